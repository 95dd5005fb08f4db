import { readFileSync } from 'node:fs';
import { join, matchesGlob, posix } from 'node:path';
import { atLeast, MIN_JEST } from '../../sandbox/judges/jest.ts';
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
import type { StaticConfig } from './static-config.ts';
import { stringList } from './static-config.ts';

/** The config files jest looks for at its root, in its own order. */
export const JEST_CONFIGS = [
  'jest.config.js',
  'jest.config.ts',
  'jest.config.mjs',
  'jest.config.cjs',
  'jest.config.mts',
  'jest.config.cts',
  'jest.config.json',
] as const;

/** jest's default `testMatch` (jest 30). */
export const JEST_DEFAULT_TEST_MATCH = [
  '**/__tests__/**/*.?([mc])[jt]s?(x)',
  '**/?(*.)+(spec|test).?([mc])[jt]s?(x)',
] as const;

const JEST_DEFAULT_EXTENSIONS = ['js', 'mjs', 'cjs', 'jsx', 'ts', 'mts', 'cts', 'tsx', 'json', 'node'];

/** Config keys that decide which files are tests. */
const SELECTION_KEYS = [
  'testMatch',
  'testRegex',
  'testPathIgnorePatterns',
  'roots',
  'rootDir',
  'moduleFileExtensions',
];

/** Script flags that change the configuration or the transforms: the judge runs jest without them. */
const LOADING_FLAGS = [
  '--config',
  '-c',
  '--rootDir',
  '--roots',
  '--projects',
  '--selectProjects',
  '--preset',
  '--transform',
  '--setupFiles',
  '--setupFilesAfterEnv',
  '--testEnvironment',
  '--env',
  '--testMatch',
  '--testRegex',
];

/** What decides which files jest runs, from its statically readable configuration. */
export interface JestSelectionConfig {
  /** Glob patterns (`testMatch`), `!`-prefixed ones excluding; null when `testRegex` is used instead. */
  testMatch: string[] | null;
  /** Regular expressions (`testRegex`) matched against the path. */
  testRegex: string[] | null;
  /** `testPathIgnorePatterns` (regular expressions). */
  ignore: string[];
  /** `roots`, with `<rootDir>` resolved: workspace-relative folders ('' for the root). */
  roots: string[];
  /** `moduleFileExtensions`. */
  extensions: string[];
}

/** jest's defaults, for a project without a readable configuration. */
export const JEST_DEFAULTS: JestSelectionConfig = {
  testMatch: [...JEST_DEFAULT_TEST_MATCH],
  testRegex: null,
  ignore: ['/node_modules/'],
  roots: [''],
  extensions: JEST_DEFAULT_EXTENSIONS,
};

/**
 * The selection a static config describes. `<rootDir>` is the config's folder (the workspace root) or
 * its `rootDir`. Paths are matched workspace-relative, and regular expressions against `/` + that path
 * (jest matches absolute paths; `/__tests__/` or `(/|\.)test\.` patterns work the same).
 */
export function jestSelectionConfig(values: Record<string, unknown>): JestSelectionConfig {
  const rootDir = posix.normalize(typeof values['rootDir'] === 'string' ? values['rootDir'] : '.');
  const base = rootDir === '.' ? '' : rootDir.replace(/\/$/, '');
  const withRoot = (p: string, glue: string) => p.replaceAll('<rootDir>/', base === '' ? glue : `${base}/`);
  const testRegex = stringList(values['testRegex']);
  const testMatch = stringList(values['testMatch']);
  const roots = stringList(values['roots']);
  return {
    testMatch: testRegex ? null : (testMatch ?? [...JEST_DEFAULT_TEST_MATCH]).map((g) => withRoot(g, '')),
    testRegex,
    ignore: (stringList(values['testPathIgnorePatterns']) ?? ['/node_modules/']).map((r) => withRoot(r, '/')),
    roots: roots
      ? roots.map((r) => posix.normalize(withRoot(r, '')).replace(/^\.$/, '').replace(/\/$/, ''))
      : [base],
    extensions: stringList(values['moduleFileExtensions']) ?? JEST_DEFAULT_EXTENSIONS,
  };
}

function safeRegExp(source: string): RegExp | null {
  try {
    return new RegExp(source);
  } catch {
    return null;
  }
}

/** True for a workspace-relative path jest would run as a test under `cfg`. */
export function jestMatches(cfg: JestSelectionConfig, rel: string): boolean {
  const abs = `/${rel}`;
  if (!cfg.roots.some((r) => r === '' || rel.startsWith(`${r}/`))) return false;
  if (!cfg.extensions.includes(posix.extname(rel).slice(1))) return false;
  if (cfg.ignore.some((r) => safeRegExp(r)?.test(abs))) return false;
  if (cfg.testRegex) return cfg.testRegex.some((r) => safeRegExp(r)?.test(abs));
  const globs = cfg.testMatch ?? [];
  const negative = globs.filter((g) => g.startsWith('!')).map((g) => g.slice(1));
  const positive = globs.filter((g) => !g.startsWith('!'));
  return positive.some((g) => matchesGlob(rel, g)) && !negative.some((g) => matchesGlob(rel, g));
}

/** jest's configuration: the first jest.config.* at the root, else package.json "jest", else none. */
function jestConfig(project: ProjectInfo): { source: string; config: StaticConfig | null } {
  const file = readRootConfig(project, JEST_CONFIGS);
  if (file) return { source: file.path, config: file.config };
  const field = (project.rootPackage as { jest?: unknown } | null)?.jest;
  if (field && typeof field === 'object')
    return {
      source: 'package.json "jest"',
      config: { values: field as Record<string, unknown>, dynamic: new Set() },
    };
  return { source: "jest's defaults", config: { values: {}, dynamic: new Set() } };
}

/** Why the selection cannot be read from `config` (computed keys, projects), empty when it can. */
function jestBlockers(source: string, config: StaticConfig | null): string[] {
  if (config === null) return [`${source} does not export a literal object`];
  const out = ['*', ...SELECTION_KEYS].filter((k) => config.dynamic.has(k)).map((k) => `${k} is computed`);
  if ('projects' in config.values || config.dynamic.has('projects')) out.push('it has projects');
  return out;
}

/** The installed jest is too old for the judge (it cannot keep tests out of band): what to do instead. */
function versionProblem(project: ProjectInfo): string | null {
  let version: string;
  try {
    version =
      (
        JSON.parse(readFileSync(join(project.root, 'node_modules', 'jest', 'package.json'), 'utf8')) as {
          version?: string;
        }
      ).version ?? '';
  } catch {
    return null; // not installed yet: the scorer says so when it runs
  }
  return atLeast(version, MIN_JEST)
    ? null
    : `jest ${version} is installed; the judge needs jest ≥ ${MIN_JEST.join('.')} (to run the tests out of the process that writes the report): upgrade jest`;
}

function scriptProblem(project: ProjectInfo): string | null {
  for (const [name, cmd] of scriptsInvoking(project, 'jest')) {
    const flag = argsAfter(cmd, 'jest').find((a) => LOADING_FLAGS.includes(a.split('=')[0]!));
    if (flag)
      return `script "${name}" passes ${flag.split('=')[0]} to jest; vtnode runs jest with the configuration jest finds by itself (jest.config.* or package.json "jest"): move that setting there`;
  }
  return null;
}

export const jestRunner: RunnerAdapter = {
  name: 'jest',
  apiModules: ['@jest/globals'],
  detect: (project) => detectNamedRunner(project, 'jest', 'jest.config.'),
  testFiles(project): TestSelection {
    const { source, config } = jestConfig(project);
    const blockers = jestBlockers(source, config);
    const cfg = config && blockers.length === 0 ? jestSelectionConfig(config.values) : JEST_DEFAULTS;
    const note =
      blockers.length === 0 ? source : `${source} (${blockers.join(', ')}: jest's default testMatch assumed)`;
    const unsupported = versionProblem(project) ?? scriptProblem(project);
    return { isTestFile: (f) => jestMatches(cfg, f.path), source: note, unsupported };
  },
  testStyle(original) {
    if (importsAny(original, ['@jest/globals'])) {
      const names = importedNames(original, ['@jest/globals']);
      return `Tests run with jest: import what you use from '@jest/globals' as the original does${names.length > 0 ? ` (it imports ${names.join(', ')})` : ''}.`;
    }
    return 'Tests run with jest: describe, it/test, expect, jest and the hooks (beforeEach, afterAll, ...) are globals; do not import them.';
  },
};
