/**
 * Upload reads: what reading a job's files the safe way costs against the way it was done until the file was read from
 * its checked handle. Wall clock and the process's CPU (the file reads run on libuv's threads: counted too).
 * - `path` (before): the path checked (realpath, then stat of the real path), then read again by path as the request
 *   read it (`fs.openAsBlob`, whose bytes are taken here with `arrayBuffer()`);
 * - `handle` (now): readUploads: one open (O_NOFOLLOW | O_NONBLOCK), fstat, the handle's path from /proc/self/fd, the
 *   bytes read from the handle;
 * - `handle, no /proc` (now, the way of systems without /proc/self/fd): the same, the path matched by device and inode.
 * Each reads the same files into memory, so the figures are the checks' and the reads' own costs; then one POST
 * /images/inspect per file through the client against the mock service (in process), the file given both ways, for
 * what a request pays on top. Ways take turns in an order that rotates each round; medians of the rounds, and the ratio
 * to `path` round by round.
 *
 * Run alone: `npx tsx bench/uploads.ts` (env: BENCH_UPLOAD_ROUNDS=15).
 */
import { openAsBlob, promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { readUploads } from '../src/activities/uploads';
import { TunesApi } from '../src/api';
import { startMockService } from '../src/mock-service';

const ROUNDS = Number(process.env.BENCH_UPLOAD_ROUNDS ?? 15);

/** The sets read each round: the advised training set, and many small files for the cost a file pays whatever size. */
const SETS = [
  { name: '20 files of 3 MB', count: 20, bytes: 3_000_000 },
  { name: '100 files of 16 KB', count: 100, bytes: 16_000 },
] as const;

type Way = 'path' | 'handle' | 'handle, no /proc';
const WAYS: Way[] = ['path', 'handle', 'handle, no /proc'];

/** The check the read trusted until now: the real path inside the directory, a regular file; then a read by path. */
async function readByPath(dir: string, files: readonly string[]): Promise<number> {
  const root = await fs.realpath(dir);
  let total = 0;
  for (const file of files) {
    const real = await fs.realpath(path.resolve(root, file));
    if (!real.startsWith(root + path.sep)) throw new Error(`${file} is outside`);
    const stat = await fs.stat(real);
    if (!stat.isFile()) throw new Error(`${file} is not a file`);
    total += (await (await openAsBlob(real)).arrayBuffer()).byteLength;
  }
  return total;
}

async function readByHandle(root: string, files: readonly string[], procSelfFd: boolean): Promise<number> {
  const paths = files.map((file, i) => ({ field: `tune.images[${i}]`, path: file }));
  let total = 0;
  for (const file of await readUploads(root, paths, { procSelfFd })) total += file.size;
  return total;
}

function read(way: Way, root: string, files: readonly string[]): Promise<number> {
  if (way === 'path') return readByPath(root, files);
  return readByHandle(root, files, way === 'handle');
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** One round of one way: wall clock, and CPU of the whole process (the threads reading files included), in ms. */
interface Round {
  wallMs: number;
  cpuMs: number;
}

/** Each way's rounds, the ways rotating their order each round (two rounds first to warm up, not counted). */
async function rounds(each: (way: Way) => Promise<void>): Promise<Record<Way, Round[]>> {
  const measured = Object.fromEntries(WAYS.map((way) => [way, [] as Round[]])) as Record<Way, Round[]>;
  for (let round = -2; round < ROUNDS; round++) {
    for (let i = 0; i < WAYS.length; i++) {
      const way = WAYS[(i + Math.max(round, 0)) % WAYS.length];
      const cpu = process.cpuUsage();
      const started = performance.now();
      await each(way);
      const { user, system } = process.cpuUsage(cpu);
      if (round >= 0) measured[way].push({ wallMs: performance.now() - started, cpuMs: (user + system) / 1000 });
    }
  }
  return measured;
}

function report(measured: Record<Way, Round[]>, count: number, unit: string): void {
  for (const way of WAYS) {
    const rs = measured[way];
    const ratio = (pick: (r: Round) => number) =>
      median(rs.map((r, i) => pick(r) / pick(measured.path[i]))).toFixed(2) + 'x';
    const us = (pick: (r: Round) => number) => ((median(rs.map(pick)) * 1000) / count).toFixed(0).padStart(6);
    console.log(
      `  ${way.padEnd(17)} wall ${us((r) => r.wallMs)} us, CPU ${us((r) => r.cpuMs)} us ${unit}` +
        (way === 'path'
          ? ''
          : `; of path, round by round: wall ${ratio((r) => r.wallMs)}, CPU ${ratio((r) => r.cpuMs)}`),
    );
  }
}

/** Prints, for each set of files, the cost to check and read them each way, and of one inspection request a file. */
export async function benchUploads(): Promise<void> {
  const root = await fs.realpath(await fs.mkdtemp(path.join(tmpdir(), 'tuneflow-bench-uploads-')));
  const mock = await startMockService({ port: 0 });
  const api = new TunesApi({ apiKey: 'sk-bench-uploads-0123456789', baseUrl: mock.url });
  try {
    for (const set of SETS) {
      const folder = path.join(root, `${set.count}x${set.bytes}`);
      await fs.mkdir(folder);
      const files: string[] = [];
      for (let i = 0; i < set.count; i++) {
        const file = path.join(folder, `${i}.jpg`);
        await fs.writeFile(file, Buffer.alloc(set.bytes, i));
        files.push(path.relative(root, file));
      }
      const expected = set.count * set.bytes;
      console.log(`${set.name}: checked and read into memory (medians of ${ROUNDS} rounds)`);
      report(
        await rounds(async (way) => {
          const total = await read(way, root, files);
          if (total !== expected) throw new Error(`${way} read ${total} bytes, not ${expected}`);
        }),
        set.count,
        'a file',
      );
      // One request a file, as inspectImage sends it: the checked path to the client (read as the request is sent),
      // or the file read from its handle. The mock (in this process) reads every byte of each.
      console.log(`${set.name}: one POST /images/inspect a file (medians of ${ROUNDS} rounds)`);
      report(
        await rounds(async (way) => {
          for (const file of files) {
            const image =
              way === 'path'
                ? await checkedPath(root, file)
                : (await readUploads(root, [{ field: 'f', path: file }], { procSelfFd: way === 'handle' }))[0];
            await api.images.inspect({ name: 'man', file: image });
          }
        }),
        set.count,
        'a request',
      );
    }
  } finally {
    await api.close();
    await mock.close();
    await fs.rm(root, { recursive: true, force: true });
  }
}

/** The old check alone (resolveUploads until now): the real path, handed to the client, read as the request is sent. */
async function checkedPath(dir: string, file: string): Promise<string> {
  const root = await fs.realpath(dir);
  const real = await fs.realpath(path.resolve(root, file));
  if (!real.startsWith(root + path.sep) || !(await fs.stat(real)).isFile()) throw new Error(`${file} refused`);
  return real;
}

if (require.main === module) {
  benchUploads().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
