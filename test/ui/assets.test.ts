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
  it('the package (no page sources): the prebuilt dist/ui/app.js that npm run build wrote', async () => {
    const pkg = await mkdtemp(join(tmpdir(), 'vt-pkg-'));
    dirs.push(pkg);
    // The package build keeps each module's URL at its source path (scripts/bundle-plan.ts).
    const module = pathToFileURL(join(pkg, 'node', 'ui', 'assets.ts')).href;
    const noSources = join(pkg, 'node', 'ui', 'web', 'main.tsx');
    expect(prebuiltApp(module)).toEqual({
      js: join(pkg, 'dist', 'ui', 'app.js'),
      css: join(pkg, 'dist', 'ui', 'app.css'),
    });
    await mkdir(join(pkg, 'dist', 'ui'), { recursive: true });
    await writeFile(join(pkg, 'dist', 'ui', 'app.js'), 'prebuilt();');
    expect(await readAssets(module, noSources)).toEqual({ js: 'prebuilt();', css: '' });
    await writeFile(join(pkg, 'dist', 'ui', 'app.css'), 'body{}');
    expect(await readAssets(module, noSources)).toEqual({ js: 'prebuilt();', css: 'body{}' });
    // The repository (sources present): always bundled from them, never an earlier build's copy.
    expect((await readAssets(module)).js).toContain('EventSource');
  });

  it('from the sources: one minified ES module and its style sheet, with nothing fetched from elsewhere', async () => {
    const assets = await readAssets();
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
