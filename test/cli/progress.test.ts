// `vtnode run`'s live progress (issue 12, build 7): the ETA does not grow while the last samples
// score; without a terminal a line is printed only when the campaign moved, at most every 10 s; a
// question on the terminal is not overwritten by the redraw.
import { describe, expect, it } from 'vitest';
import { createEta, createProgressPrinter, progressLine } from '../../cli/progress.ts';
import type { CampaignStatus } from '../../node/submitter/service.ts';

const T0 = 1_000_000;

function status(scored: number, planned = 4, state: CampaignStatus['status'] = 'running'): CampaignStatus {
  return {
    name: 'c',
    seedBase: 7,
    status: state,
    summary: {
      samples: { planned, placed: 0, generated: scored, scored, verified: scored },
      preexisting: 0,
      tasks: [{ taskId: 't', nodes: [], planned, samples: scored, verified: scored }],
      nodes: [],
      models: [],
      completionTokens: 0,
      promptTokens: 0,
      tokensPerSecond: null,
      cacheHitRate: null,
    },
    running: scored < planned ? [{ jobId: 'j', taskId: 't', peerId: 'p', samples: planned - scored }] : [],
    problem: null,
    outcome: null,
    startedAt: T0,
    finishedAt: 0,
  } as CampaignStatus;
}

describe('ETA', () => {
  it('counts down while the last sample scores, instead of growing', () => {
    const eta = createEta();
    expect(eta(status(0), T0 + 1000)).toBeNull();
    // 3 of 4 scored after 30 s: 10 s per sample, 10 s left.
    expect(eta(status(3), T0 + 30_000)).toBe(10_000);
    const later = [35_000, 40_000, 60_000, 90_000].map((t) => eta(status(3), T0 + t));
    expect(later).toEqual([5000, 0, 0, 0]);
    for (let i = 1; i < later.length; i++) expect(later[i]!).toBeLessThanOrEqual(later[i - 1]!);
    // The old estimate (remaining / (scored / elapsed)) grew: 10 s, 11.7 s, 13.3 s, 20 s, 30 s.
    expect(eta(status(4), T0 + 95_000)).toBeNull();
  });

  it('takes the pace again at each scored sample', () => {
    const eta = createEta();
    expect(eta(status(1), T0 + 10_000)).toBe(30_000);
    expect(eta(status(1), T0 + 25_000)).toBe(15_000);
    // The second took 20 s: 15 s per sample over both, 2 left.
    expect(eta(status(2), T0 + 30_000)).toBe(30_000);
  });

  it('the line says the ETA given, or -', () => {
    expect(progressLine(status(3), 65_000)).toMatch(/3\/4 scored, 3 verified .*\| ETA 1m05s$/);
    expect(progressLine(status(3), null)).toMatch(/\| ETA -$/);
  });
});

describe('progress without a terminal', () => {
  it('prints on change, at most every 10 s, never the same counts twice, and the end at once', () => {
    const p = createProgressPrinter({ tty: false });
    const printed: [number, string][] = [];
    const poll = (t: number, st: CampaignStatus) => {
      const text = p.update(st, T0 + t);
      if (text !== null) printed.push([t, text]);
    };
    // Polled every 500 ms for two minutes: 0 scored until 25 s, 1 until 27 s, 2 until 100 s, then done.
    for (let t = 0; t < 120_000; t += 500) {
      const n = t < 25_000 ? 0 : t < 27_000 ? 1 : t < 100_000 ? 2 : 4;
      poll(t, status(n, 4, n === 4 ? 'done' : 'running'));
    }
    expect(printed.map(([t]) => t)).toEqual([0, 25_000, 35_000, 100_000]);
    for (const [, text] of printed) expect(text).toMatch(/^tasks .*\n$/);
    expect(printed[1]![1]).toMatch(/1\/4 scored/);
    expect(printed[2]![1]).toMatch(/2\/4 scored/);
    expect(printed[3]![1]).toMatch(/4\/4 scored.*ETA -\n$/);
  });
});

describe('progress on a terminal', () => {
  it('redraws in place at every poll, and not while a question is asked', () => {
    const p = createProgressPrinter({ tty: true });
    expect(p.update(status(1), T0 + 1000)).toMatch(/^\r\x1b\[Ktasks .*1\/4 scored/);
    expect(p.update(status(1), T0 + 1500)).toMatch(/^\r\x1b\[K/);
    p.pause();
    expect(p.update(status(2), T0 + 2000)).toBeNull();
    expect(p.update(status(3), T0 + 2500)).toBeNull();
    p.resume();
    expect(p.update(status(3), T0 + 3000)).toMatch(/^\r\x1b\[Ktasks .*3\/4 scored/);
  });
});
