// A guest's manners (issue 13, build 4): when a node pauses (battery, load, with a margin so its own
// scoring does not make it flap), and the gate that checks on a timer and says when it changed.
import { describe, expect, it } from 'vitest';
import { createGuestGate, type GuestPolicy, pauseReason, RESUME_LOAD_SHARE } from '../../node/guest/gate.ts';
import type { PowerState } from '../../node/guest/power.ts';
import { logger } from '../../node/logger.ts';

const AC: PowerState = { onBattery: false, percent: 100 };
const BATTERY: PowerState = { onBattery: true, percent: 40 };
const UNKNOWN: PowerState = { onBattery: null, percent: null };

describe('pauseReason', () => {
  const both: GuestPolicy = { pauseOnBattery: true, maxLoad: 4 };
  it('pauses on battery only when asked to, and never for an unknown power state', () => {
    expect(pauseReason(both, { power: BATTERY, load1: 0 }, false)).toBe('on battery (40%)');
    expect(
      pauseReason(
        { pauseOnBattery: true, maxLoad: null },
        { power: { onBattery: true, percent: null }, load1: 0 },
        false,
      ),
    ).toBe('on battery');
    expect(
      pauseReason({ pauseOnBattery: false, maxLoad: null }, { power: BATTERY, load1: 99 }, false),
    ).toBeNull();
    expect(pauseReason(both, { power: UNKNOWN, load1: 0 }, false)).toBeNull();
    expect(pauseReason(both, { power: AC, load1: 0 }, true)).toBeNull();
  });

  it('pauses above --max-load and resumes only below its resume share (no flapping on its own load)', () => {
    expect(pauseReason(both, { power: AC, load1: 4 }, false)).toBeNull();
    expect(pauseReason(both, { power: AC, load1: 4.01 }, false)).toBe('load 4.0 above --max-load 4');
    const between = 4 * RESUME_LOAD_SHARE + 0.5;
    expect(pauseReason(both, { power: AC, load1: between }, true)).toMatch(/above --max-load 4/);
    expect(pauseReason(both, { power: AC, load1: between }, false)).toBeNull();
    expect(pauseReason(both, { power: AC, load1: 4 * RESUME_LOAD_SHARE }, true)).toBeNull();
    expect(pauseReason({ pauseOnBattery: true, maxLoad: null }, { power: AC, load1: 500 }, false)).toBeNull();
  });

  it('pauses while the owner uses the machine (macOS idle time), and not where idle time is unknown', () => {
    const used: GuestPolicy = { pauseOnBattery: false, maxLoad: null, pauseWhileUsedMs: 300_000 };
    expect(pauseReason(used, { power: AC, load1: 0, idleMs: 2_000 }, false)).toBe(
      'in use (keyboard or mouse within 5 min)',
    );
    expect(pauseReason(used, { power: AC, load1: 0, idleMs: 300_001 }, true)).toBeNull();
    expect(pauseReason(used, { power: AC, load1: 0, idleMs: null }, false)).toBeNull();
    expect(
      pauseReason({ ...used, pauseWhileUsedMs: null }, { power: AC, load1: 0, idleMs: 0 }, false),
    ).toBeNull();
  });
});

describe('createGuestGate', () => {
  it('checks before start resolves, then on its interval; tells each change once', async () => {
    let power = AC;
    let load = 0.5;
    const changes: (string | null)[] = [];
    let changed: (() => void) | null = null;
    const gate = createGuestGate({
      policy: { pauseOnBattery: true, maxLoad: 2 },
      power: { read: async () => power },
      load: () => load,
      intervalMs: 20,
      log: logger('test:guest'),
      onChange: () => {
        changes.push(gate.paused());
        changed?.();
      },
    });
    const next = () =>
      new Promise<void>((resolve) => {
        changed = resolve;
      });
    power = BATTERY;
    await gate.start();
    expect(gate.paused()).toBe('on battery (40%)');
    expect(gate.since()).not.toBeNull();
    let wait = next();
    power = AC;
    await wait;
    expect(gate.paused()).toBeNull();
    expect(gate.since()).toBeNull();
    wait = next();
    load = 3;
    await wait;
    expect(gate.paused()).toBe('load 3.0 above --max-load 2');
    wait = next();
    load = 1;
    await wait;
    gate.stop();
    expect(changes).toEqual(['on battery (40%)', null, 'load 3.0 above --max-load 2', null]);
  });

  it('a node without a policy never reads its power', async () => {
    let reads = 0;
    const gate = createGuestGate({
      policy: { pauseOnBattery: false, maxLoad: null },
      power: {
        read: async () => {
          reads += 1;
          return BATTERY;
        },
      },
      load: () => 100,
      intervalMs: 10,
      log: logger('test:guest'),
      onChange: () => {},
    });
    await gate.start();
    expect(gate.paused()).toBeNull();
    expect(reads).toBe(0);
    gate.stop();
  });

  it('a failing power read leaves the state as it was, and the checks go on', async () => {
    let fail = false;
    let failures = 0;
    let failedTwice: () => void = () => {};
    const twice = new Promise<void>((resolve) => {
      failedTwice = resolve;
    });
    let changes = 0;
    const gate = createGuestGate({
      policy: { pauseOnBattery: true, maxLoad: null },
      power: {
        read: async () => {
          if (!fail) return BATTERY;
          if (++failures === 2) failedTwice();
          throw new Error('pmset crashed');
        },
      },
      intervalMs: 10,
      log: logger('test:guest'),
      onChange: () => {
        changes += 1;
      },
    });
    await gate.start();
    expect(gate.paused()).toMatch(/on battery/);
    fail = true;
    await twice;
    gate.stop();
    expect(gate.paused()).toMatch(/on battery/);
    expect(changes).toBe(1);
  });
});
