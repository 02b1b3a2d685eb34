/**
 * CHANGELOG.md tells an operator upgrading under live runs what each patch marker means for the runs started before
 * it. Every marker the workflow code asks `patched()` about has its row there.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..');
const WORKFLOWS = path.join(ROOT, 'src', 'workflows');

/** The patch ids declared in workflow code: `export const NAME = 'some-marker';` passed to `patched(NAME)`. */
function markers(): string[] {
  const found: string[] = [];
  for (const file of fs.readdirSync(WORKFLOWS).filter((name) => name.endsWith('.ts'))) {
    const source = fs.readFileSync(path.join(WORKFLOWS, file), 'utf8');
    for (const [, name, id] of source.matchAll(/export const (\w+) = '([a-z]+(?:-[a-z]+)+)';/g))
      if (source.includes(`patched(${name})`) || source.includes(`=> patched(${name})`)) found.push(id);
  }
  return found.sort();
}

test('every patch marker has its row in a CHANGELOG "Upgrading under live runs" table', () => {
  const changelog = fs.readFileSync(path.join(ROOT, 'CHANGELOG.md'), 'utf8');
  const rows = [...changelog.matchAll(/^\| `([a-z-]+)` +\|/gm)].map((m) => m[1]).sort();
  expect(markers().length).toBeGreaterThanOrEqual(9);
  expect(rows).toEqual(markers());
});
