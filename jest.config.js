/** Two projects: everything else runs in parallel; workflow tests (a Temporal test server each) run serially. */
const transform = { '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022' } }] };
// A test's console output (the SDK's logs among it) shows only if the test fails: see test/quiet-environment.ts.
const testEnvironment = '<rootDir>/test/quiet-environment.ts';
const base = { testEnvironment, transform, moduleFileExtensions: ['ts', 'js', 'json'] };

/** @type {import('jest').Config} */
module.exports = {
  projects: [
    {
      ...base,
      displayName: 'unit',
      testMatch: ['<rootDir>/test/**/*.test.ts'],
      testPathIgnorePatterns: ['/test/workflows/'],
    },
    {
      ...base,
      displayName: 'workflows',
      testMatch: ['<rootDir>/test/workflows/**/*.test.ts'],
      // Decides once where the tests get a Temporal server, or prints why they are skipped.
      globalSetup: '<rootDir>/test/workflows/global-setup.ts',
    },
  ],
};
