import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { analyse } from '../../node/tasks/analyse.ts';
import { listWorkspaceFiles } from '../../node/tasks/files.ts';
import { buildGraph } from '../../node/tasks/graph.ts';
import { isParseFailure, type ParsedFile, parseFile } from '../../node/tasks/parse.ts';
import { readProject } from '../../node/tasks/project.ts';
import { createResolver } from '../../node/tasks/resolve.ts';
import { vitestRunner } from '../../node/tasks/runners.ts';
import { cleanupTemp, makeRepo } from './helpers.ts';

afterAll(cleanupTemp);

const VITEST_PKG = { name: 'lib', type: 'module', devDependencies: { vitest: '*' } };
const test = (imports: string, body = 'expect(1).toBe(1);') =>
  `import { expect, it } from 'vitest';\n${imports}\nit('works', () => { ${body} });\n`;

/** Sources each test exercises, as the miner sees them (parse, resolve, graph, analyse). */
async function exercisedIn(files: Record<string, string>): Promise<Record<string, string[]>> {
  const root = await makeRepo({ 'package.json': JSON.stringify(VITEST_PKG), ...files });
  const project = readProject(root, await listWorkspaceFiles(root));
  const parsed = new Map<string, ParsedFile>();
  for (const f of project.files.filter((p) => /\.[cm]?[jt]sx?$/.test(p))) {
    const r = parseFile(f, (files[f] ?? '') as string);
    if (isParseFailure(r)) throw new Error(r.error);
    parsed.set(f, r);
  }
  const graph = buildGraph(parsed, createResolver(project));
  const a = analyse(project, parsed, vitestRunner.testFiles(project), graph);
  return Object.fromEntries(a.tests.map((t) => [t, a.exercised(t)]));
}

describe('barrels', () => {
  it('follows a namespace import through `export *` (the three-file repro)', async () => {
    const ex = await exercisedIn({
      'src/index.js': "export * from './a.js';\n",
      'src/a.js': 'export const a = 1;\n',
      'test/a.test.js': test("import * as m from '../src/index.js';", 'expect(m.a).toBe(1);'),
    });
    expect(ex['test/a.test.js']).toEqual(['src/a.js']);
  });

  it('narrows a namespace to the members the test uses (import *, require, await import)', async () => {
    const ex = await exercisedIn({
      'src/index.js': "export * from './a.js';\nexport * from './b.js';\nexport * from './c.js';\n",
      'src/a.js': 'export const a = (x) => x + 1;\n',
      'src/b.js': 'export const b = (x) => x * 2;\n',
      'src/c.js': 'export const c = (x) => x - 1;\n',
      // `_` shadowed by a parameter is not a use of the namespace.
      'test/a.test.js': test(
        "import * as _ from '../src/index.js';",
        "expect([1].map((_, i) => i)).toEqual([0]); expect(_.a(1)).toBe(2); expect(_['c'](1)).toBe(0);",
      ),
      'test/b.test.js': test("const R = require('../src/index.js');", 'expect(R.b(2)).toBe(4);'),
      'test/c.test.js': test("const { c } = await import('../src/index.js');", 'expect(c(1)).toBe(0);'),
      // The namespace escapes (passed as a value): every export may be used.
      'test/all.test.js': test(
        "import * as lib from '../src/index.js';",
        'expect(Object.keys(lib)).toHaveLength(3);',
      ),
    });
    expect(ex['test/a.test.js']).toEqual(['src/a.js', 'src/c.js']);
    expect(ex['test/b.test.js']).toEqual(['src/b.js']);
    expect(ex['test/c.test.js']).toEqual(['src/c.js']);
    expect(ex['test/all.test.js']).toEqual(['src/a.js', 'src/b.js', 'src/c.js']);
  });

  it('follows `export *` chains by name and by namespace, and `export * as ns`', async () => {
    const files = {
      'src/index.ts': "export * from './colors/index.ts';\nexport * as units from './units.ts';\n",
      'src/colors/index.ts': "export * from './hsl.ts';\nexport * from './rgb.ts';\n",
      'src/colors/hsl.ts': 'export const hsl = 1;\n',
      'src/colors/rgb.ts': 'export const rgb = 2;\n',
      'src/units.ts': 'export const px = 3;\n',
      'test/hsl.test.ts': test("import { hsl } from '../src/index.ts';"),
      'test/all.test.ts': test("import * as lib from '../src/index.ts';"),
      'test/units.test.ts': test("import { units } from '../src/index.ts';"),
    };
    const ex = await exercisedIn(files);
    expect(ex['test/hsl.test.ts']).toEqual(['src/colors/hsl.ts']);
    expect(ex['test/all.test.ts']).toEqual(['src/colors/hsl.ts', 'src/colors/rgb.ts', 'src/units.ts']);
    expect(ex['test/units.test.ts']).toEqual(['src/units.ts']);
  });

  it('treats `export { x }` of an imported x as a re-export, default and namespace bindings too', async () => {
    const ex = await exercisedIn({
      'src/index.ts':
        "import parse from './parse.ts';\nimport { fmt as format } from './format.ts';\nimport * as math from './math.ts';\nexport { parse, format, math };\nexport default parse;\n",
      'src/parse.ts': 'export default function parse() { return 1; }\n',
      'src/format.ts': 'export const fmt = () => 1;\n',
      'src/math.ts': 'export const add = 1;\n',
      'test/parse.test.ts': test("import { parse } from '../src/index.ts';"),
      'test/format.test.ts': test("import { format } from '../src/index.ts';"),
      'test/math.test.ts': test("import { math } from '../src/index.ts';"),
      'test/default.test.ts': test("import p from '../src/index.ts';"),
    });
    expect(ex['test/parse.test.ts']).toEqual(['src/parse.ts']);
    expect(ex['test/format.test.ts']).toEqual(['src/format.ts']);
    expect(ex['test/math.test.ts']).toEqual(['src/math.ts']);
    expect(ex['test/default.test.ts']).toEqual(['src/parse.ts']);
  });

  it('follows wrappers a barrel declares into the modules they call, by name', async () => {
    const files = {
      'src/index.js': [
        "import modeHsl from './hsl/definition.js';",
        "import modeLab from './lab/definition.js';",
        "import { useMode } from './modes.js';",
        "import { register } from './registry.js';",
        "export { default as round } from './round.js';",
        'export const hsl = useMode(modeHsl);',
        'export const lab = useMode(modeLab);',
        'export function labOf(x) { return lab(x); }',
        "register('startup');",
      ].join('\n'),
      'src/hsl/definition.js': 'export default { mode: "hsl" };\n',
      'src/lab/definition.js': 'export default { mode: "lab" };\n',
      'src/modes.js': 'export const useMode = (d) => (x) => [d, x];\n',
      'src/registry.js': 'export const register = (x) => x;\n',
      'src/round.js': 'export default (x) => Math.round(x);\n',
      'test/hsl.test.js': test("import { hsl } from '../src/index.js';"),
      'test/lab.test.js': test("import { labOf } from '../src/index.js';"),
      'test/round.test.js': test("import { round } from '../src/index.js';"),
    };
    const ex = await exercisedIn(files);
    // The barrel's own code runs (its wrappers and its top-level `register` call) for every import of it.
    expect(ex['test/hsl.test.js']).toEqual([
      'src/hsl/definition.js',
      'src/index.js',
      'src/modes.js',
      'src/registry.js',
    ]);
    // A wrapper that calls another wrapper reaches that one's definition too; never hsl's.
    expect(ex['test/lab.test.js']).toEqual([
      'src/index.js',
      'src/lab/definition.js',
      'src/modes.js',
      'src/registry.js',
    ]);
    expect(ex['test/round.test.js']).toEqual(['src/index.js', 'src/registry.js', 'src/round.js']);
  });

  it('does not follow the callees of an ordinary source (a test exercises what it imports)', async () => {
    const ex = await exercisedIn({
      'src/journal.ts': "import { money } from './money.ts';\nexport const journal = () => money(1);\n",
      'src/money.ts': 'export const money = (x: number) => x;\n',
      'test/journal.test.ts': test("import { journal } from '../src/journal.ts';"),
    });
    expect(ex['test/journal.test.ts']).toEqual(['src/journal.ts']);
  });
});

describe('packages', () => {
  it('resolves a package importing its own name through `exports` conditions, mapping built paths to src', async () => {
    const pkg = {
      ...VITEST_PKG,
      exports: {
        '.': { types: './dist/index.d.ts', import: './dist/esm/index.js', require: './dist/cjs/index.cjs' },
        './utils/*': { import: './dist/esm/utils/*.js' },
        './internal/*': null,
      },
    };
    const ex = await exercisedIn({
      'package.json': JSON.stringify(pkg),
      'src/index.ts': "export * from './core.ts';\n",
      'src/core.ts': 'export const core = 1;\n',
      'src/utils/pad.ts': 'export const pad = 1;\n',
      'src/internal/x.ts': 'export const x = 1;\n',
      'test/self.test.ts': test("import { core } from 'lib';\nimport { pad } from 'lib/utils/pad';"),
      'test/blocked.test.ts': test("import { x } from 'lib/internal/x';"),
    });
    expect(ex['test/self.test.ts']).toEqual(['src/core.ts', 'src/utils/pad.ts']);
    expect(ex['test/blocked.test.ts']).toEqual([]);
  });

  it('does not map to source when the built entry exists on disk (the test runs the build)', async () => {
    const pkg = { ...VITEST_PKG, main: './dist/index.js' };
    const files = {
      'package.json': JSON.stringify(pkg),
      'src/index.ts': 'export const core = 1;\n',
      'test/self.test.ts': test("import { core } from 'lib';"),
    };
    const root = await makeRepo({ ...files, '.gitignore': 'dist/\n' });
    await mkdir(join(root, 'dist'));
    await writeFile(join(root, 'dist/index.js'), 'export const core = 1;\n');
    const project = readProject(root, await listWorkspaceFiles(root));
    expect(project.files).not.toContain('dist/index.js');
    expect(createResolver(project).resolve('test/self.test.ts', 'lib')).toBeNull();
    // Without the build, the entry maps back to its source.
    const unbuilt = await exercisedIn(files);
    expect(unbuilt['test/self.test.ts']).toEqual(['src/index.ts']);
  });

  it('resolves package `imports` (#internal), patterns and a bare-package target', async () => {
    const pkg = {
      ...VITEST_PKG,
      imports: { '#util/*': './src/util/*.js', '#clock': { node: './src/clock.ts' }, '#dep': 'vitest' },
    };
    const ex = await exercisedIn({
      'package.json': JSON.stringify(pkg),
      'src/util/pad.ts': 'export const pad = 1;\n',
      'src/clock.ts': 'export const now = 1;\n',
      'test/internal.test.ts': test(
        "import { pad } from '#util/pad';\nimport { now } from '#clock';\nimport '#dep';",
      ),
    });
    expect(ex['test/internal.test.ts']).toEqual(['src/clock.ts', 'src/util/pad.ts']);
  });

  it('resolves workspace members by name from their own tests and siblings, through customConditions', async () => {
    const ex = await exercisedIn({
      'package.json': JSON.stringify({ ...VITEST_PKG, private: true, workspaces: ['packages/*'] }),
      'tsconfig.json': JSON.stringify({ compilerOptions: { customConditions: ['source'] } }),
      'packages/core/package.json': JSON.stringify({
        name: '@z/core',
        exports: { '.': { source: './src/index.ts', import: './dist/index.js' } },
      }),
      'packages/core/src/index.ts': 'export const core = 1;\n',
      'packages/app/package.json': JSON.stringify({ name: '@z/app', main: 'dist/index.js' }),
      'packages/app/src/index.ts': "import { core } from '@z/core';\nexport const app = core;\n",
      'packages/app/test/app.test.ts': test("import { app } from '@z/app';\nimport { core } from '@z/core';"),
    });
    expect(ex['packages/app/test/app.test.ts']).toEqual([
      'packages/app/src/index.ts',
      'packages/core/src/index.ts',
    ]);
  });
});

describe('tsconfig', () => {
  it('resolves `paths` inherited through `extends` against the declaring config, and `baseUrl`', async () => {
    const ex = await exercisedIn({
      'config/tsconfig.base.json': JSON.stringify({ compilerOptions: { paths: { '~/*': ['../src/*'] } } }),
      'tsconfig.json': JSON.stringify({ extends: './config/tsconfig.base.json', include: ['src', 'test'] }),
      'src/a.ts': 'export const a = 1;\n',
      'test/a.test.ts': test("import { a } from '~/a.js';"),
    });
    expect(ex['test/a.test.ts']).toEqual(['src/a.ts']);
    const withBase = await exercisedIn({
      'tsconfig.json': JSON.stringify({
        compilerOptions: { baseUrl: 'src', paths: { '@lib': ['index.ts'] } },
      }),
      'src/index.ts': "export * from 'util/b';\n",
      'src/util/b.ts': 'export const b = 1;\n',
      'test/b.test.ts': test("import { b } from '@lib';"),
    });
    expect(withBase['test/b.test.ts']).toEqual(['src/util/b.ts']);
  });

  it('maps `.js`, `.mjs` and `.cjs` specifiers to their TypeScript sources', async () => {
    const ex = await exercisedIn({
      'src/a.ts': 'export const a = 1;\n',
      'src/b.mts': 'export const b = 1;\n',
      'src/c.cts': 'export const c = 1;\n',
      'test/abc.test.ts': test(
        "import { a } from '../src/a.js';\nimport { b } from '../src/b.mjs';\nimport { c } from '../src/c.cjs';",
      ),
    });
    expect(ex['test/abc.test.ts']).toEqual(['src/a.ts', 'src/b.mts', 'src/c.cts']);
  });
});
