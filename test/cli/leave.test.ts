// `vtnode leave` where no node runs (issue 28, finding 10): nothing to stop is success, so teardown
// scripts that run it unconditionally do not break.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { vtnode } from '../helpers/cli.ts';

it('exits 0 and says there was nothing to stop', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'vt-leave-'));
  try {
    for (const dataDir of [dir, join(dir, 'never-made')]) {
      const r = await vtnode(['leave', '--data-dir', dataDir]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toBe(`no vtnode daemon is running for ${dataDir}: nothing to stop\n`);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
