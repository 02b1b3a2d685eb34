/**
 * The cluster tier (`npm run cluster`, `npm run soak -- --cluster`) is too slow for `npm test`; what it says when this
 * machine lacks Go or PostgreSQL is checked here: what is missing, and every way out.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  ClusterServerUnavailableError,
  PINNED_SERVER,
  provisionClusterServer,
  SERVER_DIR_VARIABLE,
} from '../../src/temporal-server/cluster-server';
import { findPostgresBin, POSTGRES_BIN_VARIABLE } from '../../bench/cluster/postgres';

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
