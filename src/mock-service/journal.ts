/**
 * The mock's own record of what it did, for harnesses that judge a run by the service's side (`GET /__mock/journal`;
 * `mock.ledger(key)` is something else, the account's charges):
 * every tune and prompt created (deleted ones included) and every callback POST with its time. One entry per object
 * or callback, so it grows like the store itself.
 */

/** A tune as it was created. */
export interface JournalTune {
  id: number;
  title: string;
  /** Set on tunes created from a pack. */
  packId: number | null;
  /** Milliseconds since the epoch. */
  createdAt: number;
}

/** A prompt as it was created. */
export interface JournalPrompt {
  id: number;
  tuneId: number;
  /** The prompt's text after substitution. */
  text: string;
  packId: number | null;
  createdAt: number;
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
}

/** What `GET /__mock/journal` answers. */
export interface MockJournal {
  tunes: JournalTune[];
  prompts: JournalPrompt[];
  callbacks: JournalCallback[];
}

/** Appends to the journal; `toJSON` is the answer of `GET /__mock/journal`. */
export class Journal {
  private readonly tunes: JournalTune[] = [];
  private readonly prompts: JournalPrompt[] = [];
  private readonly callbacks: JournalCallback[] = [];

  tuneCreated(tune: { id: number; title: string; pack_id: number | null }): void {
    this.tunes.push({ id: tune.id, title: tune.title, packId: tune.pack_id, createdAt: Date.now() });
  }

  promptCreated(prompt: { id: number; tune_id: number; attributes: Record<string, unknown>; pack_id: number | null }) {
    const text = typeof prompt.attributes.text === 'string' ? prompt.attributes.text : '';
    this.prompts.push({ id: prompt.id, tuneId: prompt.tune_id, text, packId: prompt.pack_id, createdAt: Date.now() });
  }

  callbackSent(url: string, body: unknown): void {
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
    this.callbacks.push({ path, workflowId, ids, sentAt: Date.now() });
  }

  toJSON(): MockJournal {
    return { tunes: [...this.tunes], prompts: [...this.prompts], callbacks: [...this.callbacks] };
  }
}
