/**
 * A job's poll of its prompts: only the job's own, whatever else the tune holds. A Flux LoRA's prompts run on the
 * shared base tune, where every other job of the account makes prompts too: a listing down to the job's first id
 * would read (and put into history) all of theirs.
 */
import type { TunesApi } from '../api';
import type { Prompt } from '../api/schemas';

const PAGE = 120;
/** Prompts read by id at once, as the service's own command-line client does (6 in parallel), a little below. */
const RETRIEVE_CONCURRENCY = 4;

type RequestOptions = { signal?: AbortSignal };

/**
 * The prompts of `promptIds` on the tune. One list page that starts at the newest of them (`before_id`), so prompts
 * made after the job's are never read, and no longer than the job's ids span: a listing is newest first by id, so at
 * most newest - oldest + 1 of the tune's prompts lie in between, and a page that long (at most 120) reaches every one
 * of the job's that a page of 120 would. Then, by id, those the page did not reach (others' prompts interleaved with
 * the job's), unless `onePage`: then the caller reads those itself, one activity each, so every activity on the
 * rate-limited queue is one request. At most 1 + `promptIds.length` calls, and only the job's prompts come back. A
 * prompt that is gone (404) is left out: the wait's deadline names it.
 *
 * @example
 * const mine = await listOwnPrompts(api, 1504944, [1601, 1602], { signal });
 */
export async function listOwnPrompts(
  api: TunesApi,
  tuneId: number,
  promptIds: readonly number[],
  options: RequestOptions,
  onePage = false,
): Promise<Prompt[]> {
  const wanted = new Set(promptIds);
  if (wanted.size === 0) return [];
  const newest = Math.max(...wanted);
  // On a shared base tune a full page is others' prompts: 90 KB to read, parse and check for the job's few.
  const limit = Math.min(PAGE, newest - Math.min(...wanted) + 1);
  const found = new Map<number, Prompt>();
  for (const prompt of await api.prompts.list(tuneId, { before_id: newest + 1, limit }, options))
    if (wanted.has(prompt.id)) found.set(prompt.id, prompt);
  const missing = onePage ? [] : [...wanted].filter((id) => !found.has(id));
  for (let i = 0; i < missing.length; i += RETRIEVE_CONCURRENCY) {
    const batch = missing.slice(i, i + RETRIEVE_CONCURRENCY);
    const read = await Promise.all(batch.map((id) => retrieveUnlessGone(api, tuneId, id, options)));
    for (const prompt of read) if (prompt) found.set(prompt.id, prompt);
  }
  // Newest first, like a listing.
  return [...found.values()].sort((a, b) => b.id - a.id);
}

async function retrieveUnlessGone(
  api: TunesApi,
  tuneId: number,
  promptId: number,
  options: RequestOptions,
): Promise<Prompt | undefined> {
  try {
    return await api.prompts.retrieve(tuneId, promptId, options);
  } catch (err) {
    if ((err as { status?: number }).status === 404) return undefined;
    throw err;
  }
}
