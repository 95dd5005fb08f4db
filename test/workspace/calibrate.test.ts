// The calibration sample of a fetched workspace (node/workspace/calibrate.ts) on the example workspace
// and the real sandbox: a workspace that works here passes; one whose dependencies are missing, or
// that the box cannot read, is refused before it could be advertised.
import { chmod, cp, mkdir, symlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { calibrateWorkspace, calibrationTask } from '../../node/workspace/calibrate.ts';
import { workspaceIdentity } from '../../node/workspace/content-id.ts';
import type { Task } from '../../protocol/task.ts';
import { createCheckedScorer, type Scorer } from '../../sandbox/scorer.ts';
import { LEDGER } from '../helpers/campaign.ts';
import { Sandbox } from '../helpers/cli.ts';

const box = new Sandbox();
let scorer: Scorer;

beforeAll(async () => {
  scorer = await createCheckedScorer({ workspaceId: async (d) => (await workspaceIdentity(d)).id });
}, 60_000);

afterAll(async () => {
  await scorer?.close();
  await box.cleanup();
});

/** The example workspace's tracked files, as a fetch assembles them (no node_modules), in a dir of `mode`. */
async function trackedCopy(mode = 0o755): Promise<string> {
  const dir = await box.tempDir('vt-calibrate-');
  await chmod(dir, mode);
  for (const f of (await workspaceIdentity(LEDGER)).files) {
    await mkdir(dirname(join(dir, f)), { recursive: true });
    await cp(join(LEDGER, f), join(dir, f));
  }
  return dir;
}

const task = (id: string, kind: 'file' | 'tests') => ({ id, kind }) as Task;

describe('calibrationTask', () => {
  it('is the first file task in the miner order, else the first task, else none', () => {
    expect(calibrationTask([task('t1', 'tests'), task('f1', 'file'), task('f2', 'file')])?.id).toBe('f1');
    expect(calibrationTask([task('t1', 'tests'), task('t2', 'tests')])?.id).toBe('t1');
    expect(calibrationTask([])).toBeNull();
  });
});

describe('calibrateWorkspace in the real sandbox', () => {
  it('scores one mined task’s reference 1.0 in an installed workspace', async () => {
    const c = await calibrateWorkspace({ root: LEDGER, scorer: async () => scorer });
    expect(c.mined).toBeGreaterThan(10);
    expect(c.taskId).toMatch(/\S/);
  }, 120_000);

  it('refuses a workspace whose dependencies are not installed', async () => {
    const root = await trackedCopy();
    await expect(calibrateWorkspace({ root, scorer: async () => scorer })).rejects.toThrow(
      /install|not found|resolve/i,
    );
  }, 120_000);

  // The defect the laptop drill found: as root, candidates run under a dedicated uid, which could not
  // enter a fetched workspace in the 0700 data dir. Mining (as root) works; every test run fails. Only
  // root runs boxes under another uid: elsewhere the box can read what its user can.
  it.runIf(process.getuid?.() === 0)(
    'refuses a workspace the box cannot read (a 0700 dir, as root)',
    async () => {
      const root = await trackedCopy(0o700);
      await symlink(join(LEDGER, 'node_modules'), join(root, 'node_modules'));
      await expect(calibrateWorkspace({ root, scorer: async () => scorer })).rejects.toThrow(/calibration/);
      // The same tree, readable: calibrated.
      await chmod(root, 0o755);
      expect((await calibrateWorkspace({ root, scorer: async () => scorer })).taskId).toMatch(/\S/);
    },
    120_000,
  );

  it('refuses on a node that cannot score', async () => {
    await expect(calibrateWorkspace({ root: LEDGER, scorer: async () => null })).rejects.toThrow(
      /cannot score/,
    );
  });
});
