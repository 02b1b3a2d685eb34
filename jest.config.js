/**
 * Three projects: unit tests, and the workflow tests (a Temporal server each) in two: those that share the machine
 * with one other file at a time, and those that run alone because what they assert moves with the machine's load (a
 * ratio of latencies, not one 429, a flood of starts, a soak, a browser's timings).
 */
const transform = { '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022' } }] };
// A test's console output (the SDK's logs among it) shows only if the test fails: see test/quiet-environment.ts.
const testEnvironment = '<rootDir>/test/quiet-environment.ts';
const base = { testEnvironment, transform, moduleFileExtensions: ['ts', 'js', 'json'] };
// Decides once where the tests get a Temporal server, or prints why they are skipped.
const globalSetup = '<rootDir>/test/workflows/global-setup.ts';

/** The workflow test files (by name) that run alone (`workflows-alone`, in band), after the others. */
const ALONE = [
  'fair-share',
  'fairness-probe',
  'service-rate',
  'tenant-spend',
  'soak',
  'pack-and-generate',
  'progress-stream',
  'live-page',
  'worker-versioning',
];

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
      testPathIgnorePatterns: ALONE.map((name) => `/test/workflows/${name}\\.test\\.ts$`),
      globalSetup,
    },
    {
      ...base,
      displayName: 'workflows-alone',
      testMatch: ALONE.map((name) => `<rootDir>/test/workflows/${name}.test.ts`),
      globalSetup,
    },
  ],
};
