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
              message:
                'Workflow code must not do I/O or validation; the input contract (src/input-contract.ts) checks.',
              allowTypeImports: true,
            },
            {
              group: ['../api/*', '../activities*', '../callbacks*', '../mock-service*'],
              message: 'Workflow code imports api/, activities and callbacks as types only.',
              allowTypeImports: true,
            },
          ],
        },
      ],
    },
  },
  {
    // The job's input contract is bundled into the workflows: sandbox-safe, zod without its JIT, no I/O.
    files: ['src/input-contract.ts'],
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
