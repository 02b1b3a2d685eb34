/**
 * Whose a tune is, for the activity that is about to read, generate on or build on it: a job uses only its tenant's
 * tunes (src/tenants.ts), the one its input names, the base its LoRA trains on or its prompts run on, and the LoRAs and
 * FaceIDs its prompt text loads (`<lora:ID:strength>`). Refused as InvalidInput naming the field, before the create.
 */
import { activityInfo } from '@temporalio/activity';
import type { TunesApi } from '../api';
import { InvalidInputError, NotFoundError } from '../api/errors';
import type { Tune } from '../api/schemas';
import { jobOfWorkflowId } from '../contract/tenants';
import type { Tenants } from '../tenants';

/** Tunes whose titles a worker remembers: a title never changes (tuneflow's, or the account's own). */
const TITLES_KEPT = 10_000;

/** The tunes a prompt's text loads: `<lora:ID:strength>`, `<faceid:ID:strength>`. */
const REFERENCE = /<(?:lora|faceid):(\d+)(?::[^>]*)?>/g;

export class TuneOwnership {
  readonly #titles = new Map<number, unknown>();

  constructor(
    private readonly api: TunesApi,
    private readonly tenants: Tenants,
    private readonly options: () => { signal?: AbortSignal },
  ) {}

  /**
   * The tune `field` names, read, and refused unless the running job's tenant owns it and its base.
   *
   * @example
   * const tune = await ownership.owned(input.tuneId, 'tuneId');
   */
  async owned(tuneId: number, field: string): Promise<Tune> {
    const tune = this.remember(await this.api.tunes.retrieve(tuneId, this.options()));
    this.require(field, tune);
    if (typeof tune.base_tune_id === 'number') await this.requireOwned(`${field} (its base tune)`, tune.base_tune_id);
    return tune;
  }

  /**
   * Remembers the title of a tune the worker has read or made (a run's own LoRA or FaceID, loaded by its prompts).
   *
   * @example
   * ownership.remember(created);
   */
  remember<T extends { id: number; title?: unknown }>(tune: T): T {
    this.keep(tune.id, tune.title);
    return tune;
  }

  /**
   * Refuses a tune the job names without reading it itself: a LoRA's base, a prompt's LoRA and FaceID references.
   *
   * @example
   * await ownership.requireReferences('prompts[0].text', prompt.text);
   */
  async requireReferences(field: string, text: unknown): Promise<void> {
    if (typeof text !== 'string') return;
    for (const [, id] of text.matchAll(REFERENCE)) await this.requireOwned(field, Number(id));
  }

  /** Refuses tune `tuneId` (its title read once per worker) unless the job's tenant owns it. */
  async requireOwned(field: string, tuneId: number): Promise<void> {
    if (!this.#titles.has(tuneId)) {
      const tune = await this.api.tunes.retrieve(tuneId, this.options()).catch((err: unknown) => {
        if (err instanceof NotFoundError) return undefined;
        throw err;
      });
      // No such tune is nobody's to take: the create goes on, and the service refuses it naming the field.
      if (!tune) return;
      this.keep(tuneId, tune.title);
    }
    this.require(field, { id: tuneId, title: this.#titles.get(tuneId) });
  }

  private keep(tuneId: number, title: unknown): void {
    if (this.#titles.size >= TITLES_KEPT && !this.#titles.has(tuneId))
      this.#titles.delete(this.#titles.keys().next().value as number);
    this.#titles.set(tuneId, title);
  }

  private require(field: string, tune: { id: number; title?: unknown }): void {
    const workflowId = activityInfo().workflowExecution?.workflowId;
    const tenant = workflowId === undefined ? undefined : jobOfWorkflowId(workflowId)?.tenant;
    if (tenant !== undefined && this.tenants.owns(tenant, tune)) return;
    throw new InvalidInputError('input', [
      {
        field,
        rule:
          `names tune ${tune.id}, which is not this tenant's: a job uses only the tunes its tenant's jobs made, or ` +
          'that the operator gave the tenant (TUNEFLOW_TENANT_TUNES)',
      },
    ]);
  }
}
