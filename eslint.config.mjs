import tseslint from 'typescript-eslint';

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
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // Workflow code is replayed: it may import only @temporalio/workflow, its own files and types.
    files: ['src/workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['node:*', 'fs', 'path', 'http', 'https', 'crypto', 'os', 'child_process'],
              message: 'Workflow code must be deterministic: no node builtins.',
            },
            {
              group: [
                'undici',
                'zod',
                'yaml',
                '@temporalio/client',
                '@temporalio/worker',
                '@temporalio/activity',
                '@temporalio/proto',
                '@temporalio/testing',
              ],
              message:
                'Workflow code does no I/O and carries nothing heavy into the sandbox (evaluated per run); validation ' +
                'belongs to the input contract (contract.ts). Import types only.',
              allowTypeImports: true,
            },
            {
              // Outside src/workflows only these two; the contract alone brings the schemas (and zod).
              group: ['../*', '!../duration', '!../api', '../api/*', '!../api/errors'],
              message:
                'Workflow code runs in the sandbox: from outside src/workflows it may import ../duration and ' +
                '../api/errors only (the schemas come through contract.ts). Import types only.',
              allowTypeImports: true,
            },
          ],
        },
      ],
    },
  },
  {
    // The input contract runs in the sandbox too: zod's schemas, parsed jitless (no `new Function`), no I/O.
    files: ['src/workflows/contract.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['node:*', 'fs', 'path', 'http', 'https', 'crypto', 'os', 'child_process', 'undici'] },
            { group: ['../api/*', '!../api/schemas', '!../api/errors'], message: 'Only the schemas and errors.' },
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
                ...['!../workflows', '../workflows/*', '!../workflows/failures', '!../workflows/inputs'],
              ],
              message: 'The contract takes the failures and the inputs (types) of the workflows, nothing else.',
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
