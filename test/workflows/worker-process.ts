/**
 * `tuneflow worker` as a real child process (the built bin), configured only by environment variables, as users run
 * it: for the tests that kill it, restart it, or stop its Temporal server under it.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as path from 'node:path';
import { createInterface } from 'node:readline';

const ROOT = path.resolve(__dirname, '../..');

export interface WorkerProcessSettings {
  temporalAddress: string;
  apiKey: string;
  apiUrl: string;
  taskQueue: string;
  /** Callbacks to the worker's own receiver on this port; without, the runs poll. */
  callbackPort?: number;
  metricsPort?: number;
  /** More variables (OTEL_*, TEMPORAL_NAMESPACE, say). */
  env?: Record<string, string>;
  /** The `bin/tuneflow.js` to run: this repository's unless given (an installed package's, say). */
  bin?: string;
}

export interface WorkerProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly exited: Promise<number | null>;
  /** Everything it wrote to stderr (its JSON log lines) so far. */
  log(): string;
}

/**
 * Starts `tuneflow worker` and resolves once it logged that it started.
 *
 * @example
 * const worker = await startWorkerProcess({ temporalAddress, apiKey, apiUrl: mock.url, taskQueue });
 * worker.child.kill('SIGKILL');
 */
export async function startWorkerProcess(settings: WorkerProcessSettings): Promise<WorkerProcess> {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    TEMPORAL_ADDRESS: settings.temporalAddress,
    TEMPORAL_NAMESPACE: 'default',
    TUNEFLOW_API_KEY: settings.apiKey,
    TUNEFLOW_API_URL: settings.apiUrl,
    TUNEFLOW_TASK_QUEUE: settings.taskQueue,
    TUNEFLOW_METRICS_ADDRESS: settings.metricsPort ? `127.0.0.1:${settings.metricsPort}` : 'off',
    ...settings.env,
  };
  if (settings.callbackPort)
    Object.assign(env, {
      TUNEFLOW_CALLBACK_BASE_URL: `http://127.0.0.1:${settings.callbackPort}`,
      TUNEFLOW_CALLBACK_SECRET: 'worker-process-test-secret',
      TUNEFLOW_CALLBACK_PORT: String(settings.callbackPort),
      TUNEFLOW_CALLBACK_HOST: '127.0.0.1',
    });
  const bin = settings.bin ?? path.join(ROOT, 'bin', 'tuneflow.js');
  const child = spawn(process.execPath, [bin, 'worker'], { cwd: path.dirname(path.dirname(bin)), env });
  let log = '';
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: child.stderr }).on('line', (line) => {
      log += `${line}\n`;
      if (line.includes('tuneflow worker started')) resolve();
    });
    void exited.then((code) => reject(new Error(`the worker exited with ${code} before it started:\n${log}`)));
  });
  return { child, exited, log: () => log };
}
