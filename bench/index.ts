/**
 * `npm run bench`: every benchmark in one run. Speed is measured here, never asserted in tests.
 * - the service client against bare undici and global fetch, on the same mock endpoint;
 * - the mock service's own throughput (so it is never what the client bench measures);
 * - the callback receiver: callbacks per second and request-to-signal latency;
 * - upload reads: a job's files checked and read from one handle, against the path checked then read again;
 * - API calls per workflow run, with callbacks and with every callback lost (needs a Temporal server);
 * - heap per run in flight and per completed run, tuneflow beside the floor (needs a Temporal dev server);
 * - the progress stream: Temporal calls with 100 and 1,000 viewers of 100 jobs, change-to-viewer p99, its heap.
 */
import { benchApiCalls } from './api-calls';
import { benchCallbacks } from './callbacks';
import { benchClient } from './client';
import { benchMockService } from './mock-service';
import { benchProgressStream } from './progress-stream';
import { benchRunMemory } from './run-memory';
import { benchUploads } from './uploads';

async function run(): Promise<void> {
  for (const [name, bench] of [
    ['service client', benchClient],
    ['mock service', benchMockService],
    ['callback receiver', benchCallbacks],
    ['upload reads', benchUploads],
    ['API calls per run', benchApiCalls],
    ['memory per run', benchRunMemory],
    ['progress stream', () => benchProgressStream()],
  ] as const) {
    console.log(`\n=== ${name} ===`);
    await bench();
  }
}

run().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
