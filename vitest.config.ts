import { defineConfig } from 'vitest/config';

/**
 * Drills that spend most of their time waiting on the clock (a stalled node's backup, a SIGSTOPped
 * worker, a cut-off host, certificate renewal), not on the CPU: black-hole uses 0.6 of a core over
 * its 190 s. They run one at a time in a lane of their own, beside the rest of the suite.
 */
const WAITING_DRILLS = [
  'test/adversary/black-hole.test.ts',
  'test/faults/drills.test.ts',
  'test/campaign/failures.test.ts',
  'test/fleet/membership.test.ts',
];

export default defineConfig({
  test: {
    exclude: ['**/node_modules/**', 'test/fixtures/**', 'examples/**'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    teardownTimeout: 10_000,
    // Integration tests start fleets of real processes and sandboxed test runs; two cores are all
    // a CI machine has, so within each lane test files run one at a time (each file's own timeouts
    // stay meaningful), and the two lanes run side by side.
    projects: [
      {
        extends: true,
        test: {
          name: 'suite',
          include: ['test/**/*.test.ts'],
          exclude: WAITING_DRILLS,
          fileParallelism: false,
        },
      },
      { extends: true, test: { name: 'drills', include: WAITING_DRILLS, fileParallelism: false } },
    ],
  },
});
