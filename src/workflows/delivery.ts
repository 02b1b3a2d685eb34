/**
 * The copies of a job's images to the owner's storage (src/storage), one activity per settled prompt, started as the
 * prompt settles while the job waits for the others. Only where the worker that started the run has storage (its first
 * local activity said so) and the job did not opt out: a run recorded before storage existed, or without it, makes
 * no command more, so every such history replays as it was (no patch).
 */
import { condition, isCancellation } from '@temporalio/workflow';
import type { Prompt } from '../api/schemas';
import type { StoredImage } from '../contract/storage';
import { storage } from './activity-calls';
import { isPromptSettled } from './state';

/** A prompt's copy that failed past its retries: its service URLs, and why. */
export interface NotStored {
  promptId: number;
  images: string[];
  failure: string;
}

export class Delivery {
  readonly stored = new Map<number, StoredImage[]>();
  /** The service's URLs of each prompt copied, for a failure's details. */
  readonly urls = new Map<number, string[]>();
  readonly notStored: NotStored[] = [];
  /** The run's cancellation, when it came while copies were followed or under way. */
  cancelled: unknown;
  readonly #started = new Set<number>();
  readonly #copies: Promise<void>[] = [];

  /**
   * Copies each prompt of `prompts()` as it settles with images, until `done()`; then waits for every copy begun. Never
   * rejects: a cancellation of the run stops the following and is kept in `cancelled`, for the caller to throw.
   *
   * @example
   * await Promise.all([job.wait(), delivery.follow(() => ledger.all(), () => waited)]);
   */
  async follow(prompts: () => Prompt[], done: () => boolean): Promise<void> {
    for (;;) {
      this.offer(prompts());
      if (done() || this.cancelled) break;
      try {
        await condition(() => done() || prompts().some((p) => this.#due(p)));
      } catch (err) {
        // The run's cancellation rejects the condition: the copies begun are cancelled with it.
        if (!isCancellation(err)) throw err;
        this.cancelled ??= err;
        break;
      }
    }
    await Promise.all(this.#copies);
  }

  /** Starts the copy of each settled prompt with images not begun yet. */
  offer(prompts: readonly Prompt[]): void {
    for (const prompt of prompts) if (this.#due(prompt)) this.#copies.push(this.#copy(prompt));
  }

  #due(prompt: Prompt): boolean {
    return !this.#started.has(prompt.id) && isPromptSettled(prompt) && (prompt.images?.length ?? 0) > 0;
  }

  #copy(prompt: Prompt): Promise<void> {
    this.#started.add(prompt.id);
    const images = [...(prompt.images ?? [])];
    const summary = `copy prompt ${prompt.id}'s ${images.length} image${images.length === 1 ? '' : 's'} to storage`;
    return storage.storeImages.executeWithOptions({ summary }, [{ promptId: prompt.id, images }]).then(
      (stored) => {
        this.stored.set(prompt.id, stored);
        this.urls.set(prompt.id, images);
      },
      (err: unknown) => {
        // Cancelled with the run: kept for the caller, which ends the run cancelled.
        if (isCancellation(err)) {
          this.cancelled ??= err;
          return;
        }
        const cause = (err as { cause?: { message?: string } }).cause;
        this.notStored.push({ promptId: prompt.id, images, failure: cause?.message ?? String(err) });
      },
    );
  }
}
