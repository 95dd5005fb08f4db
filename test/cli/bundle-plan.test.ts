import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import {
  ENTRIES,
  EXTERNAL,
  LAZY_TYPESCRIPT,
  loaderFor,
  mapImportMetaUrl,
  RUNTIME_FILES,
  sourceUrlExpression,
} from '../../scripts/bundle-plan.ts';
import { REPO } from '../helpers/cli.ts';

const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
  files: string[];
  dependencies: Record<string, string>;
  bundleDependencies: string[];
  engines?: unknown;
};

describe('mapImportMetaUrl', () => {
  const url = sourceUrlExpression('sandbox/x/y.ts');

  it('replaces each import.meta.url expression with the module’s URL in the package', () => {
    const src = 'const a = new URL("./s.mjs", import.meta.url);\nconst b = fileURLToPath(import.meta.url);\n';
    expect(mapImportMetaUrl(src, 'sandbox/x/y.ts')).toBe(
      `const a = new URL("./s.mjs", ${url});\nconst b = fileURLToPath(${url});\n`,
    );
  });

  it('leaves import.meta.url in strings, templates and comments alone (code a module generates)', () => {
    const src = [
      '// import.meta.url in a comment',
      "const s = 'import.meta.url';",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text of a template literal
      'const t = `__vtJoin(__vtDirname(__vtPath(import.meta.url)), ${name})`;',
      '/* import.meta.url */ const u = import.meta.url;',
    ].join('\n');
    const out = mapImportMetaUrl(src, 'sandbox/x/y.ts');
    expect(out.split('\n').slice(0, 3)).toEqual(src.split('\n').slice(0, 3));
    expect(out.split('\n')[3]).toBe(`/* import.meta.url */ const u = ${url};`);
  });

  it('keeps other import.meta properties, and parses JavaScript modules too', () => {
    const src =
      'const d = import.meta.dirname; const r = import.meta.resolve("x"); const u = import.meta.url;';
    expect(mapImportMetaUrl(src, 'sandbox/typecheck/a.mjs')).toBe(
      `const d = import.meta.dirname; const r = import.meta.resolve("x"); const u = ${sourceUrlExpression('sandbox/typecheck/a.mjs')};`,
    );
  });

  it('returns a source without import.meta unchanged', () => {
    const src = 'export const x = 1; // meta';
    expect(mapImportMetaUrl(src, 'a.ts')).toBe(src);
  });

  it('maps from dist/ (where every node chunk is) to the source path in the package', () => {
    expect(sourceUrlExpression('cli/commands/demo.ts')).toBe(
      'new URL("../cli/commands/demo.ts", import.meta.url).href',
    );
    const inDist = new URL('file:///opt/vtnode/dist/chunk-ABC.js');
    expect(new URL('../cli/commands/demo.ts', inDist).pathname).toBe('/opt/vtnode/cli/commands/demo.ts');
  });

  it('refuses a path outside the repository', () => {
    expect(() => sourceUrlExpression('../x.ts')).toThrow(/not a path inside the repository/);
    expect(() => sourceUrlExpression('/abs/x.ts')).toThrow(/not a path inside the repository/);
    expect(() => sourceUrlExpression('a/../../x.ts')).toThrow(/not a path inside the repository/);
  });
});

describe('loaderFor', () => {
  it('picks esbuild’s loader by extension', () => {
    expect(['a.ts', 'a.mts', 'a.cts', 'a.tsx', 'a.js', 'a.mjs', 'a.cjs'].map(loaderFor)).toEqual([
      'ts',
      'ts',
      'ts',
      'tsx',
      'js',
      'js',
      'js',
    ]);
  });
});

describe('the package layout', () => {
  it('packs dist/ and exactly the files read or run by path at run time', () => {
    expect(pkg.files).toEqual(['dist/', ...RUNTIME_FILES]);
  });

  it('every runtime file exists', () => {
    for (const f of RUNTIME_FILES) expect(existsSync(join(REPO, f)), f).toBe(true);
  });

  it('ships every harness, reporter and service module that the sandbox loads by path', () => {
    const listed = (dir: string) => readdirSync(join(REPO, dir)).map((f) => `${dir}/${f}`);
    const shipped = (f: string) => RUNTIME_FILES.some((r) => (r.endsWith('/') ? f.startsWith(r) : f === r));
    for (const f of [
      ...listed('sandbox/integrity'),
      ...listed('sandbox/reporters'),
      ...listed('sandbox/typecheck/service'),
      ...listed('sandbox/mutation'),
      'sandbox/typecheck/service.mjs',
      'sandbox/typecheck/resolve-typescript.mjs',
    ])
      expect(shipped(f), f).toBe(true);
  });

  it('installs only the externals, each bundled in the tarball (a global install fetches nothing)', () => {
    expect(Object.keys(pkg.dependencies).sort()).toEqual([...EXTERNAL].sort());
    expect([...pkg.bundleDependencies].sort()).toEqual([...EXTERNAL].sort());
  });

  it('has one node entry per binary, directly in dist/', () => {
    const bins = ENTRIES.filter((e) => e.platform === 'node');
    expect(bins.map((e) => e.out)).toEqual(['dist/vtnode.js']);
    for (const e of ENTRIES) expect(existsSync(join(REPO, e.in)), e.in).toBe(true);
  });
});

describe('LAZY_TYPESCRIPT', () => {
  // In a plain Node process: vitest's module runner does not keep ESM live bindings of data: modules.
  it('loads typescript on first use and then is the package itself (a live binding)', async () => {
    const src = LAZY_TYPESCRIPT.replace(
      'createRequire(import.meta.url)',
      `createRequire(${JSON.stringify(join(REPO, 'x.js'))})`,
    );
    const script = `
      import { createRequire } from 'node:module';
      const mod = await import(${JSON.stringify(`data:text/javascript,${encodeURIComponent(src)}`)});
      const real = createRequire(${JSON.stringify(join(REPO, 'x.js'))})('typescript');
      const before = mod.default;
      const loadedEarly = before === real;
      const plus = before.SyntaxKind.PlusToken;
      process.stdout.write(JSON.stringify({ loadedEarly, plus, same: mod.default === real, has: 'createSourceFile' in before, version: before.version === real.version }));
    `;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
      timeout: 30_000,
    });
    expect(JSON.parse(stdout)).toEqual({
      loadedEarly: false,
      plus: ts.SyntaxKind.PlusToken,
      same: true,
      has: true,
      version: true,
    });
  });
});
