import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { bundleApp, prebuiltApp, readAssets } from '../../node/ui/assets.ts';

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

describe("the page's bundle", () => {
  it('a prebuilt ui/app.js beside the program wins over bundling the sources', async () => {
    const dist = await mkdtemp(join(tmpdir(), 'vt-dist-'));
    dirs.push(dist);
    const program = pathToFileURL(join(dist, 'vtnode.js')).href;
    expect(prebuiltApp(program)).toEqual({
      js: join(dist, 'ui', 'app.js'),
      css: join(dist, 'ui', 'app.css'),
    });
    await mkdir(join(dist, 'ui'));
    await writeFile(join(dist, 'ui', 'app.js'), 'prebuilt();');
    expect(await readAssets(program)).toEqual({ js: 'prebuilt();', css: '' });
    await writeFile(join(dist, 'ui', 'app.css'), 'body{}');
    expect(await readAssets(program)).toEqual({ js: 'prebuilt();', css: 'body{}' });
  });

  it('from the sources: one minified ES module and its style sheet, with nothing fetched from elsewhere', async () => {
    const dist = await mkdtemp(join(tmpdir(), 'vt-nodist-'));
    dirs.push(dist);
    const assets = await readAssets(pathToFileURL(join(dist, 'vtnode.js')).href);
    expect(assets).toEqual(await bundleApp());
    expect(assets.js.length).toBeGreaterThan(10_000);
    // Small: preact and zod/mini, not zod's classic API (~450 kB).
    expect(assets.js.length).toBeLessThan(120_000);
    expect(assets.js).toContain('EventSource');
    expect(assets.js).not.toMatch(/\bimport\s*[^;]*from\s*["']https?:/);
    expect(assets.js).not.toMatch(/\bimport\(\s*["']https?:/);
    expect(assets.css).toContain('.bar');
    expect(assets.css).not.toMatch(/@import|url\(\s*["']?https?:/);
  });
});
