/**
 * CHANGELOG.md tells an operator upgrading under live runs what each patch marker means for the runs started before
 * it. Every marker the workflow code asks `patched()` about has its row there.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { patchMarkers } from './patch-markers';

const ROOT = path.resolve(__dirname, '..');

test('every patch marker has its row in a CHANGELOG "Upgrading under live runs" table', () => {
  const changelog = fs.readFileSync(path.join(ROOT, 'CHANGELOG.md'), 'utf8');
  const rows = [...changelog.matchAll(/^\| `([a-z-]+)` +\|/gm)].map((m) => m[1]).sort();
  expect(patchMarkers().length).toBeGreaterThanOrEqual(9);
  expect(rows).toEqual(patchMarkers());
});
