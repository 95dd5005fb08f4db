import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { appendFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type MineResult, mine } from '../../node/tasks/mine.ts';
import { parseFile } from '../../node/tasks/parse.ts';
import { workspaceIdentity } from '../../node/workspace/content-id.ts';
import { fingerprint } from '../../protocol/canonical.ts';
import { Task } from '../../protocol/task.ts';
import { cleanupTemp, copyTree, gitCommitAll, ledgerRoot } from './helpers.ts';

const FILE_TARGETS = [
  'src/accounts/account.ts',
  'src/accounts/chart.ts',
  'src/audit/trail.ts',
  'src/dates/period.ts',
  'src/format/table.ts',
  'src/fx/convert.ts',
  'src/fx/rates.ts',
  'src/journal/entry.ts',
  'src/journal/journal.ts',
  'src/ledger/balances.ts',
  'src/money/amount.ts',
  'src/money/currency.ts',
  'src/parse/csv.ts',
  'src/parse/statement.ts',
  'src/recon/reconcile.ts',
  'src/reports/income.ts',
  'src/reports/trial-balance.ts',
];
const TEST_TARGETS = [
  'src/audit/trail.test.ts',
  'src/dates/period.test.ts',
  'src/format/table.test.ts',
  'src/fx/fx.test.ts',
  'src/journal/entry.test.ts',
  'src/journal/journal.reverse.test.ts',
  'src/journal/journal.test.ts',
  'src/ledger/balances.test.ts',
  'src/money/amount.test.ts',
  'src/money/currency.test.ts',
  'src/parse/csv.test.ts',
  'src/parse/statement.test.ts',
  'src/recon/reconcile.test.ts',
  'src/reports/reports.test.ts',
  'src/util/assert.test.ts',
  'tests/accounts/chart.test.ts',
];

let root: string;
let result: MineResult;
const task = (kind: 'file' | 'tests', target: string) => {
  const t = result.tasks.find((x) => x.kind === kind && x.target === target);
  if (!t) throw new Error(`no ${kind} task for ${target}`);
  return t;
};
const user = (t: Task) => t.messages.find((m) => m.role === 'user')!.content;
/** Paths of the context blocks of a prompt, in order. */
const blocks = (t: Task) => [...user(t).matchAll(/^### (\S+) \(/gm)].map((m) => m[1]);

beforeAll(async () => {
  root = await copyTree(ledgerRoot);
  await gitCommitAll(root);
  result = await mine({ root, installCheck: false });
});
afterAll(cleanupTemp);

describe('mining the example corpus', () => {
  it('finds every file and tests task, and nothing else', () => {
    const s = result.summary;
    expect(s.runner).toBe('vitest');
    expect(s.tasks).toBe(FILE_TARGETS.length + TEST_TARGETS.length);
    expect(s.byKind).toEqual({ file: 17, tests: 16 });
    expect(result.tasks.filter((t) => t.kind === 'file').map((t) => t.target)).toEqual(FILE_TARGETS);
    expect(result.tasks.filter((t) => t.kind === 'tests').map((t) => t.target)).toEqual(TEST_TARGETS);
    expect(s.leakage).toBe(0);
    for (const t of result.tasks) Task.parse(t);
  });

  it('skips the barrel and the shared helper, with reasons', () => {
    expect(result.summary.skipped).toEqual([
      { path: 'src/index.ts', reason: 'barrel: only re-exports other files' },
      {
        path: 'src/util/assert.ts',
        reason: 'shared helper: imported by 8 of 12 modules (--include-shared mines it)',
      },
    ]);
  });

  it('mines the shared helper when asked', async () => {
    const r = await mine({ root, installCheck: false, includeShared: true, kinds: ['file'] });
    const t = r.tasks.find((x) => x.target === 'src/util/assert.ts');
    expect(t?.mustDeclare).toEqual(['LedgerError', 'invariant']);
    expect(t?.judge.testFiles).toContain('src/util/assert.test.ts');
  });

  it('states what each file must declare and export', () => {
    expect(task('file', 'src/money/amount.ts').mustDeclare).toEqual([
      'Money',
      'divideHalfEven',
      'money',
      'sum',
      'zero',
    ]);
    expect(task('file', 'src/accounts/account.ts').mustDeclare).toEqual([
      'Account',
      'account',
      'normalSide',
      'parentCode',
    ]);
    expect(task('file', 'src/journal/entry.ts').mustDeclare).toEqual([
      'JournalEntry',
      'credit',
      'debit',
      'entry',
    ]);
    // Reached only through the barrel src/index.ts (reports.test.ts imports Journal from it) and directly.
    expect(task('file', 'src/journal/journal.ts').mustDeclare).toEqual(['Journal', 'Posted']);
    const prompt = user(task('file', 'src/money/amount.ts'));
    expect(prompt).toContain('It must declare and export');
    for (const n of ['Money', 'divideHalfEven', 'money', 'sum', 'zero']) expect(prompt).toContain(`- ${n}\n`);
  });

  it('puts the files that import the target first, then the rest of the module', () => {
    // Same-module importers first, then importers from other modules of the group.
    expect(blocks(task('file', 'src/money/currency.ts'))).toEqual([
      'src/money/amount.ts',
      'src/fx/convert.ts',
    ]);
    const amount = blocks(task('file', 'src/money/amount.ts'));
    // Importers from the target's group, then the rest of the module (currency.ts does not import amount.ts).
    expect(amount).toEqual([
      'src/fx/convert.ts',
      'src/journal/entry.ts',
      'src/ledger/balances.ts',
      'src/recon/reconcile.ts',
      'src/reports/income.ts',
      'src/reports/trial-balance.ts',
      'src/money/currency.ts',
    ]);
    // statement.ts imports amount.ts too, but belongs to another group: its text is never shown.
    expect(user(task('file', 'src/money/amount.ts'))).not.toContain('parseStatement(');
    const entry = blocks(task('file', 'src/journal/entry.ts'));
    expect(entry[0]).toBe('src/journal/journal.ts');
    expect(entry).toContain('src/money/amount.ts');
  });

  it('cuts context at the budget and still lists every declaration of the module', async () => {
    const r = await mine({ root, installCheck: false, maxContext: 200, kinds: ['file'] });
    const t = r.tasks.find((x) => x.target === 'src/journal/entry.ts')!;
    const text = user(t);
    expect(blocks(t)).toEqual([]);
    expect(text).toContain('Not shown (context budget): src/journal/journal.ts, src/money/amount.ts');
    expect(text).toContain('do not declare these again');
    expect(text).toContain('- src/journal/journal.ts: Posted, Journal');
    expect(text).toContain('- src/util/assert.ts: LedgerError, invariant');
    // At any budget: shown text fits, every other file of the module is shown or cut, and every
    // declaration of every other file of the module is listed.
    const budget = 1500;
    const r2 = await mine({ root, installCheck: false, maxContext: budget, kinds: ['file'] });
    let cutSomewhere = 0;
    for (const t of r2.tasks) {
      const text = user(t);
      const shown = blocks(t);
      const size = shown.reduce((n, p) => n + readFileSync(join(root, p!), 'utf8').length, 0);
      expect(size).toBeLessThanOrEqual(budget);
      const cut = /^Not shown \(context budget\): (.*)\.$/m.exec(text)?.[1]?.split(', ') ?? [];
      cutSomewhere += cut.length;
      const dir = t.target.split('/').slice(0, 2).join('/');
      const siblings = FILE_TARGETS.filter((f) => f.startsWith(`${dir}/`) && f !== t.target);
      for (const sib of siblings) {
        expect([...shown, ...cut]).toContain(sib);
        const parsed = parseFile(sib, readFileSync(join(root, sib), 'utf8'));
        if ('error' in parsed) throw new Error(parsed.error);
        expect(text).toContain(`- ${sib}: ${parsed.declarations.join(', ')}`);
      }
    }
    expect(cutSomewhere).toBeGreaterThan(0);
  });

  it('judges each target with only the test files that exercise it', () => {
    const amount = task('file', 'src/money/amount.ts').judge;
    expect(amount.testFiles).toEqual([
      'src/fx/fx.test.ts',
      'src/journal/entry.test.ts',
      'src/journal/journal.reverse.test.ts',
      'src/journal/journal.test.ts',
      'src/ledger/balances.test.ts',
      'src/money/amount.test.ts',
      'src/recon/reconcile.test.ts',
      'src/reports/reports.test.ts',
    ]);
    expect(amount.typeTests).toEqual(['src/money/amount.test-d.ts']);
    expect(amount.typecheck).toEqual(['tsc', '--noEmit', '-p', 'tsconfig.json']);
    // Mirrored layout: src/accounts/chart.ts <-> tests/accounts/chart.test.ts; reports.test.ts reaches it by the barrel.
    expect(task('file', 'src/accounts/chart.ts').judge.testFiles).toEqual([
      'src/ledger/balances.test.ts',
      'src/reports/reports.test.ts',
      'tests/accounts/chart.test.ts',
    ]);
    // Folder-level test, imported partly through a tsconfig `paths` alias (@ledger/journal/entry.ts).
    expect(task('file', 'src/reports/income.ts').judge.testFiles).toEqual(['src/reports/reports.test.ts']);
    expect(task('file', 'src/journal/entry.ts').judge.testFiles).toContain('src/reports/reports.test.ts');
    expect(task('tests', 'src/reports/reports.test.ts').module).toBe('reports');
    expect(task('tests', 'tests/accounts/chart.test.ts').module).toBe('accounts');
    // Several test files for one source.
    expect(task('file', 'src/journal/journal.ts').judge.testFiles).toEqual([
      'src/journal/journal.reverse.test.ts',
      'src/journal/journal.test.ts',
      'src/ledger/balances.test.ts',
      'src/reports/reports.test.ts',
    ]);
    const tt = task('tests', 'src/journal/journal.test.ts').judge;
    expect(tt.testFiles).toEqual(['src/journal/journal.test.ts']);
    expect(tt.typecheck).toEqual(['tsc', '--noEmit', '-p', 'tsconfig.json']);
  });

  it('flags timer-based tests as possibly flaky', () => {
    const flaky = result.tasks.filter((t) => t.judge.flaky).map((t) => `${t.kind}:${t.target}`);
    expect(flaky).toEqual(['file:src/audit/trail.ts', 'tests:src/audit/trail.test.ts']);
    expect(result.summary.flaky).toBe(2);
  });

  it('gives tests tasks the source under test, paired source first', () => {
    const t = task('tests', 'src/journal/journal.test.ts');
    expect(blocks(t)).toEqual(['src/journal/journal.ts', 'src/journal/entry.ts', 'src/money/amount.ts']);
    expect(user(t)).toContain(
      "`src/journal/journal.ts`, imported as './journal.ts', which exports: Posted, Journal",
    );
    expect(user(t)).not.toContain("describe('Journal'");
    expect(t.messages[0]!.content).toContain("from 'vitest'");
  });

  it('groups modules whose tests import each other’s sources', () => {
    const groupOf = (m: string) => result.summary.groups.find((g) => g.modules.includes(m))!;
    expect(groupOf('ledger').modules).toEqual([
      'accounts',
      'fx',
      'journal',
      'ledger',
      'money',
      'recon',
      'reports',
    ]);
    for (const m of ['audit', 'dates', 'format', 'parse', 'util']) expect(groupOf(m).modules).toEqual([m]);
    for (const t of result.tasks) expect(t.group).toBe(groupOf(t.module).id);
  });

  it('records provenance on every row', async () => {
    const id = await workspaceIdentity(root);
    const head = execFileSync('git', ['-C', root, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
    for (const t of result.tasks) {
      expect(t.minedAt).toBe(head);
      expect(t.workspace).toEqual({ id: id.id, commit: head, clean: true, root });
      expect(t.promptFingerprint).toBe(fingerprint(t.messages));
      expect(t.minerVersion).toMatch(/\+mine\.\d+$/);
      expect(t.id).toBe(`${t.kind}:${t.target}@${id.id.slice(7, 19)}`);
    }
  });

  it('is deterministic: same ids and prompts on a second run', async () => {
    const again = await mine({ root, installCheck: false });
    expect(again.tasks.map((t) => [t.id, t.promptFingerprint])).toEqual(
      result.tasks.map((t) => [t.id, t.promptFingerprint]),
    );
  });

  it('holds out whole groups with evalModules', async () => {
    const r = await mine({ root, installCheck: false, evalModules: ['dates', 'journal'] });
    const evalModules = [...new Set(r.tasks.filter((t) => t.split === 'eval').map((t) => t.module))].sort();
    expect(evalModules).toEqual([
      'accounts',
      'dates',
      'fx',
      'journal',
      'ledger',
      'money',
      'recon',
      'reports',
    ]);
    expect(r.summary.bySplit.eval + r.summary.bySplit.train).toBe(r.summary.tasks);
    expect(r.summary.leakage).toBe(0);
    await expect(mine({ root, installCheck: false, evalModules: ['nope'] })).rejects.toThrow(
      /unknown module\(s\): nope/,
    );
  });

  it('records an unclean tree', async () => {
    await appendFile(join(root, 'src/format/table.ts'), '\n// edited\n');
    const r = await mine({ root, installCheck: false, kinds: ['tests'] });
    expect(r.summary.workspace.clean).toBe(false);
    expect(r.tasks.every((t) => t.workspace.clean === false)).toBe(true);
    expect(r.summary.workspace.id).not.toBe(result.summary.workspace.id);
  });
});
