import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fetchedWorkspaceId, wantedWorkspaces } from '../../node/workspace/acquire.ts';
import { manifestPath, workspaceDirName } from '../../node/workspace/fetch.ts';
import { contentIdOf, sha256Of } from '../../protocol/workspace.ts';
import { tempDir } from '../collect/helpers.ts';

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
