import { describe, expect, it } from 'vitest';
import { parseNodeTestReport } from '../../sandbox/judges/node-test.ts';
import {
  exitCodeDisagreement,
  inventoryDifferences,
  type TestCase,
  VerdictError,
} from '../../sandbox/judges/verdict.ts';
import { parseVitestReport } from '../../sandbox/judges/vitest.ts';

const box = '/tmp/box';
const vitestReport = (testResults: unknown[], extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    numTotalTests: testResults.reduce(
      (n: number, f) => n + (f as { assertionResults: unknown[] }).assertionResults.length,
      0,
    ),
    numFailedTestSuites: 0,
    success: true,
    testResults,
    ...extra,
  });
const assertion = (title: string, status: string, ancestorTitles: string[] = []) => ({
  ancestorTitles,
  title,
  status,
  failureMessages: status === 'failed' ? ['expected 1 to be 2\n  at x'] : [],
});

describe('vitest report', () => {
  it('maps statuses and names, with box-relative files', () => {
    const v = parseVitestReport(
      vitestReport([
        {
          name: `${box}/test/a.test.ts`,
          status: 'failed',
          assertionResults: [
            assertion('works', 'passed', ['suite']),
            assertion('breaks', 'failed'),
            assertion('later', 'skipped'),
            assertion('pending', 'pending'),
            assertion('some day', 'todo'),
          ],
        },
      ]),
      box,
    );
    expect(v.cases).toEqual([
      { file: 'test/a.test.ts', name: 'suite > works', status: 'passed' },
      { file: 'test/a.test.ts', name: 'breaks', status: 'failed', message: 'expected 1 to be 2' },
      { file: 'test/a.test.ts', name: 'later', status: 'skipped' },
      { file: 'test/a.test.ts', name: 'pending', status: 'skipped' },
      { file: 'test/a.test.ts', name: 'some day', status: 'todo' },
    ]);
    expect(v.errors).toEqual([]);
  });

  it('reports a file that failed without a failing test as an error', () => {
    const v = parseVitestReport(
      vitestReport([
        { name: `${box}/t.test.ts`, status: 'failed', message: 'SyntaxError: x\nmore', assertionResults: [] },
      ]),
      box,
    );
    expect(v.errors).toEqual(['t.test.ts: SyntaxError: x']);
  });

  it.each([
    ['not JSON', '{"numTotalTests": 1,', /not JSON/],
    ['missing fields', JSON.stringify({ testResults: [] }), /malformed/],
    [
      'a bad status',
      vitestReport([{ name: 'a', status: 'passed', assertionResults: [assertion('x', 'great')] }]),
      /malformed/,
    ],
    [
      'counts that disagree with the list',
      vitestReport([{ name: 'a', status: 'passed', assertionResults: [assertion('x', 'passed')] }], {
        numTotalTests: 7,
      }),
      /counts 7 tests but lists 1/,
    ],
    [
      'a file outside the box',
      vitestReport([{ name: '/etc/x.test.ts', status: 'passed', assertionResults: [] }]),
      /outside the box/,
    ],
  ])('rejects %s', (_name, text, message) => {
    expect(() => parseVitestReport(text, box)).toThrow(VerdictError);
    expect(() => parseVitestReport(text, box)).toThrow(message);
  });
});

describe('node:test report', () => {
  const doc = (cases: unknown[], errors: unknown[] = []) =>
    JSON.stringify({ format: 'vtnode-node-test/1', cases, errors });

  it('parses cases and errors', () => {
    const v = parseNodeTestReport(
      doc(
        [
          { file: `${box}/t.test.js`, name: 'a > b', status: 'passed' },
          { file: `${box}/t.test.js`, name: 'c', status: 'failed', message: 'boom' },
        ],
        [{ file: `${box}/t.test.js`, message: 'suite a: hook failed' }],
      ),
      box,
    );
    expect(v.cases.map((c) => `${c.file}|${c.name}|${c.status}`)).toEqual([
      't.test.js|a > b|passed',
      't.test.js|c|failed',
    ]);
    expect(v.errors).toEqual(['t.test.js: suite a: hook failed']);
  });

  it.each([
    ['an empty file', '', /not JSON/],
    ['two documents', `${doc([])}\n${doc([])}`, /more than one document/],
    ['another format', JSON.stringify({ format: 'tap', cases: [], errors: [] }), /malformed/],
    ['a bad status', doc([{ file: 'x', name: 'y', status: 'ok' }]), /malformed/],
    ['a file outside the box', doc([{ file: '/root/x.js', name: 'y', status: 'passed' }]), /outside the box/],
  ])('rejects %s', (_name, text, message) => {
    expect(() => parseNodeTestReport(text, box)).toThrow(message);
  });
});

describe('exit code agreement', () => {
  const pass: TestCase = { file: 'f', name: 'a', status: 'passed' };
  const fail: TestCase = { file: 'f', name: 'b', status: 'failed' };
  it('accepts 0 with no failure and non-zero with one', () => {
    expect(exitCodeDisagreement({ cases: [pass], errors: [] }, 0)).toBeNull();
    expect(exitCodeDisagreement({ cases: [pass, fail], errors: [] }, 1)).toBeNull();
    expect(exitCodeDisagreement({ cases: [pass], errors: ['load error'] }, 1)).toBeNull();
  });
  it('refuses a disagreement or an abnormal exit', () => {
    expect(exitCodeDisagreement({ cases: [pass, fail], errors: [] }, 0)).toMatch(/exited 0/);
    expect(exitCodeDisagreement({ cases: [pass], errors: [] }, 1)).toMatch(/shows no failure/);
    expect(exitCodeDisagreement({ cases: [pass], errors: [] }, null)).toMatch(/did not exit normally/);
  });
});

describe('inventory', () => {
  const c = (name: string, status: TestCase['status'] = 'passed', file = 'f'): TestCase => ({
    file,
    name,
    status,
  });
  const ref = [c('a'), c('b'), c('b'), c('s', 'skipped')];
  it('agrees with the same names and counts, whatever passed', () => {
    expect(
      inventoryDifferences(ref, [c('a', 'failed'), c('b'), c('b', 'failed'), c('s', 'skipped')]),
    ).toEqual([]);
  });
  it('reports missing, extra and duplicated tests', () => {
    expect(inventoryDifferences(ref, [c('a'), c('b'), c('s', 'skipped')])).toEqual([
      '1 test(s) of the reference are missing: f :: b',
    ]);
    expect(inventoryDifferences(ref, [...ref, c('fake')])).toEqual([
      '1 test(s) not in the reference: f :: fake',
    ]);
    expect(inventoryDifferences(ref, [])).toHaveLength(1);
  });
  it('refuses a test that ran in the reference but was skipped', () => {
    expect(inventoryDifferences(ref, [c('a', 'skipped'), c('b'), c('b'), c('s', 'skipped')])).toEqual([
      '1 test(s) ran in the reference but not here: f :: a',
    ]);
  });
  it('ignores the target file of a tests task', () => {
    expect(
      inventoryDifferences([...ref, c('x', 'passed', 't')], [...ref, c('y', 'passed', 't')], ['t']),
    ).toEqual([]);
  });
});
