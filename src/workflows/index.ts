/**
 * `tuneflow/workflows`: the workflow functions and their messages, and nothing else, so a user's workflow bundle can
 * import it (`export * from 'tuneflow/workflows'` in the worker's own workflows index, or `executeChild(trainThenGenerate,
 * ...)` from a workflow of its own). Also the worker's `workflowsPath`. Other services start them by these names.
 */
export { trainThenGenerate } from './trainThenGenerate';
export { generate } from './generate';
export { packTune } from './packTune';
export { keyClaim } from './keyClaim';
export { spendLedger } from './spendLedger';
export {
  CallbackKind,
  packPromptsSettledSignal,
  Phase,
  progressQuery,
  promptSettledSignal,
  tuneTrainedSignal,
  type Progress,
} from '../contract/messages';
export {
  FailureType,
  MAX_PROMPTS_PER_RUN,
  type InspectionRefusedDetails,
  type PromptsNeverSettledDetails,
  type TuneNeverTrainedDetails,
  type WaitRecord,
} from '../contract/failures';
export type * from '../contract/inputs';
export type { Prompt, Tune } from '../api/schemas';
