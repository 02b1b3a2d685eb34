/**
 * docker-compose.yml and the Dockerfile cannot run here (no Docker engine), so this test keeps them honest: the
 * file parses, every service, port and variable the worker needs is there, the start order follows the health
 * checks, and every command in it is run here outside docker (the mock service with the compose flags, the
 * health checks against real listeners, the worker's settings through the worker's own config loader).
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { parse } from 'yaml';
import { startCallbackReceiver, type Signaler } from '../../src/callbacks/receiver';
import { CallbackSigner } from '../../src/callbacks/signing';
import { ENVIRONMENT, loadWorkerConfig } from '../../src/config';

jest.setTimeout(30_000);

const ROOT = path.resolve(__dirname, '../..');

interface Service {
  image?: string;
  build?: string;
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  profiles?: string[];
}
const compose = parse(fs.readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
};
const services = compose.services;

/** `${NAME:-default}` as compose expands it with nothing set. */
function expandDefaults(value: string): string {
  return value.replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1');
}

/** Runs `node -e ...` the way a CMD health check does; resolves with the exit code. */
function runHealthcheck(test: string[], port: number, fromPort: number): Promise<number | null> {
  expect(test[0]).toBe('CMD');
  expect(test[1]).toBe('node');
  const args = test.slice(2).map((a) => a.replace(`:${fromPort}/`, `:${port}/`));
  const child = spawn(process.execPath, args, { stdio: 'ignore' });
  return new Promise((resolve) => child.on('exit', resolve));
}

describe('docker-compose.yml', () => {
  test('has the Temporal dev server (pinned, UI included), the mock service and the worker', () => {
    expect(Object.keys(services)).toEqual(expect.arrayContaining(['temporal', 'mock-service', 'worker']));
    const temporal = services.temporal;
    expect(temporal.image).toMatch(/^temporalio\/temporal:\d+\.\d+\.\d+$/);
    expect(temporal.command).toEqual(expect.arrayContaining(['server', 'start-dev']));
    expect(temporal.ports).toEqual(expect.arrayContaining(['7233:7233', '8233:8233']));
    expect(temporal.healthcheck?.test).toBeDefined();
  });

  test('the worker waits for healthy Temporal and mock service, and exposes receiver and metrics', () => {
    const worker = services.worker;
    expect(worker.build).toBe('.');
    expect(worker.command).toEqual(['worker']);
    expect(worker.depends_on).toEqual({
      temporal: { condition: 'service_healthy' },
      'mock-service': { condition: 'service_healthy' },
    });
    expect(worker.ports).toEqual(expect.arrayContaining(['3001:3001', '9464:9464']));
    expect(worker.healthcheck?.test).toBeDefined();
  });

  test("the worker's environment holds every variable the worker reads, and it loads", () => {
    const env = Object.fromEntries(
      Object.entries(services.worker.environment ?? {}).map(([k, v]) => [k, expandDefaults(String(v))]),
    );
    for (const variable of Object.keys(ENVIRONMENT)) expect(env).toHaveProperty(variable);
    expect(env.TEMPORAL_ADDRESS).toBe('temporal:7233');
    expect(env.TUNEFLOW_API_URL).toBe('http://mock-service:8080');
    const config = loadWorkerConfig(env);
    expect(config.callbacks).toMatchObject({ baseUrl: 'http://worker:3001', port: 3001 });
    expect(config.metricsAddress).toBe('0.0.0.0:9464');
    expect(config.temporal.connectionOptions.address).toBe('temporal:7233');
  });

  test('the postgres profile has its database, server and UI', () => {
    for (const name of ['postgres', 'temporal-postgres', 'temporal-ui'])
      expect(services[name]?.profiles).toEqual(['postgres']);
  });

  test('the mock-service command runs here as written, and its health check passes against it', async () => {
    const service = services['mock-service'];
    const args = [...(service.command ?? [])];
    const portAt = args.indexOf('--port');
    const composePort = Number(args[portAt + 1]);
    args[portAt + 1] = '0'; // any free port here; compose uses 8080 inside its own network
    args[args.indexOf('--host') + 1] = '127.0.0.1';
    const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'tuneflow.js'), ...args], { cwd: ROOT });
    try {
      const first = (await createInterface({ input: child.stdout })[Symbol.asyncIterator]().next()).value as string;
      const port = Number(/:(\d+)$/.exec(first)?.[1]);
      expect(first).toMatch(/^listening on http:\/\/127\.0\.0\.1:\d+$/);
      expect(await runHealthcheck(service.healthcheck!.test, port, composePort)).toBe(0);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.on('exit', r));
    }
  });

  test("the worker's health check passes against a callback receiver, and fails when none listens", async () => {
    const signaler: Signaler = { signal: async () => 'delivered' };
    const receiver = await startCallbackReceiver({
      port: 0,
      host: '127.0.0.1',
      signer: new CallbackSigner({ secret: 'compose-test-secret-0123' }),
      signaler,
    });
    const port = Number(new URL(receiver.url).port);
    try {
      expect(await runHealthcheck(services.worker.healthcheck!.test, port, 3001)).toBe(0);
    } finally {
      await receiver.close();
    }
    expect(await runHealthcheck(services.worker.healthcheck!.test, port, 3001)).not.toBe(0);
  });
});

describe('Dockerfile', () => {
  const dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');

  test('builds on a glibc Node 20 image and runs the prebuilt bundle as a non-root user', () => {
    const images = [...dockerfile.matchAll(/^FROM (\S+)/gm)].map((m) => m[1]);
    expect(images.length).toBeGreaterThanOrEqual(2);
    for (const image of images) expect(image).toMatch(/^node:20[\d.]*-(bookworm|bullseye)(-slim)?$/); // glibc, not alpine
    expect(dockerfile).toMatch(/RUN npm run build/); // tsc and the workflow bundle
    expect(dockerfile).toMatch(/^USER node$/m);
    expect(dockerfile).toMatch(/ENTRYPOINT \["node", "lib\/cli\.js"\]/);
  });

  test('the build step it runs exists, and writes the workflow bundle the worker prefers', () => {
    const scripts = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts as Record<
      string,
      string
    >;
    expect(scripts.build).toContain('build-workflow-bundle');
    expect(fs.existsSync(path.join(ROOT, 'scripts', 'build-workflow-bundle.js'))).toBe(true);
  });
});
