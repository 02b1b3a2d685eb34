/**
 * `tuneflow-temporal/testing`: what a user's tests need to run tuneflow without the real service: the mock service (tunes
 * that train in simulated time, real PNG images, callbacks, fault injection, request counts).
 */
export {
  FLUX_BASE_TUNE,
  PACKS,
  startMockService,
  type CallbackStats,
  type Faults,
  type MockService,
  type MockServiceOptions,
  type MockStats,
} from './mock-service';
