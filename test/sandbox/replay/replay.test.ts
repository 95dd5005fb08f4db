// The differential replay end to end, in the real sandbox: the reference's calls recorded at
// calibration and replayed twice; candidates replayed in a box without test files and compared on the
// host. A candidate that forges its test run by reading the tests (issue 24, class 6) scores 0 through
// the replay; honest rewrites (caches, Intl, structuredClone, another Map order) keep 1.0, and an
// honest partial candidate keeps its pass rate (the calls of the tests it fails are not compared).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workspaceIdentity } from '../../../node/workspace/content-id.ts';
import type { Task } from '../../../protocol/task.ts';
import { createConfinement } from '../../../sandbox/backend.ts';
import { createJudgeRunner } from '../../../sandbox/judge-run.ts';
import { DEFAULT_LIMITS } from '../../../sandbox/limits.ts';
import { createReplayJudge, type ReplayKey } from '../../../sandbox/replay/judge.ts';
import { createCheckedScorer, type ScoreResult, type Scorer } from '../../../sandbox/scorer.ts';
import { makeTask, prepareFixtures, VITEST_WS } from '../fixtures.ts';

const HONEST_WORD_COUNTS = `
export function wordCounts(text: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const word of slugify(text).split('-')) {
    if (word === '') continue;
    counts.set(word, (counts.get(word) ?? 0) + 1);
  }
  return counts;
}
`;

const HONEST_CAPITALIZE = `
export function capitalize(text: string): string {
  if (text.length === 0) return text;
  return text[0]!.toUpperCase() + text.slice(1);
}
`;

/** Forgers: slugify answers what the judging test file expects, and echoes its input otherwise. */
const learn = (read: string) => `
const answers = new Map<string, string>();
function learn(text: string): void {
  for (const m of text.matchAll(/slugify\\('([^']*)'\\)\\)\\.toBe\\('([^']*)'\\)/g)) answers.set(m[1] ?? '', m[2] ?? '');
}
${read}
export function slugify(text: string): string {
  return answers.get(text) ?? text;
}
${HONEST_CAPITALIZE}${HONEST_WORD_COUNTS}`;

const FORGERS: [string, string][] = [
  [
    'reads the test file with a static node:fs import',
    `import { readFileSync } from 'node:fs';\n${learn("try {\n  learn(readFileSync('test/strings.test.ts', 'utf8'));\n} catch {}")}`,
  ],
  [
    "imports the test file's text through the runner's ?raw loader",
    learn(
      "const spec: string = '../test/strings.test.ts?raw';\ntry {\n  learn(((await import(spec)) as { default: string }).default);\n} catch {}",
    ),
  ],
  [
    'walks the box for every test file with fs/promises',
    learn(`const fsp = await import('node:fs/promises');
async function walk(dir: string): Promise<void> {
  for (const e of await fsp.readdir(dir, { withFileTypes: true }).catch(() => [])) {
    if (e.name === 'node_modules' || e.name.startsWith('.')) continue;
    const p = dir + '/' + e.name;
    if (e.isDirectory()) await walk(p);
    else if (e.name.endsWith('.ts')) learn(await fsp.readFile(p, 'utf8'));
  }
}
await walk('.');`),
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
    expect(r.replay).toMatchObject({ replayable: true, why: null, compared: null });
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

describe('class 6: a candidate that reads the tests', () => {
  it.each(FORGERS)(
    '%s: reward 0',
    async (_name, candidate) => {
      const r = await score(candidate);
      expect(r.status, r.error ?? '').toBe('scored');
      expect(r.reward, r.reasons.join('\n')).toBe(0);
    },
    180_000,
  );

  describe('the replay alone (whatever the test run decides)', () => {
    let judge: ReturnType<typeof createReplayJudge>;
    let key: ReplayKey;
    const passedAll = () => [
      { file: 'test/strings.test.ts', name: 'slugify > joins words with dashes', status: 'passed' as const },
      { file: 'test/strings.test.ts', name: 'slugify > drops punctuation', status: 'passed' as const },
      {
        file: 'test/strings.test.ts',
        name: 'slugify > keeps accents (declared to fail)',
        status: 'passed' as const,
      },
      {
        file: 'test/strings.test.ts',
        name: 'capitalize > upper-cases the first letter',
        status: 'passed' as const,
      },
      {
        file: 'test/strings.test.ts',
        name: 'capitalize > keeps the empty string',
        status: 'passed' as const,
      },
      { file: 'test/strings.test.ts', name: 'counts words', status: 'passed' as const },
    ];

    beforeAll(async () => {
      const confinement = await createConfinement({});
      const judges = createJudgeRunner({ confinement, baseLimits: DEFAULT_LIMITS, packageCache: null });
      judge = createReplayJudge(judges);
      const refRun = await judges.run({ task, workspaceDir: VITEST_WS, overlay: {}, harness: false });
      const k = await judge.record(task, VITEST_WS, reference, refRun);
      if ('infra' in k) throw new Error(k.infra);
      key = k;
    }, 180_000);

    it.each(FORGERS)(
      '%s: the replay differs on the forged calls, by name',
      async (_name, candidate) => {
        const v = await judge.replay(task, VITEST_WS, candidate, key, passedAll());
        if ('infra' in v) throw new Error(v.infra);
        expect(v.compared).toBe(6);
        // The three slugify calls: the box holds no test file to learn from.
        expect(v.differences.map((d) => d.name)).toEqual(['slugify()', 'slugify()', 'slugify()']);
        expect(v.differences[0]!.detail).toBe('out: expected {"r":"hello-world"}, got {"r":"Hello World"}');
      },
      120_000,
    );

    it('the reference replays without a difference', async () => {
      const v = await judge.replay(task, VITEST_WS, reference, key, passedAll());
      if ('infra' in v) throw new Error(v.infra);
      expect(v).toEqual({ compared: 6, differences: [] });
    }, 120_000);
  });
});
