// Per-copy sources (copies.ts), the workspace resolver (resolve.ts) and the copy detector
// (similarity.ts), on examples/ledger and the vitest fixture: real files, pure functions.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { copyPath, importGraph, specifierFor } from '../../../sandbox/mutation/copies.ts';
import { prepareMutationRun } from '../../../sandbox/mutation/plan.ts';
import { workspaceModules } from '../../../sandbox/mutation/resolve.ts';
import { COPY_THRESHOLD, copiedFunctions, functionShares } from '../../../sandbox/mutation/similarity.ts';
import { relativeImports } from '../../../sandbox/strength.ts';
import { REPO_ROOT, VITEST_WS } from '../fixtures.ts';

const LEDGER = join(REPO_ROOT, 'examples', 'ledger');
const read = (root: string, p: string) => ({ path: p, text: readFileSync(join(root, p), 'utf8') });

describe('the copies of a run', () => {
  it('resolve tsconfig path aliases: a test importing @ledger/x gets the copy of src/x', () => {
    const ws = workspaceModules(LEDGER);
    expect(ws.resolve('@ledger/journal/entry.ts', 'src/reports/reports.test.ts')).toBe(
      'src/journal/entry.ts',
    );
    expect(ws.resolve('../util/assert.ts', 'src/money/amount.ts')).toBe('src/util/assert.ts');
    expect(ws.resolve('vitest', 'src/money/amount.ts')).toBeNull();
    const test = read(LEDGER, 'src/reports/reports.test.ts');
    const { plan } = prepareMutationRun({
      runner: 'vitest',
      sources: [read(LEDGER, 'src/journal/entry.ts')],
      testFile: test,
      salt: 's',
      max: 4,
      access: ws,
    });
    expect(plan.copied).toContain('src/journal/entry.ts');
    for (const copy of plan.testFiles) {
      const tag = /\.(vtnode-t[0-9a-f]{12})\./.exec(copy)![1]!;
      expect(plan.overlay[copy]).toContain(`"../journal/entry.${tag}.ts"`);
      expect(plan.overlay[copy]).not.toContain('@ledger/journal/entry.ts');
    }
  });

  it('copy the modules between the test file and the sources (a barrel), not the others', () => {
    const test = read(VITEST_WS, 'test/strings.test.ts');
    const graph = importGraph(test, [read(VITEST_WS, 'src/strings.ts')], workspaceModules(VITEST_WS));
    // index.ts re-exports strings.ts and stack.ts: it is copied, stack.ts (no source behind it) is not.
    expect([...graph.copied].sort()).toEqual(['src/index.ts', 'src/strings.ts']);
    const { plan } = prepareMutationRun({
      runner: 'vitest',
      sources: [read(VITEST_WS, 'src/strings.ts')],
      testFile: test,
      salt: 's',
      access: workspaceModules(VITEST_WS),
    });
    const tag = /\.(vtnode-t[0-9a-f]{12})\./.exec(plan.testFiles[0]!)![1]!;
    const index = plan.overlay[copyPath('src/index.ts', tag)]!;
    expect(index).toContain(`from "./strings.${tag}.ts"`);
    expect(index).toContain("from './stack.ts'");
    expect(plan.overlay['src/strings.ts']).toMatch(/cannot be loaded during the mutation run/);
    expect(plan.overlay['src/index.ts']).toBeUndefined();
  });

  it('write specifiers in the style of the one they replace', () => {
    for (const runner of ['vitest', 'jest', 'node:test'] as const) {
      expect(specifierFor('./a.ts', 'src/b.T.ts', 'src/a.T.ts', runner)).toBe('./a.T.ts');
      expect(specifierFor('./a.js', 'src/b.T.ts', 'src/a.T.ts', runner)).toBe('./a.T.js');
      expect(specifierFor('./a', 'src/b.T.ts', 'src/a.T.ts', runner)).toBe('./a.T');
      // A bare specifier (a self-reference, an alias) names a JavaScript file by its real name.
      expect(specifierFor('colorish', 'test/b.T.test.js', 'src/index.T.js', runner)).toBe(
        '../src/index.T.js',
      );
    }
    // node's loader needs a TypeScript file's real name too; jest (ts-jest) wants none.
    expect(specifierFor('@x/a', 'test/b.T.test.ts', 'src/a.T.ts', 'node:test')).toBe('../src/a.T.ts');
    expect(specifierFor('@x/a', 'test/b.T.test.ts', 'src/a.T.ts', 'vitest')).toBe('../src/a.T.ts');
    expect(specifierFor('@x/a', 'test/b.T.test.ts', 'src/a.T.ts', 'jest')).toBe('../src/a.T');
  });
});

describe('copies of the code under test in a test file', () => {
  const ledgerTests = readdirSync(LEDGER, { recursive: true })
    .map(String)
    .filter((f) => /^(src|tests)\/.*\.test\.ts$/.test(f));

  it('the original test files of examples/ledger hold far less of any source function than the threshold', () => {
    let max = 0;
    let functions = 0;
    for (const t of ledgerTests) {
      const test = read(LEDGER, t);
      const sources = relativeImports(test.text, t, {
        exists: (p) => {
          try {
            readFileSync(join(LEDGER, p));
            return true;
          } catch {
            return false;
          }
        },
        read: (p) => readFileSync(join(LEDGER, p), 'utf8'),
      }).map((p) => read(LEDGER, p));
      const shares = functionShares(test, sources);
      functions += shares.length;
      for (const s of shares) max = Math.max(max, s.share);
      expect(copiedFunctions(test, null, sources)).toEqual([]);
    }
    expect(functions).toBeGreaterThan(100);
    expect(max).toBeLessThan(COPY_THRESHOLD / 2);
  });

  it('a pasted copy counts however it is renamed, re-typed or re-wrapped; one the original already has does not', () => {
    const source = read(VITEST_WS, 'src/strings.ts');
    const head = "import { it } from 'vitest';\n";
    const renamed = `${head}${source.text.replaceAll('export ', '').replaceAll('counts', 'c').replaceAll('word', 'w')}`;
    const untyped = `${head}${source.text.replace(/: (string|number|Map<string, number>)/g, '').replaceAll('\n', '\n\n')}`;
    for (const text of [renamed, untyped]) {
      const copied = copiedFunctions({ path: 'test/x.test.ts', text }, null, [source]);
      expect(copied.map((f) => f.at)).toContain('src/strings.ts#17');
    }
    const original = { path: 'test/x.test.ts', text: renamed };
    expect(copiedFunctions(original, original, [source])).toEqual([]);
  });
});
