/**
 * The README's "Run it locally" commands, replayed as printed: each line run by bash in the repository (`npx
 * tuneflow ...`), the dev server, the mock service and the worker left running as a user leaves them in their
 * terminals, then `start --wait` and `status` in order; then the servers stopped as a user stops them, by Ctrl-C.
 * docker-compose.yml's comment, the run it tells users to start from the host, is replayed against the same stack.
 *
 * Two liberties, both so that runs of this test beside other work on one machine do not collide: the fixed ports the
 * commands print (7233, 8233, 8080, 3001) are replaced by free ones, and the environment names the replaced Temporal
 * ports in TEMPORAL_ADDRESS and TUNEFLOW_CALLBACK_PORT (what the commands take by default: localhost:7233, 3001) and a
 * free metrics port for the worker.
 * `npm ci && npm run build`, the first line, is what this test run itself went through (`npm test` builds first).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { freePort, portIsFree } from '../../src/temporal-server/dev-server';
import { devServerTest } from './environment';
import { blocksUnder, commandsOf } from '../readme-blocks';
import { lineOf, runInShell as run, stopGroup, type Running } from './shell-process';

jest.setTimeout(240_000);

const ROOT = path.resolve(__dirname, '../..');
const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
const compose = fs.readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8');

/** The commands of the first `sh` block under `heading` in README.md. */
const commandsUnder = (markdown: string, heading: string) => commandsOf(blocksUnder(heading, 'sh', markdown)[0]);

/** What a user leaves running, and the line that says it is ready. */
const SERVERS: Array<[RegExp, RegExp]> = [
  [/tuneflow dev-server\b/, /^Ctrl-C stops it\.$/],
  [/tuneflow mock-service\b/, /^listening on /],
  [/tuneflow worker\b/, /tuneflow worker started/],
];

let servers: Running[] = [];
let env: NodeJS.ProcessEnv;
let ports: Map<string, string>;

/** The command as printed, on this test's ports. */
const onOurPorts = (command: string) =>
  command.replace(/\b(7233|8233|8080|3001)\b/g, (port) => ports.get(port) ?? port);

beforeAll(async () => {
  ports = new Map();
  for (const port of ['7233', '8233', '8080', '3001']) ports.set(port, String(await freePort()));
  env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    XDG_CACHE_HOME: process.env.XDG_CACHE_HOME,
    TUNEFLOW_TEMPORAL_DOWNLOAD: 'off',
    TEMPORAL_ADDRESS: `localhost:${ports.get('7233')}`,
    // Printed, the receiver listens on its default port, 3001, which the callback base URL names.
    TUNEFLOW_CALLBACK_PORT: ports.get('3001'),
    TUNEFLOW_METRICS_ADDRESS: `127.0.0.1:${await freePort()}`,
  };
});

afterAll(async () => {
  for (const server of servers.reverse()) {
    await stopGroup(server, 'SIGKILL');
  }
});

devServerTest("the README's Run it locally commands work as printed, and so does docker-compose.yml's", async () => {
  const commands = commandsUnder(readme, '## Run it locally');
  expect(commands[0]).toBe('npm ci && npm run build');
  const [, ...rest] = commands;
  // dev-server, the mock, the worker: in order, each ready before the next, as a user starts them.
  const others: string[] = [];
  for (const command of rest) {
    const server = SERVERS.find(([name]) => name.test(command));
    if (!server) {
      others.push(command);
      continue;
    }
    // The dev server is told its port here: printed, it takes the default one (7233 and 8233).
    const local = /tuneflow dev-server$/.test(command)
      ? `${command} --port ${ports.get('7233')} --ui-port ${ports.get('8233')}`
      : onOurPorts(command);
    const running = run(local, env);
    servers.push(running);
    await lineOf(running, server[1]);
  }
  expect(servers.map((s) => SERVERS.findIndex(([name]) => name.test(s.command)))).toEqual([0, 1, 2]);
  expect(servers[0].output()).toContain(`Web UI:  http://127.0.0.1:${ports.get('8233')}`);
  // The `temporal` the README's operator commands need: the CLI it names answers as one.
  const cli = /^CLI: +(\S+) \(alias temporal=/m.exec(servers[0].output())?.[1];
  expect(cli && (await promisify(execFile)(cli, ['--version'])).stdout).toMatch(/^temporal version /);

  // start --wait, then status: each exits 0.
  expect(others).toHaveLength(2);
  const [start, status] = others;
  expect(start).toMatch(/^npx tuneflow start .* --wait$/);
  const started = Date.now();
  const startRun = run(onOurPorts(start), env);
  expect({ code: await startRun.exited, output: startRun.output() }).toEqual({ code: 0, output: expect.any(String) });
  const took = Date.now() - started;
  const startOutput = startRun.output();
  expect(startOutput).toMatch(/^started my-first-run$/m);
  expect(startOutput).toMatch(/^completed {2}elapsed \d+s {2}1\/1 prompts {2}tune \d+ /m);
  // What it waited for, and since when (the phases pass in about a second each here).
  expect(startOutput).toMatch(/^(training|generating) {2}elapsed \d+s {2}waiting for /m);
  expect(startOutput).toMatch(
    new RegExp(`^prompt \\d+: http://127\\.0\\.0\\.1:${ports.get('8080')}/images/\\S+\\.png$`, 'm'),
  );
  // TUNEFLOW_STORAGE=$PWD/out/images: the image copied there, where the status says it is.
  const stored = new RegExp(
    `^  stored: (file://${ROOT}/out/images/default/my-first-run/prompt-\\d+/image-0\\.png)$`,
    'm',
  );
  const copy = stored.exec(startOutput)?.[1];
  expect(copy).toBeDefined();
  expect(fs.statSync(new URL(copy!)).size).toBeGreaterThan(0);
  expect(startOutput).toMatch(/^cost: 0 mc \(\$0\.00\)$/m);
  expect(startOutput).not.toMatch(/no worker polls/);
  // The run asked for callbacks (its objects carry signed URLs at the service): none reaches the terminal.
  expect(startOutput).not.toMatch(/sig=(?!redacted)/);
  // By callbacks, through the worker's receiver: seconds, not the minutes polls take.
  expect(took).toBeLessThan(60_000);

  const statusRun = run(onOurPorts(status), env);
  expect(await statusRun.exited).toBe(0);
  expect(statusRun.output()).toMatch(/^run: +my-first-run: COMPLETED after \d+s /m);
  expect(statusRun.output()).toMatch(/^tune: +\d+ "my-first-run#[\w-]+", class woman, branch fast, trained at /m);
  expect(statusRun.output()).toMatch(/^counts: +callbacks [1-9]\d*, polls 0, /m);
  expect(statusRun.output()).not.toMatch(/sig=(?!redacted)/);
  expect(statusRun.output()).toContain(`  stored: ${copy}`);
  const statusJson = run(`${onOurPorts(status)} --json`, env);
  expect(await statusJson.exited).toBe(0);
  // stdout and stderr together here: the JSON is the line that starts with a brace (npm may warn on stderr).
  const raw = JSON.parse(
    statusJson
      .output()
      .split('\n')
      .find((line) => line.startsWith('{')) ?? 'null',
  ) as {
    status: string;
  };
  expect(raw.status).toBe('COMPLETED');
  // The result names no callback URL at all (ResultTune, ResultPrompt): no signature, redacted or not.
  expect(statusJson.output()).not.toMatch(/sig=/);

  // The same start twice more: attached to the job, its result again, nothing created; then with other input:
  // refused (exit 2) naming the key and the field, before anything is created. One tune under the key.
  for (let again = 0; again < 2; again++) {
    const attach = run(onOurPorts(start), env);
    expect({ code: await attach.exited, output: attach.output() }).toEqual({
      code: 0,
      output: expect.stringMatching(/^attached to my-first-run$/m),
    });
  }
  const other = run(onOurPorts(start.replace('watercolor painting', 'oil painting')), env);
  expect({ code: await other.exited, output: other.output() }).toEqual({
    code: 2,
    output: expect.stringContaining(
      '"my-first-run" names a trainThenGenerate job with other input (input.prompts[0].text',
    ),
  });
  const apiKey = /TUNEFLOW_API_KEY=(\S+)/.exec(rest.join(' '))![1];
  const tunes = (await (
    await fetch(`http://127.0.0.1:${ports.get('8080')}/tunes`, { headers: { authorization: `Bearer ${apiKey}` } })
  ).json()) as Array<{ title: string }>;
  // One tune for the key, whatever its runs: tuneflow titles it `<workflow ID>#<run ID>`.
  expect(tunes.filter((t) => t.title.startsWith('my-first-run#'))).toHaveLength(1);

  // docker-compose.yml's comment: its host command, on this stack (compose's mock-service:8080 is our mock).
  const composeCommand = /^#\s+(TEMPORAL_ADDRESS=\S+ npx tuneflow start .*)$/m.exec(compose)?.[1];
  expect(composeCommand).toBeDefined();
  const composeRun = run(
    composeCommand!
      .replace('localhost:7233', `localhost:${ports.get('7233')}`)
      .replace('mock-service:8080', `127.0.0.1:${ports.get('8080')}`),
    env,
  );
  expect({ code: await composeRun.exited, output: composeRun.output() }).toEqual({
    code: 0,
    output: expect.stringMatching(/^completed /m),
  });

  // Ctrl-C, as a user stops them: each stops what it runs and ends with 130, the status a shell shows for Ctrl-C (npm's
  // own under npx, and tuneflow's; test/workflows/npx.test.ts checks npx and node side by side).
  for (const server of [...servers].reverse()) {
    const status = await stopGroup(server, 'SIGINT');
    expect({ command: server.command, status }).toEqual({ command: server.command, status: 130 });
  }
  expect(servers[2].output()).toContain('tuneflow worker stopped');
  for (const port of ['7233', '8233', '8080', '3001']) expect(await portIsFree(Number(ports.get(port)))).toBe(true);
  servers = [];
});
