import { describe, expect, it } from 'vitest';
import {
  detachedDeadline,
  failedJobVerdict,
  lostVerdict,
  nextReattachPause,
  REATTACH_MAX_MS,
  REATTACH_MIN_MS,
  refusalVerdict,
  satOnJob,
} from '../../placement/job-fate.ts';
import { JobFailure, RefusalReason } from '../../protocol/job.ts';

const LOST_CAUSES = [
  'unreachable',
  'no-listener',
  'timeout',
  'disconnected',
  'violation',
  'cancelled',
] as const;

/** The runner's if-chain on a lost stream as it was before issue 14 build 7: the reference. */
function referenceLost(cause: string, aborted: boolean, accepted: boolean, self: boolean) {
  if (cause === 'cancelled' || aborted) return { release: 'cancelled', blame: false, reattach: false };
  if (cause === 'violation' || !accepted || self)
    return { release: cause === 'violation' ? 'failed' : 'disconnected', blame: true, reattach: false };
  return { release: null, blame: false, reattach: true, checkGone: cause === 'no-listener' };
}

describe('job fate', () => {
  it('a full node is back-pressure: released as busy, not blamed; any other refusal blames the node', () => {
    for (const reason of RefusalReason.options) {
      const v = refusalVerdict(reason);
      if (reason === 'full') expect(v).toEqual({ release: 'busy', blame: false, full: true });
      else expect(v, reason).toEqual({ release: 'refused', blame: true, full: false });
    }
  });

  it('a failed job is released as failed and blames its node, unless it was cancelled', () => {
    for (const reason of JobFailure.options) {
      const v = failedJobVerdict(reason);
      if (reason === 'cancelled') expect(v).toEqual({ release: 'cancelled', blame: false, full: false });
      else expect(v, reason).toEqual({ release: 'failed', blame: true, full: false });
    }
  });

  it('a lost stream: the same verdict as the runner’s former if-chain, for every cause and state', () => {
    for (const cause of LOST_CAUSES)
      for (const aborted of [false, true])
        for (const accepted of [false, true])
          for (const self of [false, true]) {
            const v = lostVerdict({ cause, aborted, accepted, self });
            const actual =
              v.kind === 'cancelled'
                ? { release: 'cancelled', blame: false, reattach: false }
                : v.kind === 'lost'
                  ? { release: v.release, blame: true, reattach: false }
                  : { release: null, blame: false, reattach: true, checkGone: v.checkGone };
            expect(actual, JSON.stringify({ cause, aborted, accepted, self })).toEqual(
              referenceLost(cause, aborted, accepted, self),
            );
          }
  });

  it('holds the lease only for a remote worker that took the job; a dead address is checked for a gone worker', () => {
    const remote = { aborted: false, accepted: true, self: false };
    expect(lostVerdict({ ...remote, cause: 'disconnected' })).toEqual({ kind: 'detached', checkGone: false });
    expect(lostVerdict({ ...remote, cause: 'no-listener' })).toEqual({ kind: 'detached', checkGone: true });
    expect(lostVerdict({ ...remote, cause: 'disconnected', accepted: false })).toEqual({
      kind: 'lost',
      release: 'disconnected',
    });
    expect(lostVerdict({ ...remote, cause: 'disconnected', self: true })).toEqual({
      kind: 'lost',
      release: 'disconnected',
    });
    expect(lostVerdict({ ...remote, cause: 'violation' })).toEqual({ kind: 'lost', release: 'failed' });
    expect(lostVerdict({ ...remote, cause: 'violation', aborted: true })).toEqual({ kind: 'cancelled' });
  });

  it('a detached job keeps its lease leaseMs, never past its deadline', () => {
    expect(detachedDeadline(10_000, 1000, 60_000)).toBe(10_000);
    expect(detachedDeadline(100_000, 1000, 60_000)).toBe(61_000);
  });

  it('re-attach pauses double from REATTACH_MIN_MS up to REATTACH_MAX_MS', () => {
    const pauses = [REATTACH_MIN_MS];
    for (let i = 0; i < 6; i++) pauses.push(nextReattachPause(pauses.at(-1)!));
    expect(pauses).toEqual([500, 1000, 2000, 4000, 5000, 5000, 5000]);
    expect(REATTACH_MAX_MS).toBe(5000);
  });

  it('a job finished by its own backup without one scored sample sat on its work', () => {
    expect(satOnJob('a', 'a', 0)).toBe(true);
    expect(satOnJob('a', 'a', 1)).toBe(false);
    // Finished by a late result of an earlier job, not its backup.
    expect(satOnJob('a', undefined, 0)).toBe(false);
    expect(satOnJob('a', 'b', 0)).toBe(false);
  });
});
