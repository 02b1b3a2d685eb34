/**
 * `tuneflow-temporal`: the plugin for a user's own worker, the typed starters, the service client and its errors, and
 * the inputs and results of the workflows. Workflow code imports `tuneflow-temporal/workflows` instead (this entry
 * loads undici and the worker's code); a caller in another namespace imports `tuneflow-temporal/nexus`.
 */
export {
  shutdownOnceRunning,
  TuneflowPlugin,
  tuneflowReplayOptions,
  type TuneflowCallbackOptions,
  type TuneflowPluginOptions,
} from './plugin';
export { replayGate, type GateRun, type ReplayGateOptions, type ReplayGateResult } from './deployments/replay-gate';
export { defaultBuildId, type DeploymentVersion, type VersioningOptions } from './deployments/versions';
export { tuneflowServiceHandler } from './nexus/handler';
export { DEFAULT_TENANT, Tenants, loadTenantSettings, type TenantSettings } from './tenants';
export {
  TuneflowClient,
  type CheckedStart,
  type RunProgress,
  type TuneflowClientOptions,
  type TuneflowHandle,
} from './client';
export type { RetryingCall } from './retrying-call';
export type { TuneflowTracingOptions } from './tracing';
export { createActivities, type ActivityDeps, type TuneflowActivities } from './activities';
export * from './api';
export { checkGenerate, checkPackTune, checkTrainThenGenerate } from './contract/check';
export { FailureType, MAX_PROMPTS_PER_RUN } from './contract/failures';
export type {
  InspectionRefusedDetails,
  ClaimHeldDetails,
  JobEndedDetails,
  PromptsNeverSettledDetails,
  TuneNeverTrainedDetails,
  WaitRecord,
} from './contract/failures';
export { KeyInUseError, type KeyInUseDetails } from './contract/keys';
export { INPUT_BOUNDS } from './contract/bounds';
export { INSPECTION_FLAGS } from './contract/inspection';
export { JOB_HISTOGRAM_BUCKETS, MetricName } from './metrics';
export { Phase, progressQuery, type Progress } from './contract/messages';
export { WorkflowName } from './contract/jobs';
export type * from './contract/inputs';
export { DEFAULT_TASK_QUEUE } from './config';
export { BOOKKEEPING_ACTIVITIES, bookkeepingQueueOf } from './contract/task-queues';
export { probeFairness, type FairnessProbe } from './task-queue-limits';
export {
  checkStoredImages,
  copyAgain,
  FolderStore,
  ImageFetcher,
  S3Store,
  type ImageStore,
  type S3StoreOptions,
  type StorageSettings,
  type StorageTarget,
  type StoredImageCheck,
  type StoredImageProblem,
} from './storage';
export type { StoredImage } from './contract/storage';
export * from './progress';
export type { PhaseEntry, ProgressImage } from './contract/messages';
export type { ImagesNotStoredDetails } from './contract/failures';
