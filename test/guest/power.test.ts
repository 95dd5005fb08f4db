// A guest's power state (issue 13, build 4): `pmset -g batt` on macOS, /sys/class/power_supply on
// Linux, in the formats the real tools print, including the cases that are easy to get wrong (a
// desktop with no battery, a UPS, a mouse's battery, a charger that reports nothing).
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  linuxPowerSource,
  parseHidIdleMs,
  parseLinuxSupplies,
  parsePmsetBatt,
  platformPowerSource,
} from '../../node/guest/power.ts';

describe('pmset -g batt (macOS)', () => {
  it('reads a MacBook on battery and on AC', () => {
    expect(
      parsePmsetBatt(
        "Now drawing from 'Battery Power'\n -InternalBattery-0 (id=6553699)\t97%; discharging; 4:39 remaining present: true\n",
      ),
    ).toEqual({ onBattery: true, percent: 97 });
    expect(
      parsePmsetBatt(
        "Now drawing from 'AC Power'\n -InternalBattery-0 (id=6553699)\t100%; charged; 0:00 remaining present: true\n",
      ),
    ).toEqual({ onBattery: false, percent: 100 });
    expect(
      parsePmsetBatt(
        "Now drawing from 'AC Power'\n -InternalBattery-0 (id=4653155)\t54%; charging; (no estimate) present: true\n",
      ),
    ).toEqual({ onBattery: false, percent: 54 });
  });

  it('reads a desktop Mac (no battery) as on AC, a UPS during an outage as battery, and nonsense as unknown', () => {
    expect(parsePmsetBatt("Now drawing from 'AC Power'\n")).toEqual({ onBattery: false, percent: null });
    expect(
      parsePmsetBatt(
        "Now drawing from 'UPS Power'\n -Back-UPS ES 700\t(id=1)\t88%; discharging; present: true\n",
      ),
    ).toEqual({ onBattery: true, percent: 88 });
    expect(parsePmsetBatt('')).toEqual({ onBattery: null, percent: null });
    expect(parsePmsetBatt('pmset: command not found')).toEqual({ onBattery: null, percent: null });
  });
});

describe('/sys/class/power_supply (Linux)', () => {
  const AC_ON = { type: 'Mains\n', online: '1\n' };
  const AC_OFF = { type: 'Mains\n', online: '0\n' };
  it('a laptop: discharging battery or mains offline is battery; mains online is not', () => {
    expect(
      parseLinuxSupplies([AC_OFF, { type: 'Battery\n', status: 'Discharging\n', capacity: '41\n' }]),
    ).toEqual({
      onBattery: true,
      percent: 41,
    });
    expect(
      parseLinuxSupplies([AC_ON, { type: 'Battery\n', status: 'Charging\n', capacity: '41\n' }]),
    ).toEqual({
      onBattery: false,
      percent: 41,
    });
    expect(parseLinuxSupplies([AC_ON, { type: 'Battery', status: 'Full', capacity: '100' }])).toEqual({
      onBattery: false,
      percent: 100,
    });
    // "Not charging" on AC (a charge limit), and a battery whose status lags behind the unplugged mains.
    expect(
      parseLinuxSupplies([AC_ON, { type: 'Battery', status: 'Not charging', capacity: '80' }]).onBattery,
    ).toBe(false);
    expect(
      parseLinuxSupplies([AC_OFF, { type: 'Battery', status: 'Unknown', capacity: '80' }]).onBattery,
    ).toBe(true);
  });

  it('a USB-C charger counts as mains; a mouse battery does not count; no supplies at all is unknown', () => {
    expect(
      parseLinuxSupplies([
        { type: 'USB', online: '1' },
        { type: 'Battery', status: 'Charging' },
      ]).onBattery,
    ).toBe(false);
    expect(
      parseLinuxSupplies([
        AC_ON,
        { type: 'Battery', scope: 'Device\n', status: 'Discharging', capacity: '5' },
      ]),
    ).toEqual({ onBattery: false, percent: null });
    // A desktop: mains only, or nothing at all (a VM, a container).
    expect(parseLinuxSupplies([AC_ON])).toEqual({ onBattery: false, percent: null });
    expect(parseLinuxSupplies([])).toEqual({ onBattery: null, percent: null });
  });

  let dir = '';
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('reads the attribute files of a directory laid out like sysfs (VTNODE_POWER_SUPPLY_DIR)', async () => {
    dir = await mkdtemp(join(tmpdir(), 'vt-power-'));
    const supply = async (name: string, attrs: Record<string, string>) => {
      await mkdir(join(dir, name));
      for (const [k, v] of Object.entries(attrs)) await writeFile(join(dir, name, k), `${v}\n`);
    };
    await supply('AC', { type: 'Mains', online: '0' });
    await supply('BAT0', { type: 'Battery', status: 'Discharging', capacity: '63' });
    await supply('hidpp_battery_0', {
      type: 'Battery',
      scope: 'Device',
      status: 'Discharging',
      capacity: '9',
    });
    const source = platformPowerSource({ VTNODE_POWER_SUPPLY_DIR: dir });
    expect(await source.read()).toEqual({ onBattery: true, percent: 63 });
    await writeFile(join(dir, 'AC', 'online'), '1\n');
    await writeFile(join(dir, 'BAT0', 'status'), 'Charging\n');
    expect(await source.read()).toEqual({ onBattery: false, percent: 63 });
    expect(await linuxPowerSource(join(dir, 'missing')).read()).toEqual({ onBattery: null, percent: null });
  });
});

describe('ioreg HIDIdleTime (macOS)', () => {
  it('reads the time since the last input in ms, and null when ioreg says nothing', () => {
    const out = `+-o IOHIDSystem  <class IOHIDSystem, id 0x100000465>
    {
      "HIDIdleTime" = 12345678901
      "HIDParameters" = {"HIDClickTime"=500000000}
    }`;
    expect(parseHidIdleMs(out)).toBe(12_345);
    expect(parseHidIdleMs('')).toBeNull();
  });
});
