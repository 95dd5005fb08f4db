import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { posix } from 'node:path';
import ts from 'typescript';
import { z } from 'zod';
import type { Task } from '../protocol/task.ts';
import { insideBox } from './box.ts';
import { sentinelProblems } from './integrity/sentinel.ts';
import type { JudgeRun, JudgeRunner } from './judge-run.ts';
import {
  killMatrix,
  type MutationPlan,
  parseCoverage,
  planRunner,
  prepareMutationRun,
} from './mutation/plan.ts';
import { workspaceModules } from './mutation/resolve.ts';
import { copiedFunctions } from './mutation/similarity.ts';

/** Most mutants a tests task is judged on (select.ts spreads them over functions and operators). */
export const MAX_MUTANTS = 32;
/** Share of the functions the original tests enter that a candidate's tests must enter too. */
export const MIN_COVERAGE = 0.5;

/** The answer key of a tests task's strength, from the original test file (kept with the reference). */
export const StrengthKey = z.object({
  /** Sources whose mutants were run (workspace-relative). */
  sources: z.array(z.string()),
  /** The selected mutants (deterministic for the same sources). */
  selected: z.array(z.string()),
  /** Mutants the original test file kills: the denominator. */
  killed: z.array(z.string()),
  /** Functions (file#key) the original test file enters. */
  covered: z.array(z.string()),
});
export type StrengthKey = z.infer<typeof StrengthKey>;

/** A candidate test file's strength against the key. */
export interface Strength {
  /** Mutants of the key's `killed` the candidate also kills (a hung mutant counts as detected). */
  killed: number;
  /** Size of the key's `killed`. */
  of: number;
  /** Functions of the key's `covered` the candidate's tests enter too. */
  covered: number;
  ofCovered: number;
  /** Reasons the run cannot be believed (the candidate's doing: a hard 0). */
  problems: string[];
}

/** The outcome of a batched mutation run: the kill matrix, or why it judged nothing. */
type MutationOutcome =
  | {
      kind: 'matrix';
      killed: Set<string>;
      /** Stopped by the hit limit: detected for a candidate, left out of the original's key. */
      hung: Set<string>;
      covered: Set<string>;
      problems: string[];
      selected: string[];
    }
  | { kind: 'infra'; error: string }
  | { kind: 'void'; problem: string };

const EXTENSIONS = ['.ts', '.tsx', '.mts', '.cts', '.js', '.mjs', '.cjs', '.jsx'];

/** The workspace file a relative specifier names from `from`, by TypeScript's rules (`.js` finds `.ts`). */
function resolveRelative(from: string, spec: string, exists: (p: string) => boolean): string | null {
  const base = posix.normalize(posix.join(posix.dirname(from), spec));
  const stem = base.replace(/\.[cm]?[jt]sx?$/, '');
  const tries = [base, ...EXTENSIONS.map((e) => stem + e), ...EXTENSIONS.map((e) => `${base}/index${e}`)];
  return tries.find((c) => !c.startsWith('../') && exists(c)) ?? null;
}

/** Relative specifiers a file imports or re-exports, and whether it only re-exports (a barrel). */
function specifiersOf(text: string, path: string): { specs: string[]; barrel: boolean } {
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, false);
  const specs: string[] = [];
  let barrel = sf.statements.length > 0;
  for (const st of sf.statements) {
    const isReexport = ts.isExportDeclaration(st) && st.moduleSpecifier !== undefined;
    if (!isReexport) barrel = false;
    if (
      (ts.isImportDeclaration(st) || ts.isExportDeclaration(st)) &&
      st.moduleSpecifier &&
      ts.isStringLiteral(st.moduleSpecifier)
    )
      specs.push(st.moduleSpecifier.text);
  }
  const visit = (n: ts.Node): void => {
    if (ts.isCallExpression(n) && n.arguments[0] && ts.isStringLiteralLike(n.arguments[0])) {
      const callee = n.expression;
      if (
        callee.kind === ts.SyntaxKind.ImportKeyword ||
        (ts.isIdentifier(callee) && callee.text === 'require')
      )
        specs.push(n.arguments[0].text);
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return { specs: specs.filter((s) => s.startsWith('.')), barrel };
}

/**
 * The sources a test file is about, when its task names none: the workspace files it imports relatively,
 * through barrels (a file of re-exports stands for the files it re-exports), test files left out.
 */
export function relativeImports(
  testText: string,
  testPath: string,
  fs: { exists: (p: string) => boolean; read: (p: string) => string },
): string[] {
  const out = new Set<string>();
  const seen = new Set<string>();
  const visit = (text: string, path: string, depth: number) => {
    for (const spec of specifiersOf(text, path).specs) {
      const file = resolveRelative(path, spec, fs.exists);
      if (!file || seen.has(file) || /\.(test|spec)\.[cm]?[jt]sx?$/.test(file)) continue;
      seen.add(file);
      const body = fs.read(file);
      if (depth < 4 && specifiersOf(body, file).barrel) visit(body, file, depth + 1);
      else out.add(file);
    }
  };
  visit(testText, testPath, 0);
  return [...out].sort();
}

/**
 * Judges tests tasks by what their tests detect: the mutants of the sources under test (the task's
 * `judge.mutate`, else what the original test file imports relatively) that a test file kills, run in
 * one batched, confined runner invocation (sandbox/mutation/).
 */
export interface StrengthJudge {
  /** The answer key from the original test file, or why the task cannot be judged by strength. */
  key(
    task: Task,
    workspaceDir: string,
    signal?: AbortSignal,
  ): Promise<{ key: StrengthKey } | { problem: string } | { infra: string }>;
  /** A candidate test file's strength, or an infrastructure error. */
  measure(
    task: Task,
    workspaceDir: string,
    candidate: string,
    key: StrengthKey,
    signal?: AbortSignal,
  ): Promise<Strength | { infra: string }>;
}

export function createStrengthJudge(judges: JudgeRunner): StrengthJudge {
  async function sourcesOf(
    task: Task,
    workspaceDir: string,
    original: string,
  ): Promise<{ path: string; text: string }[]> {
    const paths =
      task.judge.mutate ??
      relativeImports(original, task.target, {
        exists: (p) => existsIn(workspaceDir, p),
        read: (p) => ts.sys.readFile(insideBox(workspaceDir, p)) ?? '',
      });
    return Promise.all(
      paths.map(async (path) => ({ path, text: await readFile(insideBox(workspaceDir, path), 'utf8') })),
    );
  }

  async function run(
    task: Task,
    workspaceDir: string,
    sources: { path: string; text: string }[],
    testText: string,
    signal?: AbortSignal,
  ): Promise<MutationOutcome> {
    let plan: MutationPlan;
    let selected: string[];
    try {
      planRunner(task.judge.runner);
      const prepared = prepareMutationRun({
        runner: task.judge.runner,
        sources,
        testFile: { path: task.target, text: testText },
        max: MAX_MUTANTS,
        salt: randomBytes(16).toString('hex'),
        registry: 'auto',
        access: workspaceModules(workspaceDir),
      });
      plan = prepared.plan;
      selected = prepared.mutants.map((m) => m.id);
    } catch (err) {
      return { kind: 'void', problem: `no mutation run: ${(err as Error).message}` };
    }
    const result = await judges.run({
      task,
      workspaceDir,
      overlay: plan.overlay,
      testFiles: plan.testFiles,
      // vitest: the registry the plan needs, whatever the workspace's config says (a config with
      // `isolate: false` would share a stateful target's module between copies).
      extraArgs:
        plan.runner === 'vitest' ? [plan.registry === 'shared' ? '--isolate=false' : '--isolate'] : [],
      collect: [plan.coverageFile],
      timeScale: 1 + plan.testFiles.length / 4,
      ...(signal ? { signal } : {}),
    });
    return outcomeOf(plan, result, selected);
  }

  return {
    async key(task, workspaceDir, signal) {
      const original = await readFile(insideBox(workspaceDir, task.target), 'utf8');
      const sources = await sourcesOf(task, workspaceDir, original);
      if (sources.length === 0)
        return { problem: `${task.target} imports no source of the workspace to mutate` };
      const out = await run(task, workspaceDir, sources, original, signal);
      if (out.kind === 'infra') return { infra: out.error };
      if (out.kind === 'void') return { problem: out.problem };
      if (out.problems.length > 0)
        return { problem: `the original tests under mutation: ${out.problems.join('; ')}` };
      if (out.killed.size === 0)
        return {
          problem: `the original tests kill none of the ${out.selected.length} mutants of ${sources.map((s) => s.path).join(', ')}`,
        };
      return {
        key: {
          sources: sources.map((s) => s.path),
          selected: out.selected,
          killed: [...out.killed].sort(),
          covered: [...out.covered].sort(),
        },
      };
    },
    async measure(task, workspaceDir, candidate, key, signal) {
      const sources = await Promise.all(
        key.sources.map(async (path) => ({
          path,
          text: await readFile(insideBox(workspaceDir, path), 'utf8'),
        })),
      );
      const original = await readFile(insideBox(workspaceDir, task.target), 'utf8');
      const copied = copiedFunctions(
        { path: task.target, text: candidate },
        { path: task.target, text: original },
        sources,
      );
      if (copied.length > 0)
        // It can tell every mutant by comparing with its copy: no mutation run can judge it.
        return {
          killed: 0,
          of: key.killed.length,
          covered: 0,
          ofCovered: key.covered.length,
          problems: [
            `tamper: the test file carries a copy of the code under test (${copied
              .slice(0, 3)
              .map((f) => `${f.at} ${Math.round(f.share * 100)} %`)
              .join(', ')})`,
          ],
        };
      const out = await run(task, workspaceDir, sources, candidate, signal);
      if (out.kind === 'infra') return { infra: out.error };
      if (out.kind === 'void')
        return {
          killed: 0,
          of: key.killed.length,
          covered: 0,
          ofCovered: key.covered.length,
          problems: [out.problem],
        };
      const problems = [...out.problems];
      if (out.selected.join() !== key.selected.join())
        problems.push('the mutant selection differs from the answer key');
      return {
        // A mutant the candidate's tests stop by the hit limit is detected too (as mutation tools count timeouts).
        killed: key.killed.filter((id) => out.killed.has(id) || out.hung.has(id)).length,
        of: key.killed.length,
        covered: key.covered.filter((f) => out.covered.has(f)).length,
        ofCovered: key.covered.length,
        problems,
      };
    },
  };
}

function existsIn(workspaceDir: string, rel: string): boolean {
  try {
    return ts.sys.fileExists(insideBox(workspaceDir, rel));
  } catch {
    return false;
  }
}

/** Classifies a batched run: kills, coverage, and what makes it unbelievable or void. */
function outcomeOf(plan: MutationPlan, result: JudgeRun, selected: string[]): MutationOutcome {
  if (result.infra) return { kind: 'infra', error: result.infra };
  if (!result.verdict) return { kind: 'void', problem: result.failure ?? 'the mutation run gave no verdict' };
  const problems: string[] = [];
  for (const [file, reading] of result.sentinels) {
    // A mutant that breaks the file's loading (an error outside any case) kills it, and the sentinel
    // appended to that copy never runs: that is the kill, not a tamper. The reference's and the decoys'
    // copies must still report (a candidate cannot tell a decoy from a mutant).
    const id = plan.mutantOf.get(file);
    const mutantCopy = id !== null && id !== undefined && !plan.decoys.has(id);
    if (mutantCopy && !reading.ok) continue;
    problems.push(...sentinelProblems(file, reading, undefined));
  }
  const m = killMatrix(plan, result.verdict);
  if (m.missing.length > 0 || m.reference === 'missing' || m.unattributed.length > 0)
    return {
      kind: 'infra',
      error: `the mutation run did not run every copy (${m.missing.length} missing${m.unattributed.length ? `; ${m.unattributed[0]}` : ''})`,
    };
  if (m.reference !== 'passed')
    problems.push('the tests fail on the instrumented sources with no mutant active');
  if (m.decoysKilled.length > 0)
    problems.push('the tests fail when a switch that changes nothing is set (they read the harness)');
  let covered = new Set<string>();
  const text = result.collected.get(plan.coverageFile);
  if (text) {
    try {
      const cov = parseCoverage(text);
      covered = new Set(
        Object.entries(cov.cov).flatMap(([file, fns]) =>
          Object.entries(fns)
            .filter(([, n]) => n > 0)
            .map(([fn]) => `${file}#${fn}`),
        ),
      );
    } catch (err) {
      problems.push((err as Error).message);
    }
  } else problems.push('the reference copy wrote no coverage');
  return { kind: 'matrix', killed: new Set(m.killed), hung: new Set(m.hung), covered, problems, selected };
}
