import tseslint from 'typescript-eslint';

const NODE_BUILTINS = ['node:*', 'fs', 'path', 'http', 'https', 'crypto', 'os', 'child_process'];
/** Packages that do I/O or weigh on a run: never evaluated in the workflow sandbox. */
const HEAVY = [
  'undici',
  'zod',
  'yaml',
  '@temporalio/client',
  '@temporalio/worker',
  '@temporalio/activity',
  '@temporalio/proto',
  '@temporalio/testing',
];

export default tseslint.config(
  {
    ignores: [
      'lib/**',
      'node_modules/**',
      'out/**',
      'bin/**',
      'scripts/*.js',
      'jest.config.js',
      'eslint.config.mjs',
      'tmp-*/**',
      // A user's project, compiled against the packed tarball by test/workflows/package.test.ts.
      'test/consumer/**',
    ],
  },
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      parserOptions: {
        // The examples are plain JavaScript an app copies: linted outside the TypeScript project.
        projectService: { allowDefaultProject: ['examples/*/*.mjs'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // Settings are read in one place (src/config.ts): each checked there, named in its errors, and in the README's table.
    files: ['src/**/*.ts'],
    ignores: ['src/config.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: 'MemberExpression[computed=false][property.name=/^(TUNEFLOW|TEMPORAL)_/]',
          message: 'Read settings through src/config.ts (a load* function), which checks them and names the variable.',
        },
      ],
    },
  },
  {
    // The library never reaches into the command line: the commands use it, not the other way round.
    files: ['src/**/*.ts'],
    ignores: ['src/cli/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [{ group: ['./cli', './cli/*', '../cli', '../cli/*'], message: 'Library code: no command line.' }],
        },
      ],
    },
  },
  {
    // Activities are adapters over the service: the contract's types, never the workflows.
    files: ['src/activities/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['../workflows', '../workflows/*'], message: 'Activities take the contract (../contract).' },
            { group: ['../cli', '../cli/*'], message: 'Library code: no command line.' },
          ],
        },
      ],
    },
  },
  {
    // Workflow code is replayed: it may import only @temporalio/workflow, its own files, the contract and types.
    files: ['src/workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: NODE_BUILTINS,
              message: 'Workflow code must be deterministic: no node builtins.',
            },
            {
              group: HEAVY,
              message:
                'Workflow code does no I/O and carries nothing heavy into the sandbox (evaluated per run); validation ' +
                'belongs to the input contract (src/contract/check.ts). Import types only.',
              allowTypeImports: true,
            },
            {
              // Outside src/workflows only these; the contract alone brings the schemas (and zod).
              group: [
                '../*',
                '!../contract',
                '!../duration',
                '!../api',
                '../api/*',
                '!../api/errors',
                '!../api/error-kinds',
              ],
              message:
                'Workflow code runs in the sandbox: from outside src/workflows it may import ../contract, ../duration ' +
                'and ../api/errors (or its ../api/error-kinds) only (the schemas come through the contract). Import types only.',
              allowTypeImports: true,
            },
          ],
        },
      ],
    },
  },
  {
    // The job's contract runs in the sandbox too (each workflow checks its input with it) and its types and failures
    // go into callers' bundles: no I/O, nothing heavy, nothing of the worker's side.
    files: ['src/contract/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: NODE_BUILTINS, message: 'The contract is deterministic: no node builtins.' },
            {
              group: HEAVY,
              message: 'The contract does no I/O; zod is for the input checks (check.ts) alone. Import types only.',
              allowTypeImports: true,
            },
            {
              group: ['../*', '!../duration', '!../api', '../api/*', '!../api/errors'],
              message: 'The contract stands alone: ../duration and ../api/errors (the schemas in check.ts).',
              allowTypeImports: true,
            },
          ],
        },
      ],
    },
  },
  {
    // The input checks (zod's schemas, parsed jitless: no `new Function`) and the JSON Schema made from them, no I/O.
    files: ['src/contract/check.ts', 'src/contract/input-schema.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: [...NODE_BUILTINS, 'undici'] },
            {
              group: ['../*', '!../api', '../api/*', '!../api/schemas', '!../api/errors'],
              message: 'Only the schemas and errors.',
            },
          ],
        },
      ],
    },
  },
  {
    // The Nexus contract goes into callers' workflow bundles (other teams', other namespaces): names and types, the
    // failures' names, nothing that does I/O, nothing heavy evaluated per run (no zod: the handler checks inputs).
    files: ['src/nexus/index.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['node:*', 'fs', 'path', 'http', 'https', 'crypto', 'os', 'child_process', 'undici', 'zod'] },
            {
              group: ['@temporalio/client', '@temporalio/worker', '@temporalio/nexus', '@temporalio/activity'],
              message: "A caller's bundle gets the contract alone.",
              allowTypeImports: true,
            },
            {
              group: [
                ...['../*', '!../api', '../api/*', '!../api/errors'],
                ...['!../contract', '../contract/*', '!../contract/failures', '!../contract/inputs'],
              ],
              message: "The Nexus contract takes the job's failures and inputs (types), nothing else.",
              allowTypeImports: true,
            },
          ],
        },
      ],
    },
  },
  {
    // A caller's workflows know tuneflow by the Nexus contract alone.
    files: ['test/nexus/caller-workflows.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['../../src/*', '!../../src/nexus'], message: 'The contract alone.' }] },
      ],
    },
  },
);
