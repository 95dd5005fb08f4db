// `vtnode export --out DIR` (issue 11, defect 11): a non-empty folder that is not a previous export is
// refused unless --force; a previous export is replaced as a whole (written beside it, swapped in),
// so no stale file remains, and a failure part way leaves the previous export intact.
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyTarget } from '../../node/collector/export-dir.ts';
import { vtnode } from '../helpers/cli.ts';
import { seededSigner } from '../helpers/digests.ts';
import { buildDataset, canMount, fillDisk, mountTmpfs, unmount } from '../helpers/storage.ts';

const MANIFEST = (files: string[], extra: object = {}) =>
  JSON.stringify({
    format: 'mlx',
    generator: 'vtnode 0.1.0',
    files: files.map((path) => ({ path })),
    ...extra,
  });

describe('classifyTarget', () => {
  it('absent, empty, a previous export (its manifest and the files it lists, folders included)', () => {
    expect(classifyTarget(null, null)).toEqual({ kind: 'absent' });
    expect(classifyTarget([], null)).toEqual({ kind: 'empty' });
    expect(
      classifyTarget(
        ['manifest.json', 'train.jsonl', 'valid.jsonl'],
        MANIFEST(['train.jsonl', 'valid.jsonl']),
      ),
    ).toEqual({ kind: 'previous-export' });
    expect(
      classifyTarget(
        ['README.md', 'data', 'data/test.jsonl', 'data/train.jsonl', 'manifest.json'],
        MANIFEST(['README.md', 'data/test.jsonl', 'data/train.jsonl'], { format: 'hf' }),
      ),
    ).toEqual({ kind: 'previous-export' });
    // A listed file missing (deleted by hand) is still a previous export: nothing else is in the way.
    expect(classifyTarget(['manifest.json'], MANIFEST(['train.jsonl']))).toEqual({ kind: 'previous-export' });
  });

  it('anything else is foreign, and the reason names what is in the way', () => {
    const foreign = (entries: string[], manifest: string | null) => {
      const t = classifyTarget(entries, manifest);
      expect(t.kind).toBe('foreign');
      return (t as { reason: string }).reason;
    };
    expect(foreign(['notes.txt'], null)).toBe('it holds notes.txt and no manifest.json');
    expect(foreign(['a', 'b', 'c', 'd', 'e', 'f', 'g'], null)).toBe(
      'it holds a, b, c, d, e, … (7 in all) and no manifest.json',
    );
    expect(foreign(['manifest.json', 'train.jsonl', 'notes.txt'], MANIFEST(['train.jsonl']))).toBe(
      'it holds notes.txt, which its manifest.json does not list',
    );
    // A folder the manifest does not explain.
    expect(foreign(['manifest.json', 'data', 'train.jsonl'], MANIFEST(['train.jsonl']))).toMatch(
      /holds data,/,
    );
    expect(foreign(['manifest.json'], 'not json')).toMatch(
      /its manifest.json is not a vtnode export's .*not JSON/,
    );
    expect(foreign(['manifest.json'], JSON.stringify({ name: 'my package' }))).toMatch(/format/);
    expect(foreign(['manifest.json'], MANIFEST([], { generator: 'other tool 1.0' }))).toMatch(/generator/);
    expect(foreign(['manifest.json'], MANIFEST([], { format: 'parquet' }))).toMatch(/format/);
    expect(
      foreign(['manifest.json'], JSON.stringify({ format: 'mlx', generator: 'vtnode 1', files: 'x' })),
    ).toMatch(/files/);
  });
});

let tmp = '';
let ds = '';
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'vt-export-dir-'));
  ds = join(tmp, 'ds');
  buildDataset(ds, await seededSigner(5), 40);
}, 60_000);
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

async function tree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true }))
    if (e.isFile())
      out[relative(dir, join(e.parentPath, e.name))] = await readFile(join(e.parentPath, e.name), 'utf8');
  return out;
}
const exportTo = (out: string, format: string, ...extra: string[]) =>
  vtnode(['export', '--from', ds, '--format', format, '--out', out, ...extra]);
const siblings = async (out: string) =>
  (await readdir(join(out, '..'))).filter((n) => n.startsWith(`.${out.split('/').at(-1)}.`));

describe('vtnode export --out', () => {
  it('a previous export of another format is replaced as a whole: no stale file beside the new manifest', async () => {
    const out = join(tmp, 'swap');
    expect((await exportTo(out, 'hf')).code).toBe(0);
    expect(Object.keys(await tree(out)).sort()).toEqual([
      'README.md',
      'data/test.jsonl',
      'data/train.jsonl',
      'manifest.json',
    ]);
    const r = await exportTo(out, 'mlx');
    expect(r.code, r.stderr).toBe(0);
    const files = await tree(out);
    expect(Object.keys(files).sort()).toEqual(['manifest.json', 'train.jsonl', 'valid.jsonl']);
    const manifest = JSON.parse(files['manifest.json']!) as { format: string; files: { path: string }[] };
    expect(manifest.format).toBe('mlx');
    expect(await readdir(out)).toEqual(['manifest.json', 'train.jsonl', 'valid.jsonl']);
    expect(await siblings(out)).toEqual([]);
    // The same export again is byte-identical.
    expect((await exportTo(out, 'mlx')).code).toBe(0);
    expect(await tree(out)).toEqual(files);
  }, 60_000);

  it('a non-empty folder that is not an export is refused and left alone; --force replaces it', async () => {
    const out = join(tmp, 'mine');
    await mkdir(join(out, 'sub'), { recursive: true });
    await writeFile(join(out, 'notes.txt'), 'my notes\n');
    await writeFile(join(out, 'sub', 'x.py'), 'print(1)\n');
    const r = await exportTo(out, 'mlx');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      new RegExp(
        `vtnode: --out ${out} is not empty and not a previous vtnode export: it holds notes.txt, sub, sub/x.py and no manifest.json\\..*--force`,
      ),
    );
    expect(r.stderr).not.toMatch(/^\s+at /m);
    expect(await tree(out)).toEqual({ 'notes.txt': 'my notes\n', 'sub/x.py': 'print(1)\n' });

    const forced = await exportTo(out, 'mlx', '--force');
    expect(forced.code, forced.stderr).toBe(0);
    expect(Object.keys(await tree(out)).sort()).toEqual(['manifest.json', 'train.jsonl', 'valid.jsonl']);
  }, 60_000);

  it('a previous export with a file added by hand is not replaced without --force', async () => {
    const out = join(tmp, 'added');
    expect((await exportTo(out, 'mlx')).code).toBe(0);
    await writeFile(join(out, 'eval-results.txt'), 'precious\n');
    const r = await exportTo(out, 'hf');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/it holds eval-results.txt, which its manifest.json does not list/);
    expect((await tree(out))['eval-results.txt']).toBe('precious\n');
    expect(JSON.parse((await tree(out))['manifest.json']!).format).toBe('mlx');
  }, 60_000);

  it('an empty folder, a new nested path, and a file in the way', async () => {
    const empty = join(tmp, 'empty');
    await mkdir(empty);
    expect((await exportTo(empty, 'mlx')).code).toBe(0);
    expect((await exportTo(join(tmp, 'new', 'nested', 'out'), 'mlx')).code).toBe(0);
    await writeFile(join(tmp, 'afile'), 'x');
    const r = await exportTo(join(tmp, 'afile'), 'mlx', '--force');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/is a file, not a folder/);
  }, 60_000);

  it('what an export killed part way leaves is cleaned up by the next one; a half-swapped export is put back', async () => {
    const out = join(tmp, 'crashed');
    expect((await exportTo(out, 'hf')).code).toBe(0);
    const old = await tree(out);
    // A dead process id (a child that has exited).
    const dead = await new Promise<number>((resolve) => {
      const c = spawn(process.execPath, ['-e', '0']);
      c.on('exit', () => resolve(c.pid!));
    });
    // Killed while writing: its temporary folder with a partial file.
    const partial = join(tmp, `.crashed.vtnode-export-new-${dead}-0badc0de`);
    await mkdir(partial);
    await writeFile(join(partial, 'train.jsonl'), '{"messages": [');
    expect(await tree(out)).toEqual(old);
    // Killed between the two renames: the old export moved aside, the target missing.
    await rename(out, join(tmp, `.crashed.vtnode-export-old-${dead}-0badc0df`));
    const r = await exportTo(out, 'mlx');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/an export died while replacing it; putting the previous export back/);
    expect(Object.keys(await tree(out)).sort()).toEqual(['manifest.json', 'train.jsonl', 'valid.jsonl']);
    expect(await siblings(out)).toEqual([]);
  }, 60_000);

  it.skipIf(!canMount)(
    'a disk that fills part way: the error names the file, the previous export stays intact (a tmpfs: needs root allowed to mount)',
    async () => {
      const mnt = await mkdtemp(join(tmpdir(), 'vt-export-full-'));
      await mountTmpfs(mnt, 1024 * 1024);
      try {
        const out = join(mnt, 'export');
        expect((await exportTo(out, 'hf')).code).toBe(0);
        const old = await tree(out);
        const filler = await fillDisk(mnt);
        const r = await exportTo(out, 'mlx');
        expect(r.code).toBe(1);
        expect(r.stderr).toMatch(
          new RegExp(`vtnode: ${out}/[a-z./]+: the export cannot be written: no space left`),
        );
        expect(r.stderr).not.toMatch(/^\s+at /m);
        expect(await tree(out)).toEqual(old);
        expect(await siblings(out)).toEqual([]);
        await rm(filler);
        expect((await exportTo(out, 'mlx')).code).toBe(0);
      } finally {
        await unmount(mnt);
        await rm(mnt, { recursive: true, force: true });
      }
    },
    60_000,
  );
});
