import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { newPsk } from '../../node/data-dir.ts';
import type { Host } from '../../node/fleet/host.ts';
import {
  createWorkspaceAcquirer,
  fetchDue,
  fetchedWorkspaceId,
  holdersOf,
  retryDue,
  wantedWorkspaces,
} from '../../node/workspace/acquire.ts';
import { manifestPath, workspaceDirName } from '../../node/workspace/fetch.ts';
import { buildManifest, type ServedWorkspace } from '../../node/workspace/manifest.ts';
import { createWorkspaceServer } from '../../node/workspace/serve.ts';
import { contentIdOf, sha256Of } from '../../protocol/workspace.ts';
import { connect, tempDir, testHost, until } from '../collect/helpers.ts';

const ws = (c: string) => `sha256:${c.repeat(64)}`;
const node = (peerId: string, workspaces: string[], self = false) => ({
  advert: { peerId, workspaces },
  self,
});

describe('wantedWorkspaces', () => {
  it('lists what other nodes advertise and this one lacks, most holders first, with every holder', () => {
    const nodes = [
      node('me', [ws('a')], true),
      node('p2', [ws('b'), ws('c')]),
      node('p1', [ws('c'), ws('a')]),
    ];
    expect(wantedWorkspaces(nodes, (id) => id === ws('a'))).toEqual([
      { id: ws('c'), holders: ['p1', 'p2'] },
      { id: ws('b'), holders: ['p2'] },
    ]);
  });

  it('never lists its own workspaces as wanted from itself, nor anything when all is held', () => {
    expect(wantedWorkspaces([node('me', [ws('a')], true)], () => false)).toEqual([]);
    expect(wantedWorkspaces([node('p', [ws('a')])], () => true)).toEqual([]);
  });
});

describe('holdersOf', () => {
  it('lists the other nodes advertising the workspace, sorted, never this node', () => {
    const nodes = [node('me', [ws('a')], true), node('p2', [ws('a')]), node('p1', [ws('a'), ws('b')])];
    expect(holdersOf(nodes, ws('a'))).toEqual(['p1', 'p2']);
    expect(holdersOf(nodes, ws('c'))).toEqual([]);
  });

  it('lets skip see the holders of each workspace', () => {
    const seen: [string, readonly string[]][] = [];
    wantedWorkspaces([node('p1', [ws('a')]), node('p2', [ws('a')])], (id, h) => {
      seen.push([id, h]);
      return false;
    });
    expect(seen).toEqual([[ws('a'), ['p1', 'p2']]]);
  });
});

describe('retryDue', () => {
  const backoff = { firstMs: 30_000, maxMs: 600_000 };
  it('waits 30 s after one failure, doubling per failure in a row up to 10 min', () => {
    const failed = (attempts: number) => ({ at: 0, attempts, holders: ['p1'] });
    expect(retryDue(failed(1), ['p1'], 29_999, backoff)).toBe(false);
    expect(retryDue(failed(1), ['p1'], 30_000, backoff)).toBe(true);
    expect(retryDue(failed(2), ['p1'], 59_999, backoff)).toBe(false);
    expect(retryDue(failed(2), ['p1'], 60_000, backoff)).toBe(true);
    expect(retryDue(failed(10), ['p1'], 599_999, backoff)).toBe(false);
    expect(retryDue(failed(10), ['p1'], 600_000, backoff)).toBe(true);
  });

  it('tries again at once when a holder the failed attempt did not have appears', () => {
    const failed = { at: 0, attempts: 5, holders: ['p1', 'p2'] };
    expect(retryDue(failed, ['p2', 'p3'], 1, backoff)).toBe(true);
    expect(retryDue(failed, ['p2'], 1, backoff)).toBe(false); // fewer holders: nothing new to try
    expect(retryDue(failed, [], 1, backoff)).toBe(false);
  });
});

describe('fetchDue', () => {
  const backoff = { firstMs: 30_000, maxMs: 600_000 };
  it('fetches what is neither held nor under way, and never what is', () => {
    expect(fetchDue({ busy: false }, ['p1'], 0, backoff)).toBe(true);
    expect(fetchDue({ busy: true }, ['p1'], 0, backoff)).toBe(false);
    expect(fetchDue({ busy: true, evictedAt: -1e9 }, ['p1'], 0, backoff)).toBe(false);
  });

  it('does not fetch again within the longest backoff of evicting it for the size cap, even from new holders', () => {
    const evicted = { busy: false, evictedAt: 1000 };
    expect(fetchDue(evicted, ['p1', 'p2', 'p3'], 1000 + 599_999, backoff)).toBe(false);
    expect(fetchDue(evicted, ['p1'], 1000 + 600_000, backoff)).toBe(true);
  });

  it('follows the failure backoff once an eviction is old', () => {
    const failed = { at: 5000, attempts: 1, holders: ['p1'] };
    expect(fetchDue({ busy: false, failed, evictedAt: 0 }, ['p1'], 600_000, backoff)).toBe(true);
    expect(fetchDue({ busy: false, failed }, ['p1'], 5000 + 29_999, backoff)).toBe(false);
    expect(fetchDue({ busy: false, failed }, ['p1', 'p9'], 5001, backoff)).toBe(true);
  });
});

describe('fetchedWorkspaceId', () => {
  it('is the verified manifest id of a ready fetched root, and null for anything else', async () => {
    const { dir, cleanup } = await tempDir('vtnode-acquire-');
    try {
      const files = [
        { path: 'a.ts', size: 1, sha256: sha256Of(Buffer.from('a')), exec: false, withheld: false },
      ];
      const id = contentIdOf(files);
      const manifest = { id, chunkBytes: 4, files: files.map((f) => ({ ...f, chunks: [f.sha256] })) };
      const root = join(dir, workspaceDirName(id));
      await mkdir(root);
      expect(await fetchedWorkspaceId(root)).toBeNull(); // no manifest, not ready
      await writeFile(manifestPath(dir, id), JSON.stringify(manifest));
      expect(await fetchedWorkspaceId(root)).toBeNull(); // not installed yet
      await writeFile(`${root}.ready`, '{}');
      expect(await fetchedWorkspaceId(root)).toBe(id);
      // a manifest that is not the id its directory names
      await writeFile(manifestPath(dir, id), JSON.stringify({ ...manifest, files: [] }));
      expect(await fetchedWorkspaceId(root)).toBeNull();
      expect(await fetchedWorkspaceId(dir)).toBeNull();
    } finally {
      await cleanup();
    }
  });
});

describe('createWorkspaceAcquirer over real libp2p', () => {
  it('fetches, installs, holds and serves what others advertise, evicts the least recently used past the cap, and restores after a restart', async () => {
    const psk = newPsk();
    const { dir, cleanup } = await tempDir('vtnode-acq-');
    const hosts: Host[] = [];
    try {
      // Two small workspaces (package.json without dependencies: `npm install` runs offline).
      const workspaces: ServedWorkspace[] = [];
      for (const name of ['one', 'two']) {
        const root = join(dir, `src-${name}`);
        await mkdir(root);
        await writeFile(join(root, 'package.json'), JSON.stringify({ name, version: '1.0.0' }));
        await writeFile(join(root, 'index.js'), `export const name = '${name}';\n${'x'.repeat(5000)}\n`);
        workspaces.push(await buildManifest(root, { chunkBytes: 1024 }));
      }
      const holder = await testHost(psk);
      const client = await testHost(psk);
      hosts.push(holder, client);
      await createWorkspaceServer({
        host: holder,
        workspaces: () => new Map(workspaces.map((w) => [w.manifest.id, w])),
      });
      await connect(client, holder);
      const [one, two] = workspaces.map((w) => w.manifest.id) as [string, string];
      let advertised = [one];
      const nodes = () => [
        node(holder.peerId.toString(), advertised),
        node(client.peerId.toString(), [], true),
      ];
      const held = new Map<string, string>();
      const served = new Map<string, ServedWorkspace>();
      const store = join(dir, 'workspaces');
      const make = () =>
        createWorkspaceAcquirer({
          host: client,
          dir: store,
          nodes,
          held,
          served,
          onChange: () => {},
          intervalMs: 50,
          maxBytes: 8000, // room for one of the two (each ~5 KB plus its lockfile)
        });
      let acquirer = make();
      acquirer.start();
      await until(() => held.has(one), 'workspace one held', 60_000);
      expect(served.get(one)?.manifest.id).toBe(one);
      expect(await fetchedWorkspaceId(held.get(one)!)).toBe(one);
      advertised = [one, two];
      await until(() => held.has(two), 'workspace two held', 60_000);
      // Evicted (least recently used, over the cap) once two is adopted: the cap is enforced after the
      // adoption, from the stored sizes read from disk, so the eviction is awaited, not assumed.
      await until(() => !held.has(one), 'workspace one evicted', 60_000);
      expect(served.has(one)).toBe(false);
      expect(held.has(two)).toBe(true);
      await acquirer.stop();
      // A restart restores the ready workspace without fetching it.
      held.clear();
      served.clear();
      acquirer = make();
      expect(await acquirer.restore()).toEqual([two]);
      expect(held.get(two)).toBe(join(store, workspaceDirName(two)));
      await acquirer.stop();
    } finally {
      await Promise.all(hosts.map((h) => h.stop()));
      await cleanup();
    }
  }, 120_000);

  it('advertises a fetched workspace only once its calibration passes, trying again after a failure', async () => {
    const psk = newPsk();
    const { dir, cleanup } = await tempDir('vtnode-acq-cal-');
    const hosts: Host[] = [];
    try {
      const root = join(dir, 'src');
      await mkdir(root);
      await writeFile(join(root, 'package.json'), JSON.stringify({ name: 'cal', version: '1.0.0' }));
      const w = await buildManifest(root, { chunkBytes: 1024 });
      const holder = await testHost(psk);
      const client = await testHost(psk);
      hosts.push(holder, client);
      await createWorkspaceServer({ host: holder, workspaces: () => new Map([[w.manifest.id, w]]) });
      await connect(client, holder);
      const held = new Map<string, string>();
      const calibrated: string[] = [];
      let changes = 0;
      const acquirer = createWorkspaceAcquirer({
        host: client,
        dir: join(dir, 'workspaces'),
        nodes: () => [
          node(holder.peerId.toString(), [w.manifest.id]),
          node(client.peerId.toString(), [], true),
        ],
        held,
        served: new Map(),
        onChange: () => changes++,
        calibrate: async (at) => {
          calibrated.push(at);
          // The first calibration fails (as a box that cannot read the tree would): not held.
          if (calibrated.length === 1) {
            expect(held.has(w.manifest.id)).toBe(false);
            throw new Error('the reference scored 0 here');
          }
          return { taskId: 't1', mined: 3, ms: 5 };
        },
        intervalMs: 50,
        retryFirstMs: 100,
      });
      acquirer.start();
      await until(() => held.has(w.manifest.id), 'workspace held after a second calibration', 60_000);
      expect(calibrated).toEqual([held.get(w.manifest.id), held.get(w.manifest.id)]);
      const ready = JSON.parse(await readFile(`${held.get(w.manifest.id)}.ready`, 'utf8'));
      expect(ready.calibration).toEqual({ taskId: 't1', mined: 3, ms: 5 });
      expect(changes).toBeGreaterThan(0);
      await acquirer.stop();
    } finally {
      await Promise.all(hosts.map((h) => h.stop()));
      await cleanup();
    }
  }, 120_000);
});
