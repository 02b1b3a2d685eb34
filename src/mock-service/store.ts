/**
 * The mock's data: accounts (one per API key), tunes, prompts, packs and uploaded files, all in memory, with one
 * increasing id counter (newest first = id descending), and the JSON forms the service answers with.
 */
import { PROMPT_CONSIDERED_ATTRIBUTES } from '../api/schemas';
import { FLUX_BASE_TUNE, GALLERY_TUNES, PACKS, type PackFixture, type PackPromptTemplate } from './fixtures';
import type { Charge } from './pricing';
import { Journal } from './journal';

export interface Account {
  readonly key: string;
  /** Spec 4.11: the account's idempotency setting. */
  readonly idempotency: boolean;
  /** The account's tunes, ascending. */
  readonly tuneIds: number[];
  /** The account's prompts, ascending. */
  readonly promptIds: number[];
  readonly likes: Set<number>;
  /** What the account was charged, in order (src/mock-service/pricing.ts). */
  readonly charges: Charge[];
}

export interface TuneRecord {
  readonly id: number;
  /** null for public fixtures, owned by no account. */
  readonly account: Account | null;
  title: string;
  name: string | null;
  token: string;
  base_tune_id: number | null;
  steps: number | null;
  face_crop: boolean | null;
  training_face_correct: boolean;
  branch: string;
  model_type: string | null;
  preset: string | null;
  auto_extend: boolean;
  callback: string | null;
  characteristics: Record<string, string | number | boolean> | null;
  orig_images: string[];
  eta: string;
  created_at: string;
  updated_at: string;
  started_training_at: string | null;
  trained_at: string | null;
  expires_at: string;
  /** Set on tunes created from a pack. */
  pack_id: number | null;
  /** What creating it cost, in millicents; 0 for public fixtures. */
  cost_mc: number;
  /** Prompts on this tune, of every account (the public base tune has many), ascending. */
  readonly promptIds: number[];
  timer?: NodeJS.Timeout;
}

/** Prompts created together from a pack for one tune: `prompts_callback` fires once when all are settled. */
export interface PromptGroup {
  readonly callback: string | null;
  /** The title the pack create carried (the journal tells whose prompts they are by it). */
  readonly requestTitle: string | null;
  readonly promptIds: number[];
  pending: number;
}

export interface PromptRecord {
  readonly id: number;
  readonly account: Account;
  readonly tune_id: number;
  /** The attributes as given and validated (text after substitution), files replaced by their URLs. */
  readonly attributes: Record<string, unknown>;
  readonly created_at: string;
  updated_at: string;
  started_training_at: string | null;
  trained_at: string | null;
  images: string[];
  user_error: string | null;
  pack_id: number | null;
  orig_prompt_id: number | null;
  group: PromptGroup | null;
  /** What creating it cost, in millicents. */
  readonly cost_mc: number;
  timer?: NodeJS.Timeout;
}

export interface PackPrompt extends PackPromptTemplate {
  readonly id: number;
}

export interface PackRecord extends Omit<PackFixture, 'prompts_per_class'> {
  readonly prompts_per_class: Record<string, PackPrompt[]>;
}

export interface StoredFile {
  readonly type: string;
  readonly bytes: Buffer;
}

export interface ListWindow {
  before_id?: number;
  limit?: number;
  offset?: number;
}

export class Store {
  readonly tunes = new Map<number, TuneRecord>();
  readonly prompts = new Map<number, PromptRecord>();
  readonly packs = new Map<number, PackRecord>();
  readonly files = new Map<string, StoredFile>();
  private readonly accounts = new Map<string, Account>();
  private lastId = FLUX_BASE_TUNE.id;
  /** Every tune and prompt created, deleted ones included. */
  readonly journal = new Journal();

  /** Base of every URL in answers: object URLs, image URLs, uploaded files. Set once the mock listens. */
  baseUrl = '';

  constructor(private readonly idempotencyDefault: boolean) {
    for (const gallery of GALLERY_TUNES)
      this.tunes.set(gallery.id, {
        ...gallery,
        account: null,
        base_tune_id: null,
        steps: null,
        face_crop: null,
        training_face_correct: false,
        preset: null,
        auto_extend: false,
        callback: null,
        characteristics: null,
        orig_images: [],
        eta: gallery.trained_at,
        updated_at: gallery.trained_at,
        started_training_at: gallery.created_at,
        pack_id: null,
        cost_mc: 0,
        promptIds: [],
      });
    for (const pack of PACKS) {
      const perClass: Record<string, PackPrompt[]> = {};
      for (const [name, templates] of Object.entries(pack.prompts_per_class))
        perClass[name] = templates.map((t) => ({ ...t, id: this.nextId() }));
      this.packs.set(pack.id, { ...pack, prompts_per_class: perClass });
    }
  }

  /** The next id of the one counter shared by every object. */
  nextId(): number {
    return ++this.lastId;
  }

  /** The account of an API key, created on first use. */
  account(key: string): Account {
    let account = this.accounts.get(key);
    if (!account) {
      account = {
        key,
        idempotency: this.idempotencyDefault,
        tuneIds: [],
        promptIds: [],
        likes: new Set(),
        charges: [],
      };
      this.accounts.set(key, account);
    }
    return account;
  }

  /** A tune the account may read: its own, or a public fixture. */
  visibleTune(account: Account, id: number): TuneRecord | undefined {
    const tune = this.tunes.get(id);
    return tune && (tune.account === account || tune.account === null) ? tune : undefined;
  }

  /** A tune the account owns. */
  ownTune(account: Account, id: number): TuneRecord | undefined {
    const tune = this.tunes.get(id);
    return tune && tune.account === account ? tune : undefined;
  }

  /** A prompt the account owns. */
  ownPrompt(account: Account, id: number): PromptRecord | undefined {
    const prompt = this.prompts.get(id);
    return prompt && prompt.account === account ? prompt : undefined;
  }

  addTune(tune: TuneRecord): void {
    this.tunes.set(tune.id, tune);
    tune.account?.tuneIds.push(tune.id);
    this.journal.tuneCreated(tune);
  }

  removeTune(tune: TuneRecord): void {
    this.tunes.delete(tune.id);
    if (tune.account) removeSorted(tune.account.tuneIds, tune.id);
    this.journal.tuneDeleted(tune.id);
  }

  addPrompt(prompt: PromptRecord): void {
    this.prompts.set(prompt.id, prompt);
    prompt.account.promptIds.push(prompt.id);
    this.tunes.get(prompt.tune_id)?.promptIds.push(prompt.id);
    this.journal.promptCreated(prompt);
  }

  removePrompt(prompt: PromptRecord): void {
    this.prompts.delete(prompt.id);
    removeSorted(prompt.account.promptIds, prompt.id);
    const tune = this.tunes.get(prompt.tune_id);
    if (tune) removeSorted(tune.promptIds, prompt.id);
    prompt.account.likes.delete(prompt.id);
    this.journal.promptDeleted(prompt.id);
  }

  /**
   * Keeps an uploaded file and answers the URL it is served at (training images come back as `orig_images`).
   * @example const url = await store.addFile(blob);
   */
  async addFile(file: Blob): Promise<string> {
    const name = typeof (file as File).name === 'string' ? (file as File).name : '';
    const ext = /\.[a-z0-9]{1,5}$/i.exec(name)?.[0].toLowerCase() ?? (file.type === 'image/png' ? '.png' : '.jpg');
    const key = `${this.files.size + 1}${ext}`;
    this.files.set(key, {
      type: file.type || 'application/octet-stream',
      bytes: Buffer.from(await file.arrayBuffer()),
    });
    const url = `${this.baseUrl}/files/${key}`;
    this.journal.fileUploaded(url);
    return url;
  }

  /** The ids of the account's tunes with exactly this title, oldest first (as `account.tuneIds`). */
  tuneIdsTitled(account: Account, title: string): number[] {
    return account.tuneIds.filter((id) => this.tunes.get(id)?.title === title);
  }

  /** Spec 4.11: the account's tune with this title (the oldest, when idempotency was off when they were made). */
  tuneByTitle(account: Account, title: string): TuneRecord | undefined {
    for (const id of account.tuneIds) {
      const tune = this.tunes.get(id);
      if (tune?.title === title) return tune;
    }
    return undefined;
  }

  /** Spec 4.11: the account's prompt on the tune whose considered attributes all equal these. */
  promptByConsidered(account: Account, tuneId: number, attributes: Record<string, unknown>): PromptRecord | undefined {
    const tune = this.tunes.get(tuneId);
    if (!tune) return undefined;
    const key = consideredKey({ ...attributes, tune_id: tuneId });
    for (const id of tune.promptIds) {
      const prompt = this.prompts.get(id);
      if (prompt && prompt.account === account && consideredKey({ ...prompt.attributes, tune_id: tuneId }) === key)
        return prompt;
    }
    return undefined;
  }

  /**
   * One page of `ids` (ascending) newest first, keyset by `before_id`, then `offset` and `limit`.
   * @example store.page(account.tuneIds, { before_id: 120, limit: 20 }, (id) => store.tunes.get(id))
   */
  page<T>(ids: readonly number[], window: ListWindow, get: (id: number) => T | undefined): T[] {
    const limit = window.limit ?? 20;
    let skip = window.offset ?? 0;
    let i = window.before_id === undefined ? ids.length - 1 : lowerBound(ids, window.before_id) - 1;
    const out: T[] = [];
    for (; i >= 0 && out.length < limit; i--) {
      const item = get(ids[i]);
      if (item === undefined) continue;
      if (skip > 0) skip--;
      else out.push(item);
    }
    return out;
  }
}

function consideredKey(attributes: Record<string, unknown>): string {
  return JSON.stringify(PROMPT_CONSIDERED_ATTRIBUTES.map((k) => attributes[k] ?? null));
}

/** First index whose id is >= `id` in an ascending array. */
function lowerBound(ids: readonly number[], id: number): number {
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ids[mid] < id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function removeSorted(ids: number[], id: number): void {
  const i = lowerBound(ids, id);
  if (ids[i] === id) ids.splice(i, 1);
}
