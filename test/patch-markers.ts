/**
 * The patch markers the workflow code asks `patched()` about, read from its source: CHANGELOG.md has a row for each
 * (test/changelog.test.ts), and a recorded history holds each (test/replay.test.ts).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

const WORKFLOWS = path.resolve(__dirname, '..', 'src', 'workflows');

/**
 * The patch ids declared in workflow code: `export const NAME = 'some-marker';` passed to `patched(NAME)`; sorted.
 *
 * @example
 * patchMarkers(); // ['callback-reads-back-off', 'callbacks-are-wake-ups', ...]
 */
export function patchMarkers(): string[] {
  const found: string[] = [];
  for (const file of fs.readdirSync(WORKFLOWS).filter((name) => name.endsWith('.ts'))) {
    const source = fs.readFileSync(path.join(WORKFLOWS, file), 'utf8');
    for (const [, name, id] of source.matchAll(/export const (\w+) = '([a-z]+(?:-[a-z]+)+)';/g))
      if (source.includes(`patched(${name})`) || source.includes(`patchedOrFolded(${name})`)) found.push(id);
  }
  return found.sort();
}
