// Nodes still fetching a workspace (--fetch-workspaces, advert `fetching`) are eligible at a cost
// (issue 13, build 2): ranked after every node that holds it, chosen only when none that holds it is
// eligible, and reached by room only when no holder has a free slot.
import { describe, expect, it } from 'vitest';
import { eligibleNodes, fetchingOnly } from '../../placement/eligibility.ts';
import { createPlacer, type Placement } from '../../placement/placer.ts';
import { indexFleet, type RoomContext, withRoom } from '../../placement/room.ts';
import { decisionReason } from '../../placement/tick.ts';
import { advert, fleetNode, MODEL, task, WS, WS_B } from '../helpers/adverts.ts';

function ok(p: Placement): Extract<Placement, { ok: true }> {
  if (!p.ok) throw new Error(`expected a placement, got: ${p.message}`);
  return p;
}

const holder = (id: string) => fleetNode(advert(id));
const laptop = (id: string, fetching = [WS]) => fleetNode(advert(id, { workspaces: [], fetching }));
const req = (label: string) => ({ task: task(label), model: MODEL });

describe('a node fetching the workspace', () => {
  it('is eligible for its jobs, marked fetching; fetching another workspace is no use', () => {
    const nodes = [holder('h'), laptop('l'), laptop('other', [WS_B])];
    const { eligible, rejected } = eligibleNodes(nodes, { model: MODEL, workspaceId: WS }, 0);
    expect(eligible.map((e) => [e.node.advert.peerId, e.fetching])).toEqual([
      ['h', false],
      ['l', true],
    ]);
    expect(rejected.map((r) => [r.peerId, r.rejection.code])).toEqual([['other', 'workspace']]);
    expect(fetchingOnly(laptop('l'), WS)).toBe(true);
    // Holding it and still listing it as fetching (a stale advert): a holder.
    expect(fetchingOnly(fleetNode(advert('x', { fetching: [WS] })), WS)).toBe(false);
  });

  it('never changes what the holders are chosen for, and is ranked after all of them', () => {
    const placer = createPlacer();
    const holders = [holder('h0'), holder('h1'), holder('h2')];
    for (let i = 0; i < 60; i++) {
      const without = ok(placer.place(req(`t${i}`), holders, 0));
      const withLaptops = ok(placer.place(req(`t${i}`), [laptop('l0'), ...holders, laptop('l1')], 0));
      expect(withLaptops.peerId).toBe(without.peerId);
      expect(withLaptops.reason).toBe(without.reason);
      expect(withLaptops.ranked.slice(0, 3)).toEqual(without.ranked.map((r) => ({ ...r, fetching: false })));
      expect(
        withLaptops.ranked
          .slice(3)
          .map((r) => [r.peerId, r.fetching])
          .sort(),
      ).toEqual([
        ['l0', true],
        ['l1', true],
      ]);
    }
  });

  it('is chosen, reason fetching, when no node holding the workspace is eligible', () => {
    const placer = createPlacer();
    const busyHolder = fleetNode(advert('h', { sandbox: { backend: 'bwrap', ok: false } }));
    const p = ok(placer.place(req('t'), [busyHolder, laptop('l')], 0));
    expect(p.peerId).toBe('l');
    expect(p.reason).toBe('fetching');
    expect(p.rejected.map((r) => r.peerId)).toEqual(['h']);
    // Nothing holds or fetches it: no placement, and the message names the workspace.
    const none = placer.place(req('t'), [laptop('l', [WS_B])], 0);
    expect(none.ok).toBe(false);
    if (!none.ok) expect(none.message).toMatch(/holds workspace/);
  });

  it('gets a job through room only once every holder is full, and the decision says fetching', () => {
    const placer = createPlacer();
    const nodes = [holder('h0'), holder('h1'), laptop('l')];
    const ctx = (full: string[]): RoomContext => ({
      fleet: indexFleet(nodes),
      outstanding: new Map(full.map((id) => [id, { jobs: 2, generating: 2, models: [MODEL] }])),
      selfPeerId: 'h0',
      proven: new Set(['h0', 'h1', 'l']),
      busyUntil: new Map(),
      now: 0,
    });
    const p = ok(placer.place(req('t'), nodes, 0));
    expect(p.peerId).not.toBe('l');
    const spillTo = p.peerId === 'h0' ? 'h1' : 'h0';
    expect(withRoom(p, ctx([]))).toBe(p.peerId);
    expect(withRoom(p, ctx([p.peerId]))).toBe(spillTo);
    expect(decisionReason(p, spillTo)).toBe('spill');
    expect(withRoom(p, ctx(['h0', 'h1']))).toBe('l');
    expect(decisionReason(p, 'l')).toBe('fetching');
    expect(decisionReason(p, p.peerId)).toBe(p.reason);
  });
});
