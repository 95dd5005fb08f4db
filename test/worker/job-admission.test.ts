import { describe, expect, it } from 'vitest';
import { fullness } from '../../node/worker/job-admission.ts';
import { freeSlots, indexFleet, TAIL_JOBS_PER_SLOT } from '../../placement/room.ts';
import { advert, fleetNode } from '../helpers/adverts.ts';

describe('job admission: fullness', () => {
  it('refuses when every job slot generates, or when the jobs finishing their scoring fill the bound', () => {
    expect(fullness({ stopped: false, running: 0, generating: 0 }, 2)).toBeNull();
    expect(fullness({ stopped: false, running: 3, generating: 1 }, 2)).toBeNull();
    expect(fullness({ stopped: false, running: 2, generating: 2 }, 2)).toEqual([
      'full',
      '2 of 2 job slots busy',
    ]);
    expect(fullness({ stopped: false, running: 4, generating: 0 }, 2)).toEqual([
      'full',
      '4 jobs admitted (4 finishing their scoring)',
    ]);
    expect(fullness({ stopped: false, running: 1, generating: 0 }, 0)).toEqual([
      'full',
      '0 of 0 job slots busy',
    ]);
  });

  it('takes a job exactly when the submitter’s room (placement/room.ts) says the node has a free slot', () => {
    // Every state a node of 1–3 slots can be in: the worker and the submitter (which knows the node's
    // load from its advert) must agree, or the submitter places jobs the worker refuses as full.
    for (let maxJobs = 1; maxJobs <= 3; maxJobs++) {
      const bound = maxJobs * (1 + TAIL_JOBS_PER_SLOT);
      for (let running = 0; running <= bound + 1; running++) {
        for (let generating = 0; generating <= Math.min(running, maxJobs + 1); generating++) {
          const load = { queued: 0, running, generating, capacity: maxJobs };
          const ctx = {
            fleet: indexFleet([fleetNode(advert('w', { load }))]),
            outstanding: new Map(),
            selfPeerId: 's',
            proven: new Set(['w']),
            busyUntil: new Map(),
            now: 0,
          };
          const takes = fullness({ stopped: false, running, generating }, maxJobs) === null;
          expect(takes, JSON.stringify(load)).toBe(freeSlots('w', ctx) > 0);
        }
      }
    }
  });
});
