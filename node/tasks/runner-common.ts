import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestRunner } from '../../protocol/task.ts';
import type { ParsedFile } from './parse.ts';
import { declaredDependencies, type ProjectInfo } from './project.ts';
import { readStaticConfig, type StaticConfig } from './static-config.ts';

/** Which files a runner executes as tests in one project, with its configuration already read. */
export interface TestSelection {
  /** True for a file this runner executes as a test file. */
  isTestFile(file: ParsedFile): boolean;
  /** Where the selection comes from (`jest defaults`, `.mocharc.yml spec`, ...), for the summary. */
  source: string;
  /**
   * Why the project's tests cannot be judged as configured (a script passes loader flags the judge
   * would not pass), with what to do instead; null when nothing stands in the way.
   */
  unsupported: string | null;
}

/**
 * A test runner the miner can mine for. Adding one means adding an adapter to RUNNERS (and its name to
 * protocol's TestRunner and a judge in sandbox/judges, so the scorer knows how to run it).
 */
export interface RunnerAdapter {
  /** Name recorded in judge.runner. */
  readonly name: TestRunner;
  /** Why the project uses this runner (a dependency, a config file, a script), or null if it does not. */
  detect(project: ProjectInfo, testCandidates: ParsedFile[]): string | null;
  /** Which files are tests, from the runner's defaults and its statically readable configuration. */
  testFiles(project: ProjectInfo): TestSelection;
  /** Module specifiers of the runner's own API: a test file imports them, they are never sources. */
  readonly apiModules: readonly string[];
  /** How a test file like `original` is written for this runner (one house-rule line for `tests` prompts). */
  testStyle(original: ParsedFile): string;
}

/** The first script (root package, then members) whose command matches `re`, as evidence. */
export function scriptsMention(project: ProjectInfo, re: RegExp): string | null {
  const scripts = [project.rootPackage?.scripts ?? {}, ...project.packages.map((p) => p.json.scripts ?? {})];
  for (const s of scripts)
    for (const [name, cmd] of Object.entries(s)) if (re.test(cmd)) return `script "${name}": ${cmd}`;
  return null;
}

/** The root package's scripts that invoke `bin` (as a word), with their commands. */
export function scriptsInvoking(project: ProjectInfo, bin: string): [string, string][] {
  const re = new RegExp(`(^|[\\s;&|(])(npx\\s+)?${bin}(\\s|$)`);
  return Object.entries(project.rootPackage?.scripts ?? {}).filter(([, cmd]) => re.test(cmd));
}

/** Environment variables a judge may take from the repository's test script (they change verdicts, not access). */
export const JUDGE_ENV_KEYS =
  /^(?:TZ|LANG|LC_ALL|BABEL_ENV|NODE_ENV|TS_NODE_PROJECT|TS_NODE_TRANSPILE_ONLY)$/;

/**
 * The variables a test script sets before its runner (`TZ=America/New_York jest`, `cross-env BABEL_ENV=cjs
 * mocha`, `env TZ=UTC node --test`): only the allow-listed ones, the first command of the script only.
 */
export function scriptEnv(command: string): Record<string, string> {
  const tokens = command.match(/[A-Za-z_][A-Za-z0-9_]*=(?:'[^']*'|"[^"]*"|\S*)|\S+/g) ?? [];
  const env: Record<string, string> = {};
  for (const t of tokens) {
    if (t === 'cross-env' || t === 'env' || t === 'npx') continue;
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(t);
    if (!m) break;
    if (JUDGE_ENV_KEYS.test(m[1]!)) env[m[1]!] = m[2]!.replace(/^(['"])(.*)\1$/, '$2');
  }
  return env;
}

/**
 * The arguments after `bin` in a shell command, split on blanks with simple quotes removed, up to the
 * next `&&`, `||`, `;` or `|`. Good enough for `mocha -r ts-node/register 'test/**\/*.ts'`.
 */
export function argsAfter(command: string, bin: string): string[] {
  const tokens = command.match(/'[^']*'|"[^"]*"|[^\s]+/g) ?? [];
  const at = tokens.findIndex((t) => t === bin || t.endsWith(`/${bin}`));
  if (at === -1) return [];
  const out: string[] = [];
  for (const t of tokens.slice(at + 1)) {
    if (['&&', '||', ';', '|'].includes(t) || t.endsWith(';')) break;
    out.push(t.replace(/^(['"])(.*)\1$/, '$2'));
  }
  return out;
}

export function importsAny(file: ParsedFile, modules: readonly string[]): boolean {
  return file.imports.some((i) => modules.includes(i.specifier));
}

/** The names a file imports from any of `modules` (`expect`, `assert`, ...), in order, without repeats. */
export function importedNames(file: ParsedFile, modules: readonly string[]): string[] {
  return [
    ...new Set(file.imports.filter((i) => modules.includes(i.specifier)).flatMap((i) => i.names)),
  ].filter((n) => n !== '*' && n !== 'default');
}

/** The first of `names` that is a file at the project root, read statically; null when none is. */
export function readRootConfig(
  project: ProjectInfo,
  names: readonly string[],
): { path: string; config: StaticConfig | null } | null {
  for (const name of names) {
    if (!project.files.includes(name)) continue;
    let text: string;
    try {
      text = readFileSync(join(project.root, name), 'utf8');
    } catch {
      return { path: name, config: null };
    }
    return { path: name, config: readStaticConfig(name, text) };
  }
  return null;
}

/**
 * Why a runner named `bin` looks like the repository's (a dependency, a root config file starting with
 * `configPrefix`, a package.json field named `bin`, a script calling it), or null.
 */
export function detectNamedRunner(project: ProjectInfo, bin: string, configPrefix: string): string | null {
  if (declaredDependencies(project).has(bin)) return `${bin} is a dependency`;
  const cfg = project.rootConfigs.find((f) => f.startsWith(configPrefix));
  if (cfg) return `${cfg} exists`;
  if ((project.rootPackage as Record<string, unknown> | null)?.[bin] !== undefined)
    return `package.json has a "${bin}" field`;
  return scriptsMention(project, new RegExp(`(^|[\\s;&|(/])${bin}(\\s|$)`));
}
