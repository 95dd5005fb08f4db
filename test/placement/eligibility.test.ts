import { describe, expect, it } from 'vitest';
import {
  checkNode,
  type EligibilityOptions,
  eligibleNodes,
  explainNoEligible,
  modelMemoryBytes,
  type OutstandingByNode,
} from '../../placement/eligibility.ts';
import type { FleetNode } from '../../placement/fleet-view.ts';
import { createReputation } from '../../placement/reputation.ts';
import { advert, fleetNode, GiB, MODEL, model, WS, WS_B } from '../helpers/adverts.ts';

const job = { model: MODEL, workspaceId: WS };

function check(
  node: FleetNode,
  options: EligibilityOptions = {},
  extra: { outstanding?: OutstandingByNode; exclude?: ReadonlySet<string>; fleet?: FleetNode[] } = {},
) {
  return checkNode(node, job, 0, {
    fleet: extra.fleet ?? [node],
    outstanding: extra.outstanding,
    exclude: extra.exclude,
    options,
  });
}

describe('checkNode', () => {
  it('accepts a healthy node that serves the model and holds the workspace', () => {
    expect(check(fleetNode(advert('a')))).toBeNull();
  });

  it('refuses a node that does not serve the model', () => {
    const r = check(fleetNode(advert('a', { models: [model({ id: 'other' })] })));
    expect(r?.code).toBe('model');
    expect(r?.detail).toContain(MODEL);
  });

  it('refuses a node that does not hold the workspace', () => {
    const r = check(fleetNode(advert('a', { workspaces: [WS_B] })));
    expect(r?.code).toBe('workspace');
    expect(r?.detail).toContain(WS);
  });

  it('refuses a node whose sandbox self-test failed, with its detail', () => {
    const r = check(
      fleetNode(
        advert('a', { sandbox: { backend: 'bwrap', ok: false, detail: 'user namespaces disabled' } }),
      ),
    );
    expect(r?.code).toBe('sandbox');
    expect(r?.detail).toContain('user namespaces disabled');
  });

  it('refuses a node that advertises no capacity', () => {
    expect(check(fleetNode(advert('a', { load: { queued: 0, running: 0, capacity: 0 } })))?.code).toBe(
      'capacity',
    );
  });

  it('refuses an excluded node and a cooling-down node', () => {
    const node = fleetNode(advert('a'));
    expect(check(node, {}, { exclude: new Set(['a']) })?.code).toBe('excluded');
    const rep = createReputation({ coolDownMs: 1000 });
    rep.failure('a', 0);
    expect(check(node, { coolingDown: rep.coolingDown })?.code).toBe('cooling-down');
    expect(
      checkNode(node, job, 1000, { fleet: [node], options: { coolingDown: rep.coolingDown } }),
    ).toBeNull();
  });

  it('reports the first failing check in a fixed order', () => {
    const bad = fleetNode(
      advert('a', {
        models: [model({ id: 'other' })],
        workspaces: [],
        sandbox: { backend: 'none', ok: false },
      }),
    );
    expect(check(bad)?.code).toBe('model');
    const noWs = fleetNode(advert('a', { workspaces: [], sandbox: { backend: 'none', ok: false } }));
    expect(check(noWs)?.code).toBe('workspace');
  });

  describe('memory headroom', () => {
    const unloaded = (size: number | null, free: number, reserved = 0) =>
      fleetNode(
        advert('a', {
          models: [model({ loaded: false, memoryBytes: size })],
          memory: { total: 64 * GiB, free, reserved },
        }),
      );

    it('needs nothing for a loaded model, even with no free memory', () => {
      expect(
        check(fleetNode(advert('a', { memory: { total: 64 * GiB, free: 0, reserved: 64 * GiB } }))),
      ).toBeNull();
    });

    it('needs the reported size to fit in free − reserved', () => {
      expect(check(unloaded(20 * GiB, 30 * GiB, 10 * GiB))).toBeNull();
      const r = check(unloaded(20 * GiB, 30 * GiB, 11 * GiB));
      expect(r?.code).toBe('memory');
      if (r?.code !== 'memory') throw new Error('expected a memory rejection');
      expect(r.needBytes).toBe(20 * GiB);
      expect(r.headroomBytes).toBe(19 * GiB);
      expect(r.detail).toMatch(/needs 20\.0 GiB .* has 19\.0 GiB free/);
    });

    it('falls back to the configured estimate, then the fleet, then the default; unknown passes', () => {
      const node = unloaded(null, 10 * GiB);
      expect(check(node)).toBeNull();
      expect(check(node, { defaultModelMemoryBytes: 11 * GiB })?.code).toBe('memory');
      expect(check(node, { defaultModelMemoryBytes: 9 * GiB })).toBeNull();
      const other = fleetNode(advert('b', { models: [model({ memoryBytes: 12 * GiB })] }));
      expect(check(node, { defaultModelMemoryBytes: 1 }, { fleet: [node, other] })?.code).toBe('memory');
      expect(check(node, { modelMemoryBytes: { [MODEL]: 5 * GiB } }, { fleet: [node, other] })).toBeNull();
    });

    it('needs nothing for a model this submitter already reserved on the node', () => {
      const node = unloaded(20 * GiB, 1 * GiB);
      expect(check(node)?.code).toBe('memory');
      expect(
        check(node, {}, { outstanding: new Map([['a', { jobs: 1, generating: 1, models: [MODEL] }]]) }),
      ).toBeNull();
    });

    it('subtracts the sizes of other not-yet-loaded models this submitter reserved', () => {
      const node = fleetNode(
        advert('a', {
          models: [
            model({ loaded: false, memoryBytes: 20 * GiB }),
            model({ id: 'big', loaded: false, memoryBytes: 15 * GiB }),
            model({ id: 'resident', loaded: true, memoryBytes: 30 * GiB }),
          ],
          memory: { total: 64 * GiB, free: 40 * GiB, reserved: 6 * GiB },
        }),
      );
      expect(check(node)).toBeNull();
      // A job for the loaded model reserves nothing more.
      expect(
        check(node, {}, { outstanding: new Map([['a', { jobs: 2, generating: 2, models: ['resident'] }]]) }),
      ).toBeNull();
      const r = check(
        node,
        {},
        { outstanding: new Map([['a', { jobs: 1, generating: 1, models: ['big'] }]]) },
      );
      expect(r?.code).toBe('memory');
      if (r?.code === 'memory') expect(r.headroomBytes).toBe(19 * GiB);
      // A reserved model the node no longer serves is ignored.
      expect(
        check(node, {}, { outstanding: new Map([['a', { jobs: 1, generating: 1, models: ['gone'] }]]) }),
      ).toBeNull();
    });
  });
});

describe('servedModel', () => {
  it('prefers a loaded entry when two servers list the model', () => {
    const node = fleetNode(
      advert('a', {
        models: [
          model({ server: 'ollama', loaded: false, memoryBytes: null }),
          model({ server: 'mlx', loaded: true }),
        ],
        memory: { total: 64 * GiB, free: 0, reserved: 0 },
      }),
    );
    expect(check(node)).toBeNull();
    expect(eligibleNodes([node], job, 0).eligible[0]!.model.server).toBe('mlx');
  });
});

describe('modelMemoryBytes', () => {
  it('takes the largest size reported in the fleet', () => {
    const nodes = [
      fleetNode(advert('a', { models: [model({ memoryBytes: 3 })] })),
      fleetNode(advert('b', { models: [model({ memoryBytes: 7 })] })),
      fleetNode(advert('c', { models: [model({ memoryBytes: null })] })),
    ];
    expect(modelMemoryBytes(MODEL, null, nodes, {})).toBe(7);
    expect(modelMemoryBytes(MODEL, 1, nodes, {})).toBe(1);
    expect(modelMemoryBytes('unknown', null, nodes, {})).toBeNull();
  });
});

describe('eligibleNodes / explainNoEligible', () => {
  it('splits the fleet and keeps each node its reason', () => {
    const nodes = [
      fleetNode(advert('ok')),
      fleetNode(advert('nomodel', { models: [model({ id: 'x' })] })),
      fleetNode(advert('nows', { workspaces: [WS_B] })),
    ];
    const { eligible, rejected } = eligibleNodes(nodes, job, 0);
    expect(eligible.map((e) => e.node.advert.peerId)).toEqual(['ok']);
    expect(eligible[0]!.model.id).toBe(MODEL);
    expect(rejected.map((r) => [r.peerId, r.rejection.code])).toEqual([
      ['nomodel', 'model'],
      ['nows', 'workspace'],
    ]);
  });

  it('names the fleet-wide cause', () => {
    const noModel = [fleetNode(advert('a', { models: [model({ id: 'x' })] }))];
    expect(explainNoEligible(job, eligibleNodes(noModel, job, 0).rejected)).toBe(
      `no node serves model ${MODEL}`,
    );
    const noWs = [fleetNode(advert('a', { workspaces: [WS_B] }))];
    expect(explainNoEligible(job, eligibleNodes(noWs, job, 0).rejected)).toBe(
      `no node holds workspace ${WS}`,
    );
    const mixed = [...noModel, ...noWs];
    expect(explainNoEligible(job, eligibleNodes(mixed, job, 0).rejected)).toBe(
      `no node serving model ${MODEL} holds workspace ${WS}`,
    );
    expect(explainNoEligible(job, [])).toBe('no nodes in the fleet view');
  });

  it('lists each node and its reason otherwise', () => {
    const nodes = [
      fleetNode(advert('a', { sandbox: { backend: 'bwrap', ok: false } })),
      fleetNode(advert('b', { host: null, models: [model({ id: 'x' })] })),
    ];
    const message = explainNoEligible(job, eligibleNodes(nodes, job, 0).rejected);
    expect(message).toContain('a: sandbox self-test failed (bwrap)');
    expect(message).toContain(`b: does not serve model ${MODEL}`);
  });
});
