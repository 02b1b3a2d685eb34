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

/** The only fields of a tune created from a pack, in the service's order (spec 2.1). */
const PACK_FORM_FIELDS = [
  'id',
  'title',
  'name',
  'eta',
  'trained_at',
  'started_training_at',
  'expires_at',
  'created_at',
  'updated_at',
  'url',
  'orig_images',
] as const;

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
    return `${this.baseUrl}/files/${key}`;
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

  /** The tune object of spec 2.1. */
  renderTune(t: TuneRecord): Record<string, unknown> {
    const ckpt =
      t.trained_at && t.account && t.model_type !== 'lora' ? `${this.baseUrl}/models/${t.id}.safetensors` : null;
    return {
      id: t.id,
      title: t.title,
      name: t.name,
      is_api: t.account !== null,
      token: t.token,
      base_tune_id: t.base_tune_id,
      args: null,
      steps: t.steps,
      face_crop: t.face_crop,
      training_face_correct: t.training_face_correct,
      ckpt_url: ckpt,
      ckpt_urls: ckpt ? [ckpt] : [],
      eta: t.eta,
      trained_at: t.trained_at,
      started_training_at: t.started_training_at,
      expires_at: t.expires_at,
      created_at: t.created_at,
      updated_at: t.updated_at,
      branch: t.branch,
      model_type: t.model_type,
      preset: t.preset,
      auto_extend: t.auto_extend,
      callback: t.callback,
      characteristics: t.characteristics,
      pack_id: t.pack_id,
      cost_mc: t.cost_mc,
      // The service's object URLs end in .json, and answer there.
      url: `${this.baseUrl}/tunes/${t.id}.json`,
      orig_images: t.orig_images,
    };
  }

  /** The pack form of a tune (spec 2.1): the answer to `POST /p/:pack_id/tunes`, a subset of the tune object. */
  renderPackTune(t: TuneRecord): Record<string, unknown> {
    const tune = this.renderTune(t);
    return Object.fromEntries(PACK_FORM_FIELDS.map((field) => [field, tune[field]]));
  }

  /** The prompt object of spec 2.2 with the service notes' `images` and `user_error`. */
  renderPrompt(p: PromptRecord): Record<string, unknown> {
    const a = p.attributes;
    return {
      id: p.id,
      ...a,
      callback: a.callback ?? null,
      text: a.text,
      negative_prompt: a.negative_prompt ?? null,
      cfg_scale: a.cfg_scale ?? null,
      steps: a.steps ?? null,
      seed: a.seed ?? null,
      num_images: a.num_images ?? 1,
      trained_at: p.trained_at,
      started_training_at: p.started_training_at,
      created_at: p.created_at,
      updated_at: p.updated_at,
      tune_id: p.tune_id,
      url: `${this.baseUrl}/tunes/${p.tune_id}/prompts/${p.id}.json`,
      images: p.images,
      user_error: p.user_error,
      pack_id: p.pack_id,
      orig_prompt_id: p.orig_prompt_id,
      liked: p.account.likes.has(p.id),
      cost_mc: p.cost_mc,
    };
  }

  /** A pack as `GET /packs` lists it (service notes). */
  renderPack(pack: PackRecord): Record<string, unknown> {
    return {
      id: pack.id,
      base_tune_id: pack.base_tune_id,
      slug: pack.slug,
      title: pack.title,
      token: pack.token,
      multiplier: pack.multiplier,
      model_type: pack.model_type,
      preset: pack.preset,
      public_at: pack.public_at,
      created_at: pack.created_at,
      updated_at: pack.created_at,
      cost_mc_hash: pack.cost_mc_hash,
    };
  }

  /** A pack as `GET /p/:id` shows it: with cover, costs and prompts per class (service notes). */
  renderPackDetail(pack: PackRecord): Record<string, unknown> {
    const costs: Record<string, { cost: number; num_images: number }> = {};
    const perClass: Record<string, Record<string, unknown>[]> = {};
    let last: PackPrompt | undefined;
    for (const [name, prompts] of Object.entries(pack.prompts_per_class)) {
      costs[name] = { cost: pack.cost_mc_hash[name], num_images: prompts.reduce((n, p) => n + p.num_images, 0) };
      perClass[name] = prompts.map((p) => ({
        id: p.id,
        text: p.text,
        negative_prompt: p.negative_prompt ?? null,
        num_images: p.num_images,
        w: p.w,
        h: p.h,
        cfg_scale: p.cfg_scale ?? null,
        steps: p.steps ?? null,
      }));
      for (const p of prompts) if (!last || p.id > last.id) last = p;
    }
    // The cover is the last prompt added to the pack (spec 1).
    const cover = last ? `${this.baseUrl}/images/${last.id}-0.png` : null;
    return { ...this.renderPack(pack), cover_url: cover, costs, prompts_per_class: perClass };
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
