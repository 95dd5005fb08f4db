import { defineConfig } from 'vitest/config';

/**
 * Drills that spend most of their time waiting (leases expiring, nodes killed and replaced, fleets
 * converging) rather than computing. `npm test` (test/parallel.ts) runs them in a second vitest
 * process beside the rest, so CI's two cores are busy while a drill waits; within each project,
 * files still run one at a time.
 */
export const waitingDrills = [
  'test/campaign/failures.test.ts',
  'test/faults/drills.test.ts',
  'test/adversary/black-hole.test.ts',
  'test/collect/campaign-collect.test.ts',
  'test/fleet/membership.test.ts',
  'test/campaign/liveness.test.ts',
  'test/fleet/fleet.test.ts',
  'test/faults/load.test.ts',
  'test/fleet/netns.test.ts',
];

const exclude = ['**/node_modules/**', 'test/fixtures/**', 'examples/**'];

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration tests start fleets of real processes and sandboxed test runs; two cores are all
    // a CI machine has, so test files run one at a time (each file's own timeouts stay meaningful).
    fileParallelism: false,
    teardownTimeout: 10_000,
    projects: [
      { extends: true, test: { name: 'drills', include: waitingDrills, exclude } },
      {
        extends: true,
        test: { name: 'main', include: ['test/**/*.test.ts'], exclude: [...exclude, ...waitingDrills] },
      },
    ],
  },
});
