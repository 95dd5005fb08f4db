import type { TestRunner } from '../../protocol/task.ts';
import type { ParsedFile } from './parse.ts';
import { declaredDependencies, type ProjectInfo } from './project.ts';

/**
 * A test runner the miner can mine for. Adding one (jest, mocha) means adding an adapter to RUNNERS
 * (and its name to protocol's TestRunner, so the scorer knows how to run it); nothing else changes.
 */
export interface RunnerAdapter {
  /** Name recorded in judge.runner. */
  readonly name: TestRunner;
  /** Why the project uses this runner (a dependency, a config file, a script), or null if it does not. */
  detect(project: ProjectInfo, testCandidates: ParsedFile[]): string | null;
  /** True for a file this runner executes as a test file. */
  isTestFile(file: ParsedFile): boolean;
  /** Module specifiers of the runner's own API: a test file imports them, they are never sources. */
  readonly apiModules: readonly string[];
  /** How a test file for this runner is written (one house-rule line for `tests` prompts). */
  readonly testStyle: string;
}

/** A runner the miner recognises but cannot mine for yet: detected only to give a clear error. */
export interface UnsupportedRunner {
  readonly name: string;
  detect(project: ProjectInfo): string | null;
}

const TEST_NAME = /\.(test|spec)\.[cm]?[jt]sx?$/;
/** vitest/tsd type tests: checked by the type-checker, never executed. */
export const TYPE_TEST_NAME = /\.(test|spec)-d\.[cm]?tsx?$/;
const NODE_TEST_NAME = /(^|\/)(test|test-[^/]*|[^/]*[._-]test)\.[cm]?[jt]s$/;
const IN_TEST_DIR = /(^|\/)(test|tests|__tests__)\//;

function scriptsMention(project: ProjectInfo, re: RegExp): string | null {
  const scripts = [project.rootPackage?.scripts ?? {}, ...project.packages.map((p) => p.json.scripts ?? {})];
  for (const s of scripts)
    for (const [name, cmd] of Object.entries(s)) if (re.test(cmd)) return `script "${name}": ${cmd}`;
  return null;
}

function importsAny(file: ParsedFile, modules: readonly string[]): boolean {
  return file.imports.some((i) => modules.includes(i.specifier));
}

export const vitestRunner: RunnerAdapter = {
  name: 'vitest',
  apiModules: ['vitest', 'vitest/globals'],
  testStyle: "Tests run with vitest: import what you use from 'vitest' (describe, it, expect, vi, ...).",
  detect(project) {
    if (declaredDependencies(project).has('vitest')) return 'vitest is a dependency';
    const cfg = project.rootConfigs.find((f) => /^vitest\.(config|workspace)\./.test(f));
    if (cfg) return `${cfg} exists`;
    return scriptsMention(project, /\bvitest\b/);
  },
  isTestFile(file) {
    return TEST_NAME.test(file.path);
  },
};

export const nodeTestRunner: RunnerAdapter = {
  name: 'node:test',
  apiModules: ['node:test', 'test'],
  testStyle:
    "Tests run with Node's built-in runner: import { describe, it } from 'node:test' and assert from 'node:assert/strict'.",
  detect(project, candidates) {
    const script = scriptsMention(project, /\bnode\b[^|&;]*\s--test\b/);
    if (script) return script;
    const user = candidates.find((f) => importsAny(f, ['node:test']));
    return user ? `${user.path} imports node:test` : null;
  },
  isTestFile(file) {
    if (!importsAny(file, ['node:test', 'test'])) return false;
    return TEST_NAME.test(file.path) || NODE_TEST_NAME.test(file.path) || IN_TEST_DIR.test(file.path);
  },
};

/** Runners the miner mines for, in order of preference when a project shows several. */
export const RUNNERS: readonly RunnerAdapter[] = [vitestRunner, nodeTestRunner];

/** Runners recognised only to say they are not supported yet. */
export const UNSUPPORTED: readonly UnsupportedRunner[] = [
  {
    name: 'jest',
    detect: (p) =>
      declaredDependencies(p).has('jest')
        ? 'jest is a dependency'
        : (p.rootConfigs.find((f) => f.startsWith('jest.config')) ?? scriptsMention(p, /\bjest\b/)),
  },
  {
    name: 'mocha',
    detect: (p) =>
      declaredDependencies(p).has('mocha')
        ? 'mocha is a dependency'
        : (p.rootConfigs.find((f) => f.startsWith('.mocharc')) ?? scriptsMention(p, /\bmocha\b/)),
  },
];

/** True for a file whose name marks it as a test of some runner (used before the runner is known). */
export function looksLikeTest(path: string): boolean {
  return TEST_NAME.test(path) || TYPE_TEST_NAME.test(path) || NODE_TEST_NAME.test(path);
}

/** True for a test-support file: lives in a test folder but is not itself a test. */
export function inTestDir(path: string): boolean {
  return IN_TEST_DIR.test(path) || /(^|\/)__mocks__\//.test(path);
}

/** The runner to mine for, with the evidence; or an error naming what was found instead. */
export function detectRunner(
  project: ProjectInfo,
  candidates: ParsedFile[],
): { runner: RunnerAdapter; evidence: string } | { error: string } {
  const found = RUNNERS.map((r) => ({ runner: r, evidence: r.detect(project, candidates) })).filter(
    (f): f is { runner: RunnerAdapter; evidence: string } => f.evidence !== null,
  );
  // The runner named by the `test` script wins when several are present.
  const testScript = project.rootPackage?.scripts?.['test'] ?? '';
  const byScript = found.find((f) =>
    f.runner.name === 'node:test' ? /\s--test\b/.test(testScript) : testScript.includes(f.runner.name),
  );
  const pick = byScript ?? found[0];
  if (pick) return pick;
  const other = UNSUPPORTED.map((u) => ({ name: u.name, evidence: u.detect(project) })).find(
    (u) => u.evidence,
  );
  if (other)
    return {
      error: `test runner ${other.name} (${other.evidence}) is not supported yet; supported: ${RUNNERS.map((r) => r.name).join(', ')}`,
    };
  return {
    error: `no test runner found: expected vitest (a dependency or vitest.config.*) or node:test (a "node --test" script, or test files importing node:test)`,
  };
}
