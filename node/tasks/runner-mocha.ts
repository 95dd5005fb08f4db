import { matchesGlob, posix } from 'node:path';
import type { ProjectInfo } from './project.ts';
import {
  argsAfter,
  detectNamedRunner,
  importedNames,
  importsAny,
  type RunnerAdapter,
  readRootConfig,
  scriptsInvoking,
  type TestSelection,
} from './runner-common.ts';
import { type StaticConfig, stringList } from './static-config.ts';

/** The config files mocha looks for, in its own order. */
export const MOCHA_CONFIGS = [
  '.mocharc.cjs',
  '.mocharc.js',
  '.mocharc.mjs',
  '.mocharc.yaml',
  '.mocharc.yml',
  '.mocharc.jsonc',
  '.mocharc.json',
] as const;

/** mocha's flags that take a value, by every spelling. */
const VALUE_FLAGS = new Set([
  '-r',
  '--require',
  '--import',
  '-n',
  '--node-option',
  '--extension',
  '-u',
  '--ui',
  '--file',
  '--config',
  '--package',
  '-R',
  '--reporter',
  '-O',
  '--reporter-option',
  '--reporter-options',
  '-t',
  '--timeout',
  '--timeouts',
  '-s',
  '--slow',
  '-g',
  '--grep',
  '-f',
  '--fgrep',
  '--ignore',
  '--exclude',
  '--retries',
  '-j',
  '--jobs',
  '--spec',
  '--watch-files',
  '--watch-ignore',
  '--loader',
  '--experimental-loader',
]);

/** Flags that change how test files load; the judge passes only the workspace's config files. */
const LOADING_FLAGS: Record<string, string> = {
  '-r': 'require',
  '--require': 'require',
  '--import': 'node-option',
  '-n': 'node-option',
  '--node-option': 'node-option',
  '--loader': 'node-option',
  '--experimental-loader': 'node-option',
  '--extension': 'extension',
  '-u': 'ui',
  '--ui': 'ui',
  '--file': 'file',
  '--config': 'config',
  '--package': 'package',
};

/** What decides which files mocha loads, and how. */
export interface MochaSelectionConfig {
  /** Files, folders or globs (`spec` of the config, the scripts' positional arguments, or `test`). */
  spec: string[];
  /** Extensions of files taken from a folder spec. */
  extensions: string[];
  /** Folder specs are searched recursively. */
  recursive: boolean;
  /** Globs left out. */
  ignore: string[];
}

const clean = (p: string) => posix.normalize(p.replace(/^\.\//, '')).replace(/\/$/, '');
const hasMagic = (p: string) => /[*?[\]{}()!+@]/.test(p);

/** True for a workspace-relative path mocha would load as a spec file under `cfg`. */
export function mochaMatches(cfg: MochaSelectionConfig, rel: string): boolean {
  if (rel.split('/').some((seg) => seg.startsWith('.'))) return false;
  if (cfg.ignore.some((g) => matchesGlob(rel, clean(g)))) return false;
  return cfg.spec.some((raw) => {
    const spec = clean(raw);
    if (hasMagic(spec)) return matchesGlob(rel, spec);
    if (rel === spec) return true;
    // A folder: its files with a configured extension (and its subfolders' with --recursive).
    if (!rel.startsWith(`${spec === '.' ? '' : `${spec}/`}`)) return false;
    const rest = spec === '.' ? rel : rel.slice(spec.length + 1);
    if (!cfg.recursive && rest.includes('/')) return false;
    return cfg.extensions.some((e) => rel.endsWith(`.${e.replace(/^\./, '')}`));
  });
}

/** The workspace's mocha configuration: the first .mocharc.* (mocha's order), merged over package.json "mocha". */
function mochaConfig(project: ProjectInfo): { source: string; config: StaticConfig | null } {
  const rc = readRootConfig(project, MOCHA_CONFIGS);
  const field = (project.rootPackage as { mocha?: unknown } | null)?.mocha;
  const pkg = field && typeof field === 'object' ? (field as Record<string, unknown>) : {};
  if (!rc)
    return {
      source: field ? 'package.json "mocha"' : "mocha's defaults",
      config: { values: pkg, dynamic: new Set() },
    };
  if (!rc.config) return { source: rc.path, config: null };
  return {
    source: rc.path,
    config: { values: mergeLikeMocha(rc.config.values, pkg), dynamic: rc.config.dynamic },
  };
}

/** The rc file over package.json "mocha", list options concatenated (rc first), as mocha merges them. */
export function mergeLikeMocha(
  rc: Record<string, unknown>,
  pkg: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...pkg, ...rc };
  for (const key of Object.keys(rc)) {
    const [a, b] = [stringList(rc[key]), stringList(pkg[key])];
    if (a && b && (Array.isArray(rc[key]) || Array.isArray(pkg[key]))) out[key] = [...a, ...b];
  }
  return out;
}

/** Positional arguments (specs) and loading flags of every root script that runs mocha. */
function scriptArgs(project: ProjectInfo): {
  specs: string[];
  recursive: boolean;
  flags: { script: string; flag: string; value: string }[];
} {
  const specs: string[] = [];
  let recursive = false;
  const flags: { script: string; flag: string; value: string }[] = [];
  for (const [name, cmd] of scriptsInvoking(project, 'mocha')) {
    const args = argsAfter(cmd, 'mocha');
    for (let i = 0; i < args.length; i++) {
      const [flag, inline] = args[i]!.split(/=(.*)/s) as [string, string | undefined];
      if (!flag.startsWith('-')) specs.push(flag);
      else if (flag === '--recursive') recursive = true;
      else if (VALUE_FLAGS.has(flag)) {
        const value = inline ?? args[++i] ?? '';
        if (flag === '--spec') specs.push(value);
        else if (LOADING_FLAGS[flag]) flags.push({ script: name, flag, value });
      }
    }
  }
  return { specs, recursive, flags };
}

/** The first script flag the config does not already carry (the judge would load files without it). */
function scriptProblem(
  values: Record<string, unknown>,
  flags: { script: string; flag: string; value: string }[],
): string | null {
  for (const f of flags) {
    const option = LOADING_FLAGS[f.flag]!;
    const configured = stringList(values[option]) ?? [];
    const wanted =
      f.flag === '--import' || f.flag.endsWith('loader') ? `${f.flag.slice(2)}=${f.value}` : f.value;
    if (!configured.includes(wanted))
      return `script "${f.script}" passes ${f.flag} ${f.value} to mocha; vtnode runs mocha with the workspace's .mocharc.* / package.json "mocha" only: add ${option}: ${JSON.stringify(wanted)} there`;
  }
  return null;
}

/** Assertion libraries a mocha test file may use, by import specifier. */
const ASSERTION_MODULES = [
  'chai',
  'node:assert',
  'node:assert/strict',
  'assert',
  'assert/strict',
  'expect',
  'should',
  'power-assert',
  'unexpected',
  'sinon',
];

export const mochaRunner: RunnerAdapter = {
  name: 'mocha',
  apiModules: ['mocha'],
  detect: (project) => detectNamedRunner(project, 'mocha', '.mocharc'),
  testFiles(project): TestSelection {
    const { source, config } = mochaConfig(project);
    const { specs, recursive, flags } = scriptArgs(project);
    const values = config?.values ?? {};
    const dynamic =
      config === null || ['*', 'spec', 'extension', 'recursive', 'ignore'].some((k) => config.dynamic.has(k));
    const spec = [...(stringList(values['spec']) ?? []), ...specs];
    const cfg: MochaSelectionConfig = {
      spec: spec.length > 0 ? spec : ['test'],
      extensions: stringList(values['extension']) ?? ['js', 'cjs', 'mjs'],
      recursive: values['recursive'] === true || recursive,
      ignore: stringList(values['ignore']) ?? [],
    };
    // A file mocha loads but that declares no test (a helper in test/) is support, not a test file.
    const declaresTests = (text: string) =>
      /\b(describe|context|suite|it|specify|test)(\.(only|skip))?\s*\(/.test(text);
    return {
      isTestFile: (f) => mochaMatches(cfg, f.path) && declaresTests(f.text),
      source: dynamic ? `${source} (not static: only the scripts' specs and mocha's defaults used)` : source,
      unsupported: scriptProblem(values, flags),
    };
  },
  testStyle(original) {
    const tdd = /\bsuite\s*\(/.test(original.text) && !/\bdescribe\s*\(/.test(original.text);
    const api = importsAny(original, ['mocha'])
      ? `import ${importedNames(original, ['mocha']).join(', ') || 'describe, it'} from 'mocha' as the original does`
      : tdd
        ? 'suite, test, suiteSetup, setup and teardown are globals (TDD interface)'
        : 'describe, it, before, beforeEach, after and afterEach are globals';
    const libs = ASSERTION_MODULES.filter((m) => importsAny(original, [m])).map((m) => {
      const names = importedNames(original, [m]);
      return names.length > 0 ? `${m} (${names.join(', ')})` : m;
    });
    const assertions =
      libs.length > 0 ? `; assert with ${libs.join(', ')}, imported as the original does` : '';
    return `Tests run with mocha: ${api}${assertions}.`;
  },
};
