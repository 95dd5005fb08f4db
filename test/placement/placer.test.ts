import { describe, expect, it } from 'vitest';
import type { NodeOutstanding } from '../../placement/eligibility.ts';
import type { FleetNode } from '../../placement/fleet-view.ts';
import { hrwRank } from '../../placement/hrw.ts';
import { concurrencyWeight, createPlacer, loadCap, type Placement } from '../../placement/placer.ts';
import { createReputation } from '../../placement/reputation.ts';
import { seededRandom } from '../../placement/seeded-random.ts';
import { advert, fleet, fleetNode, MODEL, model, task, WS_B } from '../helpers/adverts.ts';

function ok(p: Placement): Extract<Placement, { ok: true }> {
  if (!p.ok) throw new Error(`expected a placement, got: ${p.message}`);
  return p;
}

function req(label: string, extra: { exclude?: string[] } = {}) {
  return { task: task(label), model: MODEL, ...extra };
}

function one(peerId: string, jobs: number, models: string[] = [MODEL]): [string, NodeOutstanding] {
  return [peerId, { jobs, generating: jobs, models }];
}

describe('loadCap', () => {
  it('is ⌈(1+ε)·mean⌉ with the new job in the mean, scaled by weight share', () => {
    expect(loadCap(0.25, 11, 1, 4)).toBe(4); // mean 3, 3.75 → 4
    expect(loadCap(0, 11, 1, 4)).toBe(3);
    expect(loadCap(0, 0, 1, 4)).toBe(1); // never below 1
    expect(loadCap(0.5, 9, 2, 4)).toBe(8); // 1.5 · 10 · 1/2 = 7.5
    expect(loadCap(0.1, 24, 2, 5)).toBe(11); // 1.1 · 25 · 2 / 5 = 11.000000000000002 must not round up to 12
    expect(loadCap(Number.POSITIVE_INFINITY, 100, 1, 4)).toBe(Number.POSITIVE_INFINITY);
  });
});

describe('createPlacer', () => {
  it('rejects a bad epsilon', () => {
    expect(() => createPlacer({ epsilon: -0.1 })).toThrow(/epsilon/);
    expect(() => createPlacer({ epsilon: Number.NaN })).toThrow(/epsilon/);
  });

  it('places an idle fleet on the rendezvous owner of (prompt, model)', () => {
    const placer = createPlacer();
    const nodes = fleet(5);
    for (let i = 0; i < 50; i++) {
      const p = ok(placer.place(req(`t${i}`), nodes, 0));
      const expected = hrwRank(
        placer.key(task(`t${i}`).promptFingerprint, MODEL),
        nodes.map((n) => ({ id: n.advert.peerId, weight: 2 })),
      )[0]!.id;
      expect(p.peerId).toBe(expected);
      expect(p.reason).toBe('owner');
      expect(p.ranked).toHaveLength(5);
      expect(p.node.advert.peerId).toBe(p.peerId);
    }
  });

  it('is deterministic: every submitter computes the same owner from the same view in any order', () => {
    const nodes = fleet(6);
    const shuffled = [...nodes].reverse();
    const outstanding = new Map([one('n1', 1), one('n4', 2)]);
    for (let i = 0; i < 100; i++) {
      const a = ok(createPlacer().place(req(`t${i}`), nodes, 0, outstanding));
      const b = ok(createPlacer().place(req(`t${i}`), shuffled, 0, outstanding));
      expect(b.peerId).toBe(a.peerId);
      expect(b.ranked.map((r) => r.peerId)).toEqual(a.ranked.map((r) => r.peerId));
    }
  });

  it('keys on the model too: the same prompt with another model may go elsewhere', () => {
    const placer = createPlacer();
    expect(placer.key('p', 'm1')).not.toBe(placer.key('p', 'm2'));
  });

  it('sends a job to a node whose advert shows the prompt warm', () => {
    const t = task('warm');
    const nodes = fleet(4);
    const owner = ok(createPlacer().place(req('warm'), nodes, 0)).peerId;
    const other = nodes.find((n) => n.advert.peerId !== owner)!.advert.peerId;
    const withWarm = nodes.map((n) =>
      n.advert.peerId === other
        ? fleetNode(advert(other, { warm: [{ prompt: t.promptFingerprint, model: MODEL }] }))
        : n,
    );
    const p = ok(createPlacer().place(req('warm'), withWarm, 0));
    expect(p.peerId).toBe(other);
    expect(p.reason).toBe('warm');
    expect(p.chosen.warmIndex).toBe(0);
    // Turned off, the owner wins again.
    expect(ok(createPlacer({ warmAffinity: false }).place(req('warm'), withWarm, 0)).peerId).toBe(owner);
  });

  it('ignores a warm entry for another model', () => {
    const t = task('w2');
    const nodes = fleet(4).map((n) =>
      fleetNode(advert(n.advert.peerId, { warm: [{ prompt: t.promptFingerprint, model: 'other' }] })),
    );
    expect(ok(createPlacer().place(req('w2'), nodes, 0)).reason).toBe('owner');
  });

  it('prefers the node where the prompt is newest among several warm nodes', () => {
    const t = task('multi');
    const filler = { prompt: task('filler').promptFingerprint, model: MODEL };
    const mine = { prompt: t.promptFingerprint, model: MODEL };
    const nodes = [
      fleetNode(advert('a', { warm: [filler, filler, mine] })),
      fleetNode(advert('b', { warm: [filler, mine] })),
      fleetNode(advert('c', { warm: [] })),
    ];
    const p = ok(createPlacer().place(req('multi'), nodes, 0));
    expect(p.peerId).toBe('b');
    expect(p.reason).toBe('warm');
  });

  it('passes over a warm node at its load cap', () => {
    const t = task('busy');
    const nodes = [
      fleetNode(advert('a', { warm: [{ prompt: t.promptFingerprint, model: MODEL }] })),
      fleetNode(advert('b')),
      fleetNode(advert('c')),
    ];
    // Loads a=3, b=0, c=0: total 3, mean with the new job 4/3, cap ⌈1.1·4/3⌉ = 2 < 3 + 1.
    const p = ok(createPlacer().place(req('busy'), nodes, 0, new Map([one('a', 3)])));
    expect(p.peerId).not.toBe('a');
    expect(p.reason === 'owner' || p.reason === 'spill').toBe(true);
    expect(p.ranked.find((r) => r.peerId === 'a')!.cap).toBe(2);
  });

  it('spills to the next node in rendezvous order when the owner is at its cap', () => {
    const nodes = fleet(4);
    const placer = createPlacer({ epsilon: 0 });
    const first = ok(placer.place(req('hot'), nodes, 0));
    const ownerId = first.peerId;
    const p = ok(placer.place(req('hot'), nodes, 0, new Map([one(ownerId, 1)])));
    expect(p.reason).toBe('spill');
    expect(p.peerId).toBe(first.ranked[1]!.peerId);
  });

  it('counts advertised queued + running jobs in the load, unless told not to', () => {
    const nodes = fleet(4);
    const owner = ok(createPlacer().place(req('adv'), nodes, 0)).peerId;
    const busy = nodes.map((n) =>
      n.advert.peerId === owner
        ? fleetNode(advert(owner, { load: { queued: 3, running: 2, capacity: 2 } }))
        : n,
    );
    const p = ok(createPlacer().place(req('adv'), busy, 0));
    expect(p.peerId).not.toBe(owner);
    expect(p.ranked.find((r) => r.peerId === owner)!.load).toBe(5);
    expect(ok(createPlacer({ countAdvertisedLoad: false }).place(req('adv'), busy, 0)).peerId).toBe(owner);
  });

  it('with an unbounded epsilon always picks the owner', () => {
    const nodes = fleet(3);
    const placer = createPlacer({ epsilon: Number.POSITIVE_INFINITY });
    const owner = ok(placer.place(req('x'), nodes, 0)).peerId;
    expect(ok(placer.place(req('x'), nodes, 0, new Map([one(owner, 1000)]))).peerId).toBe(owner);
  });

  it('never lets any node exceed its cap over a long sequence of placements', () => {
    const rand = seededRandom(7);
    const nodes = [
      ...fleet(3),
      fleetNode(advert('big', { load: { queued: 0, running: 0, capacity: 6 } })),
      fleetNode(advert('small', { load: { queued: 0, running: 0, capacity: 1 } })),
    ];
    for (const epsilon of [0, 0.1, 0.25, 1]) {
      const placer = createPlacer({ epsilon });
      const outstanding = new Map<string, NodeOutstanding>();
      let total = 0;
      for (let i = 0; i < 400; i++) {
        // A hot prompt half of the time, to push its owner against the cap.
        const label = rand() < 0.5 ? 'hot' : `t${i}`;
        const p = ok(placer.place(req(label), nodes, 0, outstanding));
        expect(p.chosen.load + 1).toBeLessThanOrEqual(p.chosen.cap);
        const jobs = (outstanding.get(p.peerId)?.jobs ?? 0) + 1;
        outstanding.set(p.peerId, { jobs, generating: jobs, models: [MODEL] });
        total++;
        // Finish a random job now and then so loads move both ways.
        if (rand() < 0.3) {
          const ids = [...outstanding.keys()].filter((k) => outstanding.get(k)!.jobs > 0);
          const id = ids[Math.floor(rand() * ids.length)]!;
          const jobs = outstanding.get(id)!.jobs - 1;
          outstanding.set(id, { jobs, generating: jobs, models: [MODEL] });
          total--;
        }
        const weights = new Map(nodes.map((n) => [n.advert.peerId, n.advert.load.capacity]));
        const totalWeight = [...weights.values()].reduce((a, b) => a + b, 0);
        for (const [id, o] of outstanding) {
          // Each node stays within the cap computed for the last job it took.
          expect(o.jobs).toBeLessThanOrEqual(
            Math.ceil((1 + epsilon) * (total + 1) * (weights.get(id)! / totalWeight)) + 1,
          );
        }
      }
    }
  });

  it('gives nodes a share of owners proportional to their weight', () => {
    const nodes = [
      fleetNode(advert('a', { load: { queued: 0, running: 0, capacity: 1 } })),
      fleetNode(advert('b', { load: { queued: 0, running: 0, capacity: 3 } })),
    ];
    const placer = createPlacer();
    let b = 0;
    for (let i = 0; i < 2000; i++) if (ok(placer.place(req(`t${i}`), nodes, 0)).peerId === 'b') b++;
    expect(Math.abs(b / 2000 - 0.75)).toBeLessThan(0.03);
  });

  it('can weigh by model concurrency instead of job capacity', () => {
    const nodes = [
      fleetNode(advert('a', { models: [model({ concurrency: 1 })] })),
      fleetNode(advert('b', { models: [model({ concurrency: 4 })] })),
    ];
    const p = ok(createPlacer({ weight: concurrencyWeight }).place(req('c'), nodes, 0));
    expect(p.ranked.find((r) => r.peerId === 'b')!.weight).toBe(4);
    expect(p.ranked.find((r) => r.peerId === 'a')!.weight).toBe(1);
  });

  it('refuses a weight function that returns a non-positive weight', () => {
    expect(() => createPlacer({ weight: () => 0 }).place(req('w'), fleet(2), 0)).toThrow(/weight of n\d/);
  });

  it('lowers the weight of penalised nodes and skips cooling-down ones', () => {
    const rep = createReputation({ coolDownMs: 1000, halfLifeMs: 60_000 });
    const placer = createPlacer({ reputation: rep });
    const nodes = fleet(3);
    const owner = ok(placer.place(req('r'), nodes, 0)).peerId;
    rep.failure(owner, 0);
    const during = ok(placer.place(req('r'), nodes, 500));
    expect(during.peerId).not.toBe(owner);
    expect(during.rejected).toEqual([
      expect.objectContaining({
        peerId: owner,
        rejection: expect.objectContaining({ code: 'cooling-down' }),
      }),
    ]);
    const after = ok(placer.place(req('r'), nodes, 2000));
    const entry = after.ranked.find((r) => r.peerId === owner)!;
    expect(entry.weight).toBeCloseTo(2 / (1 + 0.5 ** (2000 / 60_000)), 10);
    // A penalised node owns fewer keys than its peers.
    let owned = 0;
    for (let i = 0; i < 1500; i++) if (ok(placer.place(req(`k${i}`), nodes, 2000)).peerId === owner) owned++;
    expect(owned / 1500).toBeLessThan(0.27);
    expect(owned / 1500).toBeGreaterThan(0.1);
  });

  it('honours exclude (nodes that refused the job)', () => {
    const nodes = fleet(3);
    const placer = createPlacer();
    const owner = ok(placer.place(req('e'), nodes, 0)).peerId;
    const p = ok(placer.place(req('e', { exclude: [owner] }), nodes, 0));
    expect(p.peerId).not.toBe(owner);
  });

  it('places only on eligible nodes and explains when there are none', () => {
    const nodes = [
      fleetNode(advert('a', { workspaces: [WS_B] })),
      fleetNode(advert('b')),
      fleetNode(advert('c', { models: [model({ id: 'other' })] })),
    ];
    for (let i = 0; i < 20; i++) expect(ok(createPlacer().place(req(`t${i}`), nodes, 0)).peerId).toBe('b');
    const p = createPlacer().place(req('x', { exclude: ['b'] }), nodes, 0);
    expect(p.ok).toBe(false);
    if (!p.ok) {
      expect(p.message).toContain('b: excluded');
      expect(p.rejected).toHaveLength(3);
    }
    const none = createPlacer().place({ task: task('y'), model: 'nobody-serves-this' }, nodes, 0);
    expect(none).toMatchObject({ ok: false, message: 'no node serves model nobody-serves-this' });
    const empty: FleetNode[] = [];
    expect(createPlacer().place(req('z'), empty, 0)).toMatchObject({
      ok: false,
      message: 'no nodes in the fleet view',
    });
  });

  it('checks memory against this submitter’s reservations from its outstanding jobs', () => {
    const GiB = 2 ** 30;
    const nodes = [
      fleetNode(
        advert('a', {
          models: [
            model({ id: 'm1', loaded: false, memoryBytes: 30 * GiB }),
            model({ id: 'm2', loaded: false, memoryBytes: 30 * GiB }),
          ],
          memory: { total: 64 * GiB, free: 40 * GiB, reserved: 0 },
        }),
      ),
    ];
    const placer = createPlacer();
    expect(placer.place({ task: task('m'), model: 'm1' }, nodes, 0).ok).toBe(true);
    const withM1 = new Map([one('a', 1, ['m1'])]);
    expect(placer.place({ task: task('m'), model: 'm1' }, nodes, 0, withM1).ok).toBe(true);
    const p = placer.place({ task: task('m'), model: 'm2' }, nodes, 0, withM1);
    expect(p.ok).toBe(false);
    if (!p.ok) expect(p.message).toMatch(/needs 30\.0 GiB for model m2, has 10\.0 GiB free/);
  });
});
