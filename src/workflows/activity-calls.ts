/**
 * The activities as workflow code calls them, one proxy per retry policy (src/workflows/policies.ts), made once for
 * every step of a job.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { TuneflowActivities } from '../activities';
import { pollActivityOptions, serviceActivityOptions, temporalReadOptions, uploadCheckOptions } from './policies';

/** Creates, deletes and the reads a workflow cannot go on without: the service's full retry policy. */
export const service = proxyActivities<TuneflowActivities>(serviceActivityOptions);
/** Polls: a few attempts; a poll that still fails is counted and the wait goes on. */
export const polls = proxyActivities<TuneflowActivities>(pollActivityOptions);
/** Reads of Temporal (the earlier run of a claimed key). */
export const temporal = proxyActivities<TuneflowActivities>(temporalReadOptions);
/** The upload directory's check, before anything is created (runs whose input names files). */
export const uploads = proxyActivities<TuneflowActivities>(uploadCheckOptions);
