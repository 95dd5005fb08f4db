import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import type { TestRunner } from '../../protocol/task.ts';

/** Folder of the harness modules (read-only inside the sandbox). */
export const HARNESS_DIR = dirname(fileURLToPath(import.meta.url));
/**
 * Content digest of everything that decides what the judged run checks and how `tests` candidates are
 * judged: the harness modules, the sentinel checks, the static tamper rules, the mutation operators,
 * selection and schemata, the strength judge (the mutant set follows from them and the workspace's
 * content), and the exported-API reading and comparison. Part of the evaluation fingerprint.
 */
export const INTEGRITY_DIGEST = (() => {
  const h = createHash('sha256');
  const code = (dir: string) =>
    readdirSync(dir)
      .filter((f) => /\.(?:[cm]?js|ts)$/.test(f))
      .sort()
      .map((f) => join(dir, f));
  const sandbox = join(HARNESS_DIR, '..');
  const files = [
    ...code(HARNESS_DIR),
    ...code(join(sandbox, 'mutation')),
    join(sandbox, 'tamper.ts'),
    join(sandbox, 'tamper-modules.ts'),
    join(sandbox, 'strength.ts'),
    // The exported-API comparison: what it refuses decides a reward as much as the rules above.
    join(sandbox, 'typecheck', 'api.ts'),
    join(sandbox, 'typecheck', 'service', 'exported-api.mjs'),
  ];
  for (const f of files) h.update(f.slice(sandbox.length)).update(readFileSync(f));
  return `sha256:${h.digest('hex')}`;
})();

/** Box-relative path of the entry module the judged test files import first (runners that need one). */
export const ENTRY_PATH = '.vtnode/integrity.mjs';

/** How the judged test files of one box load the harness. */
export interface HarnessSetup {
  /** The statement put before a judged file's first statement: it loads the harness before anything else. */
  prelude(esm: boolean, file: string): string;
  /** The statements appended to a judged file (`file`: its absolute path in the box): the sentinel test, last. */
  tail(esm: boolean, file: string): string;
  /** A module to write into the box (and protect) before the run, when the runner needs one. */
  entry: { path: string; text: string } | null;
}

const load = (esm: boolean, spec: string) => (esm ? `import ${spec}; ` : `require(${spec}); `);

function vitestSetup(box: string): HarnessSetup {
  const harness = join(HARNESS_DIR, 'vitest.mjs');
  const text = [
    '// Written by vtnode: the integrity harness of this judged run (see sandbox/integrity/).',
    "import * as vitest from 'vitest';",
    `import { installVitest } from ${JSON.stringify(harness)};`,
    `const harness = installVitest(vitest, { box: ${JSON.stringify(box)} });`,
    'export const sentinel = harness.sentinel;',
    '',
  ].join('\n');
  const spec = JSON.stringify(join(box, ENTRY_PATH));
  return {
    prelude: (esm) => load(esm, spec),
    // vitest files its tests by suite, so the harness may register the sentinel itself.
    tail: (esm) =>
      esm
        ? `\n;import { sentinel as __vtnodeSentinel } from ${spec};\n__vtnodeSentinel();\n`
        : `\n;require(${spec}).sentinel();\n`,
    entry: { path: ENTRY_PATH, text },
  };
}

function nodeTestSetup(): HarnessSetup {
  const spec = JSON.stringify(join(HARNESS_DIR, 'node-test.mjs'));
  return {
    prelude: (esm) => load(esm, spec),
    // node:test files a test where `test()` is called: the sentinel is declared in the test file itself.
    tail: (esm, file) =>
      esm
        ? `\n;import { test as __vtnodeTest } from 'node:test';\nimport { sentinelBody as __vtnodeSentinel } from ${spec};\n__vtnodeTest('vtnode:sentinel', () => __vtnodeSentinel(${JSON.stringify(file)}));\n`
        : `\n;require('node:test').test('vtnode:sentinel', () => require(${spec}).sentinelBody(${JSON.stringify(file)}));\n`,
    entry: null,
  };
}

function jestSetup(): HarnessSetup {
  const spec = JSON.stringify(join(HARNESS_DIR, 'jest.cjs'));
  return {
    // A side-effect import: TypeScript keeps it, ts-jest and babel-jest turn it into the first require.
    prelude: (esm) => load(esm, spec),
    // Appended code must be CommonJS-safe (a file babel-jest does not transform stays CommonJS).
    tail: (_esm, file) =>
      `\n;(globalThis.test ?? require('@jest/globals').test)('vtnode:sentinel', require(${spec}).sentinelBody(${JSON.stringify(file)}));\n`,
    entry: null,
  };
}

function mochaSetup(): HarnessSetup {
  const spec = JSON.stringify(join(HARNESS_DIR, 'mocha.cjs'));
  return {
    prelude: (esm, file) => (esm ? `import ${spec}; ` : `require(${spec}).prime(${JSON.stringify(file)}); `),
    // A suite of its own, last in the file: mocha runs it after the file's other suites.
    tail: (_esm, file) =>
      `\n;(globalThis.describe ?? globalThis.suite)('vtnode:sentinel', function () { (globalThis.it ?? globalThis.test)('vtnode:sentinel', require(${spec}).sentinelBody(${JSON.stringify(file)})); });\n`,
    entry: null,
  };
}

/**
 * The harness of a runner for a box. vitest's harness must use the workspace's own `vitest` module (the
 * instance the test file registers its tests with), so a small entry module in the box imports both;
 * the others reach their runner through builtins or globals, so the harness module is loaded directly.
 */
export function harnessSetup(runner: TestRunner, box: string): HarnessSetup {
  switch (runner) {
    case 'vitest':
      return vitestSetup(box);
    case 'node:test':
      return nodeTestSetup();
    case 'jest':
      return jestSetup();
    case 'mocha':
      return mochaSetup();
  }
}

function scriptKind(fileName: string): ts.ScriptKind {
  if (/\.[cm]?tsx?$/.test(fileName)) return fileName.endsWith('x') ? ts.ScriptKind.TSX : ts.ScriptKind.TS;
  return fileName.endsWith('x') ? ts.ScriptKind.JSX : ts.ScriptKind.JS;
}

function parse(text: string, fileName: string): ts.SourceFile {
  return ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, scriptKind(fileName));
}

/** True when the file is written as an ES module (import/export syntax or import.meta). */
export function usesEsmSyntax(text: string, fileName: string): boolean {
  if (/\.mjs$|\.mts$/.test(fileName)) return true;
  if (/\.cjs$|\.cts$/.test(fileName)) return false;
  const sf = parse(text, fileName);
  const esm = sf.statements.some(
    (s) =>
      ts.isImportDeclaration(s) ||
      ts.isExportDeclaration(s) ||
      ts.isExportAssignment(s) ||
      (ts.canHaveModifiers(s) && ts.getModifiers(s)?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)),
  );
  return esm || /\bimport\.meta\b/.test(text);
}

/** Offset where the prelude goes: after a shebang, leading comments (docblocks) and directives. */
export function preludeOffset(text: string, fileName: string): number {
  const sf = parse(text, fileName);
  let i = 0;
  while (i < sf.statements.length) {
    const s = sf.statements[i]!;
    if (!(ts.isExpressionStatement(s) && ts.isStringLiteral(s.expression))) break;
    i++;
  }
  if (i > 0) return sf.statements[i - 1]!.getEnd();
  const first = sf.statements[0];
  return first ? first.getStart(sf) : text.length;
}

/** True when the prelude lands right after a directive prologue (it then needs a leading `;`). */
function afterDirective(text: string, fileName: string): boolean {
  const first = parse(text, fileName).statements[0];
  return first !== undefined && ts.isExpressionStatement(first) && ts.isStringLiteral(first.expression);
}

/**
 * The judged test file as it runs in the box: the harness imported before anything else (on the line of
 * the first statement, so line numbers stay), and the sentinel registered after everything else.
 */
export function instrumentTestFile(
  text: string,
  fileName: string,
  setup: HarnessSetup,
  path = fileName,
): string {
  const esm = usesEsmSyntax(text, fileName);
  const at = preludeOffset(text, fileName);
  const lead = afterDirective(text, fileName) ? ';' : '';
  return `${text.slice(0, at)}${lead}${setup.prelude(esm, path)}${text.slice(at)}${setup.tail(esm, path)}`;
}
