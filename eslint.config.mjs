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
              group: ['undici', 'zod'],
              message: 'Workflow code must not do I/O; validation only in input-contract.ts (jitless zod).',
              allowTypeImports: true,
            },
            {
              group: ['../api/*', '!../api/schemas', '!../api/errors', '../activities*', '../callbacks*'],
              message: 'Workflow code imports only the pure parts of api/ (schemas, errors); the rest as types.',
              allowTypeImports: true,
            },
          ],
        },
      ],
    },
  },
  {
    // The job's input contract runs in the workflow sandbox: zod with its JIT off (z.config({ jitless: true })).
    files: ['src/workflows/input-contract.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['node:*', 'fs', 'path', 'http', 'https', 'crypto', 'os', 'child_process', 'undici'],
              message: 'Workflow code must be deterministic: no node builtins, no I/O.',
            },
          ],
        },
      ],
    },
  },
);
