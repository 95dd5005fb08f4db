import { describe, expect, it } from 'vitest';
import { claimsAgree, type Resolution, resolveAll, resolveClaims } from '../../node/collector/claims.ts';
import type { StoredSample } from '../../node/collector/store.ts';
import { claimFor } from '../../protocol/digest.ts';
import type { SampleBody } from '../../protocol/sample.ts';
import { sampleBody } from '../helpers/samples.ts';

// The pure resolution of several origins' claims of one sample id (node/collector/claims.ts).

const SIG = 'A'.repeat(86);

function claim(origin: string, body: SampleBody, extra: Partial<StoredSample> = {}, seq = 1): StoredSample {
  return {
    digest: { ...claimFor(body, origin, seq), sig: SIG },
    bodyState: 'ok',
    body,
    audit: 'none',
    auditReward: null,
    quarantined: false,
    rescore: null,
    ...extra,
  };
}

const pass = sampleBody('t', 'qwen', 0, { reward: 1, candidate: 'right\n' });
const fail = sampleBody('t', 'qwen', 0, { reward: 0, candidate: 'right\n' });
const other = sampleBody('t', 'qwen', 0, { reward: 1, candidate: 'other\n' });
const pending = { bodyState: 'pending' as const, body: null };
const passed = { audit: 'passed' as const };
const failedAt = (r: number) => ({ audit: 'failed' as const, auditReward: r, quarantined: true });

/** The outcome, as origin names. */
const summary = (r: Resolution) => ({
  chosen: r.chosen?.digest.origin ?? null,
  reward: r.reward,
  disputed: r.disputed,
  exportable: r.exportable,
});

/** Every order of a list. */
function permutations<T>(xs: T[]): T[][] {
  if (xs.length <= 1) return [xs];
  return xs.flatMap((x, i) => permutations([...xs.slice(0, i), ...xs.slice(i + 1)]).map((p) => [x, ...p]));
}

describe('claims of one sample id', () => {
  const cases: [string, StoredSample[], ReturnType<typeof summary>][] = [
    ['one claim', [claim('b', pass)], { chosen: 'b', reward: 1, disputed: false, exportable: true }],
    [
      'one claim without its body yet',
      [claim('b', pass, pending)],
      { chosen: 'b', reward: 1, disputed: false, exportable: false },
    ],
    [
      'agreeing claims (an honest redo): the audited one stands',
      [claim('a', pass), claim('b', pass, passed), claim('c', pass)],
      { chosen: 'b', reward: 1, disputed: false, exportable: true },
    ],
    [
      'agreeing claims, none audited: one with a body stands',
      [claim('a', pass, pending), claim('b', pass)],
      { chosen: 'b', reward: 1, disputed: false, exportable: true },
    ],
    [
      'different rewards, no audit: disputed, nothing counts',
      [claim('a', fail), claim('b', pass)],
      { chosen: null, reward: null, disputed: true, exportable: false },
    ],
    [
      'different rewards, one side failed its audit: the other stands',
      [claim('a', fail, failedAt(1)), claim('b', pass)],
      { chosen: 'b', reward: 1, disputed: false, exportable: true },
    ],
    [
      'different rewards, the side that passed an audit stands against a withheld body',
      [claim('a', fail, pending), claim('b', pass, passed)],
      { chosen: 'b', reward: 1, disputed: false, exportable: true },
    ],
    [
      'different rewards, the other side withholds its body and nobody audited: disputed',
      [claim('a', fail, pending), claim('b', pass)],
      { chosen: null, reward: null, disputed: true, exportable: false },
    ],
    [
      'different rewards, the body of one side contradicted its digest: the other stands',
      [claim('a', fail, { bodyState: 'rejected', body: null }), claim('b', pass)],
      { chosen: 'b', reward: 1, disputed: false, exportable: true },
    ],
    [
      'different rewards, both confirmed by audits (a flaky judge): disputed',
      [claim('a', fail, passed), claim('b', pass, passed)],
      { chosen: null, reward: null, disputed: true, exportable: false },
    ],
    [
      'same reward, other candidates, unaudited: counted, not exported',
      [claim('a', other), claim('b', pass)],
      { chosen: 'a', reward: 1, disputed: true, exportable: false },
    ],
    [
      'same reward, other candidates, both confirmed: exported once (the lowest content hash)',
      [claim('a', other, passed), claim('b', pass, passed)],
      {
        chosen: pass.contentHash < other.contentHash ? 'b' : 'a',
        reward: 1,
        disputed: false,
        exportable: true,
      },
    ],
    [
      'every claim failed its audit, the audits agree: the audited reward counts, nothing exported',
      [claim('a', pass, failedAt(0)), claim('b', other, failedAt(0))],
      { chosen: 'a', reward: 0, disputed: false, exportable: false },
    ],
    [
      'every claim failed its audit, the audits disagree: disputed',
      [claim('a', pass, failedAt(0)), claim('b', other, failedAt(0.5))],
      { chosen: null, reward: null, disputed: true, exportable: false },
    ],
    [
      'one claim whose body contradicted its digest: nothing counts',
      [claim('a', pass, { bodyState: 'rejected', body: null })],
      { chosen: null, reward: null, disputed: false, exportable: false },
    ],
    [
      'claims naming different models for one sample id: disputed',
      [claim('a', pass), claim('b', { ...pass, model: 'llama' })],
      { chosen: null, reward: null, disputed: true, exportable: false },
    ],
    [
      'claims naming different splits: disputed',
      [claim('a', pass), claim('b', { ...pass, split: 'eval' })],
      { chosen: null, reward: null, disputed: true, exportable: false },
    ],
  ];

  for (const [name, claims, expected] of cases)
    it(name, () => {
      // Whatever order the claims come in, the result is the same.
      for (const order of permutations(claims)) expect(summary(resolveClaims(order))).toEqual(expected);
    });

  it('the origins’ names decide nothing: renaming them so a liar sorts first or last changes no outcome', () => {
    for (const [liar, honest] of [
      ['0000-liar', 'zzzz-honest'],
      ['zzzz-liar', '0000-honest'],
    ] as const) {
      expect(summary(resolveClaims([claim(liar, fail), claim(honest, pass)]))).toMatchObject({
        reward: null,
        disputed: true,
      });
      expect(summary(resolveClaims([claim(liar, other), claim(honest, pass, passed)]))).toMatchObject({
        chosen: honest,
        exportable: false,
      });
      expect(
        summary(resolveClaims([claim(liar, other, failedAt(0)), claim(honest, pass, passed)])),
      ).toMatchObject({ chosen: honest, exportable: true, disputed: false });
    }
  });

  it('claimsAgree: same task, model, split, reward and candidate', () => {
    const d = (b: SampleBody, origin = 'a') => claimFor(b, origin, 1);
    expect(claimsAgree([])).toBe(true);
    expect(claimsAgree([d(pass), d(pass, 'b')])).toBe(true);
    expect(claimsAgree([d(pass), d(fail, 'b')])).toBe(false);
    expect(claimsAgree([d(pass), d(other, 'b')])).toBe(false);
    expect(claimsAgree([d(pass), d({ ...pass, taskId: 'u' }, 'b')])).toBe(false);
  });

  it('claims naming different task rows (v2 digests) disagree and are disputed; a v1 claim names none', () => {
    const [h1, h2] = [`sha256:${'1'.repeat(64)}`, `sha256:${'2'.repeat(64)}`];
    const v2 = (b: SampleBody, origin: string, hash: string, extra: Partial<StoredSample> = {}) => ({
      ...claim(origin, b, extra),
      digest: { ...claimFor(b, origin, 1, hash), sig: SIG },
    });
    expect(claimsAgree([v2(pass, 'a', h1).digest, v2(pass, 'b', h1).digest])).toBe(true);
    expect(claimsAgree([v2(pass, 'a', h1).digest, v2(pass, 'b', h2).digest])).toBe(false);
    expect(claimsAgree([v2(pass, 'a', h1).digest, claim('b', pass).digest])).toBe(true);
    for (const order of permutations([v2(pass, 'a', h1), v2(pass, 'b', h2)]))
      expect(summary(resolveClaims(order))).toEqual({
        chosen: null,
        reward: null,
        disputed: true,
        exportable: false,
      });
    // A v1 claim (an older worker's redo) beside a v2 one is one row, as before.
    expect(summary(resolveClaims([v2(pass, 'a', h1), claim('b', pass)]))).toMatchObject({
      disputed: false,
      exportable: true,
    });
    // Once one side is disproved, the other stands.
    expect(summary(resolveClaims([v2(pass, 'a', h1, passed), v2(pass, 'b', h2, failedAt(0))]))).toMatchObject(
      {
        chosen: 'a',
        disputed: false,
        exportable: true,
      },
    );
  });

  it('resolveAll groups by sample id, ordered by sample id', () => {
    const second = sampleBody('t', 'qwen', 1);
    const all = resolveAll([claim('b', second), claim('a', pass), claim('c', pass, {}, 2)]);
    expect(all.map((r) => r.sampleId)).toEqual([pass.sampleId, second.sampleId].sort());
    expect(all.find((r) => r.sampleId === pass.sampleId)!.claims.map((c) => c.digest.origin)).toEqual([
      'a',
      'c',
    ]);
  });
});
