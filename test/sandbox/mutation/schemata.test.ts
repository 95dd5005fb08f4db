import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { isDeepStrictEqual, promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { syntaxErrors } from '../../../sandbox/mutation/ast.ts';
import { enumerateMutants } from '../../../sandbox/mutation/mutants.ts';
import { HIT_LIMIT_MARKER, instrument, renderEdits } from '../../../sandbox/mutation/schemata.ts';
import { selectMutants } from '../../../sandbox/mutation/select.ts';
import { REPO_ROOT } from '../fixtures.ts';
import { differential } from './differential.ts';

const exec = promisify(execFile);
const MODULES = join(REPO_ROOT, 'test', 'fixtures', 'mutation');

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vtnode-schemata-test-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Writes files into a fresh folder and runs `main.mjs` there in a real node process; returns its JSON output. */
async function runModule(files: Record<string, string>): Promise<unknown> {
  const d = await mkdtemp(join(dir, 'run-'));
  for (const [name, text] of Object.entries(files)) await writeFile(join(d, name), text);
  const { stdout } = await exec(process.execPath, [join(d, 'main.mjs')], { timeout: 20_000 });
  return JSON.parse(stdout);
}

const read = (name: string) => readFile(join(MODULES, name), 'utf8');

describe('differential: the schemata with one mutant active behaves like that mutant applied by hand', () => {
  it('every operator of a TypeScript ES module, loaded fresh per mutant and as one shared instance', async () => {
    const d = await differential({
      source: await read('operators.ts'),
      ext: '.ts',
      probe: await read('operators.probe.mjs'),
    });
    expect(d.mutants.length).toBeGreaterThan(150);
    expect(new Set(d.mutants.map((m) => m.operator)).size).toBe(19); // every operator is represented
    expect(d.none).toEqual(d.original);
    expect(JSON.stringify(d.original)).not.toMatch(/importError|"throws"/);
    const unchanged: string[] = [];
    for (const m of d.mutants) {
      const r = d.perMutant.get(m.id)!;
      expect(r.fresh, `${m.operator} ${m.original} → ${m.replacement}`).toEqual(r.direct);
      // Read at evaluation time: one instance loaded with no mutant active serves every mutant.
      if (m.fn !== '<module>') expect(r.shared, `shared: ${m.original} → ${m.replacement}`).toEqual(r.direct);
      if (isDeepStrictEqual(r.direct, d.original)) unchanged.push(`${m.original} → ${m.replacement}`);
    }
    // The probe sees every mutant but one, which is equivalent (sign(-5) falls through to 'neg').
    expect(unchanged).toEqual(['n < 0 → false']);
  }, 60_000);

  it('CommonJS without semicolons: ASI, hoisted calls at load time, directives', async () => {
    const source = await read('shape.cjs');
    const d = await differential({ source, ext: '.cjs', probe: await read('shape.probe.mjs') });
    expect(d.none).toEqual(d.original);
    for (const m of d.mutants) {
      const r = d.perMutant.get(m.id)!;
      expect(r.fresh, `${m.operator} ${m.original} → ${m.replacement}`).toEqual(r.direct);
      // `late` only runs while the module loads: a shared instance cannot see its mutants (see plan.ts).
      if (m.fn !== '<module>' && m.fn !== 'late') expect(r.shared).toEqual(r.direct);
    }
    const text = instrument(source, 'shape.cjs', enumerateMutants(source, 'shape.cjs')).text;
    expect(text.startsWith("// @ts-nocheck\n'use strict'")).toBe(true);
    // Statements after a line without `;` that now start with `(` get one.
    expect(text).toMatch(/for \(const x of xs\)[^\n]*\n\s+;\(__vtnodeM/);
  }, 60_000);
});

describe('run time', () => {
  // What an activator does (plan.ts): create the state when no instrumented module did yet.
  const state =
    '(globalThis.__vtnode_mutation ??= { active: null, cov: Object.create(null), hits: 0, limit: 0, tripped: false })';

  it('the hit limit ends `while (true) {}` under an active mutant; no mutant active never throws', async () => {
    const source =
      'export function spin() {\n  while (true) {}\n}\nexport function count(n) {\n  let i = 0;\n  for (; i < n; i++);\n  return i;\n}\n';
    const out = await runModule({
      'm.mjs': instrument(source, 'm.mjs', []).text,
      'main.mjs': [
        `import { spin, count } from './m.mjs';`,
        `const s = ${state};`,
        `const res = {};`,
        `s.limit = 1000; s.active = 'some-mutant';`,
        `try { spin(); res.spin = 'returned'; } catch (e) { res.spin = e.message; }`,
        `res.tripped = s.tripped;`,
        `s.hits = 0; s.tripped = false; s.active = null;`,
        `res.unlimited = count(5000); res.hits = s.hits;`,
        `console.log(JSON.stringify(res));`,
      ].join('\n'),
    });
    expect(out).toEqual({
      spin: `${HIT_LIMIT_MARKER}: more than 1000 loop iterations and calls under mutant some-mutant`,
      tripped: true,
      unlimited: 5000,
      hits: 5001, // one entry and 5000 iterations
    });
  });

  it('an infinite-loop mutant and a runaway-recursion mutant end as errors', async () => {
    const source = [
      'export function sum(n) {\n  let s = 0;\n  for (let i = 0; i < n; i++) s += i;\n  return s;\n}',
      'export function depth(n) {\n  return n === 0 ? 0 : 1 + depth(n - 1);\n}',
    ].join('\n');
    const ms = enumerateMutants(source, 'm.mjs');
    const loop = ms.find((x) => x.original === 'i++' && x.operator === 'UpdateOperator')!;
    const recursion = ms.find((x) => x.original === 'n - 1' && x.operator === 'ArithmeticOperator')!;
    const inst = instrument(source, 'm.mjs', [loop, recursion]);
    const out = await runModule({
      'm.mjs': inst.text,
      'main.mjs': [
        `import { sum, depth } from './m.mjs';`,
        `const s = ${state};`,
        `const res = [];`,
        `for (const [token, f] of [[${JSON.stringify(inst.tokens[loop.id])}, () => sum(3)], [${JSON.stringify(inst.tokens[recursion.id])}, () => depth(3)], [null, () => sum(3) + depth(3)]]) {`,
        `  s.active = token; s.hits = 0; s.limit = 1000; s.tripped = false;`,
        `  try { res.push(f()); } catch (e) { res.push(e.message.split(':')[0]); }`,
        `}`,
        `console.log(JSON.stringify(res));`,
      ].join('\n'),
    });
    expect(out).toEqual([HIT_LIMIT_MARKER, HIT_LIMIT_MARKER, 6]);
  });

  it('coverage counts entries per named function, member and callback', async () => {
    const source = [
      'export function twice(xs) { return xs.map((x) => x * 2); }',
      'export class Box { constructor(v) { this.v = v; } get value() { return this.v; } static of(v) { return new Box(v); } }',
      'export const arrow = () => 1;',
      'function unused() { return 0; }',
    ].join('\n');
    const inst = instrument(source, 'src/c.mjs', []);
    expect(inst.functions).toEqual([
      'twice',
      'twice/<anonymous:1:43>',
      'Box.constructor',
      'get Box.value',
      'Box.of',
      'arrow',
      'unused',
    ]);
    const out = await runModule({
      'c.mjs': inst.text,
      'main.mjs': [
        `import { twice, Box, arrow } from './c.mjs';`,
        `twice([1, 2, 3]); twice([]); Box.of(1).value; arrow();`,
        `console.log(JSON.stringify({ cov: ${state}.cov, hits: ${state}.hits }));`,
      ].join('\n'),
    });
    expect(out).toEqual({
      cov: {
        'src/c.mjs': {
          twice: 2,
          'twice/<anonymous:1:43>': 3,
          'Box.of': 1,
          'Box.constructor': 1,
          'get Box.value': 1,
          arrow: 1,
        },
      },
      hits: 9,
    });
  });

  it('keeps module shape: hoisted declarations in an import cycle, export default function, function directives', async () => {
    const a =
      'import { fromB } from "./b.mjs";\nexport default function id(x) { return x + 0; }\nexport function viaA() { return fromB; }\n';
    const b = 'import id from "./a.mjs";\nexport const fromB = id(41) + 1;\n';
    const c =
      'function sloppy() { return this === undefined; }\nfunction strict() { "use strict"; return this === undefined; }\nmodule.exports = { sloppy: sloppy(), strict: strict() };\n';
    const out = await runModule({
      'a.mjs': instrument(a, 'a.mjs', enumerateMutants(a, 'a.mjs')).text,
      'b.mjs': b,
      'c.cjs': instrument(c, 'c.cjs', enumerateMutants(c, 'c.cjs')).text,
      'main.mjs': [
        `import { viaA } from './a.mjs';`,
        `import c from './c.cjs';`,
        `console.log(JSON.stringify({ viaA: viaA(), c }));`,
      ].join('\n'),
    });
    // b.mjs calls a.mjs's hoisted `id` before a.mjs's body ran: the helpers must be hoisted too.
    expect(out).toEqual({ viaA: 42, c: { sloppy: false, strict: true } });
  });
});

describe('text', () => {
  it('every source of examples/ledger/src and test/fixtures still parses, with all mutants and with a selection', async () => {
    const roots = [join(REPO_ROOT, 'examples', 'ledger', 'src'), join(REPO_ROOT, 'test', 'fixtures')];
    const files: string[] = [];
    for (const root of roots)
      for (const f of await readdir(root, { recursive: true }))
        if (
          /\.(ts|tsx|mts|cts|js|mjs|cjs|jsx)$/.test(f) &&
          !f.includes('node_modules') &&
          !f.endsWith('.d.ts')
        )
          files.push(join(root, f));
    expect(files.length).toBeGreaterThan(40);
    let mutated = 0;
    for (const f of files) {
      const rel = relative(REPO_ROOT, f);
      const source = await readFile(f, 'utf8');
      const all = enumerateMutants(source, rel);
      mutated += all.length;
      for (const set of [all, selectMutants(all)]) {
        const s = instrument(source, rel, set);
        expect(syntaxErrors(s.text, rel), rel).toEqual([]);
        expect(s.text.split('\n')[0]).toBe('// @ts-nocheck');
      }
    }
    expect(mutated).toBeGreaterThan(1000);
  });

  it('nests edits by span and refuses overlapping ones', () => {
    const text = 'abcdef';
    const e = (start: number, end: number, before: string, after: string, rank = 0) => ({
      start,
      end,
      before,
      after,
      rank,
      asi: false,
    });
    expect(
      renderEdits(text, [e(1, 5, '[', ']'), e(2, 4, '(', ')'), e(2, 4, '<', '>', 1), e(5, 5, '|', '')]),
    ).toBe('a[b(<cd>)e]|f');
    expect(() => renderEdits(text, [e(1, 4, '[', ']'), e(2, 5, '(', ')')])).toThrow(/overlap/);
  });

  it('refuses mutants of another file or of another version of the source', () => {
    const src = 'export const f = (a) => a + 1;\n';
    const [m] = enumerateMutants(src, 'a.js');
    expect(() => instrument(src, 'b.js', [m!])).toThrow(/belongs to a.js/);
    expect(() => instrument(`// moved\n${src}`, 'a.js', [m!])).toThrow(/stale mutant/);
  });

  it('tokens depend on the salt, and helper names avoid names the source uses', () => {
    const src = 'const __vtnodeM = 1;\nexport const f = (a) => a + __vtnodeM;\n';
    const ms = enumerateMutants(src, 'a.js');
    const a = instrument(src, 'a.js', ms, { salt: 'one' });
    const b = instrument(src, 'a.js', ms, { salt: 'two' });
    expect(a.tokens).not.toEqual(b.tokens);
    expect(instrument(src, 'a.js', ms, { salt: 'one' })).toEqual(a);
    expect(a.text).toContain('function __vtnode1_M(');
    expect(a.text).not.toContain('function __vtnodeM(');
  });
});
