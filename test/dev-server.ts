/**
 * A Temporal CLI dev server of the test's own (DESIGN.md tier 5), for what only a real server shows. The CLI comes
 * from TEMPORAL_CLI_PATH; without it the tests that need one are skipped, with the reason printed (failed under CI).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as net from 'node:net';
import { Connection } from '@temporalio/client';

export const DEV_SERVER_CLI = process.env.TEMPORAL_CLI_PATH;

/** `test`, or `test.skip` without a CLI; under CI a missing CLI fails instead. */
export const devServerTest: jest.It = DEV_SERVER_CLI || process.env.CI ? test : test.skip;
if (!DEV_SERVER_CLI && !process.env.CI)
  process.stderr.write('dev-server tests SKIPPED: set TEMPORAL_CLI_PATH to a Temporal CLI\n');

export interface DevServer {
  readonly address: string;
  stop(): Promise<void>;
}

/** A free loopback port (the OS picks one; closed again before the server takes it). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * Starts `temporal server start-dev` on a free port and waits until it answers.
 *
 * @example
 * const server = await startDevServer(); ... await server.stop();
 */
export async function startDevServer(): Promise<DevServer> {
  if (!DEV_SERVER_CLI) throw new Error('TEMPORAL_CLI_PATH is not set: no Temporal CLI to start a dev server with');
  const port = await freePort();
  const args = ['server', 'start-dev', '--headless', '--ip', '127.0.0.1', '--port', String(port)];
  const child: ChildProcess = spawn(DEV_SERVER_CLI, [...args, '--log-level', 'error'], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const address = `127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  try {
    await waitUntilServing(address, child);
  } catch (err) {
    await stop();
    throw err;
  }
  return { address, stop };
}

async function waitUntilServing(address: string, child: ChildProcess): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    if (child.exitCode !== null) throw new Error(`the dev server exited with ${child.exitCode} before serving`);
    try {
      const connection = await Connection.connect({ address, connectTimeout: '1 second' });
      try {
        await connection.workflowService.describeNamespace({ namespace: 'default' });
        return;
      } finally {
        await connection.close();
      }
    } catch (err) {
      if (attempt >= 60) throw new Error(`the dev server at ${address} did not serve: ${String(err)}`);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}
