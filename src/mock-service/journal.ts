/**
 * The mock's own record of what it did, for harnesses that judge a run by the service's side (`GET /__mock/journal`;
 * `mock.ledger(key)` is something else, the account's charges):
 * every tune and prompt created (deleted ones included) with what became of it (trained, settled, deleted, or told by
 * a fault never to train), every file uploaded with the object it went into, and every callback POST with its time.
 * One entry per object, file or callback, so it grows like the store itself. Reads are not recorded: a read names no
 * caller the service could tell apart (one API key serves every tenant), so a harness judges them by what reached each
 * run (its history), not here.
 */

/** A tune as it was created. */
export interface JournalTune {
  id: number;
  title: string;
  /** Set on tunes created from a pack. */
  packId: number | null;
  /** Milliseconds since the epoch. */
  createdAt: number;
  /** When it got `trained_at`; null while it has not. */
  trainedAt: number | null;
  /** A fault (`neverTrainRate`, `neverTrainTitles`) picked it: it will never train. */
  neverTrains: boolean;
  deletedAt: number | null;
}

/** A prompt as it was created. */
export interface JournalPrompt {
  id: number;
  tuneId: number;
  /** The prompt's text after substitution. */
  text: string;
  packId: number | null;
  /**
   * The title the create that made it carried: a pack create's (`POST /p/:pack_id/tunes`), whose prompts hold no text
   * of the caller's to tell whose they are, on the tune it made or on existing ones (`tune_ids`); null for a prompt
   * create (`POST /tunes/:id/prompts`).
   */
  requestTitle: string | null;
  createdAt: number;
  /** When it got images or a user_error; null while it has not. */
  settledAt: number | null;
  deletedAt: number | null;
}

/** One callback POST (a duplicated callback is two entries). */
export interface JournalCallback {
  /** The URL's path, e.g. `/callbacks/tune`. */
  path: string;
  /** The `workflowId` parameter of the URL, when it has one. */
  workflowId: string | null;
  /** The id of the tune or prompt the body reports, or the ids of a list of prompts. */
  ids: number[];
  /** When the POST was made, in milliseconds since the epoch. */
  sentAt: number;
  /** The receiver's answer; null while none came, or when none will (`failure`). */
  status: number | null;
  /** Why no answer came (refused connection, timeout); null otherwise. */
  failure: string | null;
}

/** A file uploaded in a multipart create (a training image, an input or a mask image), and what it went into. */
export interface JournalUpload {
  /** Where the service serves it (a tune's `orig_images`, a prompt's `input_image`). */
  url: string;
  uploadedAt: number;
  /** The tune or prompt created with it; both null when no object was (a create refused after its files came). */
  tuneId: number | null;
  promptId: number | null;
}

/** What `GET /__mock/journal` answers. */
export interface MockJournal {
  tunes: JournalTune[];
  prompts: JournalPrompt[];
  uploads: JournalUpload[];
  callbacks: JournalCallback[];
}

/** Appends to the journal; `toJSON` is the answer of `GET /__mock/journal`. */
export class Journal {
  private readonly tunes = new Map<number, JournalTune>();
  private readonly prompts = new Map<number, JournalPrompt>();
  private readonly uploads = new Map<string, JournalUpload>();
  private readonly callbacks: JournalCallback[] = [];

  /** A file the service keeps, served at `url`; the create that carried it names it in its object (`linkUploads`). */
  fileUploaded(url: string): void {
    this.uploads.set(url, { url, uploadedAt: Date.now(), tuneId: null, promptId: null });
  }

  /** The uploads among `urls` went into this object. */
  private linkUploads(urls: readonly unknown[], object: { tuneId: number } | { promptId: number }): void {
    for (const url of urls) {
      const upload = typeof url === 'string' ? this.uploads.get(url) : undefined;
      if (upload) Object.assign(upload, object);
    }
  }

  tuneCreated(tune: {
    id: number;
    title: string;
    pack_id: number | null;
    trained_at: string | null;
    orig_images: readonly string[];
  }): void {
    const now = Date.now();
    this.linkUploads(tune.orig_images, { tuneId: tune.id });
    this.tunes.set(tune.id, {
      id: tune.id,
      title: tune.title,
      packId: tune.pack_id,
      createdAt: now,
      trainedAt: tune.trained_at ? now : null,
      neverTrains: false,
      deletedAt: null,
    });
  }

  tuneTrained(id: number): void {
    const tune = this.tunes.get(id);
    if (tune) tune.trainedAt = Date.now();
  }

  tuneNeverTrains(id: number): void {
    const tune = this.tunes.get(id);
    if (tune) tune.neverTrains = true;
  }

  tuneDeleted(id: number): void {
    const tune = this.tunes.get(id);
    if (tune) tune.deletedAt = Date.now();
  }

  promptCreated(prompt: {
    id: number;
    tune_id: number;
    attributes: Record<string, unknown>;
    pack_id: number | null;
    group: { requestTitle: string | null } | null;
  }) {
    const text = typeof prompt.attributes.text === 'string' ? prompt.attributes.text : '';
    this.linkUploads([prompt.attributes.input_image, prompt.attributes.mask_image], { promptId: prompt.id });
    this.prompts.set(prompt.id, {
      id: prompt.id,
      tuneId: prompt.tune_id,
      text,
      packId: prompt.pack_id,
      requestTitle: prompt.group?.requestTitle ?? null,
      createdAt: Date.now(),
      settledAt: null,
      deletedAt: null,
    });
  }

  promptSettled(id: number): void {
    const prompt = this.prompts.get(id);
    if (prompt) prompt.settledAt = Date.now();
  }

  promptDeleted(id: number): void {
    const prompt = this.prompts.get(id);
    if (prompt) prompt.deletedAt = Date.now();
  }

  /** Records a callback POST; then `answered` records the receiver's status, or `failed` why none came. */
  callbackSent(url: string, body: unknown): { answered(status: number): void; failed(reason: string): void } {
    let path = url;
    let workflowId: string | null = null;
    try {
      const parsed = new URL(url);
      path = parsed.pathname;
      workflowId = parsed.searchParams.get('workflowId');
    } catch {
      // Kept as given: the journal records what was sent, valid or not.
    }
    const ids = (Array.isArray(body) ? body : [body])
      .map((entity) => (entity as { id?: unknown } | null)?.id)
      .filter((id): id is number => typeof id === 'number');
    const entry: JournalCallback = { path, workflowId, ids, sentAt: Date.now(), status: null, failure: null };
    this.callbacks.push(entry);
    return { answered: (status) => void (entry.status = status), failed: (reason) => void (entry.failure = reason) };
  }

  toJSON(): MockJournal {
    // Copies: the entries change as objects train, settle and go.
    return {
      tunes: [...this.tunes.values()].map((t) => ({ ...t })),
      prompts: [...this.prompts.values()].map((p) => ({ ...p })),
      uploads: [...this.uploads.values()].map((u) => ({ ...u })),
      callbacks: this.callbacks.map((c) => ({ ...c, ids: [...c.ids] })),
    };
  }
}
