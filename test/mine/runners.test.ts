import { afterAll, describe, expect, it } from 'vitest';
import { MineError, mine } from '../../node/tasks/mine.ts';
import { argsAfter, scriptEnv } from '../../node/tasks/runner-common.ts';
import { JEST_DEFAULTS, jestMatches, jestSelectionConfig } from '../../node/tasks/runner-jest.ts';
import { type MochaSelectionConfig, mergeLikeMocha, mochaMatches } from '../../node/tasks/runner-mocha.ts';
import { readStaticConfig, simpleYaml } from '../../node/tasks/static-config.ts';
import { cleanupTemp, makeRepo } from './helpers.ts';

afterAll(cleanupTemp);

describe('static config reading (nothing of the workspace runs)', () => {
  it('reads literal exports of CommonJS, ESM and TypeScript configs, and flags computed keys', () => {
    expect(
      readStaticConfig(
        'jest.config.js',
        "module.exports = { testMatch: ['**/*.spec.js'], testRegex: /x\\.js$/ };",
      ),
    ).toEqual({ values: { testMatch: ['**/*.spec.js'], testRegex: 'x\\.js$' }, dynamic: new Set() });
    expect(
      readStaticConfig(
        'jest.config.ts',
        "import type { Config } from 'jest';\nconst config: Config = { roots: ['<rootDir>/src'], preset: 'ts-jest' } satisfies Config;\nexport default config;\n",
      ),
    ).toEqual({ values: { roots: ['<rootDir>/src'], preset: 'ts-jest' }, dynamic: new Set() });
    expect(
      readStaticConfig('.mocharc.cjs', 'module.exports = defineConfig({ spec: ["a"] });')?.values,
    ).toEqual({
      spec: ['a'],
    });
    const dynamic = readStaticConfig(
      'jest.config.js',
      'const base = require("./base");\nmodule.exports = { ...base, testMatch: base.tests, bail: 1 };',
    );
    expect(dynamic?.values).toEqual({ bail: 1 });
    expect([...(dynamic?.dynamic ?? [])].sort()).toEqual(['*', 'testMatch']);
    expect(readStaticConfig('jest.config.js', 'module.exports = makeConfig();')).toBeNull();
    expect(readStaticConfig('.mocharc.jsonc', '{ // spec\n "spec": "test/**/*.ts" }')?.values).toEqual({
      spec: 'test/**/*.ts',
    });
  });

  it('reads the YAML subset of .mocharc.yml files and refuses the rest', () => {
    expect(
      simpleYaml(
        "# c\nspec:\n  - 'test/**/*.spec.ts'\n  - test/x.js\nrequire: [ts-node/register, tsx]\nrecursive: true\ntimeout: 5000\n",
      ),
    ).toEqual({
      spec: ['test/**/*.spec.ts', 'test/x.js'],
      require: ['ts-node/register', 'tsx'],
      recursive: true,
      timeout: 5000,
    });
    expect(simpleYaml('spec:\n  nested:\n    key: 1\n')).toBeNull();
  });

  it('splits the arguments of a runner inside a script', () => {
    expect(
      argsAfter("tsc && mocha -r ts-node/register 'test/**/*.spec.ts' --exit && echo ok", 'mocha'),
    ).toEqual(['-r', 'ts-node/register', 'test/**/*.spec.ts', '--exit']);
    expect(argsAfter('npx jest --config=jest.unit.js', 'jest')).toEqual(['--config=jest.unit.js']);
  });
});

describe('which files jest runs', () => {
  it("uses jest's default testMatch and ignores node_modules", () => {
    const yes = ['src/a.test.ts', 'a.spec.mjs', 'src/__tests__/helper.js', 'test.ts', 'lib/x.test.cjs'];
    const no = ['src/a.ts', 'node_modules/p/a.test.js', 'src/a.test.md', 'src/a.test-d.ts'];
    for (const f of yes) expect(jestMatches(JEST_DEFAULTS, f), f).toBe(true);
    for (const f of no) expect(jestMatches(JEST_DEFAULTS, f), f).toBe(false);
  });

  it('honours testMatch with <rootDir> and negations, testRegex, roots, ignores and extensions', () => {
    const byMatch = jestSelectionConfig({ testMatch: ['<rootDir>/test/**/*.ts', '!**/fixtures/**'] });
    expect(jestMatches(byMatch, 'test/a.ts')).toBe(true);
    expect(jestMatches(byMatch, 'test/fixtures/a.ts')).toBe(false);
    expect(jestMatches(byMatch, 'src/a.test.ts')).toBe(false);
    const byRegex = jestSelectionConfig({ testRegex: '(/__tests__/.*|(\\.|/)(test|spec))\\.[jt]sx?$' });
    expect(jestMatches(byRegex, '__tests__/a.ts')).toBe(true);
    expect(jestMatches(byRegex, 'src/a.spec.tsx')).toBe(true);
    expect(jestMatches(byRegex, 'src/spec.ts')).toBe(true);
    expect(jestMatches(byRegex, 'src/aspec.ts')).toBe(false);
    const rooted = jestSelectionConfig({
      roots: ['<rootDir>/src'],
      testPathIgnorePatterns: ['<rootDir>/src/legacy/'],
      moduleFileExtensions: ['ts'],
    });
    expect(jestMatches(rooted, 'src/a.test.ts')).toBe(true);
    expect(jestMatches(rooted, 'test/a.test.ts')).toBe(false);
    expect(jestMatches(rooted, 'src/legacy/a.test.ts')).toBe(false);
    expect(jestMatches(rooted, 'src/a.test.js')).toBe(false);
    const rootDir = jestSelectionConfig({ rootDir: 'packages/core', testMatch: ['<rootDir>/**/*.test.ts'] });
    expect(jestMatches(rootDir, 'packages/core/a.test.ts')).toBe(true);
    expect(jestMatches(rootDir, 'packages/other/a.test.ts')).toBe(false);
  });
});

describe('which files mocha runs', () => {
  const cfg = (over: Partial<MochaSelectionConfig>): MochaSelectionConfig => ({
    spec: ['test'],
    extensions: ['js', 'cjs', 'mjs'],
    recursive: false,
    ignore: [],
    ...over,
  });
  it("uses mocha's default spec: the files of ./test with its extensions, not its subfolders", () => {
    expect(mochaMatches(cfg({}), 'test/a.js')).toBe(true);
    expect(mochaMatches(cfg({}), 'test/a.ts')).toBe(false);
    expect(mochaMatches(cfg({}), 'test/unit/a.js')).toBe(false);
    expect(mochaMatches(cfg({ recursive: true }), 'test/unit/a.js')).toBe(true);
    expect(mochaMatches(cfg({ extensions: ['ts'] }), 'test/a.ts')).toBe(true);
    expect(mochaMatches(cfg({}), 'test/.hidden.js')).toBe(false);
  });
  it('merges .mocharc over package.json "mocha" as mocha does: lists concatenated, the rc first', () => {
    expect(
      mergeLikeMocha(
        { spec: 'test/a.js', timeout: 1, require: ['x'] },
        { spec: ['test/b.js'], timeout: 2, ui: 'tdd' },
      ),
    ).toEqual({ spec: ['test/a.js', 'test/b.js'], timeout: 1, require: ['x'], ui: 'tdd' });
  });

  it('takes globs, files and ignores from the config and the scripts', () => {
    const c = cfg({ spec: ['./src/**/*.spec.ts', 'test/one.js'], ignore: ['src/legacy/**'] });
    expect(mochaMatches(c, 'src/a/b.spec.ts')).toBe(true);
    expect(mochaMatches(c, 'src/legacy/b.spec.ts')).toBe(false);
    expect(mochaMatches(c, 'test/one.js')).toBe(true);
    expect(mochaMatches(c, 'test/two.js')).toBe(false);
  });
});

const source = 'export function add(a, b) {\n  return a + b;\n}\n';

describe('mining jest and mocha repositories', () => {
  it('mines a jest repository with its testMatch; the tests prompt follows the original style', async () => {
    const root = await makeRepo({
      'package.json': JSON.stringify({
        name: 'j',
        scripts: { test: 'jest' },
        devDependencies: { jest: '30.0.0' },
      }),
      'jest.config.js': "module.exports = { testMatch: ['<rootDir>/spec/**/*.js'] };\n",
      'src/add.js': source,
      'spec/add.js':
        "const { add } = require('../src/add.js');\ntest('adds', () => { expect(add(1, 2)).toBe(3); });\n",
      'spec/imports.js':
        "import { expect, it } from '@jest/globals';\nimport { add } from '../src/add.js';\nit('adds again', () => { expect(add(2, 2)).toBe(4); });\n",
      'src/add.test.js': "test('not run: outside testMatch', () => {});\n",
    });
    const { tasks, summary } = await mine({ root, installCheck: false });
    expect(summary).toMatchObject({
      runner: 'jest',
      runnerEvidence: 'jest is a dependency',
      testSelection: 'jest.config.js',
    });
    expect(tasks.map((t) => `${t.kind}:${t.target}`)).toEqual([
      'file:src/add.js',
      'tests:spec/add.js',
      'tests:spec/imports.js',
    ]);
    expect(tasks[0]!.judge).toMatchObject({ runner: 'jest', testFiles: ['spec/add.js', 'spec/imports.js'] });
    expect(tasks[1]!.messages[0]!.content).toContain('describe, it/test, expect, jest and the hooks');
    expect(tasks[2]!.messages[0]!.content).toContain(
      "import what you use from '@jest/globals' as the original does (it imports expect, it)",
    );
  });

  it('falls back to jest defaults when the config is computed, and says so', async () => {
    const root = await makeRepo({
      'package.json': JSON.stringify({ name: 'j', devDependencies: { jest: '30.0.0' } }),
      'jest.config.js': "const base = require('./base.js');\nmodule.exports = { ...base };\n",
      'src/add.js': source,
      'src/add.test.js':
        "import { add } from './add.js';\ntest('adds', () => { expect(add(1, 2)).toBe(3); });\n",
    });
    const { summary } = await mine({ root, installCheck: false });
    expect(summary.testSelection).toBe("jest.config.js (* is computed: jest's default testMatch assumed)");
    expect(summary.files.tests).toBe(1);
  });

  it('mines a mocha repository with its .mocharc spec and chai; helpers in test/ stay support', async () => {
    const root = await makeRepo({
      'package.json': JSON.stringify({
        name: 'm',
        scripts: { test: 'mocha' },
        devDependencies: { mocha: '11.0.0', chai: '4.5.0' },
      }),
      '.mocharc.yml': 'spec:\n  - test/**/*.test.js\nrecursive: true\n',
      'src/add.js': source,
      'test/unit/add.test.js':
        "const { expect } = require('chai');\nconst { add } = require('../../src/add.js');\nconst { twice } = require('../helpers.js');\ndescribe('add', () => { it('adds', () => { expect(add(1, twice(1))).to.equal(3); }); });\n",
      'test/helpers.js': 'exports.twice = (x) => 2 * x;\n',
    });
    const { tasks, summary } = await mine({ root, installCheck: false });
    expect(summary).toMatchObject({ runner: 'mocha', testSelection: '.mocharc.yml' });
    expect(summary.files).toMatchObject({ tests: 1, support: 1 }); // test/helpers.js declares no test
    // A mocha tests task could not be judged by strength (one module cache for every file: no batched
    // mutation run), so the miner skips it and says why rather than mine a task it cannot score.
    expect(tasks.map((t) => `${t.kind}:${t.target}`)).toEqual(['file:src/add.js']);
    expect(summary.skipped).toContainEqual({
      path: 'test/unit/add.test.js',
      reason: expect.stringContaining('mutants their tests kill'),
    });
  });

  it('refuses a mocha script whose loader flags the config lacks, and accepts them once in .mocharc', async () => {
    const files = {
      'package.json': JSON.stringify({
        name: 'm',
        scripts: { test: "mocha -r ts-node/register 'test/**/*.spec.ts'" },
        devDependencies: { mocha: '11.0.0' },
      }),
      'src/add.ts': source,
      'test/add.spec.ts':
        "import { add } from '../src/add';\nit('adds', () => { if (add(1, 2) !== 3) throw new Error('x'); });\n",
    };
    await expect(mine({ root: await makeRepo(files) })).rejects.toThrow(MineError);
    await expect(mine({ root: await makeRepo(files) })).rejects.toThrow(
      /script "test" passes -r ts-node\/register to mocha; .* add require: "ts-node\/register" there/,
    );
    const { tasks } = await mine({
      installCheck: false,
      root: await makeRepo({ ...files, '.mocharc.json': '{ "require": ["ts-node/register"] }' }),
    });
    // The script's positional spec selects the test files.
    expect(tasks.map((t) => `${t.kind}:${t.target}`)).toEqual(['file:src/add.ts']);
  });

  it('refuses a jest too old for the judge, naming the version it needs', async () => {
    const root = await makeRepo({
      'package.json': JSON.stringify({ name: 'j', devDependencies: { jest: '27.5.1' } }),
      'node_modules/jest/package.json': JSON.stringify({ name: 'jest', version: '27.5.1' }),
      'src/add.js': source,
      'src/add.test.js':
        "import { add } from './add.js';\ntest('adds', () => { expect(add(1, 2)).toBe(3); });\n",
    });
    await expect(mine({ root })).rejects.toThrow(/jest 27\.5\.1 is installed; the judge needs jest ≥ 29\.3/);
  });

  it('refuses a jest script that picks another config', async () => {
    const root = await makeRepo({
      'package.json': JSON.stringify({
        name: 'j',
        scripts: { test: 'jest -c jest.unit.js' },
        devDependencies: { jest: '30.0.0' },
      }),
      'src/add.js': source,
      'src/add.test.js':
        "import { add } from './add.js';\ntest('adds', () => { expect(add(1, 2)).toBe(3); });\n",
    });
    await expect(mine({ root })).rejects.toThrow(
      /script "test" passes -c to jest; vtnode runs jest with the configuration/,
    );
  });
});

describe('the test script environment a judge takes over', () => {
  it.each([
    ['TZ=America/New_York jest', { TZ: 'America/New_York' }],
    ['cross-env BABEL_ENV=cjs TZ=UTC mocha --require @babel/register', { BABEL_ENV: 'cjs', TZ: 'UTC' }],
    ["env TZ='Europe/Paris' node --test", { TZ: 'Europe/Paris' }],
    ['jest TZ=UTC', {}],
    ['SECRET_TOKEN=abc HOME=/x NODE_OPTIONS=--inspect TZ=UTC vitest run', { TZ: 'UTC' }],
    ['npm run build && TZ=UTC jest', {}],
    ['', {}],
  ])('%s', (script, env) => {
    expect(scriptEnv(script)).toEqual(env);
  });
});
