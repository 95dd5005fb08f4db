import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { chooseEvictions, diskBytes } from '../../node/workspace/evict.ts';
import { tempDir } from '../collect/helpers.ts';

const w = (id: string, bytes: number, lastUsed: number) => ({ id, bytes, lastUsed });
const none = new Set<string>();

describe('chooseEvictions', () => {
  it('evicts nothing while everything fits', () => {
    expect(
      chooseEvictions([w('a', 10, 1), w('b', 10, 2)], { maxBytes: 30, incoming: 10, keep: none }),
    ).toEqual({
      evict: [],
      fits: true,
    });
  });

  it('evicts the least recently used first, only as many as needed', () => {
    const stored = [w('new', 10, 9), w('old', 10, 1), w('mid', 10, 5)];
    expect(chooseEvictions(stored, { maxBytes: 25, incoming: 0, keep: none })).toEqual({
      evict: ['old'],
      fits: true,
    });
    expect(chooseEvictions(stored, { maxBytes: 25, incoming: 10, keep: none })).toEqual({
      evict: ['old', 'mid'],
      fits: true,
    });
  });

  it('never evicts a workspace in use, and says when the rest cannot fit', () => {
    const stored = [w('busy', 50, 1), w('idle', 10, 2)];
    expect(chooseEvictions(stored, { maxBytes: 40, incoming: 0, keep: new Set(['busy']) })).toEqual({
      evict: ['idle'],
      fits: false,
    });
  });

  it('breaks ties by id, so the choice is stable', () => {
    expect(
      chooseEvictions([w('b', 10, 1), w('a', 10, 1)], { maxBytes: 10, incoming: 0, keep: none }).evict,
    ).toEqual(['a']);
  });
});

describe('diskBytes', () => {
  it('sums files under a tree, counting a symlink itself and not its target', async () => {
    const { dir, cleanup } = await tempDir('vtnode-du-');
    try {
      await mkdir(join(dir, 'a/b'), { recursive: true });
      await writeFile(join(dir, 'a/x'), Buffer.alloc(100));
      await writeFile(join(dir, 'a/b/y'), Buffer.alloc(50));
      await symlink('/usr', join(dir, 'link'));
      expect(await diskBytes(dir)).toBe(150 + '/usr'.length);
      expect(await diskBytes(join(dir, 'missing'))).toBe(0);
    } finally {
      await cleanup();
    }
  });
});
