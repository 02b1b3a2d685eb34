/**
 * What the workflow bundle evaluates for every run (issue 15): the modules reached from the workflows entry by value
 * imports. Only the input contract (src/contract/check.ts) may bring zod and the answer schemas into the sandbox,
 * and nothing may bring I/O or another heavy package. ESLint checks each workflow file's own imports; this follows
 * them through every module they reach (src/api/errors.ts importing zod would pass the lint and fail here).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as ts from 'typescript';

const ROOT = path.resolve(__dirname, '../..');
const ENTRY = path.join(ROOT, 'src/workflows/index.ts');
/** The modules allowed to import heavy ones: their own imports are not followed. */
const ALLOWED = new Set([path.join(ROOT, 'src/contract/check.ts')]);
const HEAVY = [
  'zod',
  'undici',
  'yaml',
  '@temporalio/client',
  '@temporalio/worker',
  '@temporalio/activity',
  '@temporalio/proto',
  '@temporalio/testing',
];

/** The module specifiers a source imports or re-exports as values (type-only imports are erased by the compiler). */
function valueImports(source: string, fileName = 'module.ts'): string[] {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.ES2022, false, ts.ScriptKind.TS);
  const specifiers: string[] = [];
  for (const statement of file.statements) {
    if (ts.isImportDeclaration(statement)) {
      const clause = statement.importClause;
      const valued =
        !clause ||
        (!clause.isTypeOnly &&
          (!!clause.name ||
            !clause.namedBindings ||
            ts.isNamespaceImport(clause.namedBindings) ||
            clause.namedBindings.elements.some((e) => !e.isTypeOnly)));
      if (valued) specifiers.push((statement.moduleSpecifier as ts.StringLiteral).text);
    } else if (ts.isExportDeclaration(statement) && statement.moduleSpecifier) {
      const clause = statement.exportClause;
      const valued =
        !statement.isTypeOnly && (!clause || !ts.isNamedExports(clause) || clause.elements.some((e) => !e.isTypeOnly));
      if (valued) specifiers.push((statement.moduleSpecifier as ts.StringLiteral).text);
    }
  }
  return specifiers;
}

function resolveLocal(from: string, specifier: string): string | undefined {
  const base = path.resolve(path.dirname(from), specifier);
  return [`${base}.ts`, path.join(base, 'index.ts')].find((candidate) => fs.existsSync(candidate));
}

function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/** Every chain from `entry` to a heavy package or a node builtin that passes through no allowed module. */
function heavyChains(entry: string): string[] {
  const chains: string[] = [];
  const seen = new Set<string>();
  const visit = (file: string, chain: string[]) => {
    if (seen.has(file)) return;
    seen.add(file);
    if (ALLOWED.has(file)) return;
    for (const specifier of valueImports(fs.readFileSync(file, 'utf8'), file)) {
      if (specifier.startsWith('.')) {
        const next = resolveLocal(file, specifier);
        if (next) visit(next, [...chain, path.relative(ROOT, next)]);
      } else if (HEAVY.includes(packageOf(specifier)) || specifier.startsWith('node:')) {
        chains.push([...chain, specifier].join(' -> '));
      }
    }
  };
  visit(entry, [path.relative(ROOT, entry)]);
  return chains;
}

test('only the contract brings zod or another heavy module into the workflow sandbox', () => {
  expect(heavyChains(ENTRY)).toEqual([]);
});

test('the check sees value imports and re-exports, and skips type-only ones', () => {
  const source = [
    "import { z } from 'zod';",
    "import type { ZodType } from 'zod';",
    "import { type Tune, TuneCreateInput } from '../api/schemas';",
    "import { type Prompt } from '../api/prompts';",
    "import ms from 'ms';",
    "import 'side-effect';",
    "export { request } from 'undici';",
    "export type { Client } from '@temporalio/client';",
    "export * from './messages';",
  ].join('\n');
  expect(valueImports(source)).toEqual(['zod', '../api/schemas', 'ms', 'side-effect', 'undici', './messages']);
});

test('a chain through a module other than the contract is found', () => {
  // The entry's own graph with the contract no longer allowed: its zod import becomes a finding.
  ALLOWED.clear();
  try {
    expect(heavyChains(ENTRY)).toContainEqual(expect.stringMatching(/src\/contract\/check\.ts -> .*zod$/));
  } finally {
    ALLOWED.add(path.join(ROOT, 'src/contract/check.ts'));
  }
});
