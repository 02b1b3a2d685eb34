/**
 * The search attributes a run keeps current, so an operator can find jobs in the Web UI and with
 * `temporal workflow list --query`: its tenant, its phase, its tune, its cost so far and, once failed, its failure type. A
 * namespace must have them registered (`tuneflow search-attributes`, or the `temporal operator` command below);
 * without them runs go on as before, unlisted. Shared by the workflows, the worker's check and the command line.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const SearchAttribute = {
  /** The run's phase, as `progress` answers it: `training`, `generating`, `completed`, `failed`, ... */
  phase: defineSearchAttributeKey('TuneflowPhase', SearchAttributeType.KEYWORD),
  /** The tune the run trains or uses, once known. */
  tuneId: defineSearchAttributeKey('TuneflowTuneId', SearchAttributeType.INT),
  /** What the job has cost so far, in millicents (`cost_mc`), as of its latest phase. */
  costMc: defineSearchAttributeKey('TuneflowCostMc', SearchAttributeType.INT),
  /** A failed run's failure type (`OverBudget`, `InspectionRefused`, `TuneNeverTrained`, ...). */
  failure: defineSearchAttributeKey('TuneflowFailure', SearchAttributeType.KEYWORD),
  /** The tenant the job runs as (src/contract/tenants.ts): `default`, or the tenant its workflow ID names. */
  tenant: defineSearchAttributeKey('TuneflowTenant', SearchAttributeType.KEYWORD),
} as const;

/** Every attribute with its type as the Temporal CLI spells it (`--search-attribute TuneflowPhase=Keyword`). */
export const SEARCH_ATTRIBUTES: ReadonlyArray<{ name: string; type: 'Keyword' | 'Int' }> = Object.values(
  SearchAttribute,
).map((key) => ({ name: key.name, type: key.type === SearchAttributeType.INT ? 'Int' : 'Keyword' }));

/**
 * The Temporal CLI commands that register them in `namespace` (what `tuneflow search-attributes` does): one per type,
 * since the CLI takes one `--type` for all the names of a command.
 *
 * @example
 * registerCommands('default');
 * // ['temporal operator search-attribute create --namespace default --name TuneflowPhase --name TuneflowFailure --name TuneflowTenant --type Keyword',
 * //  'temporal operator search-attribute create --namespace default --name TuneflowTuneId --name TuneflowCostMc --type Int']
 */
export function registerCommands(namespace: string): string[] {
  return (['Keyword', 'Int'] as const).map((type) => {
    const names = SEARCH_ATTRIBUTES.filter((a) => a.type === type).map(({ name }) => `--name ${name}`);
    return `temporal operator search-attribute create --namespace ${namespace} ${names.join(' ')} --type ${type}`;
  });
}
