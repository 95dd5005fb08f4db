import type { ParsedFile } from './parse.ts';
import { declaredDependencies, type ProjectInfo } from './project.ts';
import {
  importedNames,
  importsAny,
  type RunnerAdapter,
  scriptsMention,
  type TestSelection,
} from './runner-common.ts';
import { jestRunner } from './runner-jest.ts';
import { mochaRunner } from './runner-mocha.ts';

export type { RunnerAdapter, TestSelection } from './runner-common.ts';

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

/** A selection that needs no configuration: `isTestFile` decides alone. */
function fixedSelection(source: string, isTestFile: (f: ParsedFile) => boolean): TestSelection {
  return { isTestFile, source, unsupported: null };
}

export const vitestRunner: RunnerAdapter = {
  name: 'vitest',
  apiModules: ['vitest', 'vitest/globals'],
  testStyle(original) {
    if (!importsAny(original, ['vitest']))
      return 'Tests run with vitest with globals enabled: describe, it, expect, vi and the hooks are globals, as in the original.';
    const names = importedNames(original, ['vitest']);
    return `Tests run with vitest: import what you use from 'vitest'${names.length > 0 ? ` (the original imports ${names.join(', ')})` : ' (describe, it, expect, vi, ...)'}.`;
  },
  detect(project) {
    if (declaredDependencies(project).has('vitest')) return 'vitest is a dependency';
    const cfg = project.rootConfigs.find((f) => /^vitest\.(config|workspace)\./.test(f));
    if (cfg) return `${cfg} exists`;
    return scriptsMention(project, /\bvitest\b/);
  },
  testFiles: () => fixedSelection('*.test.* / *.spec.* files', (file) => TEST_NAME.test(file.path)),
};

export const nodeTestRunner: RunnerAdapter = {
  name: 'node:test',
  apiModules: ['node:test', 'test'],
  testStyle: () =>
    "Tests run with Node's built-in runner: import { describe, it } from 'node:test' and assert from 'node:assert/strict'.",
  detect(project, candidates) {
    const script = scriptsMention(project, /\bnode\b[^|&;]*\s--test\b/);
    if (script) return script;
    const user = candidates.find((f) => importsAny(f, ['node:test']));
    return user ? `${user.path} imports node:test` : null;
  },
  testFiles: () =>
    fixedSelection('files importing node:test', (file) => {
      if (!importsAny(file, ['node:test', 'test'])) return false;
      return TEST_NAME.test(file.path) || NODE_TEST_NAME.test(file.path) || IN_TEST_DIR.test(file.path);
    }),
};

/** Runners the miner mines for, in order of preference when a project shows several. */
export const RUNNERS: readonly RunnerAdapter[] = [vitestRunner, jestRunner, mochaRunner, nodeTestRunner];

/** Runners recognised only to say they are not supported yet. */
export const UNSUPPORTED: readonly UnsupportedRunner[] = [
  {
    name: 'ava',
    detect: (p) =>
      declaredDependencies(p).has('ava')
        ? 'ava is a dependency'
        : (p.files.find((f) => /^ava\.config\.[cm]?js$/.test(f)) ??
          scriptsMention(p, /(^|[\s;&|(/])ava(\s|$)/)),
  },
  {
    name: 'jasmine',
    detect: (p) =>
      declaredDependencies(p).has('jasmine')
        ? 'jasmine is a dependency'
        : (p.files.find((f) => f === 'spec/support/jasmine.json') ??
          scriptsMention(p, /(^|[\s;&|(/])jasmine(\s|$)/)),
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
    error: `no test runner found: expected vitest (a dependency or vitest.config.*), jest (a dependency, jest.config.* or package.json "jest"), mocha (a dependency, .mocharc.* or package.json "mocha") or node:test (a "node --test" script, or test files importing node:test)`,
  };
}
