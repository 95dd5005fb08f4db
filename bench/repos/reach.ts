/**
 * Which source files the tests of a package reach, computed WITHOUT the miner: its own file
 * classification, its own import extraction and TypeScript's module resolution (`ts.resolveModuleName`
 * with each file's nearest tsconfig), so that the bench can judge the miner's graph instead of
 * repeating it. A test reaches every workspace file it executes: the closure of its runtime imports
 * (static, `export … from`, `require()`, `import()`), through helpers, barrels and other sources.
 * Files with no code of their own (barrels, type declarations) are passed through but never counted.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, join, posix, relative, sep } from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { getOrInsert } from '../../node/tasks/multimap.ts';

const run = promisify(execFile);

const CODE = /\.(?:[cm]?[jt]s|[jt]sx)$/;
const DECLARATION = /\.d\.[cm]?ts$/;
const TEST_NAME = /\.(?:test|spec)\.[cm]?[jt]sx?$/;
const TYPE_TEST_NAME = /\.(?:test|spec)-d\.[cm]?tsx?$/;
const TEST_DIR = /(?:^|\/)(?:test|tests|__tests__|spec)\//;
const NEVER = /(?:^|\/)(?:node_modules|fixtures|__fixtures__|__snapshots__)\//;
/** A call of a test API at any depth: `it(`, `test.each(...)(`, `describe.skip(`. */
const TEST_CALL = /\b(?:it|test|describe|suite)\s*(?:\.\s*\w+\s*)*\(/;

/** What a file is to the bench. */
export type FileRole = 'test' | 'support' | 'source' | 'other';

/** Runner-agnostic role of a file from its path and text (a test file in a test folder declares cases). */
export function roleOf(path: string, text: string): FileRole {
  if (!CODE.test(path) || DECLARATION.test(path) || NEVER.test(path) || TYPE_TEST_NAME.test(path))
    return 'other';
  if (TEST_NAME.test(path)) return 'test';
  if (TEST_DIR.test(path) || /(?:^|\/)__mocks__\//.test(path))
    return TEST_CALL.test(text) ? 'test' : 'support';
  return 'source';
}

/** A module specifier a file imports at run time (type-only imports are left out). */
export function runtimeSpecifiers(path: string, text: string): string[] {
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, false, scriptKind(path));
  const out: string[] = [];
  const literal = (n: ts.Node | undefined) => {
    if (n && ts.isStringLiteralLike(n)) out.push(n.text);
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) {
      if (!node.importClause?.isTypeOnly) literal(node.moduleSpecifier);
    } else if (ts.isExportDeclaration(node)) {
      if (!node.isTypeOnly) literal(node.moduleSpecifier);
    } else if (ts.isImportEqualsDeclaration(node)) {
      if (!node.isTypeOnly && ts.isExternalModuleReference(node.moduleReference))
        literal(node.moduleReference.expression);
    } else if (ts.isCallExpression(node) && node.arguments.length >= 1) {
      const callee = node.expression;
      const isRequire = ts.isIdentifier(callee) && callee.text === 'require';
      if (isRequire || callee.kind === ts.SyntaxKind.ImportKeyword) literal(node.arguments[0]);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

/**
 * True for a file with no code of its own to run: it only imports and re-exports (a barrel), declares
 * types (interfaces, type aliases, `declare`), or is empty. Such a file is not a source to write.
 */
export function hasNoRuntimeCode(path: string, text: string): boolean {
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, false, scriptKind(path));
  const declared = (s: ts.Statement) =>
    ts.canHaveModifiers(s) && (ts.getModifiers(s) ?? []).some((m) => m.kind === ts.SyntaxKind.DeclareKeyword);
  return sf.statements.every(
    (s) =>
      ts.isExportDeclaration(s) ||
      ts.isImportDeclaration(s) ||
      ts.isInterfaceDeclaration(s) ||
      ts.isTypeAliasDeclaration(s) ||
      declared(s),
  );
}

function scriptKind(path: string): ts.ScriptKind {
  if (path.endsWith('.tsx')) return ts.ScriptKind.TSX;
  if (path.endsWith('.jsx')) return ts.ScriptKind.JSX;
  return /\.[cm]?ts$/.test(path) ? ts.ScriptKind.TS : ts.ScriptKind.JS;
}

/** The runtime file behind a declaration file TypeScript resolved to (`x.d.ts` → `x.js`/`x.cjs`), if on disk. */
function runtimeFileOf(resolved: string): string | null {
  const m = /\.d\.([cm]?)ts$/.exec(resolved);
  if (!m) return resolved;
  const stem = resolved.slice(0, -m[0].length);
  const tries = m[1] ? [`${stem}.${m[1]}js`] : [`${stem}.js`, `${stem}.cjs`, `${stem}.mjs`];
  return tries.find((f) => existsSync(f)) ?? null;
}

/**
 * A resolver from (importing file, specifier) to an absolute path, with the compiler options of the
 * importing file's nearest tsconfig (at or below `root`), forced to bundler resolution with JS allowed:
 * tsconfig `paths`, package `exports`/`imports`, self-references and `.js` → `.ts` all apply.
 */
export function createTsResolver(root: string): (fromAbs: string, specifier: string) => string | null {
  const configs = new Map<string, { options: ts.CompilerOptions; cache: ts.ModuleResolutionCache }>();
  const configDir = new Map<string, string | null>();

  const nearestConfig = (dir: string): string | null => {
    const cached = configDir.get(dir);
    if (cached !== undefined) return cached;
    const here = join(dir, 'tsconfig.json');
    const parent = dirname(dir);
    const found = existsSync(here)
      ? here
      : dir === root || parent === dir || !dir.startsWith(root)
        ? null
        : nearestConfig(parent);
    configDir.set(dir, found);
    return found;
  };

  const optionsFor = (config: string | null) => {
    const key = config ?? '';
    let entry = configs.get(key);
    if (!entry) {
      const host = { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} };
      const parsed = config ? ts.getParsedCommandLineOfConfigFile(config, {}, host) : undefined;
      const options: ts.CompilerOptions = {
        ...(parsed?.options ?? {}),
        allowJs: true,
        resolveJsonModule: true,
        allowImportingTsExtensions: true,
        noEmit: true,
        module: ts.ModuleKind.ESNext,
        moduleResolution: ts.ModuleResolutionKind.Bundler,
      };
      entry = {
        options,
        cache: ts.createModuleResolutionCache(dirname(config ?? join(root, 'x')), (f) => f, options),
      };
      configs.set(key, entry);
    }
    return entry;
  };

  return (fromAbs, specifier) => {
    if (specifier.startsWith('node:')) return null;
    const { options, cache } = optionsFor(nearestConfig(dirname(fromAbs)));
    const hit = ts.resolveModuleName(specifier, fromAbs, options, ts.sys, cache).resolvedModule;
    return hit ? runtimeFileOf(hit.resolvedFileName) : null;
  };
}

/** What the tests of one package reach. */
export interface Reach {
  /** Code files considered (tracked or untracked-not-ignored, outside node_modules and fixtures). */
  codeFiles: number;
  tests: string[];
  /** Non-test code files without code of their own (barrels, type declarations, empty): not counted as sources. */
  withoutCode: string[];
  /** Source → the test files that reach it (files without code left out). */
  testsOf: Map<string, Set<string>>;
  /** Test → the sources it reaches (files without code left out). */
  sourcesOf: Map<string, Set<string>>;
  /** Number of (source, test) pairs where the test reaches the source. */
  pairs: number;
}

/** Files of the package at `root` as git lists them (tracked plus untracked-not-ignored), POSIX, sorted. */
export async function listFiles(root: string, signal?: AbortSignal): Promise<string[]> {
  const { stdout } = await run(
    'git',
    ['-C', root, 'ls-files', '-z', '--cached', '--others', '--exclude-standard'],
    {
      maxBuffer: 512 * 1024 * 1024,
      ...(signal ? { signal } : {}),
    },
  );
  return [...new Set(stdout.split('\0').filter(Boolean))].sort();
}

/** Computes which sources the tests under `root` reach. */
export async function computeReach(root: string, signal?: AbortSignal): Promise<Reach> {
  const files = (await listFiles(root, signal)).filter((f) => CODE.test(f) && !NEVER.test(f));
  const texts = new Map<string, string>();
  for (const f of files) {
    signal?.throwIfAborted();
    texts.set(f, await readFile(join(root, f), 'utf8'));
  }
  const role = new Map(files.map((f) => [f, roleOf(f, texts.get(f)!)]));
  const listed = new Set(files);
  const resolve = createTsResolver(root);
  const toRel = (abs: string) => relative(root, abs).split(sep).join('/');

  const edges = new Map<string, string[]>();
  const edgesOf = (file: string): string[] => {
    let out = edges.get(file);
    if (!out) {
      const fromAbs = join(root, file);
      out = [];
      for (const spec of runtimeSpecifiers(file, texts.get(file)!)) {
        const abs = resolve(fromAbs, spec);
        if (!abs) continue;
        const rel = toRel(abs);
        if (!rel.startsWith('..') && !posix.isAbsolute(rel) && listed.has(rel) && rel !== file) out.push(rel);
      }
      edges.set(file, out);
    }
    return out;
  };

  const tests = files.filter((f) => role.get(f) === 'test');
  const withoutCode = files.filter((f) => role.get(f) === 'source' && hasNoRuntimeCode(f, texts.get(f)!));
  const skip = new Set(withoutCode);
  const testsOf = new Map<string, Set<string>>();
  const sourcesOf = new Map<string, Set<string>>();
  let pairs = 0;
  for (const test of tests) {
    signal?.throwIfAborted();
    const seen = new Set([test]);
    const queue = [test];
    for (let f = queue.shift(); f !== undefined; f = queue.shift())
      for (const next of edgesOf(f))
        if (!seen.has(next)) {
          seen.add(next);
          queue.push(next);
        }
    const reached = new Set([...seen].filter((f) => role.get(f) === 'source' && !skip.has(f)));
    sourcesOf.set(test, reached);
    pairs += reached.size;
    for (const s of reached) getOrInsert(testsOf, s, () => new Set<string>()).add(test);
  }
  return { codeFiles: files.length, tests, withoutCode, testsOf, sourcesOf, pairs };
}
