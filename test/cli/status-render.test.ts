// `vtnode status`'s table: the WORKSPACES column says what a node holds and what it is fetching
// (issue 13: a laptop that joins with --fetch-workspaces shows up fetching, then holding).
import { describe, expect, it } from 'vitest';
import { renderStatus } from '../../cli/commands/status.ts';
import { nodeStatus } from '../../node/status.ts';
import { advert, sid } from '../helpers/adverts.ts';

describe('status table', () => {
  it('counts the workspaces a node holds, and those it fetches', () => {
    const now = Date.now();
    const studio = nodeStatus(
      { advert: advert('12D3KooWstudio0001', { host: 'studio' }), receivedAt: now, self: true },
      now,
    );
    const laptop = nodeStatus(
      {
        advert: {
          ...advert('12D3KooWlaptop0002', { host: 'laptop', workspaces: [] }),
          fetching: [sid('ws')],
        },
        receivedAt: now,
        self: false,
      },
      now,
    );
    expect(laptop.fetching).toEqual([sid('ws')]);
    expect(studio.fetching).toBeUndefined();
    const lines = renderStatus({ fleet: 'f', self: studio.peerId, nodes: [studio, laptop] }).split('\n');
    const col = lines[1]!.indexOf('WORKSPACES');
    expect(col).toBeGreaterThan(0);
    expect(lines[2]!.slice(col)).toMatch(/^1\s/);
    expect(lines[3]!.slice(col)).toMatch(/^0 \+1 fetching/);
  });
});
