import { execFile } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Whether the machine runs on battery now. */
export interface PowerState {
  /** True on battery (or a UPS), false on mains, null when the machine does not say (a desktop without power data). */
  onBattery: boolean | null;
  /** Charge of the main battery in percent, or null. */
  percent: number | null;
}

/** Reads the machine's power state (`pmset` on macOS, sysfs on Linux; fakes in tests). */
export interface PowerSource {
  read(signal?: AbortSignal): Promise<PowerState>;
}

const UNKNOWN: PowerState = { onBattery: null, percent: null };

/**
 * Parses `pmset -g batt` (macOS):
 *
 *     Now drawing from 'Battery Power'
 *      -InternalBattery-0 (id=4653155)	85%; discharging; 4:39 remaining present: true
 *
 * A desktop Mac prints only `Now drawing from 'AC Power'`; a Mac on a UPS during an outage prints
 * `'UPS Power'`, which counts as battery.
 */
export function parsePmsetBatt(text: string): PowerState {
  const source = /Now drawing from '([^']+)'/.exec(text)?.[1];
  const percent = /\t(\d{1,3})%;/.exec(text)?.[1];
  return {
    onBattery: source === undefined ? null : /battery|ups/i.test(source),
    percent: percent === undefined ? null : Number(percent),
  };
}

/** One entry of /sys/class/power_supply: the attribute files that decide the power state. */
export interface LinuxSupply {
  /** `type`: Mains, Battery, USB, UPS, ... */
  type: string;
  /** `scope`: `Device` for a peripheral's battery (a mouse), absent or `System` for the machine's own. */
  scope?: string;
  /** `online`: 1 when a mains or USB supply is plugged in. */
  online?: string;
  /** `status`: Charging, Discharging, Full, Not charging, Unknown (batteries). */
  status?: string;
  /** `capacity`: charge in percent (batteries). */
  capacity?: string;
}

/**
 * The power state from the machine's supplies (a peripheral's battery does not count): on battery
 * when a system battery discharges, or when there are external supplies and none is online.
 */
export function parseLinuxSupplies(supplies: LinuxSupply[]): PowerState {
  const own = supplies.filter((s) => s.scope?.trim() !== 'Device');
  const batteries = own.filter((s) => s.type.trim() === 'Battery');
  const external = own.filter((s) => ['Mains', 'USB', 'USB_C', 'USB_PD'].includes(s.type.trim()));
  const capacity = batteries.map((b) => Number(b.capacity?.trim())).find((n) => Number.isFinite(n));
  const percent = capacity ?? null;
  if (batteries.some((b) => b.status?.trim() === 'Discharging')) return { onBattery: true, percent };
  if (external.some((s) => s.online?.trim() === '1')) return { onBattery: false, percent };
  if (batteries.length > 0 && external.length > 0) return { onBattery: true, percent };
  return batteries.length > 0 ? { onBattery: false, percent } : UNKNOWN;
}

const ATTRIBUTES = ['type', 'scope', 'online', 'status', 'capacity'] as const;

/** The Linux power source: the attribute files under `root` (default /sys/class/power_supply). */
export function linuxPowerSource(root = '/sys/class/power_supply'): PowerSource {
  return {
    async read() {
      const names = await readdir(root).catch(() => [] as string[]);
      const supplies: LinuxSupply[] = [];
      for (const name of names) {
        const entry: Record<string, string> = {};
        for (const attr of ATTRIBUTES) {
          const text = await readFile(join(root, name, attr), 'utf8').catch(() => null);
          if (text !== null) entry[attr] = text;
        }
        if (entry['type'] !== undefined) supplies.push(entry as unknown as LinuxSupply);
      }
      return parseLinuxSupplies(supplies);
    },
  };
}

/** The macOS power source: `pmset -g batt` (a few ms; no battery on a desktop Mac). */
export function macPowerSource(): PowerSource {
  return {
    read(signal) {
      return new Promise((resolve) => {
        execFile('pmset', ['-g', 'batt'], { timeout: 5000, ...(signal ? { signal } : {}) }, (err, out) =>
          resolve(err ? UNKNOWN : parsePmsetBatt(out)),
        );
      });
    },
  };
}

/**
 * This machine's power source. `VTNODE_POWER_SUPPLY_DIR` points the Linux reader at another
 * directory laid out like /sys/class/power_supply (the tests fake a laptop's battery so).
 */
export function platformPowerSource(env: NodeJS.ProcessEnv = process.env): PowerSource {
  const dir = env['VTNODE_POWER_SUPPLY_DIR'];
  if (dir) return linuxPowerSource(dir);
  if (process.platform === 'darwin') return macPowerSource();
  if (process.platform === 'linux') return linuxPowerSource();
  return { read: async () => UNKNOWN };
}

/**
 * Parses `ioreg -c IOHIDSystem -d 4` (macOS) for the time since the last keyboard or mouse input:
 * `"HIDIdleTime" = 1234567890` in nanoseconds. Null when absent.
 */
export function parseHidIdleMs(text: string): number | null {
  const ns = /"HIDIdleTime" = (\d+)/.exec(text)?.[1];
  return ns === undefined ? null : Math.floor(Number(ns) / 1e6);
}

/** Time since the owner last used the machine, ms, or null where that is not cheap to know. */
export interface IdleSource {
  idleMs(signal?: AbortSignal): Promise<number | null>;
}

/**
 * macOS: `ioreg` (about 20 ms). Elsewhere null: Linux has no cheap, display-server-independent
 * measure (X11 and Wayland each need their own), so `--pause-while-used` is macOS only.
 */
export function platformIdleSource(): IdleSource {
  if (process.platform !== 'darwin') return { idleMs: async () => null };
  return {
    idleMs(signal) {
      return new Promise((resolve) => {
        execFile(
          'ioreg',
          ['-c', 'IOHIDSystem', '-d', '4'],
          { timeout: 5000, maxBuffer: 4 * 1024 * 1024, ...(signal ? { signal } : {}) },
          (err, out) => resolve(err ? null : parseHidIdleMs(out)),
        );
      });
    },
  };
}
