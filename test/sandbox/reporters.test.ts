// vtnode's own reporters (node:test, mocha) and the mocha config module, run for real (unconfined,
// small temp workspaces), plus the jest and mocha report parsers. The sandboxed end-to-end runs are in
// judges.test.ts.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jestFlags, parseJestReport } from '../../sandbox/judges/jest.ts';
import { MOCHA_CONFIG, MOCHA_REPORTER, parseMochaReport } from '../../sandbox/judges/mocha.ts';
import { NODE_TEST_REPORTER, parseNodeTestReport } from '../../sandbox/judges/node-test.ts';
import { findRunnerPackage, RunnerMissingError, searchDirs } from '../../sandbox/judges/runner-package.ts';
import { VerdictError } from '../../sandbox/judges/verdict.ts';
import { JUDGE_FIXTURES } from './fixtures.ts';

const run = promisify(execFile);
const MOCHA_BIN = join(JUDGE_FIXTURES, 'mocha-cjs', 'node_modules', 'mocha', 'bin', 'mocha.js');

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vtnode-reporters-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Writes `files` under a fresh folder of `dir`; returns its path. */
async function workspace(name: string, files: Record<string, string>): Promise<string> {
  const root = join(dir, name);
  for (const [path, text] of Object.entries(files)) {
    await mkdir(dirname(join(root, path)), { recursive: true });
    await writeFile(join(root, path), text);
  }
  return root;
}

/** Runs a command to its end (bounded), whatever its exit code. */
async function exec(argv: string[], cwd: string): Promise<{ code: number; stderr: string }> {
  try {
    const r = await run(argv[0]!, argv.slice(1), {
      cwd,
      timeout: 60_000,
      env: { ...process.env, NO_COLOR: '1' },
    });
    return { code: 0, stderr: r.stderr };
  } catch (err) {
    const e = err as { code?: number; stderr?: string; killed?: boolean };
    if (e.killed) throw new Error(`${argv.join(' ')} timed out`);
    return { code: typeof e.code === 'number' ? e.code : -1, stderr: e.stderr ?? '' };
  }
}

describe('node:test reporter', () => {
  it('counts an empty file as 0 cases, a one-case file as 1, and a file that fails to load as an error', async () => {
    const root = await workspace('node-test', {
      'empty.test.mjs': '',
      'one.test.mjs': "import { it } from 'node:test';\nit('only', () => {});\n",
      'broken.test.mjs': "import { it } from 'node:test';\nit('x', () => {}) syntax error\n",
      'throws.test.mjs': "throw new Error('boom at load');\n",
      'hooks.test.mjs': `import { after, before, describe, it } from 'node:test';
describe('before fails', () => { before(() => { throw new Error('b'); }); it('guarded', () => {}); });
describe('after fails', () => { after(() => { throw new Error('after hook'); }); it('runs', () => {}); });
describe('a case fails', () => { it('breaks', () => { throw new Error('no'); }); });
`,
    });
    const report = join(root, 'report.json');
    const files = ['empty', 'one', 'broken', 'throws', 'hooks'].map((f) => join(root, `${f}.test.mjs`));
    const r = await exec(
      [
        process.execPath,
        '--test',
        `--test-reporter=${NODE_TEST_REPORTER}`,
        `--test-reporter-destination=${report}`,
        ...files,
      ],
      root,
    );
    expect(r.code).toBe(1);
    const v = parseNodeTestReport(await readFile(report, 'utf8'), root);
    expect(v.cases.map((c) => `${c.file} | ${c.name} | ${c.status}`).sort()).toEqual([
      'hooks.test.mjs | a case fails > breaks | failed',
      'hooks.test.mjs | after fails > runs | passed',
      'hooks.test.mjs | before fails > guarded | failed',
      'one.test.mjs | only | passed',
    ]);
    // Suites whose failure a failed case already carries are not errors; the after hook and the two
    // files that did not load are, with the error their process printed.
    expect(v.errors.sort()).toEqual([
      "broken.test.mjs: the test file failed (exit code 1): SyntaxError: Unexpected identifier 'syntax'",
      'hooks.test.mjs: suite after fails: after hook',
      'throws.test.mjs: the test file failed (exit code 1): Error: boom at load',
    ]);
  }, 60_000);
});

describe('mocha reporter and config module', () => {
  const argv = (root: string, report: string, files: string[]) => [
    process.execPath,
    MOCHA_BIN,
    '--config',
    MOCHA_CONFIG,
    '--no-package',
    '--reporter',
    MOCHA_REPORTER,
    '--reporter-option',
    `output=${report}`,
    '--exit',
    '--forbid-only',
    ...files.map((f) => join(root, f)),
  ];
  let root: string;
  beforeAll(async () => {
    // mocha resolved the way the judge does: the workspace's node_modules (a link to a fixture's).
    root = await workspace('mocha', {
      '.mocharc.yml': 'spec:\n  - test/**/*.spec.js\nretries: 0\nbail: true\nreporter: dot\n',
      'package.json': JSON.stringify({ mocha: { spec: 'test/other.spec.js', timeout: 4000 } }),
      'test/other.spec.js': "it('belongs to the config spec', () => {});\n",
      'test/flaky.spec.js': `let n = 0;
describe('retried', function () {
  this.retries(2);
  it('passes on its second attempt', () => { n++; if (n < 2) throw new Error('first attempt'); });
});
describe('each hook', () => {
  let k = 0;
  beforeEach(() => { k++; if (k === 2) throw new Error('second beforeEach'); });
  it('first', () => {});
  it('second', () => {});
  it('third', () => {});
  it.skip('skipped under it', () => {});
});
describe('after all', () => {
  after(() => { throw new Error('after-all failed'); });
  it('passes before it', () => {});
});
it('fails on its own', () => { throw new Error('own failure'); });
`,
      'test/exits.spec.js': "it('exits mid-run', () => { process.exit(0); });\nit('never runs', () => {});\n",
      'test/forges.spec.js': `const fs = require('node:fs');
const out = process.argv.find((a) => a.includes('output=')).split('output=')[1];
const fake = JSON.stringify({ format: 'vtnode-mocha/1', started: true, complete: true, cases: [], errors: [] });
fs.writeFileSync(out, fake);
process.on('exit', () => fs.writeFileSync(out, fake));
it('really fails', () => { throw new Error('real'); });
`,
      'test/loads-badly.spec.js': "throw new Error('cannot load');\n",
      'test/sentinel.spec.js':
        "it('vtnode:sentinel', () => { throw new Error('vtnode-sentinel:' + 'x'.repeat(1000)); });\nit('long', () => { throw new Error('y'.repeat(1000)); });\n",
    });
    await symlink(join(JUDGE_FIXTURES, 'mocha-cjs', 'node_modules'), join(root, 'node_modules'));
  });

  const runMocha = async (name: string, files: string[]) => {
    const report = join(root, `${name}.json`);
    const r = await exec(argv(root, report, files), root);
    return { code: r.code, stderr: r.stderr, text: await readFile(report, 'utf8') };
  };

  it('runs exactly the given files (not the config spec); retries, hooks and bail as the judge needs', async () => {
    const r = await runMocha('flaky', ['test/flaky.spec.js']);
    const v = parseMochaReport(r.text, root);
    expect(v.cases.map((c) => `${c.file} | ${c.name} | ${c.status}`).sort()).toEqual([
      'test/flaky.spec.js | after all > passes before it | passed',
      'test/flaky.spec.js | each hook > first | passed',
      'test/flaky.spec.js | each hook > second | failed', // kept from running by the beforeEach
      'test/flaky.spec.js | each hook > skipped under it | skipped',
      'test/flaky.spec.js | each hook > third | failed',
      'test/flaky.spec.js | fails on its own | failed', // ran: the config's `bail` is the judge's to decide
      'test/flaky.spec.js | retried > passes on its second attempt | passed',
    ]);
    // The beforeEach failure is carried by the cases it stopped; the after-all failure by none.
    expect(v.errors).toEqual([
      'test/flaky.spec.js: "after all" hook for "passes before it": after-all failed',
    ]);
    expect(r.code).toBeGreaterThan(0);
    expect(r.stderr).toContain('mocha: 3 passed, 3 failed, 1 skipped');
  }, 60_000);

  it('overwrites a report a test forges, also from an exit listener', async () => {
    const r = await runMocha('forges', ['test/forges.spec.js']);
    const v = parseMochaReport(r.text, root);
    expect(v.cases).toEqual([
      { file: 'test/forges.spec.js', name: 'really fails', status: 'failed', message: 'real' },
    ]);
  }, 60_000);

  it('keeps an integrity sentinel line whole, caps other messages', async () => {
    const r = await runMocha('sentinel', ['test/sentinel.spec.js']);
    const v = parseMochaReport(r.text, root);
    expect(v.cases.map((c) => `${c.name}:${c.message?.length}`)).toEqual([
      `vtnode:sentinel:${'vtnode-sentinel:'.length + 1000}`,
      'long:300',
    ]);
  }, 60_000);

  it('refuses a run the process left before its end, and reports a file that fails to load', async () => {
    const exits = await runMocha('exits', ['test/exits.spec.js']);
    expect(() => parseMochaReport(exits.text, root)).toThrow(
      /the mocha run did not finish: mocha: the process exited/,
    );
    const loads = await runMocha('loads', ['test/other.spec.js', 'test/loads-badly.spec.js']);
    expect(loads.code).toBe(1);
    expect(parseMochaReport(loads.text, root)).toEqual({
      cases: [],
      errors: [
        'mocha: mocha stopped before running any test: a test file or a required module failed to load (see stderr)',
      ],
    });
    expect(loads.stderr).toContain('cannot load');
  }, 60_000);
});

describe('mocha report parser', () => {
  const box = '/tmp/box';
  const doc = (extra: Record<string, unknown>) =>
    JSON.stringify({
      format: 'vtnode-mocha/1',
      started: true,
      complete: true,
      cases: [],
      errors: [],
      ...extra,
    });
  it('refuses two documents, files outside the box, cases of a run that never started, bad fields', () => {
    expect(() => parseMochaReport(`${doc({})}\n${doc({})}`, box)).toThrow(/more than one document/);
    expect(() =>
      parseMochaReport(doc({ cases: [{ file: '/etc/x.js', name: 'a', status: 'passed' }] }), box),
    ).toThrow(/outside the box/);
    expect(() =>
      parseMochaReport(
        doc({
          started: false,
          complete: false,
          cases: [{ file: `${box}/a.js`, name: 'a', status: 'passed' }],
        }),
        box,
      ),
    ).toThrow(/never started/);
    expect(() =>
      parseMochaReport(doc({ cases: [{ file: `${box}/a.js`, name: 'a', status: 'pending' }] }), box),
    ).toThrow(/the mocha report is malformed: cases\.0\.status/);
    expect(() => parseMochaReport('{"format":"other"}', box)).toThrow(VerdictError);
  });
});

describe('jest report parser', () => {
  const box = '/tmp/box';
  const file = (assertionResults: unknown[], status = 'passed', message = '') => ({
    name: `${box}/test/a.test.ts`,
    status,
    message,
    assertionResults,
  });
  const report = (files: unknown[], total: number) =>
    JSON.stringify({ numTotalTests: total, numFailedTestSuites: 0, success: false, testResults: files });
  it('maps jest statuses; a file that failed to run is an error named by its first real line', () => {
    const v = parseJestReport(
      report(
        [
          file([
            { ancestorTitles: ['a', 'b'], title: 'c', status: 'passed' },
            { ancestorTitles: [], title: 'p', status: 'pending' },
            { ancestorTitles: [], title: 'd', status: 'disabled' },
            { ancestorTitles: [], title: 't', status: 'todo' },
            {
              ancestorTitles: [],
              title: 'f',
              status: 'failed',
              failureMessages: ['\u001b[31mError: boom\u001b[39m\n at x'],
            },
          ]),
          {
            ...file(
              [],
              'failed',
              '  \u001b[1m● Test suite failed to run\u001b[22m\n\n    Cannot find module "x"\n',
            ),
            name: `${box}/test/b.test.ts`,
          },
        ],
        5,
      ),
      box,
    );
    expect(v.cases.map((c) => `${c.name}:${c.status}`)).toEqual([
      'a > b > c:passed',
      'p:skipped',
      'd:skipped',
      't:todo',
      'f:failed',
    ]);
    expect(v.cases.at(-1)?.message).toBe('Error: boom');
    expect(v.errors).toEqual(['test/b.test.ts: Cannot find module "x"']);
  });
  it('keeps an integrity sentinel line whole, caps other messages', () => {
    const long = 'x'.repeat(1000);
    const v = parseJestReport(
      report(
        [
          file([
            {
              ancestorTitles: [],
              title: 's',
              status: 'failed',
              failureMessages: [`Error: vtnode-sentinel:${long}\n at x`],
            },
            { ancestorTitles: [], title: 'o', status: 'failed', failureMessages: [`Error: ${long}`] },
          ]),
        ],
        2,
      ),
      box,
    );
    expect(v.cases.map((c) => c.message?.length)).toEqual([`Error: vtnode-sentinel:${long}`.length, 300]);
  });

  it('refuses a count that disagrees with the cases listed, and files outside the box', () => {
    expect(() =>
      parseJestReport(report([file([{ ancestorTitles: [], title: 'x', status: 'passed' }])], 2), box),
    ).toThrow(/the jest report counts 2 tests but lists 1/);
    expect(() => parseJestReport(report([{ ...file([]), name: '/elsewhere/a.test.ts' }], 0), box)).toThrow(
      /outside the box/,
    );
  });
});

describe('jest judge flags, run for real', () => {
  it('run the tests in a worker, never in band, and override a config that bails', async () => {
    const root = await workspace('jest', {
      'package.json': '{}',
      // Plain CommonJS through jest's default babel-jest; `bail: 1` would stop after the first failing
      // file and leave no report at all.
      'jest.config.js': "module.exports = { testEnvironment: 'node', bail: 1 };\n",
      // In band, the test would share the argv (and the process) of the jest that writes the report.
      'a.test.js':
        "test('in a worker: ' + !process.argv.includes('--runTestsByPath'), () => { expect(1).toBe(2); });\n",
      'b.test.js': "test('b fails too', () => { expect(1).toBe(2); });\n",
    });
    await symlink(join(JUDGE_FIXTURES, 'jest-ts', 'node_modules'), join(root, 'node_modules'));
    await mkdir(join(root, '.tmp'));
    const report = join(root, 'report.json');
    const flags = jestFlags({ box: root, cwd: root, node: process.execPath, reportPath: report });
    expect(flags).not.toContain('--runInBand');
    const bin = join(root, 'node_modules', 'jest', 'bin', 'jest.js');
    const r = await exec(
      [process.execPath, bin, ...flags, join(root, 'a.test.js'), join(root, 'b.test.js')],
      root,
    );
    expect(r.code).toBe(1);
    const v = parseJestReport(await readFile(report, 'utf8'), root);
    expect(v.cases.map((c) => `${c.file} | ${c.name} | ${c.status}`).sort()).toEqual([
      'a.test.js | in a worker: true | failed',
      'b.test.js | b fails too | failed',
    ]);
  }, 120_000);
});

describe('runner packages', () => {
  it('looks from the run cwd up to the box root, and names what is missing', async () => {
    const box = await workspace('pkgs', {
      'node_modules/mocha/package.json': JSON.stringify({
        version: '10.2.0',
        bin: { mocha: 'bin/mocha.js' },
      }),
      'packages/a/package.json': '{}',
    });
    expect(searchDirs(box, join(box, 'packages/a'))).toEqual([
      join(box, 'packages/a'),
      join(box, 'packages'),
      box,
    ]);
    expect(() => searchDirs(box, dirname(box))).toThrow(/not inside the box/);
    const found = await findRunnerPackage(box, join(box, 'packages/a'), 'mocha');
    expect(found.json.version).toBe('10.2.0');
    await expect(findRunnerPackage(box, join(box, 'packages/a'), 'jest')).rejects.toThrow(RunnerMissingError);
    await expect(findRunnerPackage(box, join(box, 'packages/a'), 'jest')).rejects.toThrow(
      /jest is not installed in the workspace \(no node_modules\/jest in packages\/a, packages, \.\)/,
    );
  });
});
