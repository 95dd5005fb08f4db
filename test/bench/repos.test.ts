import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { coverageOf, type MinedTask } from '../../bench/repos/coverage.ts';
import { runMeasured } from '../../bench/repos/cpu.ts';
import { readRepoList } from '../../bench/repos/list.ts';
import type { RepoResult } from '../../bench/repos/measure.ts';
import { minerGraphReach } from '../../bench/repos/miner-graph.ts';
import { computeReach, hasNoRuntimeCode, roleOf, runtimeSpecifiers } from '../../bench/repos/reach.ts';
import { groupReasons, normaliseReason, sampleTasks } from '../../bench/repos/reasons.ts';
import { median, renderReport } from '../../bench/repos/report.ts';
import { ParseError } from '../../protocol/parse.ts';
import { cleanupTemp, makeRepo, tempDir } from '../mine/helpers.ts';

afterAll(cleanupTemp);

const vitestCase = (imports: string) =>
  `import { expect, it } from 'vitest';\n${imports}\n\nit('works', () => {\n  expect(1).toBe(1);\n});\n`;

describe('roleOf', () => {
  it('tells tests, helpers, sources and what is never counted apart', () => {
    expect(roleOf('src/a.test.ts', '')).toBe('test');
    expect(roleOf('test/add.js', "describe('add', () => {})")).toBe('test');
    expect(roleOf('__tests__/base/array.js', 'test("x", () => {})')).toBe('test');
    expect(roleOf('test/shared/eq.js', 'module.exports = function eq() {}')).toBe('support');
    expect(roleOf('src/a.ts', 'export const a = 1;')).toBe('source');
    expect(roleOf('src/a.test-d.ts', '')).toBe('other');
    expect(roleOf('src/a.d.ts', '')).toBe('other');
    expect(roleOf('test/fixtures/x.test.ts', '')).toBe('other');
    expect(roleOf('node_modules/p/a.test.js', '')).toBe('other');
    expect(roleOf('README.md', '')).toBe('other');
  });
});

describe('runtimeSpecifiers', () => {
  it('collects imports, re-exports, require() and import(), not type-only imports or computed specifiers', () => {
    const text = [
      "import a from './a.js';",
      "import type { B } from './b.js';",
      "import { type C, d } from './cd.js';",
      "export * from './e.js';",
      "export type { F } from './f.js';",
      "const g = require('./g.cjs');",
      "const h = () => import('./h.js');",
      'const name = "./i.js"; require(name);',
      "import j = require('./j');",
    ].join('\n');
    expect(runtimeSpecifiers('x.ts', text)).toEqual([
      './a.js',
      './cd.js',
      './e.js',
      './g.cjs',
      './h.js',
      './j',
    ]);
  });
});

describe('hasNoRuntimeCode', () => {
  it('is true for a barrel, type declarations or an empty file, false as soon as something runs', () => {
    expect(hasNoRuntimeCode('i.ts', "export * from './a.ts';\nexport { b } from './b.ts';")).toBe(true);
    expect(hasNoRuntimeCode('i.ts', '')).toBe(true);
    expect(
      hasNoRuntimeCode(
        't.ts',
        "import type { A } from './a.ts';\nexport interface B { a: A }\nexport type C = B[];",
      ),
    ).toBe(true);
    expect(hasNoRuntimeCode('d.ts', 'declare const x: number;\nexport declare function f(): void;')).toBe(
      true,
    );
    expect(hasNoRuntimeCode('e.ts', 'export enum E { A }')).toBe(false);
    expect(
      hasNoRuntimeCode('i.ts', "import { useMode } from './m.ts';\nexport const hsl = useMode(1);"),
    ).toBe(false);
  });
});

describe('computeReach', () => {
  it('follows tsconfig paths to a barrel, export * chains, helpers and .js → .ts, transitively', async () => {
    const root = await makeRepo(
      {
        'package.json': JSON.stringify({ name: 'lib', type: 'module' }),
        'tsconfig.json': JSON.stringify({ compilerOptions: { paths: { lib: ['./src/mod.ts'] } } }),
        'src/mod.ts': "export * from './a.ts';\nexport * from './more/index.ts';\n",
        'src/more/index.ts': "export * from './b.ts';\n",
        'src/a.ts': "import { inner } from './inner.js';\nexport const a = () => inner();\n",
        'src/inner.ts': 'export const inner = () => 1;\n',
        'src/more/b.ts': 'export const b = 2;\n',
        'src/alone.ts': 'export const alone = 3;\n',
        'tests/a.test.ts': vitestCase("import * as _ from 'lib';"),
        'tests/helper.ts': "export { b } from '../src/more/b.ts';\n",
        'tests/b.test.ts': vitestCase("import { b } from './helper.ts';"),
      },
      { git: true },
    );
    const reach = await computeReach(root);
    expect(reach.tests).toEqual(['tests/a.test.ts', 'tests/b.test.ts']);
    expect(reach.withoutCode).toEqual(['src/mod.ts', 'src/more/index.ts']);
    expect([...reach.sourcesOf.get('tests/a.test.ts')!].sort()).toEqual([
      'src/a.ts',
      'src/inner.ts',
      'src/more/b.ts',
    ]);
    expect([...reach.sourcesOf.get('tests/b.test.ts')!]).toEqual(['src/more/b.ts']);
    expect(reach.testsOf.has('src/alone.ts')).toBe(false);
    expect(reach.pairs).toBe(4);
  });

  it('follows a package self-import through `exports` to the file that runs, and CommonJS require()', async () => {
    const root = await makeRepo(
      {
        'package.json': JSON.stringify({
          name: 'selfpkg',
          exports: { '.': { types: './lib/index.d.ts', default: './lib/index.js' } },
        }),
        'lib/index.js': "module.exports = require('./impl.js');\n",
        'lib/index.d.ts': 'export declare const x: number;\n',
        'lib/impl.js': 'module.exports = { x: 1 };\n',
        'test/index.js': "const { x } = require('selfpkg');\ndescribe('x', () => {});\n",
      },
      { git: true },
    );
    const reach = await computeReach(root);
    expect([...reach.sourcesOf.get('test/index.js')!].sort()).toEqual(['lib/impl.js', 'lib/index.js']);
  });

  it('leaves out files outside the package and files git ignores', async () => {
    const root = await makeRepo(
      {
        '.gitignore': 'built/\n',
        'built/a.js': 'export const a = 1;\n',
        'src/b.ts': 'export const b = 1;\n',
        'src/b.test.ts': vitestCase("import { a } from '../built/a.js';\nimport { b } from './b.ts';"),
      },
      { git: true },
    );
    const reach = await computeReach(root);
    expect([...reach.testsOf.keys()]).toEqual(['src/b.ts']);
  });
});

describe('minerGraphReach', () => {
  it("runs the miner's graph with the bench's test files, whatever the runner", async () => {
    const root = await makeRepo(
      {
        'package.json': JSON.stringify({ name: 'lib', devDependencies: { jest: '30.0.0' } }),
        'src/a.js': 'exports.a = () => 1;\n',
        'src/b.js': 'exports.b = () => 2;\n',
        // A jest test by folder, not by name: the miner's runners would call it a helper.
        '__tests__/a.js': "const { a } = require('../src/a.js');\ntest('a', () => expect(a()).toBe(1));\n",
      },
      { git: true },
    );
    const reach = await computeReach(root);
    expect(await minerGraphReach(root, reach)).toEqual({
      reachedSources: 1,
      agreedSources: 1,
      reachingTests: 1,
    });
  });
});

describe('coverageOf', () => {
  it('counts tasks on reached sources and reaching tests, judged pairs, and targets the bench does not count', () => {
    const reach = {
      codeFiles: 5,
      tests: ['t1.test.ts', 't2.test.ts', 't3.test.ts'],
      withoutCode: [],
      testsOf: new Map([
        ['a.ts', new Set(['t1.test.ts', 't2.test.ts'])],
        ['b.ts', new Set(['t2.test.ts'])],
      ]),
      sourcesOf: new Map([
        ['t1.test.ts', new Set(['a.ts'])],
        ['t2.test.ts', new Set(['a.ts', 'b.ts'])],
        ['t3.test.ts', new Set<string>()],
      ]),
      pairs: 3,
    };
    const task = (kind: 'file' | 'tests', target: string, testFiles: string[] = [target]): MinedTask => ({
      kind,
      target,
      judge: { testFiles },
    });
    const c = coverageOf(reach, [
      task('file', 'a.ts', ['t1.test.ts']),
      task('file', 'z.ts', ['t1.test.ts']),
      task('tests', 't2.test.ts'),
      task('tests', 't3.test.ts'),
    ]);
    expect(c).toEqual({
      reachedSources: 2,
      reachingTests: 2,
      pairs: 3,
      fileTasksOnReached: 1,
      testsTasksOnReaching: 1,
      pairsJudged: 1,
      minedOutside: ['file:z.ts', 'tests:t3.test.ts'],
    });
  });
});

describe('reasons', () => {
  it('normalises paths, file names, hex ids, numbers and listed test names', () => {
    expect(
      normaliseReason(
        'the reference run gave no verdict: vitest is not installed in the workspace (no /tmp/vtnode-boxes/box-12-ab12cd34ef/node_modules/vitest/vitest.mjs)',
      ),
    ).toBe('the reference run gave no verdict: vitest is not installed in the workspace (no <path>)');
    expect(normaliseReason('2 test(s) of the reference are missing: a.test.ts :: x; b.test.ts :: y')).toBe(
      'N test(s) of the reference are missing: …',
    );
    expect(normaliseReason('separate package (own package.json), only *.test-d.ts')).toBe(
      'separate package (own package.json), only *.test-d.ts',
    );
    expect(normaliseReason('unparsable: syntax error at 2:10 in src/x.ts\nmore')).toBe(
      'unparsable: syntax error at N:N in <file>',
    );
  });

  it('groups once per item, most frequent first', () => {
    expect(
      groupReasons([
        ['3 of 4 tests failed', '1 of 2 tests failed'],
        ['no test ran'],
        ['5 of 9 tests failed'],
      ]),
    ).toEqual([
      { reason: 'N of N tests failed', count: 2 },
      { reason: 'no test ran', count: 1 },
    ]);
  });

  it('samples the same tasks whatever their order, and at most n', () => {
    const tasks = Array.from({ length: 30 }, (_, i) => ({ kind: 'file', target: `src/f${i}.ts` }));
    const a = sampleTasks(tasks, 5);
    expect(a).toHaveLength(5);
    expect(sampleTasks([...tasks].reverse(), 5)).toEqual(a);
    expect(sampleTasks(tasks, 100)).toHaveLength(30);
    expect(sampleTasks(tasks, 0)).toEqual([]);
  });
});

describe('readRepoList', () => {
  it('reads a comma list and a JSON file, resolving relative roots', async () => {
    expect(await readRepoList('/r/a,/r/b')).toEqual([
      { name: 'a', root: '/r/a', runner: undefined, layout: undefined },
      { name: 'b', root: '/r/b', runner: undefined, layout: undefined },
    ]);
    const dir = await tempDir();
    await writeFile(
      join(dir, 'repos.json'),
      JSON.stringify(['x', { name: 'm', root: '/r/m/packages/m', runner: 'jest', layout: 'npm workspaces' }]),
    );
    expect(await readRepoList('repos.json', dir)).toEqual([
      { name: 'x', root: join(dir, 'x'), runner: undefined, layout: undefined },
      { name: 'm', root: '/r/m/packages/m', runner: 'jest', layout: 'npm workspaces' },
    ]);
  });

  it('refuses a bad list, naming the input and the field', async () => {
    const dir = await tempDir();
    await writeFile(join(dir, 'bad.json'), JSON.stringify([{ name: 'm' }]));
    const err = await readRepoList('bad.json', dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ParseError);
    expect((err as ParseError).message).toContain('--repos bad.json');
    await expect(readRepoList('', dir)).rejects.toThrow(/--repos/);
  });
});

describe('runMeasured', () => {
  it('reports the CPU a child spent, its exit code, and kills it at the time limit', async () => {
    const dir = await tempDir();
    const busy = await runMeasured(
      [process.execPath, '-e', 'while (process.cpuUsage().user < 300_000); process.exit(3)'],
      dir,
      10_000,
    );
    expect(busy.exitCode).toBe(3);
    expect(busy.timedOut).toBe(false);
    // The child spins until it has used 300 ms of CPU itself: the measure must see at least that.
    expect(busy.cpuMs).toBeGreaterThanOrEqual(300);
    const slow = await runMeasured([process.execPath, '-e', 'setInterval(() => {}, 1000)'], dir, 300);
    expect(slow.timedOut).toBe(true);
    expect(slow.exitCode).toBeNull();
  });
});

describe('renderReport', () => {
  it('shows a refused repository, its reason, and percentages of what was reached', () => {
    const result: RepoResult = {
      spec: { name: 'lib', root: '/r/lib', runner: 'jest', layout: 'single' },
      commit: 'abcdef1234567890',
      reach: { codeFiles: 10, tests: 2, withoutCode: 0, durationMs: 5 },
      mine: {
        refused: 'test runner jest is not supported yet',
        runner: null,
        tasks: 0,
        file: 0,
        tests: 0,
        withoutTypecheck: 0,
        wallMs: 100,
        cpuMs: 80,
        skipped: [],
      },
      coverage: {
        reachedSources: 4,
        reachingTests: 2,
        pairs: 5,
        fileTasksOnReached: 0,
        testsTasksOnReaching: 0,
        pairsJudged: 0,
        minedOutside: [],
      },
      minerGraph: { reachedSources: 1, agreedSources: 1, reachingTests: 2 },
      calibration: { sampled: 0, kept: 0, dropped: [], droppedAll: [], rows: [] },
      freshTsc: null,
    };
    const md = renderReport([result]);
    expect(md).toContain(
      '| lib | jest · single | 10 | 2 | 4 | 2 | 5 | 1/4 (25 %) / 2/2 (100 %) | refused | 0/4 (0 %) | 0/2 (0 %) | 0/5 (0 %) |',
    );
    expect(md).toContain('### lib (`abcdef123456`)');
    expect(md).toContain('Mine refused: test runner jest is not supported yet');
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
    expect(median([])).toBeNull();
  });
});
