import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['**/node_modules/**', 'test/fixtures/**', 'examples/**'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration tests start fleets of real processes and sandboxed test runs; two cores are all
    // a CI machine has, so test files run one at a time (each file's own timeouts stay meaningful).
    fileParallelism: false,
    teardownTimeout: 10_000,
  },
});
