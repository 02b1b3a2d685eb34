/**
 * Every patch of the job workflows, folded into one marker for the runs that start now. Each `patched(id)` a new run
 * asks records a marker and an update of its TemporalChangeVersion search attribute (the SDK's, with every id so
 * far): eight events and about a tenth of a job's history bytes, in runs that take every new branch anyway. A job
 * that starts with EARLIER_PATCHES_FOLDED takes them all on that one marker; a run that started before it (its first
 * task replays without the marker) asks each patch as it always did, so it keeps the rules it started with.
 */
import { patched, workflowInfo } from '@temporalio/workflow';

/**
 * The one marker of a job started with every earlier patch's new branch. A patch added after it asks `patched()`
 * itself, never `patchedOrFolded`: a run started with the fold did not take that patch's branch.
 */
export const EARLIER_PATCHES_FOLDED = 'earlier-patches-folded';

/** This run's answer, asked once at its start; keyed by run, as a context may be shared by runs. */
let folded: { runId: string; all: boolean } | undefined;

/**
 * Asks, once and first of all, whether this run started with every earlier patch folded (a new run: yes, with one
 * marker). Called at the start of each job workflow, before any other patch is asked.
 */
export function foldEarlierPatches(): void {
  folded = { runId: workflowInfo().runId, all: patched(EARLIER_PATCHES_FOLDED) };
}

/**
 * `patched(id)`, answered without a marker of its own in a run that started with EARLIER_PATCHES_FOLDED. A run not
 * asked at its start (a workflow that does not fold) asks the patch itself.
 *
 * @example
 * if (patchedOrFolded(KEY_CLAIMED)) await claimKey();
 */
export function patchedOrFolded(id: string): boolean {
  if (folded?.runId === workflowInfo().runId && folded.all) return true;
  return patched(id);
}
