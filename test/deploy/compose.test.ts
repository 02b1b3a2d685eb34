/**
 * docker-compose.yml and the Dockerfile cannot run here (no Docker engine), so this test keeps them honest: the
 * file parses, every service, port and variable the worker needs is there, the start order follows the health
 * checks, and every command in it is run here outside docker (the mock service with the compose flags, the
 * health checks against real listeners, the worker's settings through the worker's own config loader). It validates
 * against the Compose Specification's JSON schema (vendored in compose-spec/), and checks what operators rely on:
 * `--scale worker=3` fixes no host port twice, the receiver runs as its own service too, metrics are scraped inside
 * the network, the PostgreSQL profile is Temporal's current set-up (no auto-setup image, no tctl), and the tracing
 * profile's collector is where the worker's OTEL_* variables send spans.
 */
import { FAIRNESS_DYNAMIC_CONFIG } from '../../src/temporal-server/dev-server';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import Ajv from 'ajv';
import { parse } from 'yaml';
import { startCallbackReceiver, type Signaler } from '../../src/callbacks/receiver';
import { CallbackSigner } from '../../src/callbacks/signing';
import { ENVIRONMENT, loadMetricsAddress, loadReceiverConfig, loadWorkerConfig } from '../../src/config';
import { registerCommands, SEARCH_ATTRIBUTES } from '../../src/contract/search-attributes';
import { loadTracingConfig } from '../../src/tracing-environment';

jest.setTimeout(30_000);

const ROOT = path.resolve(__dirname, '../..');

interface Service {
  image?: string;
  build?: string;
  command?: string[];
  entrypoint?: string[];
  environment?: Record<string, string>;
  ports?: Array<string | { published?: string | number }>;
  expose?: string[];
  container_name?: string;
  depends_on?: Record<string, { condition: string; required?: boolean }>;
  healthcheck?: { test: string[] };
  profiles?: string[];
}
const compose = parse(fs.readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
  configs?: Record<string, { content?: string }>;
};
const services = compose.services;

/** The host port a `ports` entry fixes, if any (`"3001"` alone lets the engine pick one). */
function hostPort(port: string | { published?: string | number }): string | undefined {
  if (typeof port !== 'string') return port.published === undefined ? undefined : String(port.published);
  const parts = port.split(':');
  return parts.length === 1 ? undefined : parts[parts.length - 2];
}

/** The services `docker compose --profile ... up` starts. */
function activeServices(profiles: string[]): string[] {
  return Object.keys(services).filter((name) => !services[name].profiles?.some((p) => !profiles.includes(p)));
}

/** Every word a service runs: its health check, command and entrypoint. */
function commandWords(service: Service): string[] {
  return [...(service.healthcheck?.test ?? []), ...(service.command ?? []), ...(service.entrypoint ?? [])].flatMap(
    (part) => part.split(/\s+/),
  );
}

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

  test("registers tuneflow's search attributes: the dev server at start, the PostgreSQL profile with the CLI", () => {
    const flags = SEARCH_ATTRIBUTES.map(({ name, type }) => `--search-attribute ${name}=${type}`).join(' ');
    expect((services.temporal.command as string[]).join(' ')).toContain(flags);
    const setup = (services['temporal-namespace'].command as string[]).join(' ');
    for (const command of registerCommands('default')) expect(setup).toContain(command);
  });

  test('turns fairness on as `tuneflow dev-server` does: the same dynamic config, one partition per task queue', () => {
    const flags = FAIRNESS_DYNAMIC_CONFIG.map((setting) => `--dynamic-config-value ${setting}`).join(' ');
    expect((services.temporal.command as string[]).join(' ')).toContain(flags);
  });

  test('validates against the Compose Specification', () => {
    const schema = JSON.parse(fs.readFileSync(path.join(__dirname, 'compose-spec', 'compose-spec.json'), 'utf8'));
    // The schema names draft-07 by an address Ajv does not know it by (https, no `#`).
    delete schema.$schema;
    // The spec's schema is not written for Ajv's strict mode (union types, untyped object keywords): its warnings
    // would say nothing about our file. Validation itself is unchanged.
    const ajv = new Ajv({ allErrors: true, strict: false });
    const validate = ajv.compile(schema);
    expect(validate(compose) ? [] : validate.errors).toEqual([]);
    // And it catches what it should: a key that is not the spec's, a start condition that is not one.
    expect(validate({ services: { worker: { image: 'x', replicas: 3 } } })).toBe(false);
    const badCondition = { image: 'x', depends_on: { temporal: { condition: 'healthy' } } };
    expect(validate({ services: { worker: badCondition, temporal: { image: 'y' } } })).toBe(false);
  });

  test('the worker waits for healthy Temporal and mock service, and exposes receiver and metrics inside the network', () => {
    const worker = services.worker;
    expect(worker.build).toBe('.');
    expect(worker.command).toEqual(['worker']);
    expect(worker.depends_on).toEqual({
      temporal: { condition: 'service_healthy' },
      'mock-service': { condition: 'service_healthy' },
      // Only where the postgres profile runs it.
      'temporal-namespace': { condition: 'service_completed_successfully', required: false },
      // Only where the tracing profile runs it.
      jaeger: { condition: 'service_started', required: false },
    });
    expect(worker.ports).toBeUndefined();
    expect(worker.expose).toEqual(['3001', '9464']);
    expect(worker.healthcheck?.test).toBeDefined();
  });

  test('`--scale worker=3` fixes no host port twice, whatever the profiles', () => {
    // A service that is scaled may fix no host port and no container name: each replica would claim it.
    expect(services.worker.ports ?? []).toEqual([]);
    expect(services.worker.container_name).toBeUndefined();
    const profiles = [...new Set(Object.values(services).flatMap((s) => s.profiles ?? []))];
    expect(profiles.sort()).toEqual(['metrics', 'postgres', 'receiver', 'tracing']);
    for (const active of [[], ...profiles.map((p) => [p]), profiles]) {
      const replicas = activeServices(active).flatMap((name) => Array(name === 'worker' ? 3 : 1).fill(name));
      const claimed = replicas.flatMap((name: string) => (services[name].ports ?? []).map(hostPort)).filter(Boolean);
      expect({ profiles: active, conflicts: claimed.filter((port, i) => claimed.indexOf(port) !== i) }).toEqual({
        profiles: active,
        conflicts: [],
      });
      // Every service a started one depends on is started too, unless the dependency is optional.
      for (const name of activeServices(active))
        for (const [dependency, { required }] of Object.entries(services[name].depends_on ?? {}))
          if (required !== false) expect(activeServices(active)).toContain(dependency);
    }
  });

  test('callbacks reach any worker replica by the service name; metrics are scraped inside the network', () => {
    const env = Object.fromEntries(
      Object.entries(services.worker.environment ?? {}).map(([k, v]) => [k, expandDefaults(String(v))]),
    );
    const config = loadWorkerConfig(env);
    const base = new URL(config.callbacks!.baseUrl);
    expect(base.hostname).toBe('worker');
    expect(Number(base.port)).toBe(config.callbacks!.port);
    expect(config.callbacks!.host).toBe('0.0.0.0');

    const prometheus = services.prometheus;
    expect(prometheus.profiles).toEqual(['metrics']);
    expect(prometheus.image).toMatch(/^prom\/prometheus:v\d+\.\d+\.\d+$/);
    const scrape = parse(compose.configs!.prometheus.content!) as {
      scrape_configs: Array<{ dns_sd_configs?: Array<{ names: string[]; type: string; port: number }> }>;
    };
    const [host, port] = config.metricsAddress!.split(':');
    expect(host).toBe('0.0.0.0');
    // A DNS A query for the service name answers one address per replica: each is scraped.
    expect(scrape.scrape_configs.flatMap((c) => c.dns_sd_configs ?? [])).toContainEqual({
      names: ['worker'],
      type: 'A',
      port: Number(port),
    });
  });

  test("the callback receiver runs as its own service, with the workers' secret and Temporal", () => {
    const receiver = services.callbacks;
    expect(receiver.profiles).toEqual(['receiver']);
    expect(receiver.build).toBe('.');
    expect(receiver.command).toEqual(['callbacks']);
    const env = (service: Service) =>
      Object.fromEntries(Object.entries(service.environment ?? {}).map(([k, v]) => [k, expandDefaults(String(v))]));
    const config = loadReceiverConfig(env(receiver));
    expect(config).toMatchObject({ port: 3001, host: '0.0.0.0' });
    expect(config.secret).toBe(loadWorkerConfig(env(services.worker)).callbacks!.secret);
    expect(env(receiver).TEMPORAL_ADDRESS).toBe(env(services.worker).TEMPORAL_ADDRESS);
    expect(receiver.ports).toEqual(['3001:3001']);
    // Its callbacks counted where Prometheus looks (profile metrics), inside the network only.
    const metrics = loadMetricsAddress(env(receiver), 'off')!;
    expect(receiver.expose).toEqual([metrics.split(':')[1]]);
    const scrape = parse(compose.configs!.prometheus.content!) as {
      scrape_configs: Array<{ dns_sd_configs?: Array<{ names: string[]; type: string; port: number }> }>;
    };
    expect(scrape.scrape_configs.flatMap((c) => c.dns_sd_configs ?? [])).toContainEqual({
      names: ['callbacks'],
      type: 'A',
      port: Number(metrics.split(':')[1]),
    });
    expect(receiver.healthcheck?.test).toEqual(services.worker.healthcheck?.test);
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

  test('the tracing profile: a collector with a trace viewer, where the OTEL_* variables send the spans', () => {
    const jaeger = services.jaeger;
    expect(jaeger.profiles).toEqual(['tracing']);
    expect(jaeger.image).toMatch(/^jaegertracing\/jaeger:\d+\.\d+\.\d+$/); // pinned; v2 is all-in-one and takes OTLP
    expect(jaeger.ports).toEqual(['16686:16686']);
    // `${NAME:-default}` as compose expands it, with `set` in the shell's environment.
    const env = (service: Service, set: Record<string, string> = {}) =>
      Object.fromEntries(
        Object.entries(service.environment ?? {}).map(([k, v]) => [
          k,
          String(v).replace(/\$\{([A-Z_]+):-([^}]*)\}/g, (_m, name: string, fallback: string) => set[name] || fallback),
        ]),
      );
    for (const name of ['worker', 'callbacks']) {
      // Unset, no span is sent (and no collector is needed).
      expect(loadTracingConfig(env(services[name]))).toBeUndefined();
      // As the compose file's header says: the endpoint set, spans go to the collector's OTLP/HTTP port.
      const url = new URL(
        loadTracingConfig(env(services[name], { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://jaeger:4318' }))!.url,
      );
      expect(url.hostname).toBe('jaeger');
      expect(jaeger.expose).toContain(url.port);
      expect(url.pathname).toBe('/v1/traces');
      expect(services[name].environment?.OTEL_SERVICE_NAME).toMatch(/^tuneflow-/);
    }
  });

  test('the postgres profile has its database, schema set-up, server, namespace and UI', () => {
    for (const name of ['postgres', 'temporal-schema', 'temporal-postgres', 'temporal-namespace', 'temporal-ui'])
      expect(services[name]?.profiles).toEqual(['postgres']);
  });

  test("the postgres profile is Temporal's current set-up: the server image, the admin tools' SQL tool, no tctl", () => {
    for (const service of Object.values(services)) {
      expect(service.image ?? '').not.toMatch(/auto-setup/);
      expect(commandWords(service)).not.toContain('tctl');
    }
    const server = services['temporal-postgres'];
    const version = /^temporalio\/server:(\d+\.\d+\.\d+)$/.exec(server.image ?? '')?.[1];
    expect(version).toBeDefined();
    expect(server.healthcheck?.test).toEqual(
      expect.arrayContaining(['CMD', 'temporal', 'operator', 'cluster', 'health']),
    );
    expect(server.depends_on).toEqual({ 'temporal-schema': { condition: 'service_completed_successfully' } });
    expect(server.environment).toMatchObject({ DB: 'postgres12', POSTGRES_SEEDS: 'postgres' });
    expect(server.environment?.POSTGRES_USER).toBe(services.postgres.environment?.POSTGRES_USER);
    expect(server.environment?.POSTGRES_PWD).toBe(services.postgres.environment?.POSTGRES_PASSWORD);

    // The schema: the admin tools of the same release, both databases, created, set up and updated.
    const schema = services['temporal-schema'];
    expect(schema.image).toMatch(new RegExp(`^temporalio/admin-tools:${version!.replace(/\./g, '\\.')}\\b`));
    expect(schema.depends_on).toEqual({ postgres: { condition: 'service_healthy' } });
    const script = (schema.command ?? []).join('\n');
    for (const db of ['temporal', 'temporal_visibility'])
      for (const step of ['create-database', 'setup-schema', 'update-schema'])
        expect(script).toMatch(new RegExp(`^temporal-sql-tool --db ${db} ${step}\\b`, 'm'));
    expect(schema.environment).toMatchObject({ SQL_PLUGIN: 'postgres12', SQL_HOST: 'postgres' });

    // The namespace, with the temporal CLI, once the server is healthy.
    const namespace = services['temporal-namespace'];
    expect(namespace.image).toBe(schema.image);
    expect((namespace.command ?? []).join(' ')).toContain('temporal operator namespace create --namespace default');
    expect(namespace.depends_on).toEqual({ 'temporal-postgres': { condition: 'service_healthy' } });
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
    expect(dockerfile).toMatch(/ENTRYPOINT \["node", "lib\/cli\/index\.js"\]/);
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
