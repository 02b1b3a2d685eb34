/**
 * The cluster tier (`npm run cluster`, `npm run soak -- --cluster`) is too slow for `npm test`; what it says when this
 * machine lacks Go or PostgreSQL is checked here: what is missing, and every way out. So is how it reads what the jobs
 * left in the database, on a real PostgreSQL.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  ClusterServerUnavailableError,
  PINNED_SERVER,
  provisionClusterServer,
  SERVER_DIR_VARIABLE,
} from '../../src/temporal-server/cluster-server';
import { promisify } from 'node:util';
import { footprint, footprintPerJob } from '../../bench/cluster/footprint';
import { findPostgresBin, POSTGRES_BIN_VARIABLE, startPostgres } from '../../bench/cluster/postgres';

const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-cluster-test-'));
afterAll(() => fs.rmSync(empty, { recursive: true, force: true }));

test('without Go and nothing cached, the server cannot be had: the message says why and the ways out', async () => {
  const env = { PATH: empty, XDG_CACHE_HOME: empty, HOME: empty };
  const outcome = provisionClusterServer({ env, log: () => undefined });
  await expect(outcome).rejects.toBeInstanceOf(ClusterServerUnavailableError);
  const message = ((await outcome.catch((err: Error) => err)) as Error).message;
  expect(message).toContain(
    `The Temporal server ${PINNED_SERVER.version} is built from its Go module, and go is not on PATH`,
  );
  expect(message).toContain('install Go 1.25 or newer');
  expect(message).toContain(path.join(empty, 'tuneflow', 'temporal', `server-${PINNED_SERVER.version}`));
  expect(message).toContain(`${SERVER_DIR_VARIABLE}=/path/to/folder`);
});

test('a server folder that lacks the files is named, not passed over', async () => {
  const env = { PATH: empty, XDG_CACHE_HOME: empty, [SERVER_DIR_VARIABLE]: empty };
  await expect(provisionClusterServer({ env })).rejects.toThrow(
    `${SERVER_DIR_VARIABLE}=${empty} must hold temporal-server, temporal-sql-tool and config/development-postgres12.yaml`,
  );
});

test("without PostgreSQL's binaries, the message says how to install them or where to point", () => {
  expect(() => findPostgresBin({ PATH: empty }, path.join(empty, 'no-debian-packages'))).toThrow(
    /PostgreSQL \(initdb and postgres\) is not on this machine\. Ways out:\n.*apt-get install postgresql.*\n.*\n.*TUNEFLOW_POSTGRES_BIN=\/path\/to\/bin/,
  );
  expect(() => findPostgresBin({ [POSTGRES_BIN_VARIABLE]: empty })).toThrow(
    `${POSTGRES_BIN_VARIABLE}=${empty} holds no initdb and postgres`,
  );
});

test('PostgreSQL is found in a folder laid out like the Debian package, newest major first', () => {
  const debian = path.join(empty, 'postgresql');
  for (const major of ['13', '15'])
    for (const tool of ['initdb', 'postgres']) {
      fs.mkdirSync(path.join(debian, major, 'bin'), { recursive: true });
      fs.writeFileSync(path.join(debian, major, 'bin', tool), '');
    }
  expect(findPostgresBin({ PATH: empty }, debian)).toBe(path.join(debian, '15', 'bin'));
});

test("the jobs' footprint: each database's bytes and the rows of the tables that grew, a job, read from PostgreSQL", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-footprint-'));
  fs.chmodSync(dir, 0o755); // PostgreSQL may run as another user (see bench/cluster/postgres.ts)
  const postgres = await startPostgres({ dir: path.join(dir, 'postgres') });
  const psql = (database: string, sql: string) =>
    promisify(execFile)(
      path.join(findPostgresBin(), 'psql'),
      ['-X', '-h', postgres.host, '-p', String(postgres.port), '-U', postgres.user, '-d', database, '-c', sql],
      { env: { ...process.env, PGPASSWORD: postgres.password } },
    );
  try {
    for (const database of ['temporal', 'temporal_visibility']) await psql('postgres', `CREATE DATABASE ${database}`);
    await psql('temporal', 'CREATE TABLE history_node (id int, data bytea); CREATE TABLE executions (id int)');
    // Stored as written (no compression), so that the bytes a job are known.
    await psql('temporal', 'ALTER TABLE history_node ALTER COLUMN data SET STORAGE EXTERNAL');
    await psql('temporal_visibility', 'CREATE TABLE executions_visibility (id int)');
    const before = await footprint(postgres);
    expect(before.temporal.rows).toEqual({ history_node: 0, executions: 0 });
    expect(before.temporal.bytes).toBeGreaterThan(1_000_000);

    // Ten jobs: 40 history nodes of 8 KiB each, 10 executions, nothing in visibility.
    await psql(
      'temporal',
      "INSERT INTO history_node SELECT g, decode(repeat('ab', 8192), 'hex') FROM generate_series(1, 40) g",
    );
    await psql('temporal', 'INSERT INTO executions SELECT g FROM generate_series(1, 10) g');
    await psql('temporal', 'CHECKPOINT');
    const after = await footprint(postgres);
    expect(after.temporal.rows).toEqual({ history_node: 40, executions: 10 });

    const [temporal, visibility] = footprintPerJob(before, after, 10);
    expect(temporal.database).toBe('temporal');
    expect(temporal.rows).toEqual([
      ['history_node', 4],
      ['executions', 1],
    ]);
    // 4 nodes of 8 KiB a job, in heap and TOAST pages: at least their data, at most twice it.
    expect(temporal.bytes).toBeGreaterThanOrEqual(4 * 8192);
    expect(temporal.bytes).toBeLessThan(2 * 4 * 8192 + 8192);
    expect(visibility).toEqual({ database: 'temporal_visibility', bytes: 0, rows: [] });
  } finally {
    await postgres.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
