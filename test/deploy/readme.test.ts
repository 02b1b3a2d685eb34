/**
 * The README cannot drift from what runs: its commands are package.json scripts and CLI commands, its test command
 * is what CI runs, its configuration and options lists hold every variable and default the code has, and no line of
 * its prose passes 120 columns (the formatter keeps them so, and a table it pads past them becomes a list).
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DEMO_ENVIRONMENT, ENVIRONMENT } from '../../src/config';
import { DEFAULT_OPTIONS } from '../../src/contract/options';

const ROOT = path.resolve(__dirname, '../..');
const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
const scripts = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts as Record<string, string>;

describe('README', () => {
  test('shows the test command near the top, and .ci/run runs exactly it', () => {
    const top = readme.split('\n').slice(0, 15).join('\n');
    expect(top).toContain('npm ci && npm test');
    const ci = fs.readFileSync(path.join(ROOT, '.ci', 'run'), 'utf8');
    expect(ci.split('\n').filter((l) => l.trim() && !l.startsWith('#') && !/^(set|cd|export) /.test(l))).toEqual([
      'npm ci && npm test',
    ]);
  });

  test('every `npm run X` it and CONTRIBUTING.md show is a package.json script', () => {
    const contributing = fs.readFileSync(path.join(ROOT, 'CONTRIBUTING.md'), 'utf8');
    const named = [...(readme + contributing).matchAll(/npm run ([\w:-]+)/g)].map((m) => m[1]);
    expect(named.length).toBeGreaterThan(3);
    for (const name of new Set(named)) expect(Object.keys(scripts)).toContain(name);
    expect(scripts.test).toBeDefined();
  });

  test('every `tuneflow <command>` it shows is a command of the CLI, and every command is documented', () => {
    const help = execFileSync(process.execPath, [path.join(ROOT, 'bin', 'tuneflow.js'), '--help'], {
      encoding: 'utf8',
    });
    const commands = [...help.matchAll(/^ {2}([\w-]+) {2,}/gm)].map((m) => m[1]);
    expect(commands.length).toBeGreaterThan(5);
    const section = readme.slice(readme.indexOf('## The command line'), readme.indexOf('## The mock service'));
    const documented = [...section.matchAll(/^- `([a-z][\w-]*)/gm)].map((m) => m[1]);
    const invoked = [...readme.matchAll(/npx tuneflow ([a-z][\w-]*)/g)].map((m) => m[1]);
    for (const name of new Set([...documented, ...invoked])) expect(commands).toContain(name);
    expect(documented.sort()).toEqual([...commands].sort());
  });

  test("its configuration list holds every variable config.ts reads, and no other of tuneflow's", () => {
    const table = readme.slice(readme.indexOf('### Configuration'), readme.indexOf('### Callbacks'));
    const rows = [...table.matchAll(/^- `(TUNEFLOW_\w+)` \(/gm)].map((m) => m[1]);
    expect(rows.sort()).toEqual([...Object.keys(ENVIRONMENT), ...Object.keys(DEMO_ENVIRONMENT)].sort());
  });

  test("its options list holds every workflow option with the code's default", () => {
    for (const [option, value] of Object.entries(DEFAULT_OPTIONS))
      expect(readme).toMatch(new RegExp(`^- \`${option}\` \\(default \`${String(value)}\`\\): `, 'm'));
  });

  test('no line outside its code blocks passes 120 columns', () => {
    let inBlock = false;
    const long: string[] = [];
    readme.split('\n').forEach((line, i) => {
      if (line.startsWith('```')) inBlock = !inBlock;
      else if (!inBlock && line.length > 120) long.push(`README.md:${i + 1} (${line.length}): ${line.slice(0, 60)}...`);
    });
    expect(long).toEqual([]);
  });
});
