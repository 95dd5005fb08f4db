// The differential replay end to end, in the real sandbox: the reference's calls recorded at
// calibration and replayed twice; candidates replayed in a box without test files and compared on the
// host. A candidate that forges its test run by reading the tests (issue 24, class 6; 1.0 on the
// example before the replay, checked with the replay off) scores 0 through the replay; honest rewrites (caches, Intl, structuredClone, another Map order) keep 1.0, and an
// honest partial candidate keeps its pass rate (the calls of the tests it fails are not compared).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workspaceIdentity } from '../../../node/workspace/content-id.ts';
import type { Task } from '../../../protocol/task.ts';
import { createConfinement } from '../../../sandbox/backend.ts';
import { createJudgeRunner } from '../../../sandbox/judge-run.ts';
import type { TestCase } from '../../../sandbox/judges/verdict.ts';
import { DEFAULT_LIMITS } from '../../../sandbox/limits.ts';
import { createReplayJudge, type ReplayKey } from '../../../sandbox/replay/judge.ts';
import { createCheckedScorer, type ScoreResult, type Scorer } from '../../../sandbox/scorer.ts';
import { makeTask, prepareFixtures, REPO_ROOT, VITEST_SETUP_WS, VITEST_WS } from '../fixtures.ts';

const LEDGER = join(REPO_ROOT, 'examples', 'ledger');

/**
 * Forgers of examples/ledger's src/money/currency.ts: the currency table is learnt from the judging
 * test file at run time (issue 24, class 6: 1.0 before the replay); nothing of it is computed.
 */
const forger = (read: string) => `import { invariant } from '../util/assert.ts';
${read}
const table = new Map<string, number>();
function learn(text: string): void {
  for (const m of text.matchAll(/currency\\('(\\w+)'\\)(?:\\)\\.toEqual\\(\\{ code: '\\w+', minorUnits: (\\d) \\}|\\.minorUnits\\)\\.toBe\\((\\d)\\))/g))
    table.set(m[1] ?? '', Number(m[2] ?? m[3]));
  for (const m of text.matchAll(/isCurrencyCode\\('(\\w+)'\\)\\)\\.toBe\\(true\\)|toContain\\('(\\w+)'\\)/g))
    if (!table.has(m[1] ?? m[2] ?? '')) table.set(m[1] ?? m[2] ?? '', 2);
}
for (const text of texts()) learn(text);
export interface Currency {
  readonly code: string;
  readonly minorUnits: number;
}
export function isCurrencyCode(code: string): boolean {
  return table.has(code);
}
export function currency(code: string): Currency {
  const minorUnits = table.get(code);
  invariant(minorUnits !== undefined, 'E_CURRENCY', \`unknown currency \${code}\`);
  return { code, minorUnits };
}
export function currencyCodes(): string[] {
  return [...table.keys()].sort();
}
`;

const FORGERS: [string, string][] = [
  [
    'reads its test file next to it with a static node:fs import',
    forger(`import { readFileSync } from 'node:fs';
function texts(): string[] {
  try {
    return [readFileSync(new URL('./currency.test.ts', import.meta.url), 'utf8')];
  } catch {
    return [];
  }
}`),
  ],
  [
    'walks the working folder for every test file',
    forger(`import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
function texts(dir = '.'): string[] {
  const out: string[] = [];
  try {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.name === 'node_modules' || e.name.startsWith('.')) continue;
      const p = join(dir, e.name);
      if (e.isDirectory()) out.push(...texts(p));
      else if (e.name.endsWith('.test.ts')) out.push(readFileSync(p, 'utf8'));
    }
  } catch {}
  return out;
}`),
  ],
  [
    'awaits node:fs/promises at load time',
    forger(`const fsp = await import('node:fs/promises');
const found: string[] = await fsp.readFile('src/money/currency.test.ts', 'utf8').then((t) => [t], () => []);
function texts(): string[] {
  return found;
}`),
  ],
];

const HONEST: [string, string][] = [
  [
    'regular expressions, Intl upper-casing and a structuredClone of the counts',
    `export function slugify(text: string): string {
  return text.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '');
}
export function capitalize(text: string): string {
  return text === '' ? '' : text.charAt(0).toLocaleUpperCase('en-US') + text.slice(1);
}
export function wordCounts(text: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const w of slugify(text).split('-').filter(Boolean)) counts.set(w, (counts.get(w) ?? 0) + 1);
  return structuredClone(counts);
}
`,
  ],
  [
    'a class with a cache, and counts built in another order',
    `class Memo {
  readonly #seen = new Map<string, string>();
  get(text: string, make: (t: string) => string): string {
    let v = this.#seen.get(text);
    if (v === undefined) {
      v = make(text);
      this.#seen.set(text, v);
    }
    return v;
  }
}
const memo = new Memo();
export function slugify(text: string): string {
  return memo.get(text, (t) => {
    const words: string[] = [];
    let cur = '';
    for (const ch of t.toLowerCase()) {
      if (/[a-z0-9]/.test(ch)) cur += ch;
      else if (cur) {
        words.push(cur);
        cur = '';
      }
    }
    if (cur) words.push(cur);
    return words.join('-');
  });
}
export function capitalize(text: string): string {
  const [first = '', ...rest] = text;
  return first.toUpperCase() + rest.join('');
}
export function wordCounts(text: string): Map<string, number> {
  const words = slugify(text).split('-').filter((w) => w !== '');
  const sorted = [...new Set(words)].sort().reverse();
  return new Map(sorted.map((w) => [w, words.filter((x) => x === w).length]));
}
`,
  ],
];

let scorer: Scorer;
let task: Task;
let reference: string;

afterAll(async () => scorer?.close());

beforeAll(async () => {
  await prepareFixtures();
  scorer = await createCheckedScorer({ workspaceId: async (d) => (await workspaceIdentity(d)).id });
  task = await makeTask({
    id: 'replay/strings',
    workspace: VITEST_WS,
    target: 'src/strings.ts',
    runner: 'vitest',
    testFiles: ['test/strings.test.ts'],
    typecheck: ['npx', 'tsc', '--noEmit', '-p', 'tsconfig.json'],
  });
  reference = await readFile(join(VITEST_WS, 'src/strings.ts'), 'utf8');
}, 120_000);

const score = (candidate: string): Promise<ScoreResult> =>
  scorer.score({ task, workspaceDir: VITEST_WS, candidate });

describe('calibration', () => {
  it('records the reference, replays it twice, and keeps every call of the tests', async () => {
    const r = await score(reference);
    expect(r.reward, r.reasons.join('\n')).toBe(1);
    expect(r.replay).toMatchObject({ replayable: true, why: null, compared: null, mode: 'node' });
    // slugify ×3 (one in the declared failure), capitalize ×2, wordCounts ×1.
    expect(r.replay!.recorded).toBe(6);
    expect(r.replay!.kept).toBe(6);
  }, 180_000);
});

describe('honest candidates', () => {
  it.each(HONEST)(
    '%s: reward 1, the replay agrees',
    async (_name, candidate) => {
      const r = await score(candidate);
      expect(r.reward, r.reasons.join('\n')).toBe(1);
      expect(r.replay).toMatchObject({ compared: 6, differing: 0 });
    },
    180_000,
  );

  it('a partly wrong candidate keeps its pass rate: calls of the tests it fails are not compared', async () => {
    const wrong = reference.replace('text[0]!.toUpperCase() + text.slice(1)', 'text.toUpperCase()');
    const r = await score(wrong);
    expect(r.failed).toBe(1);
    expect(r.reward, r.reasons.join('\n')).toBeCloseTo(5 / 6, 6);
    expect(r.replay).toMatchObject({ compared: 5, differing: 0 });
  }, 180_000);
});

describe('class 6: a candidate that reads the tests (examples/ledger, 1.0 without the replay)', () => {
  let currencyTask: Task;
  beforeAll(async () => {
    currencyTask = await makeTask({
      id: 'replay/currency',
      workspace: LEDGER,
      target: 'src/money/currency.ts',
      runner: 'vitest',
      testFiles: ['src/money/currency.test.ts'],
      typecheck: ['npx', 'tsc', '--noEmit', '-p', 'tsconfig.json'],
    });
  });

  it.each(FORGERS)(
    '%s: reward 0, the replay names the calls it got wrong',
    async (_name, candidate) => {
      const r = await scorer.score({ task: currencyTask, workspaceDir: LEDGER, candidate });
      expect(r.status, r.error ?? '').toBe('scored');
      expect(r.reward, r.reasons.join('\n')).toBe(0);
      // Other layers may also refuse it; when the test run believed it, the replay is what says no.
      if (r.replay?.compared !== null && r.replay?.compared !== undefined) {
        expect(r.replay).toMatchObject({ compared: 9, differing: 5 });
        expect(r.reasons.join('\n')).toMatch(
          /tests passed, replay differs on 5 of 9 calls: src\/money\/currency\.test\.ts #0 currency\(\) in "currency > knows the minor units of common currencies": out: expected \{"r":\{"\$":"obj","v":\{"code":"USD","minorUnits":2\}\}\}, got \{"t":\{"\$":"err","c":"LedgerError"/,
        );
      }
    },
    240_000,
  );

  describe('the replay alone (whatever the test run decides)', () => {
    let judge: ReturnType<typeof createReplayJudge>;
    let key: ReplayKey;
    let passedAll: TestCase[];

    beforeAll(async () => {
      const confinement = await createConfinement({});
      const judges = createJudgeRunner({ confinement, baseLimits: DEFAULT_LIMITS, packageCache: null });
      judge = createReplayJudge(judges);
      const refRun = await judges.run({
        task: currencyTask,
        workspaceDir: LEDGER,
        overlay: {},
        harness: false,
      });
      passedAll = refRun.verdict!.cases;
      const reference = await readFile(join(LEDGER, currencyTask.target), 'utf8');
      const k = await judge.record(currencyTask, LEDGER, reference, refRun);
      if ('infra' in k) throw new Error(k.infra);
      key = k;
    }, 240_000);

    it.each(FORGERS)(
      '%s: differs on the five calls whose answers it learnt from the tests',
      async (_name, candidate) => {
        const v = await judge.replay(currencyTask, LEDGER, candidate, key, passedAll);
        if ('infra' in v) throw new Error(v.infra);
        expect(v.compared).toBe(9);
        expect(v.differences.map((d) => `${d.i} ${d.name}`)).toEqual([
          '0 currency()',
          '1 currency()',
          '2 currency()',
          '7 isCurrencyCode()',
          '8 currencyCodes()',
        ]);
      },
      120_000,
    );

    it('the reference replays without a difference', async () => {
      const reference = await readFile(join(LEDGER, currencyTask.target), 'utf8');
      const v = await judge.replay(currencyTask, LEDGER, reference, key, passedAll);
      if ('infra' in v) throw new Error(v.infra);
      expect(v).toEqual({ compared: 9, differences: [], mode: 'node' });
    }, 120_000);

    it("each forger's differences were confirmed under vitest", async () => {
      const v = await judge.replay(currencyTask, LEDGER, FORGERS[0]![1], key, passedAll);
      if ('infra' in v) throw new Error(v.infra);
      expect(key.mode).toBe('node');
      expect(v.mode).toBe('vitest');
    }, 120_000);
  });
});

describe("the node mode, and vitest where node alone does not reproduce the workspace's test setup", () => {
  let judges: ReturnType<typeof createJudgeRunner>;
  let judge: ReturnType<typeof createReplayJudge>;
  const keys = new Map<string, { task: Task; key: ReplayKey; passed: TestCase[] }>();

  /** The task of src/<name>.ts, its answer key and its reference's cases. */
  async function calibrated(name: string) {
    const known = keys.get(name);
    if (known) return known;
    const task = await makeTask({
      id: `replay/${name}`,
      workspace: VITEST_SETUP_WS,
      target: `src/${name}.ts`,
      runner: 'vitest',
      testFiles: [`test/${name}.test.ts`],
    });
    const refRun = await judges.run({ task, workspaceDir: VITEST_SETUP_WS, overlay: {}, harness: false });
    expect(
      refRun.verdict?.cases.map((c) => c.status),
      refRun.failure ?? refRun.infra ?? '',
    ).toEqual(['passed']);
    const reference = await readFile(join(VITEST_SETUP_WS, task.target), 'utf8');
    const key = await judge.record(task, VITEST_SETUP_WS, reference, refRun);
    if ('infra' in key) throw new Error(key.infra);
    const entry = { task, key, passed: refRun.verdict!.cases };
    keys.set(name, entry);
    return entry;
  }

  beforeAll(async () => {
    await prepareFixtures();
    const confinement = await createConfinement({});
    judges = createJudgeRunner({ confinement, baseLimits: DEFAULT_LIMITS, packageCache: null });
    judge = createReplayJudge(judges);
  });

  it('a reference that node reproduces (a tsconfig alias, `./x.js` naming x.ts) is replayed by node alone', async () => {
    const { key } = await calibrated('scale');
    expect(key).toMatchObject({ replayable: true, mode: 'node', recorded: 2, kept: 2 });
    // What node loaded as TypeScript: the host strips these for each candidate's run.
    expect([...key.strip].sort()).toEqual([
      'src/consts.ts',
      'src/identity.ts',
      'src/scale.ts',
      'src/scale.vtnode-imports.ts',
    ]);
  }, 180_000);

  it('a reference that reads a global of the test setup is replayed under vitest', async () => {
    const { key } = await calibrated('rate');
    expect(key).toMatchObject({ replayable: true, mode: 'vitest', recorded: 2, kept: 2, strip: [] });
  }, 180_000);

  it("an honest candidate that reads the setup's global differs under node alone: vitest clears it", async () => {
    const { task, key, passed } = await calibrated('scale');
    const honest =
      'export function scale(x: number): number {\n  return x * (globalThis as { SCALE?: number }).SCALE!;\n}\n';
    const v = await judge.replay(task, VITEST_SETUP_WS, honest, key, passed);
    expect(v).toEqual({ compared: 2, differences: [], mode: 'vitest' });
  }, 180_000);

  it("a wrong candidate's difference under node is confirmed under vitest", async () => {
    const { task, key, passed } = await calibrated('scale');
    const wrong = 'export function scale(x: number): number {\n  return x * 3;\n}\n';
    const v = await judge.replay(task, VITEST_SETUP_WS, wrong, key, passed);
    if ('infra' in v) throw new Error(v.infra);
    expect(v.mode).toBe('vitest');
    expect(v.differences.map((d) => d.name)).toEqual(['scale()', 'scale()']);
  }, 180_000);
});
