import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['**/node_modules/**', 'test/fixtures/**', 'examples/**'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration tests start real processes; two cores are all we have.
    maxWorkers: 2,
    teardownTimeout: 10_000,
  },
});
