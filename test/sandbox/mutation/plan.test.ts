import { describe, expect, it } from 'vitest';
import type { Verdict } from '../../../sandbox/judges/verdict.ts';
import {
  activatorSource,
  companionPath,
  killMatrix,
  MutationPlanError,
  makeDecoys,
  moduleState,
  parseCoverage,
  planMutationRun,
  prepareMutationRun,
  snapshotPathOf,
  taggedPath,
} from '../../../sandbox/mutation/plan.ts';
import { HIT_LIMIT_MARKER } from '../../../sandbox/mutation/schemata.ts';

const SOURCE = 'export function f(a, b) {\n  return a < b ? a + 1 : b - 1;\n}\n';
const TEST = [
  '// leading comment stays first',
  "import { expect, it } from 'vitest';",
  "import { f } from './f.ts';",
  '',
  "it('f', () => expect(f(1, 2)).toBe(2));",
  '',
].join('\n');

const prepare = (over: Partial<Parameters<typeof prepareMutationRun>[0]> = {}) =>
  prepareMutationRun({
    runner: 'vitest',
    sources: [{ path: 'src/f.ts', text: SOURCE }],
    testFile: { path: 'src/f.test.ts', text: TEST },
    salt: 's1',
    ...over,
  });

describe('names', () => {
  it('inserts the tag after the first name segment, so suffix and prefix globs still match', () => {
    expect(taggedPath('src/money/amount.test.ts', 'T')).toBe('src/money/amount.T.test.ts');
    expect(taggedPath('src/journal/journal.reverse.test.ts', 'T')).toBe(
      'src/journal/journal.T.reverse.test.ts',
    );
    expect(taggedPath('test/test-math.js', 'T')).toBe('test/test-math.T.js');
    expect(taggedPath('spec.cjs', 'T')).toBe('spec.T.cjs');
    expect(taggedPath('test/.hidden.test.js', 'T')).toBe('test/.hidden.T.test.js');
    expect(companionPath('src/a.test.ts', 'T', '.activate.ts')).toBe('src/a.T.activate.ts');
    expect(snapshotPathOf('src/a.T.test.ts')).toBe('src/__snapshots__/a.T.test.ts.snap');
  });
});

describe('planMutationRun', () => {
  it('gives every copy (mutant, decoy, reference) its own source copy and activator; the source itself throws', () => {
    const { plan, mutants } = prepare();
    expect(mutants.length).toBeGreaterThan(5);
    expect(plan.testFiles).toHaveLength(mutants.length + 2 + 1); // + 2 decoys + the reference
    expect(plan.copied).toEqual(['src/f.ts']);
    expect(plan.overlay['src/f.ts']).toMatch(/^\/\/ @ts-nocheck\nthrow new Error\(/);
    // Per copy: the test file, its activator, its copy of the source.
    expect(Object.keys(plan.overlay)).toHaveLength(1 + 3 * plan.testFiles.length);
    const ids = [...plan.mutantOf.values()];
    expect(ids.filter((id) => id === null)).toHaveLength(1);
    expect(new Set(ids.filter((id) => id !== null && !plan.decoys.has(id)))).toEqual(
      new Set(mutants.map((m) => m.id)),
    );
    for (const f of plan.testFiles) {
      expect(f).toMatch(/^src\/f\.vtnode-t[0-9a-f]{12}\.test\.ts$/);
      // File names say nothing about which mutant (or whether any) runs in the copy.
      for (const id of ids) if (id) expect(f).not.toContain(id.slice(1));
    }
    expect(plan.referenceFile).toBe([...plan.mutantOf].find(([, id]) => id === null)![0]);
    expect(plan.coverageFile).toBe(plan.referenceFile.replace('.test.ts', '.coverage.json'));
  });

  it("each copy's source differs from the original in one edit of the same form, mutant, decoy or reference", () => {
    const { plan, mutants } = prepare();
    const tagOf = (copy: string) => /\.(vtnode-t[0-9a-f]{12})\./.exec(copy)![1]!;
    const texts = [...plan.mutantOf].map(([copy, id]) => {
      const tag = tagOf(copy);
      // The copy's own names masked: what is left is what tells copies apart.
      const text = plan.overlay[`src/f.${tag}.ts`]!.replaceAll(tag.slice(-12), 'TAG');
      return { id, text };
    });
    // No switch, no token, no global holding a choice: the copies differ only in their edit.
    for (const { text } of texts) {
      expect(text).not.toMatch(/active|__vtnode_mutation|t[0-9a-f]{12}/);
      expect((text.match(/ as never\)/g) ?? []).length).toBeLessThanOrEqual(1);
    }
    const decoyTexts = texts.filter((t) => t.id === null || plan.decoys.has(t.id));
    expect(decoyTexts).toHaveLength(3);
    for (const d of decoyTexts) expect(d.text.match(/ as never\)/g)).toHaveLength(1);
    // A mutant's copy holds its replacement where the decoys hold the original text.
    const m = mutants.find((x) => x.kind === 'expression')!;
    const mine = texts.find((t) => t.id === m.id)!.text;
    expect(mine).toContain(`((${m.replacement}) as never)`);
  });

  it('each copy imports its own activator first (after leading comments), and its own copy of the source', () => {
    const { plan } = prepare();
    for (const [copy] of plan.mutantOf) {
      const text = plan.overlay[copy]!;
      const activator = copy.replace('.test.ts', '.activate.ts');
      const tag = /\.(vtnode-t[0-9a-f]{12})\./.exec(copy)![1]!;
      const lines = text.split('\n');
      expect(lines[0]).toBe('// leading comment stays first');
      expect(lines[1]).toBe(`import "./${activator.split('/').pop()}";`);
      expect(lines.slice(2).join('\n')).toBe(
        TEST.split('\n').slice(1).join('\n').replace("'./f.ts'", `"./f.${tag}.ts"`),
      );
      const act = plan.overlay[activator]!;
      expect(act).not.toMatch(/active|t[0-9a-f]{12}"/);
      expect(act).toContain("import { beforeAll, afterAll } from 'vitest';");
      // Every copy writes its coverage, so writing one says nothing either.
      expect(act).toContain('writeFileSync');
      // The coverage path never goes through the global URL (jsdom replaces it; node:fs refuses theirs).
      expect(act).not.toContain('new URL(');
      expect(act).toContain('__vtPath(import.meta.url)');
    }
  });

  it('mirrors how the test file writes relative imports (.ts, .js or none) and its module kind', () => {
    const activatorLine = (
      text: string,
      path: string,
      runner: 'vitest' | 'node:test' | 'jest' = 'vitest',
    ) => {
      const { plan } = prepare({ runner, testFile: { path, text } });
      return plan.overlay[plan.testFiles[0]!]!.split('\n')[0]!;
    };
    expect(activatorLine("import { f } from './f.js';\n", 'src/f.test.ts')).toMatch(
      /^import "\.\/f\.vtnode-t\w+\.activate\.js";$/,
    );
    expect(activatorLine("import { f } from './f';\n", 'src/f.test.ts')).toMatch(
      /^import "\.\/f\.vtnode-t\w+\.activate";$/,
    );
    expect(activatorLine("import { f } from '@app/f';\n", 'src/f.test.ts', 'jest')).toMatch(/activate";$/);
    expect(activatorLine("import { f } from './f.mjs';\n", 'src/f.test.mjs', 'node:test')).toMatch(
      /activate\.mjs";$/,
    );
    // CommonJS: a require() after the prologue, and an activator without ES syntax.
    const cjs = "'use strict';\nconst { f } = require('./f.js');\n";
    const { plan } = prepare({ runner: 'node:test', testFile: { path: 'test/f.test.js', text: cjs } });
    const copy = plan.testFiles[0]!;
    expect(plan.overlay[copy]!.split('\n').slice(0, 2)).toEqual([
      "'use strict';",
      `require("./${copy.split('/').pop()!.replace('.test.js', '.activate.js')}");`,
    ]);
    const act = plan.overlay[copy.replace('.test.js', '.activate.js')]!;
    expect(act).toContain("const { beforeEach, after } = require('node:test');");
    expect(act).not.toMatch(/^(import|export) /m);
  });

  it('copies the snapshot file beside every copy', () => {
    const { plan } = prepare({ snapshot: 'exports[`f 1`] = `2`;\n' });
    for (const f of plan.testFiles) expect(plan.overlay[snapshotPathOf(f)]).toBe('exports[`f 1`] = `2`;\n');
  });

  it('refuses mocha and mutants of no given source or of another text', () => {
    expect(() => prepare({ runner: 'mocha' })).toThrow(MutationPlanError);
    expect(() => prepare({ runner: 'mocha' })).toThrow(/one module registry/);
    const { mutants } = prepare();
    const other = prepare({ sources: [{ path: 'src/g.ts', text: SOURCE }] });
    const base = {
      runner: 'vitest' as const,
      sources: [{ path: 'src/f.ts', text: SOURCE }],
      testFile: { path: 'src/f.test.ts', text: TEST },
      salt: 's',
    };
    expect(() => planMutationRun({ ...base, mutants: [...mutants, ...other.mutants] })).toThrow(
      /is in no source of the run/,
    );
    expect(() =>
      planMutationRun({
        ...base,
        sources: [{ path: 'src/f.ts', text: `${SOURCE}// x\n`.replace('a < b', 'b > a') }],
        mutants,
      }),
    ).toThrow(/stale mutant/);
  });

  it('is deterministic for a salt; another salt renames every file and token', () => {
    const a = prepare().plan;
    expect(prepare().plan).toEqual(a);
    const b = prepare({ salt: 's2' }).plan;
    expect(b.testFiles.filter((f) => a.testFiles.includes(f))).toEqual([]);
    expect([...b.mutantOf.values()].filter((id) => id && !b.decoys.has(id)).sort()).toEqual(
      [...a.mutantOf.values()].filter((id) => id && !a.decoys.has(id)).sort(),
    );
  });
});

describe('shared module registry (vitest --isolate=false)', () => {
  const STATEFUL =
    'let calls = 0;\nexport function f(a, b) {\n  calls++;\n  return a < b ? a + 1 : b - 1;\n}\n';

  it('leaves module-level mutants out (the selection of the schemata era) and is a vitest mode only', () => {
    const withTop = 'export const LIMIT = 2 + 3;\nexport function f(a) {\n  return a * LIMIT;\n}\n';
    const shared = prepare({ registry: 'shared', sources: [{ path: 'src/f.ts', text: withTop }] });
    const perFile = prepare({ sources: [{ path: 'src/f.ts', text: withTop }] });
    expect(shared.plan.registry).toBe('shared');
    expect(perFile.mutants.some((m) => m.fn === '<module>')).toBe(true);
    expect(shared.mutants.some((m) => m.fn === '<module>')).toBe(false);
    expect(() => prepare({ registry: 'shared', runner: 'jest' })).toThrow(/vitest mode/);
  });

  it('auto: shared for vitest and stateless sources only', () => {
    expect(prepare({ registry: 'auto' }).plan.registry).toBe('shared');
    expect(prepare({ registry: 'auto', sources: [{ path: 'src/f.ts', text: STATEFUL }] }).plan.registry).toBe(
      'per-file',
    );
    expect(prepare({ registry: 'auto', runner: 'node:test' }).plan.registry).toBe('per-file');
  });

  it('moduleState names what a shared registry would carry from one copy to the next', () => {
    expect(moduleState(STATEFUL, 'a.js')).toEqual(['module-level let/var calls']);
    expect(
      moduleState(
        [
          'const N = 3, S = "s", NEG = -1, F = () => 1, C = class {}, ALIAS = N, T = `t`;',
          'const CACHE = new Map();',
          'const LIST = [1, 2];',
          'const CONF = { a: 1 } as const;',
          'register(N);',
          '"use strict";',
          'class K { static count = 0; static readonly NAME = "k"; static made = []; }',
          'export function f() {}',
        ].join('\n'),
        'a.ts',
      ),
    ).toEqual([
      'module-level const CACHE',
      'module-level const LIST',
      'module-level const CONF',
      'module-level statement at line 5',
      'static field K.count',
      'static field K.made',
    ]);
  });
});

describe('decoys', () => {
  it('sit on expression mutants, change nothing, and are chosen by the salt', () => {
    const { mutants } = prepare();
    const d = makeDecoys(mutants, 2, 'x');
    expect(d).toHaveLength(2);
    for (const x of d) {
      expect(x.replacement).toBe(x.original);
      expect(x.kind).toBe('expression');
      expect(x.id).toMatch(/^d[0-9a-f]{12}$/);
    }
    expect(makeDecoys(mutants, 2, 'x')).toEqual(d);
    expect(makeDecoys(mutants, 5, 'y').map((x) => x.id)).not.toEqual(d.map((x) => x.id));
  });
});

describe('activatorSource', () => {
  it('hands its counters over through a global it deletes before the tests, and fails the file when the limit tripped', () => {
    const src = activatorSource({
      runner: 'jest',
      esm: false,
      stateKey: 'K',
      hitLimit: 9,
      coverageName: 'c.json',
    });
    expect(src).toContain('const s = { cov: Object.create(null), hits: 0, limit: 9, tripped: false };');
    expect(src).toContain('Object.defineProperty(globalThis, "K", { value: s, configurable: true });');
    expect(src).toMatch(/beforeAll\(\(\) => \{\n {2}delete globalThis\["K"\];/);
    expect(src).toContain('afterAll(() => {');
    expect(src).toContain(`throw new Error('${HIT_LIMIT_MARKER}`);
    // jest compiles to CommonJS: no import.meta, the file is written next to the activator.
    expect(src).toContain('require(\'node:path\').join(__dirname, "./c.json")');
  });
});

describe('killMatrix', () => {
  const { plan, mutants } = prepare();
  const copyOf = (id: string | null) => [...plan.mutantOf].find(([, x]) => x === id)![0];
  const decoys = [...plan.decoys];
  const [m0, m1, m2, m3] = mutants;

  it('maps each copy to killed, survived, hung or missing; decoys and the reference apart', () => {
    const pass = (file: string, name = 'f') => ({ file, name, status: 'passed' as const });
    const fail = (file: string, message = 'expected 2 to be 3') => ({
      file,
      name: 'f',
      status: 'failed' as const,
      message,
    });
    const verdict: Verdict = {
      cases: [
        pass(copyOf(null)),
        { file: copyOf(null), name: 'g', status: 'skipped' },
        fail(copyOf(m0!.id)),
        pass(copyOf(m1!.id)),
        fail(copyOf(m2!.id), `Error: ${HIT_LIMIT_MARKER}: more than 9 loop iterations`),
        pass(copyOf(decoys[0]!)),
        fail(copyOf(decoys[1]!)),
        ...mutants.slice(4).map((m) => pass(copyOf(m.id))),
      ],
      errors: [`${copyOf(m3!.id)}: Error: cannot import the target`, 'vitest.config.ts: broken'],
    };
    // m3 has only a file-level error; every other copy has cases, none for one extra mutant below.
    const m = killMatrix(plan, verdict);
    expect(m.reference).toBe('passed');
    expect(m.referenceCases.map((c) => c.file)).toEqual(['src/f.test.ts', 'src/f.test.ts']);
    expect(m.killed.sort()).toEqual([m0!.id, m3!.id].sort());
    expect(m.hung).toEqual([m2!.id]);
    expect(m.survived).toEqual(expect.arrayContaining([m1!.id]));
    expect(m.decoysKilled).toEqual([decoys[1]]);
    expect(m.unattributed).toEqual(['vitest.config.ts: broken']);
    expect(m.outcomes.get(m0!.id)).toBe('killed');
    expect(m.outcomes.size).toBe(mutants.length);
  });

  it('a copy absent from the verdict is missing, a failing reference is failed', () => {
    const m = killMatrix(plan, {
      cases: [{ file: copyOf(null), name: 'f', status: 'failed', message: 'x' }],
      errors: [],
    });
    expect(m.reference).toBe('failed');
    expect(m.missing).toHaveLength(mutants.length);
    expect(killMatrix(plan, { cases: [], errors: [] }).reference).toBe('missing');
  });

  it('a hit-limit error reported by the after-all hook (a test swallowed the error) counts as hung', () => {
    const m = killMatrix(plan, {
      cases: [{ file: copyOf(m0!.id), name: 'f', status: 'passed' }],
      errors: [`${copyOf(m0!.id)}: Error: ${HIT_LIMIT_MARKER}: the hit limit of 9 was reached`],
    });
    expect(m.hung).toEqual([m0!.id]);
  });
});

describe('parseCoverage', () => {
  it('accepts the document the reference copy writes and names the bad field otherwise', () => {
    const ok = {
      format: 'vtnode-mutation-coverage/1',
      hits: 3,
      tripped: false,
      cov: { 'src/f.ts': { f: 3 } },
    };
    expect(parseCoverage(JSON.stringify(ok))).toEqual(ok);
    expect(() => parseCoverage('{')).toThrow(/not JSON/);
    expect(() => parseCoverage(JSON.stringify({ ...ok, hits: -1 }))).toThrow(/malformed: hits/);
    expect(() => parseCoverage(JSON.stringify({ ...ok, cov: { 'src/f.ts': { f: 'x' } } }))).toThrow(
      /cov\.src\/f\.ts\.f/,
    );
    expect(() => parseCoverage(JSON.stringify({ ...ok, format: 'other' }))).toThrow(/format/);
  });
});
