import { defineConfig } from 'vitest/config';

/**
 * Test folders of the `mesh` lane: the fleet drills (daemons, workers, collectors, netns hosts talking
 * libp2p). Every other file is in the `box` lane: sandboxed test runs, mining, pure parts, the CLI and
 * the web view (whose few tests that start a small fleet balance the lanes' lengths).
 */
const MESH = [
  'adversary',
  'campaign',
  'collect',
  'doctor',
  'faults',
  'fleet',
  'service',
  'submitter',
  'wire',
  'worker',
];
const meshFiles = MESH.map((d) => `test/${d}/**/*.test.ts`);
const exclude = ['**/node_modules/**', 'test/fixtures/**', 'examples/**'];

/** What both lanes share: timeouts, and one file at a time within a lane. */
const lane = {
  exclude,
  testTimeout: 30_000,
  hookTimeout: 60_000,
  // Within a lane, files run one at a time, so each file's own timeouts stay meaningful on two cores.
  fileParallelism: false,
  teardownTimeout: 10_000,
};

// `npm test` runs the two lanes side by side, one vitest process each (package.json): a fleet drill,
// mostly waiting on timers and other processes, beside a sandboxed run, mostly CPU, never two drills
// at once. vitest's own pool cannot keep that pairing (a group of projects shares one worker count), so
// the lanes are two processes. `npx vitest run FILE` runs one file in whichever lane holds it.
export default defineConfig({
  test: {
    // Two lanes would write one results cache at once (the last writer wins, a torn file stops the next
    // run at start-up); files are ordered by size instead of by the last run's durations.
    cache: false,
    projects: [
      { test: { ...lane, name: 'mesh', include: meshFiles } },
      { test: { ...lane, name: 'box', include: ['test/**/*.test.ts'], exclude: [...exclude, ...meshFiles] } },
    ],
  },
});
