/**
 * Tier 2: uploads read what was checked. Real files in a temporary upload directory, the activities in
 * MockActivityEnvironment over the real client and the real mock service on loopback. A path is swapped at the
 * activities' seam between the check and the read (deterministically, no race): what reaches the service is the file
 * that was checked, never the one swapped in. Every refusal names the field and the rule, and the mock sees nothing.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rename, rm, symlink, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { createActivities, type ActivityDeps, type TuneflowActivities } from '../../src/activities';
import { readUploads, UPLOAD_MAX_BYTES, type UploadReadOptions } from '../../src/activities/uploads';
import { TunesApi } from '../../src/api';
import { PATH_RULE } from '../../src/contract/bounds';
import { startMockService } from '../../src/mock-service';

const PNG_1X1 = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
  'base64',
);
const SECRET = 'a token the worker can read, outside the upload directory';
const quiet = new DefaultLogger('ERROR', () => undefined);

let mock: Awaited<ReturnType<typeof startMockService>>;
let root: string;
let uploads: string;
let secret: string;
let keys = 0;
const opened: TunesApi[] = [];

beforeAll(async () => {
  mock = await startMockService({ port: 0, trainingTime: '200ms', inferenceTime: '100ms' });
  root = await mkdtemp(join(tmpdir(), 'tuneflow-uploads-fd-'));
  uploads = join(root, 'uploads');
  await mkdir(join(root, 'outside'), { recursive: true });
  secret = join(root, 'outside', 'secret.png');
  await writeFile(secret, SECRET);
});
afterAll(async () => {
  await Promise.all(opened.map((api) => api.close()));
  await mock.close();
  await rm(root, { recursive: true, force: true });
});

/** A fresh job folder with one good image, for each test: swaps in one test never reach another. */
let job = 0;
async function jobFolder(): Promise<{ folder: string; image: string; relative: string }> {
  const folder = join(uploads, `order-${++job}`);
  await mkdir(folder, { recursive: true });
  await writeFile(join(folder, '1.png'), PNG_1X1);
  return { folder, image: join(folder, '1.png'), relative: `order-${job}/1.png` };
}

function activitiesWith(beforeUploadRead?: ActivityDeps['beforeUploadRead']): TuneflowActivities {
  const api = new TunesApi({ apiKey: `uploads-fd-key-${++keys}-abcdefghijkl`, baseUrl: mock.url });
  opened.push(api);
  return createActivities({ api, uploadDir: uploads, beforeUploadRead });
}

function run<K extends keyof TuneflowActivities>(
  activities: TuneflowActivities,
  name: K,
  input: Parameters<TuneflowActivities[K]>[0],
): ReturnType<TuneflowActivities[K]> {
  const env = new MockActivityEnvironment(
    { attempt: 1, workflowExecution: { workflowId: `wf-${name}`, runId: 'run-1' } },
    { logger: quiet },
  );
  const fn = activities[name] as (arg: typeof input) => ReturnType<TuneflowActivities[K]>;
  return env.run(fn, input) as ReturnType<TuneflowActivities[K]>;
}

async function failureOf(promise: Promise<unknown>): Promise<ApplicationFailure> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApplicationFailure);
  return err as ApplicationFailure;
}

/** What the mock has seen: every request answered, and every tune and prompt it made, all accounts together. */
function seen(): { requests: number; tunes: number; prompts: number } {
  const routes = mock.stats().routes as Record<string, number>;
  const journal = mock.journal();
  return {
    requests: Object.values(routes).reduce((sum, n) => sum + n, 0),
    tunes: journal.tunes.length,
    prompts: journal.prompts.length,
  };
}

/** The bytes the mock serves for a tune's (only) training image. */
async function served(tune: Record<string, unknown>): Promise<Buffer> {
  expect(tune.orig_images).toHaveLength(1);
  const res = await fetch((tune.orig_images as string[])[0]);
  expect(res.status).toBe(200);
  return Buffer.from(await res.arrayBuffer());
}

/** Ways to swap a checked path for something else, at the seam between the check and the read. */
const SWAPS: [string, (image: string) => Promise<void>][] = [
  [
    'the file swapped for a link to a file outside',
    async (image) => {
      await rm(image);
      await symlink(secret, image);
    },
  ],
  [
    'its folder swapped for a link to a folder outside holding a file of the same name',
    async (image) => {
      const folder = dirname(image);
      const elsewhere = join(root, 'outside', `${basename(folder)}-swapped`);
      await mkdir(elsewhere);
      await writeFile(join(elsewhere, basename(image)), SECRET);
      await rename(folder, `${folder}-moved`);
      await symlink(elsewhere, folder);
    },
  ],
  [
    'the file swapped for a FIFO no one writes to',
    async (image) => {
      await rm(image);
      execFileSync('mkfifo', [image]);
    },
  ],
];

/** Each case makes its path in a fresh job folder and gives the rule the refusal must say. */
const CASES: [string, (folder: string) => Promise<string>, string][] = [
  [
    'a link as the last component, even to a file inside',
    async (folder) => {
      await symlink(join(folder, '1.png'), join(folder, 'link.png'));
      return 'link.png';
    },
    'must name the file itself, not a symbolic link, in the upload directory',
  ],
  [
    'a FIFO (refused without waiting for a writer)',
    async (folder) => {
      execFileSync('mkfifo', [join(folder, 'fifo.png')]);
      return 'fifo.png';
    },
    'must name a regular file in the upload directory',
  ],
  ['a directory', async () => '.', 'must name a regular file in the upload directory'],
  [
    'a file over the size bound',
    async (folder) => {
      await writeFile(join(folder, 'big.png'), '');
      await truncate(join(folder, 'big.png'), UPLOAD_MAX_BYTES + 1); // sparse: no 32 MiB written
      return 'big.png';
    },
    `must be at most ${UPLOAD_MAX_BYTES} bytes (it has ${UPLOAD_MAX_BYTES + 1})`,
  ],
  [
    'a folder along the path that links outside',
    async (folder) => {
      await symlink(join(root, 'outside'), join(folder, 'away'));
      return 'away/secret.png';
    },
    PATH_RULE,
  ],
];

describe('a path swapped between the check and the read', () => {
  test.each(SWAPS)('%s: the tune gets the bytes that were checked', async (_what, swap) => {
    const { image, relative } = await jobFolder();
    const swapped: string[] = [];
    const activities = activitiesWith(async ({ field, path }) => {
      swapped.push(field);
      await swap(path);
    });
    await run(activities, 'checkUploads', { paths: [{ field: 'tune.images[0]', path: relative }] });
    const tune = await run(activities, 'createTune', {
      tune: { title: `swap-${job}`, name: 'man', images: [relative] },
    });
    expect(swapped).toEqual(['tune.images[0]']);
    const bytes = await served(tune);
    expect(bytes.toString('latin1')).not.toContain(SECRET);
    expect(bytes.equals(PNG_1X1)).toBe(true);
    // The path now names something else: the same create again is refused, and sends nothing.
    const before = seen();
    const again = await failureOf(
      run(activities, 'createTune', { tune: { title: `swap-again-${job}`, name: 'man', images: [image] } }),
    );
    expect(again.type).toBe('InvalidInput');
    expect(again.message).toContain('tune.images[0]: ');
    expect(seen()).toEqual(before);
  });

  test('a prompt input image and an inspected image swapped the same way are sent as checked', async () => {
    const { folder, relative } = await jobFolder();
    await writeFile(join(folder, '2.png'), PNG_1X1);
    await writeFile(join(folder, '3.png'), PNG_1X1);
    const fields: string[] = [];
    const activities = activitiesWith(async ({ field, path }) => {
      fields.push(field);
      await SWAPS[0][1](path);
    });
    const tune = await run(activities, 'createTune', { tune: { title: `p-${job}`, name: 'man', images: [relative] } });
    const prompt = await run(activities, 'createPrompt', {
      tuneId: tune.id,
      prompt: { text: 'ohwx man', input_image: `${basename(folder)}/2.png`, controlnet: 'canny' },
      key: '0',
    });
    const inspected = await run(activities, 'inspectImage', {
      name: 'man',
      image: { field: 'tune.images[0]', path: `${basename(folder)}/3.png` },
    });
    expect(fields).toEqual(['tune.images[0]', 'prompt.input_image', 'tune.images[0]']);
    expect(prompt.tune_id).toBe(tune.id);
    // The mock reads a PNG's size from its bytes: the text swapped in would raise no low_resolution.
    expect(inspected.flags).toContain('low_resolution');
  });

  test('a file swapped for a link after checkUploads passed is refused by the read, naming it, nothing sent', async () => {
    const { image, relative } = await jobFolder();
    const activities = activitiesWith();
    await run(activities, 'checkUploads', { paths: [{ field: 'tune.images[0]', path: relative }] });
    await rm(image);
    await symlink(secret, image);
    const before = seen();
    const failure = await failureOf(
      run(activities, 'createTune', { tune: { title: `late-${job}`, name: 'man', images: [relative] } }),
    );
    expect(failure.type).toBe('InvalidInput');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toContain('tune.images[0]: must name the file itself, not a symbolic link');
    expect(seen()).toEqual(before);
  });
});

describe('what the read refuses, on its own handle', () => {
  test.each(CASES)('%s: InvalidInput naming the field and the rule, nothing sent', async (_what, make, rule) => {
    const { folder } = await jobFolder();
    const path = `${basename(folder)}/${await make(folder)}`;
    const activities = activitiesWith();
    const before = seen();
    const failures = [
      await failureOf(run(activities, 'checkUploads', { paths: [{ field: 'prompts[3].mask_image', path }] })),
      await failureOf(
        run(activities, 'createTune', { tune: { title: `refused-${job}`, name: 'man', images: ['x/../1.png', path] } }),
      ),
      await failureOf(
        run(activities, 'createPrompt', {
          tuneId: 1,
          prompt: { text: 'x', input_image: path, controlnet: 'canny' },
          key: '0',
        }),
      ),
      await failureOf(run(activities, 'inspectImage', { name: 'man', image: { field: 'tune.images[2]', path } })),
      await failureOf(
        run(activities, 'createPackTune', { packId: 1, tune: { title: `pack-${job}`, name: 'man', images: [path] } }),
      ),
    ];
    for (const failure of failures) {
      expect(failure.type).toBe('InvalidInput');
      expect(failure.nonRetryable).toBe(true);
    }
    const [checked, tune, prompt, inspected, pack] = failures.map((failure) => failure.message);
    expect(checked).toContain(`prompts[3].mask_image: ${rule}`);
    // Every refused field is named, in input order.
    expect(tune).toContain(`tune.images[0]: ${PATH_RULE}`);
    expect(tune).toContain(`tune.images[1]: ${rule}`);
    expect(prompt).toContain(`prompt.input_image: ${rule}`);
    expect(inspected).toContain(`tune.images[2]: ${rule}`);
    expect(pack).toContain(`tune.images[0]: ${rule}`);
    expect(seen()).toEqual(before);
  });

  test('a folder along the path that links to another folder inside is followed', async () => {
    const { folder } = await jobFolder();
    await symlink(folder, join(uploads, `alias-${job}`));
    const tune = await run(activitiesWith(), 'createTune', {
      tune: { title: `alias-${job}`, name: 'man', images: [`alias-${job}/1.png`] },
    });
    expect((await served(tune)).equals(PNG_1X1)).toBe(true);
  });
});

describe('without /proc/self/fd (the way macOS takes)', () => {
  const read = (path: string, beforeRead?: UploadReadOptions['beforeRead']) =>
    readUploads(uploads, [{ field: 'tune.images[0]', path }], { procSelfFd: false, beforeRead });

  test('a file swapped for a link at the seam: the checked bytes are read', async () => {
    const { relative } = await jobFolder();
    const [file] = await read(relative, ({ path }) => SWAPS[0][1](path));
    expect(file.name).toBe('1.png');
    expect(Buffer.from(await file.arrayBuffer()).equals(PNG_1X1)).toBe(true);
    expect(await readFile(join(uploads, relative), 'utf8')).toBe(SECRET); // the path itself did change
  });

  test.each(CASES)('%s is refused the same way', async (_what, make, rule) => {
    const { folder } = await jobFolder();
    await expect(read(`${basename(folder)}/${await make(folder)}`)).rejects.toThrow(`tune.images[0]: ${rule}`);
  });
});
