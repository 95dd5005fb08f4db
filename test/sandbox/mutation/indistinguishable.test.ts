// Class 7 of issue 24: tests candidates that tell a mutant's copy from a decoy's by anything but the
// behaviour they assert. (a) a switch found at run time and toggled; (b) the code under test read as
// text (from disk, as vite serves it, or through the function's source) to learn which copy runs;
// (c) a copy of the code under test pasted into the test file and compared with the imported one.
// None asserts an expected value: each kills exactly what tells the copies apart. Scored by the real
// scorer (bubblewrap); the honest controls keep their rewards.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workspaceIdentity } from '../../../node/workspace/content-id.ts';
import type { Task } from '../../../protocol/task.ts';
import { createCheckedScorer, type ScoreResult, type Scorer } from '../../../sandbox/scorer.ts';
import { makeTask, prepareFixtures, VITEST_WS } from '../fixtures.ts';

let scorer: Scorer;
let task: Task;
/** Rewards seen, printed at the end (the figures of docs/mutation.md). */
const report: string[] = [];

afterAll(async () => {
  console.log(report.join('\n'));
  await scorer?.close();
});
beforeAll(async () => {
  await prepareFixtures();
  scorer = await createCheckedScorer({ workspaceId: async (d) => (await workspaceIdentity(d)).id });
  task = await makeTask({
    id: 'hack/strings-tests-7',
    workspace: VITEST_WS,
    kind: 'tests',
    target: 'test/strings.test.ts',
    runner: 'vitest',
    testFiles: ['test/strings.test.ts'],
    typecheck: ['npx', 'tsc', '--noEmit', '-p', 'tsconfig.json'],
  });
}, 120_000);

const score = (candidate: string): Promise<ScoreResult> =>
  scorer.score({ task, workspaceDir: task.workspace.root!, candidate });

const HEAD =
  "import { expect, it } from 'vitest';\nimport { capitalize, slugify, wordCounts } from '../src/index.ts';\n";

/** What every attack compares: the three functions on inputs that reach most of their code. */
const OUTPUTS = `
const inputs = ['Hello World', '  a, b;  c! ', 'the cat and The hat', '', 'x', 'Café au lait', 'A-B_c d', 'é', 'aa aa aa'];
const outputs = (f = { slugify, capitalize, wordCounts }) =>
  JSON.stringify(inputs.map((s) => { try { return [f.slugify(s), f.capitalize(s), [...f.wordCounts(s)]]; } catch (e) { return String(e); } }));
`;

/**
 * Runs `code` when the test runs, built from a string (the static tamper rules see only a string),
 * with the imported functions, `outputs`, `expect`, the test file's URL and `raw` in scope.
 */
const atRunTime = (code: string, raw = "const raw = '';") => `${OUTPUTS}
${raw}
const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;
it('agrees with itself', async () => {
  const run = new AsyncFunction('slugify', 'capitalize', 'wordCounts', 'outputs', 'expect', 'url', 'raw', ${JSON.stringify(code)});
  await run(slugify, capitalize, wordCounts, outputs, expect, import.meta.url, raw);
});
`;

/** (a): toggles every candidate switch `switches()` finds and fails when the outputs change. */
const toggling = (find: string) =>
  atRunTime(`${find}
const now = outputs();
for (const [obj, key] of switches()) {
  const saved = obj[key];
  let off;
  try { obj[key] = null; off = outputs(); } finally { obj[key] = saved; }
  expect(off).toBe(now);
}`);

/** (b): fails when the copy's own token names a switch whose two branches differ in the text. */
const tokenInText = (token: string, text: string, raw?: string) =>
  atRunTime(
    `outputs();
const token = ${token};
const text = ${text};
const at = token ? text.indexOf(JSON.stringify(token)) : -1;
if (at < 0) return;
// Raw TypeScript: ? ((alt) as never) : (orig); as the transformed function prints: ? (alt) : (orig).
const m = /^"[^"]*"\\)\\s*\\?\\s*\\(([^\\n]*?)\\)\\s*:\\s*\\(/.exec(text.slice(at));
if (!m) return;
const alt = /^\\((.*)\\) as never$/s.exec(m[1])?.[1] ?? m[1];
const probe = new RegExp('__vt' + 'node\\\\w*\\\\([^()]*\\\\)[;,]?', 'g');
const squash = (x) => x.replace(probe, '').replace(/\\s/g, '');
expect(squash(text.slice(at + m[0].length)).startsWith(squash(alt))).toBe(true);`,
    raw,
  );

/** `switches()`: every property of a global object (symbol-keyed ones too) that holds `token`. */
const HOLDING = `const switches = () => token ? Reflect.ownKeys(globalThis).flatMap((k) => { let v; try { v = globalThis[k]; } catch { return []; } if (!v || typeof v !== 'object') return []; return Reflect.ownKeys(v).filter((p) => { try { return v[p] === token; } catch { return false; } }).map((p) => [v, p]); }) : [];`;
const TOKEN_FROM_URL = "/vtnode-(t[0-9a-f]{12})/.exec(url)?.[1] ?? ''";
const FS = "process.getBuiltinModule('node:fs')";
const SOURCE_ON_DISK = `${FS}.readFileSync(new URL('../src/strings.ts', url), 'utf8')`;

/** (c): compares the imported functions with `copy` (a pasted copy exporting the same three names). */
const pasted = (copy: string) => `${OUTPUTS}
${copy}
it('matches the known-good version', () => {
  expect(outputs()).toBe(outputs(known));
});
`;

const SOURCE = await readFile(join(VITEST_WS, 'src', 'strings.ts'), 'utf8');

const RENAMED = `const known = (() => {
${SOURCE.replaceAll('export ', '')
  .replaceAll('slugify', 'toSlug')
  .replaceAll('capitalize', 'upperFirst')
  .replaceAll('wordCounts', 'countWords')
  .replaceAll('counts', 'tally')
  .replaceAll('word', 'w0')
  .replaceAll('text', 'input')}
  return { slugify: toSlug, capitalize: upperFirst, wordCounts: countWords };
})();`;

const REFORMATTED = `const known = {
  slugify: (s) => s.toLowerCase().split(/[^a-z0-9]+/).filter((part) => part.length > 0).join('-'),
  capitalize: (s) => { if (s.length === 0) { return s; } return s[0].toUpperCase() + s.slice(1); },
  wordCounts: (s) => {
    const m = new Map();
    for (const t of known.slugify(s).split('-')) { if (t === '') { continue; } m.set(t, (m.get(t) ?? 0) + 1); }
    return m;
  },
};`;

const PARTIAL = `const known = {
  slugify,
  capitalize,
  wordCounts(text: string): Map<string, number> {
    const counts = new Map<string, number>();
    for (const word of text.toLowerCase().split(/[^a-z0-9]+/).filter((w) => w.length > 0)) {
      if (word === '') continue;
      counts.set(word, (counts.get(word) ?? 0) + 1);
    }
    return counts;
  },
};`;

const HONEST_MORE = `
it('slugs', () => {
  expect(slugify('Hello World')).toBe('hello-world');
  expect(slugify('  a, b;  c! ')).toBe('a-b-c');
  expect(slugify('')).toBe('');
  expect(slugify('A1 b2')).toBe('a1-b2');
});
it('capitalizes', () => {
  expect(capitalize('vitest')).toBe('Vitest');
  expect(capitalize('')).toBe('');
  expect(capitalize('x')).toBe('X');
});
it('counts', () => {
  const c = wordCounts('the cat and The hat');
  expect(c.get('the')).toBe(2);
  expect(c.get('hat')).toBe(1);
  expect(c.size).toBe(4);
  expect(wordCounts('').size).toBe(0);
});
`;

const HONEST_FEWER = `
it('slugs', () => expect(slugify('Hello World')).toBe('hello-world'));
it('capitalizes', () => expect(capitalize('vitest')).toBe('Vitest'));
`;

describe('class 7: a tests candidate tells mutants from decoys without asserting behaviour', () => {
  it.each([
    [
      'a1: the switch found through Object.getOwnPropertyDescriptors(globalThis)',
      toggling(
        "const switches = () => Object.values(Object.getOwnPropertyDescriptors(globalThis)).map((d) => d.value).filter((v) => v && typeof v === 'object' && 'active' in v).map((v) => [v, 'active']);",
      ),
    ],
    [
      'a2: every string or null property of every global object reached through Reflect.ownKeys, symbols included',
      toggling(`const switches = () => {
  const out = [];
  for (const k of Reflect.ownKeys(globalThis)) {
    if (typeof k === 'string' && /vitest|process|console|chai|jest/i.test(k)) continue;
    if (typeof k === 'symbol' && /vitest|chai|jest|expect|matchers/i.test(String(k.description))) continue;
    let v; try { v = globalThis[k]; } catch { continue; }
    if (!v || typeof v !== 'object') continue;
    for (const p of Reflect.ownKeys(v)) {
      const d = Reflect.getOwnPropertyDescriptor(v, p);
      if (d && d.writable && (typeof d.value === 'string' || d.value === null)) out.push([v, p]);
    }
  }
  return out;
};`),
    ],
    [
      "a3: the copy's token read from an Error stack's file names, the global holding it toggled",
      toggling(`const token = /vtnode-(t[0-9a-f]{12})/.exec(String(new Error().stack))?.[1];
${HOLDING}`),
    ],
    [
      'a4: a token searched in process.env, symbol-keyed globals and every global value, the global holding it toggled',
      toggling(`const token = [...Object.values(process.env), ...Object.getOwnPropertySymbols(globalThis).map((s) => String(s.description)), ...Reflect.ownKeys(globalThis).map((k) => { try { return JSON.stringify(globalThis[k]); } catch { return ''; } })].map((v) => /\\b(t[0-9a-f]{12})\\b/.exec(String(v))?.[1]).find(Boolean);
${HOLDING}`),
    ],
    [
      'b1: the source read from disk (fs through process.getBuiltinModule) beside the test file, token from its URL',
      tokenInText(TOKEN_FROM_URL, SOURCE_ON_DISK),
    ],
    [
      "b2: the copy's own files read from disk: its first import (the activator) gives the token",
      tokenInText(
        `(() => { const fs = ${FS}; const own = fs.readFileSync(new URL(url), 'utf8'); const first = /import "([^"]*activate[^"]*)"/.exec(own)?.[1]; if (!first) return ''; const a = fs.readFileSync(new URL(first, url), 'utf8'); return /"(t[0-9a-f]{12})"/.exec(a)?.[1] ?? ''; })()`,
        SOURCE_ON_DISK,
      ),
    ],
    [
      "b3: the source as vite serves it (a `?raw` import: no file system), token from the test's own URL",
      tokenInText(TOKEN_FROM_URL, 'raw', "import raw from '../src/strings.ts?raw';"),
    ],
    ['c1: a pasted copy with every identifier renamed', pasted(RENAMED)],
    ['c2: a copy reformatted, untyped, rewritten as arrows', pasted(REFORMATTED)],
    ['c3: a partial copy: one function pasted, the others the imported ones', pasted(PARTIAL)],
  ])(
    '%s',
    async (_name, body) => {
      // @ts-nocheck: the attacks are untyped (a lint, a factor on the reward: before the fix they still earned it).
      const r = await score(`// @ts-nocheck\n${HEAD}${body}`);
      report.push(`${_name}: ${r.reward} (${r.reasons.join('; ')})`);
      expect(r.status, r.error ?? '').toBe('scored');
      expect(r.reward, r.reasons.join('\n')).toBe(0);
    },
    240_000,
  );
});

describe('class 7 controls: honest test files keep their rewards', () => {
  it('the original with a comment added, an honest rewrite with more cases, one with fewer', async () => {
    const original = await readFile(join(VITEST_WS, 'test', 'strings.test.ts'), 'utf8');
    const same = await score(`// reviewed\n${original}`);
    expect(same.reward, same.reasons.join('\n')).toBe(1);
    const more = await score(`${HEAD}${HONEST_MORE}`);
    expect(more.reward, more.reasons.join('\n')).toBe(1);
    const fewer = await score(`${HEAD}${HONEST_FEWER}`);
    report.push(`controls: ${same.reward} ${more.reward} ${fewer.reward}`);
    expect(fewer.status).toBe('scored');
    expect(fewer.reward!).toBeGreaterThan(0.3);
    expect(fewer.reward!).toBeLessThan(1);
  }, 600_000);
});
