/**
 * `tuneflow-temporal`: the plugin for a user's own worker, the typed starters, the service client and its errors, and
 * the inputs and results of the workflows. Workflow code imports `tuneflow-temporal/workflows` instead (this entry
 * loads undici and the worker's code); a caller in another namespace imports `tuneflow-temporal/nexus`.
 */
export { TuneflowPlugin, type TuneflowCallbackOptions, type TuneflowPluginOptions } from './plugin';
export { tuneflowServiceHandler } from './nexus/handler';
export { TuneflowClient, WorkflowName, type TuneflowClientOptions, type TuneflowHandle } from './client';
export type { TuneflowTracingOptions } from './tracing';
export { createActivities, type ActivityDeps, type TuneflowActivities } from './activities';
export * from './api';
export { checkGenerate, checkPackTune, checkTrainThenGenerate } from './workflows/contract';
export { FailureType, MAX_PROMPTS_PER_RUN } from './workflows/failures';
export type { PromptsNeverSettledDetails, TuneNeverTrainedDetails, WaitRecord } from './workflows/failures';
export { Phase, progressQuery, type Progress } from './workflows/messages';
export type * from './workflows/inputs';
export { DEFAULT_TASK_QUEUE } from './config';
