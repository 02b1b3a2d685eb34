/**
 * Look-up-before-retry: what an earlier attempt of a create may have made, found before POSTing again, so a job
 * makes exactly one tune and one prompt per request with or without the account's idempotency setting (spec 4.11).
 */
import type { TunesApi } from '../api';
import { PROMPT_CONSIDERED_ATTRIBUTES, type Prompt, type Tune } from '../api/schemas';

/** Clocks of the worker and the service differ; an earlier attempt's object may look slightly older. */
const CLOCK_SKEW_MS = 5 * 60_000;
const PAGE = 120;

type RequestOptions = { signal?: AbortSignal };

/**
 * The newest tune titled `title`. The title is the run's own (its workflow ID and run ID, src/contract/tenants.ts
 * tuneTitle), so a tune with it was made by this run, never by an older one or another job: no time bound (a
 * time-skipping test server's clock is no guide). One call asks the service for that
 * title (`GET /tunes?title=`); an answer holding other titles means the filter was not honoured, and the look-up goes
 * on paging the account's tunes, newest first, at most `pages` pages in all.
 */
export async function findCreatedTune(
  api: TunesApi,
  title: string,
  pages: number,
  options: RequestOptions,
): Promise<Tune | undefined> {
  const first = await api.tunes.list({ title, limit: PAGE }, options);
  const honoured = first.every((tune) => tune.title === title);
  const found = first.find((tune) => tune.title === title);
  if (found || honoured || first.length < PAGE) return found;
  // Not filtered: that was the account's newest page; read on from its last tune.
  let seen = first.length;
  for await (const tune of api.tunes.list({ before_id: first[first.length - 1].id, limit: PAGE }, options)) {
    if (tune.title === title) return tune;
    if (++seen >= pages * PAGE) return undefined;
  }
  return undefined;
}

/**
 * The newest prompt of the tune whose considered attributes match the request. With a signed callback (workflow ID
 * and prompt key in it) a match is this job's own, however old; without one, the same text may be another job's, so
 * only prompts created since `sinceMs` (the first attempt, less the clock skew) count.
 */
export async function findCreatedPrompt(
  api: TunesApi,
  tuneId: number,
  attributes: Record<string, unknown>,
  sinceMs: number | undefined,
  pages: number,
  options: RequestOptions,
): Promise<Prompt | undefined> {
  const wanted = { ...attributes, tune_id: tuneId };
  let seen = 0;
  for await (const prompt of api.prompts.list(tuneId, { limit: PAGE }, options)) {
    if (promptMatches(prompt, wanted)) return prompt;
    if ((sinceMs !== undefined && isOlderThan(prompt.created_at, sinceMs)) || ++seen >= pages * PAGE) return undefined;
  }
  return undefined;
}

/**
 * Pack prompts an earlier attempt of `POST /p/:id/tunes` with `tune_ids` created: they carry this job's signed
 * per-prompt callback. Without callbacks they cannot be told from others, and nothing is found.
 */
export async function findCreatedPackPrompts(
  api: TunesApi,
  tuneId: number,
  promptCallback: string | undefined,
  pages: number,
  options: RequestOptions,
): Promise<boolean> {
  if (!promptCallback) return false;
  let seen = 0;
  for await (const prompt of api.prompts.list(tuneId, { limit: PAGE }, options)) {
    if (sameCallback(prompt.callback, promptCallback)) return true;
    if (++seen >= pages * PAGE) return false;
  }
  return false;
}

/**
 * True when every considered attribute (spec 4.11) the request set equals the prompt's. Attributes the service does
 * not echo back cannot be compared and are passed over; ones the request left unset may have service defaults.
 */
export function promptMatches(prompt: Record<string, unknown>, wanted: Record<string, unknown>): boolean {
  for (const key of PROMPT_CONSIDERED_ATTRIBUTES) {
    const value = wanted[key];
    if (value === undefined || !(key in prompt)) continue;
    if (!sameValue(prompt[key], value, key)) return false;
  }
  return true;
}

/**
 * The same callback: the same receiver path, workflow and prompt key. The rest of the URL may differ between the
 * attempts of one create (an attempt made by an earlier release signed the URL without a run ID; a traced one adds the
 * trace context), and a look-up that missed for it would create the prompt twice.
 *
 * @example
 * sameCallback('https://h/callbacks/prompt?workflowId=w&sig=a&key=1', 'https://h/callbacks/prompt?workflowId=w&runId=r&sig=b&key=1'); // true
 */
export function sameCallback(actual: unknown, wanted: unknown): boolean {
  if (actual === wanted) return true;
  if (typeof actual !== 'string' || typeof wanted !== 'string') return false;
  try {
    const [a, b] = [new URL(actual), new URL(wanted)];
    return (
      a.origin === b.origin &&
      a.pathname === b.pathname &&
      a.searchParams.get('workflowId') === b.searchParams.get('workflowId') &&
      a.searchParams.get('key') === b.searchParams.get('key')
    );
  } catch {
    return false;
  }
}

function sameValue(actual: unknown, wanted: unknown, key?: string): boolean {
  if (key === 'callback') return sameCallback(actual, wanted);
  if (actual === wanted) return true;
  if (actual === null || actual === undefined) return false;
  // Multipart requests and some answers carry numbers and booleans as strings; decimals as Rails renders them
  // ("3.0" for 3).
  if (typeof wanted === 'number' && typeof actual === 'string' && actual.trim() !== '')
    return Number(actual) === wanted;
  return String(actual) === String(wanted);
}

function isOlderThan(timestamp: string | null | undefined, sinceMs: number): boolean {
  if (!timestamp) return false;
  const t = Date.parse(timestamp);
  return Number.isFinite(t) && t < sinceMs - CLOCK_SKEW_MS;
}
