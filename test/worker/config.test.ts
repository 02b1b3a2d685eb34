import {
  ConfigError,
  DEFAULT_API_URL,
  DEFAULT_CALLBACK_PORT,
  loadDemoService,
  loadTaskQueue,
  loadStorageSettings,
  loadWorkerConfig,
  temporalAddressOf,
} from '../../src/config';

const base = { TUNEFLOW_API_KEY: 'key-for-tests' };

describe('loadStorageSettings', () => {
  test('a folder, or an s3:// bucket with its prefix and endpoint; the image hosts and bound; unset: none', () => {
    expect(loadStorageSettings({})).toBeUndefined();
    expect(loadWorkerConfig({ ...base, TUNEFLOW_STORAGE: '/srv/images' }).storage).toEqual({
      target: { folder: '/srv/images' },
    });
    expect(
      loadStorageSettings({
        TUNEFLOW_STORAGE: 's3://portraits-images/tuneflow/prod',
        TUNEFLOW_STORAGE_ENDPOINT: 'http://127.0.0.1:8333',
        TUNEFLOW_IMAGE_HOSTS: 'cdn.example.com, 10.0.0.5:9000',
        TUNEFLOW_IMAGE_MAX_BYTES: '1048576',
      }),
    ).toEqual({
      target: { s3: { bucket: 'portraits-images', prefix: 'tuneflow/prod', endpoint: 'http://127.0.0.1:8333' } },
      imageHosts: ['cdn.example.com', '10.0.0.5:9000'],
      imageMaxBytes: 1048576,
    });
  });

  test.each([
    [{ TUNEFLOW_STORAGE: 'images' }, 'TUNEFLOW_STORAGE: must be an absolute folder path, or s3://bucket/prefix'],
    [{ TUNEFLOW_STORAGE: 's3://Bad_Bucket' }, 'TUNEFLOW_STORAGE: must name an S3 bucket after s3://'],
    [
      { TUNEFLOW_STORAGE: 's3://images', TUNEFLOW_STORAGE_ENDPOINT: 'ftp://x' },
      'TUNEFLOW_STORAGE_ENDPOINT: must be an http or https URL',
    ],
    [
      { TUNEFLOW_STORAGE: '/srv/images', TUNEFLOW_STORAGE_ENDPOINT: 'http://x:1' },
      'TUNEFLOW_STORAGE_ENDPOINT: is for an s3:// TUNEFLOW_STORAGE only',
    ],
    [{ TUNEFLOW_STORAGE_ENDPOINT: 'http://x:1' }, 'TUNEFLOW_STORAGE_ENDPOINT: is set without TUNEFLOW_STORAGE'],
    [
      { TUNEFLOW_STORAGE: '/srv/images', TUNEFLOW_IMAGE_HOSTS: 'http://cdn' },
      'TUNEFLOW_IMAGE_HOSTS: must be host or host:port',
    ],
    [
      { TUNEFLOW_STORAGE: '/srv/images', TUNEFLOW_IMAGE_MAX_BYTES: '10' },
      'TUNEFLOW_IMAGE_MAX_BYTES: must be a whole number of bytes from 1024',
    ],
  ])('%j is refused, naming the variable and the rule', (env, message) => {
    expect(() => loadStorageSettings(env)).toThrow(ConfigError);
    expect(() => loadStorageSettings(env)).toThrow(message);
  });
});

describe('loadWorkerConfig', () => {
  test('defaults: public service, task queue tuneflow, no callbacks, metrics on 9464, INFO', () => {
    const config = loadWorkerConfig({ ...base });
    expect(config.api).toEqual({ baseUrl: DEFAULT_API_URL, apiKey: 'key-for-tests' });
    expect(config.taskQueue).toBe('tuneflow');
    expect(config.callbacks).toBeUndefined();
    expect(config.metricsAddress).toBe('0.0.0.0:9464');
    expect(config.logLevel).toBe('INFO');
    expect(config.maxCachedWorkflows).toBeUndefined();
    expect(config.serviceRate).toBeUndefined();
  });

  test('the service rate: a positive number of requests per second, named when it is not', () => {
    expect(loadWorkerConfig({ ...base, TUNEFLOW_SERVICE_RATE: '18' }).serviceRate).toBe(18);
    expect(loadWorkerConfig({ ...base, TUNEFLOW_SERVICE_RATE: '0.5' }).serviceRate).toBe(0.5);
    expect(loadWorkerConfig({ ...base, TUNEFLOW_SERVICE_RATE: ' 20 ' }).serviceRate).toBe(20);
    expect(loadWorkerConfig(base).serviceMargin).toBeUndefined();
    expect(loadWorkerConfig({ ...base, TUNEFLOW_SERVICE_MARGIN: '0' }).serviceMargin).toBe(0);
    expect(loadWorkerConfig({ ...base, TUNEFLOW_SERVICE_MARGIN: '0.25' }).serviceMargin).toBe(0.25);
    expect(() => loadWorkerConfig({ ...base, TUNEFLOW_SERVICE_MARGIN: 'ten' })).toThrow(
      'TUNEFLOW_SERVICE_MARGIN: must be a number from 0 to 0.5',
    );
    // Empty, as compose passes an unset one: no limit.
    expect(loadWorkerConfig({ ...base, TUNEFLOW_SERVICE_RATE: '' }).serviceRate).toBeUndefined();
    for (const bad of ['0', '0.0', '-5', '1e3', '20/s', 'fast', 'Infinity', '.5'])
      expect(() => loadWorkerConfig({ ...base, TUNEFLOW_SERVICE_RATE: bad })).toThrow(
        `TUNEFLOW_SERVICE_RATE: must be a positive number of requests per second, such as 18 or 0.5 (got ${JSON.stringify(bad)})`,
      );
  });

  test("the worker's cache of runs: a whole number, named when it is not", () => {
    expect(loadWorkerConfig({ ...base, TUNEFLOW_MAX_CACHED_WORKFLOWS: '150' }).maxCachedWorkflows).toBe(150);
    expect(loadWorkerConfig({ ...base, TUNEFLOW_MAX_CACHED_WORKFLOWS: '0' }).maxCachedWorkflows).toBe(0);
    for (const bad of ['-1', '1.5', 'many'])
      expect(() => loadWorkerConfig({ ...base, TUNEFLOW_MAX_CACHED_WORKFLOWS: bad })).toThrow(
        'TUNEFLOW_MAX_CACHED_WORKFLOWS: must be a whole number, 0 or more',
      );
  });

  test('reads the Temporal connection from the standard variables', () => {
    const config = loadWorkerConfig({ ...base, TEMPORAL_ADDRESS: 'temporal:7233', TEMPORAL_NAMESPACE: 'prod' });
    expect(config.temporal.connectionOptions.address).toBe('temporal:7233');
    expect(config.temporal.namespace).toBe('prod');
  });

  test('callbacks: base URL, secret, port and host', () => {
    const config = loadWorkerConfig({
      ...base,
      TUNEFLOW_CALLBACK_BASE_URL: 'https://hooks.example.com',
      TUNEFLOW_CALLBACK_SECRET: 'a-secret-of-enough-length',
      TUNEFLOW_CALLBACK_PORT: '4000',
    });
    expect(config.callbacks).toEqual({
      baseUrl: 'https://hooks.example.com',
      secret: 'a-secret-of-enough-length',
      port: 4000,
      host: '0.0.0.0',
      limits: {},
    });
    const defaults = loadWorkerConfig({
      ...base,
      TUNEFLOW_CALLBACK_BASE_URL: 'https://h.example.com',
      TUNEFLOW_CALLBACK_SECRET: 'x'.repeat(16),
    });
    expect(defaults.callbacks?.port).toBe(DEFAULT_CALLBACK_PORT);
  });

  test("callbacks: the receiver's limits, each variable over its default, a bad one named", () => {
    const callbacks = {
      ...base,
      TUNEFLOW_CALLBACK_BASE_URL: 'https://h.example.com',
      TUNEFLOW_CALLBACK_SECRET: 'x'.repeat(16),
    };
    const limits = loadWorkerConfig({
      ...callbacks,
      TUNEFLOW_CALLBACK_MAX_CONNECTIONS: '900',
      TUNEFLOW_CALLBACK_MAX_CONNECTIONS_PER_PEER: '900',
      TUNEFLOW_CALLBACK_MAX_BUFFERED_BYTES: '1048576',
      TUNEFLOW_CALLBACK_IDLE_TIMEOUT: '2 seconds',
    }).callbacks?.limits;
    expect(limits).toEqual({
      maxConnections: 900,
      maxConnectionsPerPeer: 900,
      maxBufferedBytes: 1_048_576,
      idleTimeout: '2 seconds',
    });
    expect(() => loadWorkerConfig({ ...callbacks, TUNEFLOW_CALLBACK_MAX_CONNECTIONS: '0' })).toThrow(
      'TUNEFLOW_CALLBACK_MAX_CONNECTIONS: must be a whole number, 1 or more',
    );
    expect(() => loadWorkerConfig({ ...callbacks, TUNEFLOW_CALLBACK_IDLE_TIMEOUT: 'soon' })).toThrow(
      'TUNEFLOW_CALLBACK_IDLE_TIMEOUT: must be a positive duration',
    );
  });

  test.each([
    [{}, 'TUNEFLOW_API_KEY', 'is required'],
    [{ TUNEFLOW_API_KEY: '   ' }, 'TUNEFLOW_API_KEY', 'is required'],
    [{ ...base, TUNEFLOW_API_URL: 'not a url' }, 'TUNEFLOW_API_URL', 'http(s) URL'],
    [{ ...base, TUNEFLOW_API_URL: 'ftp://x.example.com' }, 'TUNEFLOW_API_URL', 'http(s) URL'],
    [{ ...base, TUNEFLOW_CALLBACK_BASE_URL: 'https://h.example.com' }, 'TUNEFLOW_CALLBACK_SECRET', 'at least 16'],
    [
      { ...base, TUNEFLOW_CALLBACK_BASE_URL: 'https://h.example.com', TUNEFLOW_CALLBACK_SECRET: 'short' },
      'TUNEFLOW_CALLBACK_SECRET',
      'at least 16',
    ],
    [
      { ...base, TUNEFLOW_CALLBACK_BASE_URL: 'hooks', TUNEFLOW_CALLBACK_SECRET: 'x'.repeat(16) },
      'TUNEFLOW_CALLBACK_BASE_URL',
      'URL',
    ],
    [
      {
        ...base,
        TUNEFLOW_CALLBACK_BASE_URL: 'https://h.example.com',
        TUNEFLOW_CALLBACK_SECRET: 'x'.repeat(16),
        TUNEFLOW_CALLBACK_PORT: '70000',
      },
      'TUNEFLOW_CALLBACK_PORT',
      'port number',
    ],
    [{ ...base, TUNEFLOW_TASK_QUEUE: 'two words' }, 'TUNEFLOW_TASK_QUEUE', 'without spaces'],
    [{ ...base, TUNEFLOW_METRICS_ADDRESS: 'nine' }, 'TUNEFLOW_METRICS_ADDRESS', 'host:port'],
    [{ ...base, TUNEFLOW_LOG_LEVEL: 'LOUD' }, 'TUNEFLOW_LOG_LEVEL', 'one of'],
  ])('%j is refused, naming %s', (env, variable, rule) => {
    let error: unknown;
    try {
      loadWorkerConfig(env as Record<string, string>);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe(variable);
    expect((error as Error).message).toContain(variable);
    expect((error as Error).message).toContain(rule);
  });

  test('the API key never appears in an error message', () => {
    expect(() => loadWorkerConfig({ TUNEFLOW_API_KEY: 'sekrit-key', TUNEFLOW_API_URL: 'nope' })).toThrow(
      expect.objectContaining({ message: expect.not.stringContaining('sekrit-key') }),
    );
  });

  test('metrics can be turned off', () => {
    expect(loadWorkerConfig({ ...base, TUNEFLOW_METRICS_ADDRESS: 'off' }).metricsAddress).toBeUndefined();
  });
});

describe('the commands read their settings through config.ts', () => {
  test('the task queue: TUNEFLOW_TASK_QUEUE, else tuneflow; a name with a space is named', () => {
    expect(loadTaskQueue({})).toBe('tuneflow');
    expect(loadTaskQueue({ TUNEFLOW_TASK_QUEUE: 'orders' })).toBe('orders');
    expect(() => loadTaskQueue({ TUNEFLOW_TASK_QUEUE: 'my queue' })).toThrow('TUNEFLOW_TASK_QUEUE: must be a name');
  });

  test('where TEMPORAL_ADDRESS says a server is', () => {
    expect(temporalAddressOf({})).toEqual({ address: undefined, namespace: 'default' });
    expect(temporalAddressOf({ TEMPORAL_ADDRESS: 'temporal:7233', TEMPORAL_NAMESPACE: 'jobs' })).toEqual({
      address: 'temporal:7233',
      namespace: 'jobs',
    });
  });

  test('the demo: the mock without a key; with one, images from --images before TUNEFLOW_DEMO_IMAGES', () => {
    expect(loadDemoService({ TUNEFLOW_DEMO_IMAGES: 'https://a.test/1.jpg' })).toBeUndefined();
    const env = { ...base, TUNEFLOW_DEMO_IMAGES: 'https://a.test/1.jpg,https://a.test/2.jpg' };
    expect(loadDemoService(env)).toMatchObject({
      apiKey: 'key-for-tests',
      apiUrl: DEFAULT_API_URL,
      images: ['https://a.test/1.jpg', 'https://a.test/2.jpg'],
      branch: 'fast',
    });
    expect(loadDemoService(env, ['https://b.test/1.jpg'])?.images).toEqual(['https://b.test/1.jpg']);
    expect(loadDemoService({ ...env, TUNEFLOW_DEMO_BRANCH: 'flux1' })?.branch).toBe('flux1');
  });

  test('the demo names a missing image list and a branch it does not know', () => {
    expect(() => loadDemoService({ ...base })).toThrow(
      expect.objectContaining({ variable: 'TUNEFLOW_DEMO_IMAGES', message: expect.stringContaining('--images') }),
    );
    expect(() =>
      loadDemoService({ ...base, TUNEFLOW_DEMO_IMAGES: 'https://a.test/1.jpg', TUNEFLOW_DEMO_BRANCH: 'turbo' }),
    ).toThrow('TUNEFLOW_DEMO_BRANCH: must be one of fast, sd15, sdxl1, flux1');
  });
});
