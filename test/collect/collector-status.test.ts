// `vtnode status` on a collector shows the sandbox its audits run in, not `none (not ok)`
// (issue 12, build 7). A real collector process with a workspace, its status read over its control channel.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { mine } from '../../node/tasks/mine.ts';
import { LEDGER } from '../helpers/campaign.ts';
import { eventually, Sandbox, vtnode } from '../helpers/cli.ts';
import { initFleet } from '../helpers/fleet.ts';

const box = new Sandbox();
afterAll(() => box.cleanup());

interface StatusNode {
  self: boolean;
  roles: string[];
  sandbox: { backend: string; ok: boolean; detail?: string };
}

async function selfStatus(dataDir: string): Promise<StatusNode | null> {
  const r = await vtnode(['status', '--json', '--data-dir', dataDir]);
  if (r.code !== 0) return null;
  const nodes = (JSON.parse(r.stdout) as { nodes: StatusNode[] }).nodes;
  return nodes.find((n) => n.self && n.roles.includes('collector')) ?? null;
}

describe('a collector in `vtnode status`', () => {
  it('with audits: the sandbox backend they run in, ok; without: none, saying audits are off', async () => {
    const dir = await box.tempDir('vt-cstatus-');
    const tasksFile = join(dir, 'tasks.jsonl');
    const { tasks } = await mine({ root: LEDGER, kinds: ['file'] });
    await writeFile(tasksFile, tasks.map((t) => `${JSON.stringify(t)}\n`).join(''));
    // The platform's sandbox (CI installs bubblewrap).
    const backend = process.platform === 'darwin' ? 'seatbelt' : 'bwrap';

    const audited = await initFleet(box, 'cstatus');
    const c1 = box.spawn([
      'collect',
      '--data-dir',
      audited.dataDir,
      '--out',
      join(dir, 'ds1'),
      '--tasks',
      tasksFile,
      '--workspace',
      LEDGER,
    ]);
    await c1.waitFor(/is collecting/, 60_000);
    const s1 = await eventually(() => selfStatus(audited.dataDir), 20_000, 'the collector in its status');
    expect(s1.sandbox).toEqual({ backend: backend, ok: true });

    const plain = await initFleet(box, 'cstatus2');
    const c2 = box.spawn(['collect', '--data-dir', plain.dataDir, '--out', join(dir, 'ds2')]);
    await c2.waitFor(/is collecting/, 60_000);
    const s2 = await eventually(() => selfStatus(plain.dataDir), 20_000, 'the collector in its status');
    expect(s2.sandbox).toEqual({ backend: 'none', ok: false, detail: 'audits off' });
    const table = await vtnode(['status', '--data-dir', audited.dataDir]);
    expect(table.stdout).toMatch(new RegExp(`\\b${backend}\\b`));
    expect(table.stdout).not.toMatch(/not ok/);

    c1.child.kill('SIGTERM');
    c2.child.kill('SIGTERM');
    expect(await c1.exited).toBe(0);
    expect(await c2.exited).toBe(0);
  }, 180_000);
});
