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
);
