/**
 * The figures of what a job costs (CPU, memory a run, history, throughput) are stated in one place, docs/scale.md's
 * summary, with the load each was measured under; the README, CONTRIBUTING.md, docker-compose.yml and every command's
 * --help link there instead of repeating them. A figure copied elsewhere drifts from the next measurement: the README
 * once said 65 to 145 ms of server CPU, the summary 65 to 90, the sizing table 136 to 158; the configuration table
 * ~1.5 MiB a cached run, the sizing 0.28 to 0.45.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');
const BIN = path.join(ROOT, 'bin', 'tuneflow.js');
const read = (file: string) => fs.readFileSync(path.join(ROOT, file), 'utf8');

/** The summary of docs/scale.md: its lines from the heading to the next section. */
function scaleSummary(): string {
  const scale = read('docs/scale.md');
  const from = scale.indexOf('## Summary');
  return scale.slice(from, scale.indexOf('\n## ', from + 1));
}

/** A figure with its unit: `67 ms`, `0.28 to 0.45 MiB`, `1.16x`, `75 to 82 events`, `5 to 15 jobs/s`. */
const FIGURE = /\b\d[\d,.]*(?: to \d[\d,.]*)? ?(?:ms|MiB|GiB|KB|events|jobs\/s|x)(?![\w])/g;

/** Cost figures stated anywhere, whatever their value: memory a run, CPU a job, events a job. */
const COST_FIGURES = [
  /\d[\d.]* ?(?:MiB|KB) (?:each|a (?:cached )?run|per run|a job)/,
  /\d[\d.]* ?ms (?:of (?:worker |server |Temporal )?CPU|a job|per job)/,
  /\d+ history events/,
];

/** Where a reader meets figures besides docs/scale.md: the README, CONTRIBUTING.md, compose, each command's help. */
function elsewhere(): Array<[string, string]> {
  const help = execFileSync(process.execPath, [BIN, '--help'], { encoding: 'utf8' });
  const commands = [...help.matchAll(/^ {2}([\w-]+) {2,}/gm)].map((m) => m[1]);
  return [
    ['README.md', read('README.md')],
    ['CONTRIBUTING.md', read('CONTRIBUTING.md')],
    ['docker-compose.yml', read('docker-compose.yml')],
    ...commands.map((c): [string, string] => [
      `tuneflow ${c} --help`,
      execFileSync(process.execPath, [BIN, c, '--help'], { encoding: 'utf8' }),
    ]),
  ];
}

beforeAll(() => {
  if (!fs.existsSync(path.join(ROOT, 'lib', 'cli', 'index.js')))
    throw new Error('lib/cli/index.js is missing: run `npm run build` (npm test builds before it tests)');
});

test("docs/scale.md's summary states the figures of a job's cost", () => {
  const figures = scaleSummary().match(FIGURE) ?? [];
  // CPU, memory, history, throughput: each there with its unit.
  for (const unit of ['ms', 'MiB', 'events', 'KB', 'jobs/s']) expect(figures.some((f) => f.endsWith(unit))).toBe(true);
});

test('no figure of the summary is stated anywhere else a reader looks, and no cost figure of any value', () => {
  const figures = [...new Set(scaleSummary().match(FIGURE) ?? [])];
  const found: string[] = [];
  for (const [where, text] of elsewhere()) {
    for (const figure of figures) if (text.includes(figure)) found.push(`${where}: "${figure}"`);
    for (const pattern of COST_FIGURES) {
      const match = pattern.exec(text);
      if (match) found.push(`${where}: "${match[0]}"`);
    }
  }
  expect(found).toEqual([]);
});
