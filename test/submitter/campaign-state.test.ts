// What `vtnode run` reports as a campaign's status: a campaign that gave samples up is incomplete.
import { describe, expect, it } from 'vitest';
import { campaignState } from '../../node/submitter/service.ts';

const all = { planned: 6, scored: 6 };
const short = { planned: 6, scored: 4 };

describe('campaignState', () => {
  it.each([
    // live runner outcome wins over what is stored
    [{ running: true, outcome: null }, 'running', all, 'running'],
    [{ running: true, outcome: 'done' }, 'done', all, 'done'],
    [{ running: true, outcome: 'done' }, 'done', short, 'incomplete'],
    [{ running: true, outcome: 'cancelled' }, 'cancelled', short, 'cancelled'],
    [{ running: true, outcome: 'stalled' }, 'running', short, 'stalled'],
    // no runner in this daemon: the stored status (a running one lost its daemon)
    [{ running: false, outcome: null }, 'running', short, 'stalled'],
    [{ running: false, outcome: null }, 'done', all, 'done'],
    [{ running: false, outcome: null }, 'done', short, 'incomplete'],
    [{ running: false, outcome: null }, 'cancelled', short, 'cancelled'],
  ] as const)('%o stored %s with %o is %s', (live, stored, samples, expected) => {
    expect(campaignState(live, stored, samples)).toBe(expected);
  });
});
