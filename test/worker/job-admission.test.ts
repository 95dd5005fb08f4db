import { describe, expect, it } from 'vitest';
import { fullness } from '../../node/worker/job-admission.ts';
import { freeSlots, indexFleet, jobBounds } from '../../placement/room.ts';
import { advert, fleetNode } from '../helpers/adverts.ts';

const state = (running: number, generating: number, waiting = 0) => ({
  stopped: false,
  running,
  generating,
  waiting,
});

describe('job admission: fullness', () => {
  it('keeps one job waiting for a slot; refuses once it waits, or when the jobs finishing their scoring fill the bound', () => {
    expect(fullness(state(0, 0), 2)).toBeNull();
    expect(fullness(state(3, 1), 2)).toBeNull();
    // Both slots generate: one more job may wait for one.
    expect(fullness(state(2, 2), 2)).toBeNull();
    expect(fullness(state(3, 2, 1), 2)).toEqual(['full', '2 of 2 job slots busy, 1 job(s) waiting for one']);
    expect(fullness(state(5, 0), 2)).toEqual(['full', '5 jobs admitted (5 finishing their scoring)']);
    expect(fullness(state(5, 1, 1), 2)).toEqual(['full', '5 jobs admitted (3 finishing their scoring)']);
    expect(fullness(state(1, 0), 0)).toEqual(['full', '0 of 0 job slots busy, 0 job(s) waiting for one']);
  });

  it('takes a job exactly when the submitter’s room (placement/room.ts) says the node has a free slot', () => {
    // Every state a node of 1–3 slots can be in: the worker and the submitter (which knows the node's
    // load from its advert) must agree, or the submitter places jobs the worker refuses as full.
    for (let maxJobs = 1; maxJobs <= 3; maxJobs++) {
      const bound = jobBounds(maxJobs, true).total;
      for (let running = 0; running <= bound + 1; running++) {
        for (let generating = 0; generating <= Math.min(running, maxJobs + 1); generating++) {
          for (let waiting = 0; waiting <= Math.min(running - generating, 2); waiting++) {
            const load = {
              queued: waiting,
              running: running - waiting,
              generating,
              waiting,
              capacity: maxJobs,
            };
            const ctx = {
              fleet: indexFleet([fleetNode(advert('w', { load }))]),
              outstanding: new Map(),
              selfPeerId: 's',
              proven: new Set(['w']),
              busyUntil: new Map(),
              now: 0,
            };
            const takes = fullness(state(running, generating, waiting), maxJobs) === null;
            expect(takes, JSON.stringify(load)).toBe(freeSlots('w', ctx) > 0);
          }
        }
      }
    }
  });
});
