// The fleet of the multi-host fault drills (test/faults/drills.test.ts): one network namespace per
// host on a bridge (helpers/netns.ts). Host 0 runs the submitter, hosts 0..3 are workers (fast scoring,
// helpers/fast-scoring-node.ts), each with its own emulated model server (`vtnode model-server`, a
// process of its own on the host's loopback, so a drill can kill, stop or replace it), hosts 4 and 5
// run collectors. Model servers outlive fleets; `startFleet` starts fresh nodes in fresh data dirs.

import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { EmulatorStats, FaultsInput } from '../../node/model-server/emulator.ts';
import type { FleetStatus } from '../../node/status.ts';
import { LEDGER, MODEL, type RunJson } from './campaign.ts';
import { type Proc, type Sandbox, vtnode } from './cli.ts';
import { INTERVAL } from './fleet.ts';
import { collectorArgs } from './load-fleet.ts';
import type { TestNetwork } from './netns.ts';
import { type Checked, notYet, pollFor } from './poll.ts';

const run = promisify(execFile);
const NODE = join(import.meta.dirname, 'fast-scoring-node.ts');

/** Hosts of the drill fleet. */
export const HOSTS = 6;
export const SUBMITTER = 0;
/** Worker hosts: the submitter's host works too. */
export const WORKERS = [0, 1, 2, 3] as const;
export const COLLECTORS = [4, 5] as const;
/** Port of each worker host's model server (on its loopback). */
export const MODEL_PORT = 8080;
/** The seed of every drill campaign (sample ids depend on it): see runCampaign. */
export const CAMPAIGN_SEED = 1;

export interface DrillFleetOptions {
  /** Tracks processes and temp dirs. */
  box: Sandbox;
  /** Six hosts (HOSTS). */
  net: TestNetwork;
  /** Tasks of every campaign (model servers and collectors read it). */
  tasksFile: string;
  /** The model servers' --time-scale (how long a sample takes to generate). */
  timeScale: number;
  /** Drill log: one line per event, with the time since the drill began. */
  log: (line: string) => void;
}

/** One fleet: fresh data dirs, processes and peer ids. */
export interface Fleet {
  /** Data dir per host (node or collector). */
  dirs: string[];
  /** The process per host. */
  procs: Proc[];
  /** Peer id per host. */
  peers: string[];
  /** Dataset dir per collector host (by host index). */
  datasets: Map<number, string>;
}

/** Bounded polling with a pause between tries (status calls spawn a process: poll gently on 2 cores). */
export function poll<T>(
  fn: () => Promise<Checked<T>>,
  timeoutMs: number,
  what: string,
  pauseMs = 1000,
): Promise<T> {
  return pollFor(fn, { what, timeoutMs, pauseMs });
}

export class DrillFleet {
  /** The model server process of each worker host. */
  readonly modelServers = new Map<number, Proc>();

  readonly o: DrillFleetOptions;

  constructor(options: DrillFleetOptions) {
    this.o = options;
  }

  /** Starts (or restarts) the emulated model server of host `h`; resolves once it listens. */
  async startModelServer(h: number): Promise<Proc> {
    const args = ['model-server', '--port', String(MODEL_PORT), '--emulate', 'llama-server'];
    args.push('--tasks', this.o.tasksFile, '--model', MODEL, '--time-scale', String(this.o.timeScale));
    args.push('--concurrency', '2', '--cache-prompts', '8', '--script', 'mixed');
    const proc = this.o.box.spawn(args, { VTNODE_DEBUG: '' }, this.o.net.exec(h));
    await proc.waitFor(/emulating llama-server/, 30_000);
    this.modelServers.set(h, proc);
    return proc;
  }

  /** Sets the fault injection of host `h`'s emulator (asked on its loopback). */
  async setEmulatorFaults(h: number, faults: FaultsInput): Promise<void> {
    const url = `http://127.0.0.1:${MODEL_PORT}/vtnode/emulator/faults`;
    const [cmd, ...pre] = this.o.net.exec(h);
    await run(cmd!, [...pre, 'curl', '-sf', '-m', '5', '-X', 'POST', '-d', JSON.stringify(faults), url]);
  }

  /** The emulator counters of host `h` (asked on its loopback). */
  async emulatorStats(h: number): Promise<EmulatorStats> {
    const url = `http://127.0.0.1:${MODEL_PORT}/vtnode/emulator`;
    const { stdout } = await run(this.o.net.exec(h)[0]!, [
      ...this.o.net.exec(h).slice(1),
      'curl',
      '-sf',
      '-m',
      '5',
      url,
    ]);
    return (JSON.parse(stdout) as { stats: EmulatorStats }).stats;
  }

  /** `vtnode status --json` of the node on host `h`. */
  async status(f: Fleet, h: number): Promise<FleetStatus> {
    const res = await vtnode(['status', '--json', '--data-dir', f.dirs[h]!], { prefix: this.o.net.exec(h) });
    if (res.code !== 0) throw new Error(`status on host ${h}: ${res.stderr}`);
    return JSON.parse(res.stdout) as FleetStatus;
  }

  private nodeArgs(): string[] {
    const server = `http://127.0.0.1:${MODEL_PORT}`;
    return [
      '--advert-interval',
      INTERVAL,
      '--model-server',
      server,
      '--workspace',
      LEDGER,
      '--max-jobs',
      '2',
    ];
  }

  /** Starts a fresh fleet (new data dirs): nodes on the worker hosts, collectors; waits until all are ready. */
  async startFleet(name: string): Promise<Fleet> {
    const { box, net } = this.o;
    const dirs: string[] = [];
    const procs: Proc[] = [];
    const datasets = new Map<number, string>();
    for (let h = 0; h < HOSTS; h++) dirs.push(await box.tempDir(`vt-drill-${name}-h${h}-`));
    const init = await vtnode(['init', '--fleet', name, '--data-dir', dirs[SUBMITTER]!, ...this.nodeArgs()], {
      prefix: net.exec(SUBMITTER),
    });
    if (init.code !== 0) throw new Error(`init: ${init.stderr}`);
    const token = init.stdout.trim();
    procs[SUBMITTER] = box.spawn(['start', '--data-dir', dirs[SUBMITTER]!], {}, net.exec(SUBMITTER), NODE);
    for (const h of WORKERS.filter((w) => w !== SUBMITTER))
      procs[h] = box.spawn(
        ['join', token, '--data-dir', dirs[h]!, ...this.nodeArgs()],
        {},
        net.exec(h),
        NODE,
      );
    for (const h of COLLECTORS) {
      datasets.set(h, join(dirs[h]!, 'dataset'));
      procs[h] = this.spawnCollector(dirs[h]!, datasets.get(h)!, h, token);
    }
    const fleet: Fleet = { dirs, procs, peers: [], datasets };
    try {
      const s = await poll(
        async () => {
          const st = await this.status(fleet, SUBMITTER);
          const ready = st.nodes.filter(
            (n) => n.models.length > 0 && n.sandbox.ok && n.workspaces.length > 0,
          );
          return st.nodes.length === HOSTS && ready.length === WORKERS.length
            ? st
            : notYet(`${st.nodes.length} nodes, ${ready.length} ready workers`);
        },
        150_000,
        `fleet ${name}: ${HOSTS} nodes, ${WORKERS.length} ready workers`,
        2000,
      );
      for (let h = 0; h < HOSTS; h++) {
        const ip = net.ips[h]!;
        const node = s.nodes.find((n) => n.addrs.some((a) => a.startsWith(`/ip4/${ip}/`)));
        if (!node) throw new Error(`no node advertises host ${h}'s address ${ip}`);
        fleet.peers[h] = node.peerId;
      }
    } catch (err) {
      // A fleet that never got ready is not left running: its processes would load the machine for
      // every later test (and outlive the run).
      const tails = this.tails(fleet);
      await this.stopFleet(fleet);
      throw new Error(`${(err as Error).message}\n${tails}`);
    }
    this.o.log(`fleet ${name} ready: ${fleet.peers.map((p, h) => `h${h}=${p.slice(-6)}`).join(' ')}`);
    return fleet;
  }

  /** A collector on host `h` (joining with `token`, or restarted on its data dir without one). */
  spawnCollector(dataDir: string, out: string, h: number, token?: string): Proc {
    const args = collectorArgs({
      dataDir,
      out,
      tasksFile: this.o.tasksFile,
      catchUp: '5s',
      ...(token ? { token } : {}),
    });
    return this.o.box.spawn(args, {}, this.o.net.exec(h));
  }

  /** Starts `vtnode run` of a campaign on the submitter (a process: the drill acts while it runs). */
  runCampaign(f: Fleet, tasksFile: string, campaign: string, k: number, extra: string[] = []): Proc {
    const args = ['run', '--data-dir', f.dirs[SUBMITTER]!, '--tasks', tasksFile, '--model', MODEL];
    // One seed for every campaign of a drill: the drilled dataset is compared with the reference run's
    // sample by sample, and sample ids depend on the seed (each campaign would get its own otherwise).
    const seed = extra.includes('--seed') ? [] : ['--seed', String(CAMPAIGN_SEED)];
    args.push('--split', 'all', '-k', String(k), '--campaign', campaign, '--json', ...seed, ...extra);
    return this.o.box.spawn(args, { VTNODE_DEBUG: '' }, this.o.net.exec(SUBMITTER));
  }

  /** Kills every process of a fleet (its data dirs stay until the sandbox is cleaned up). */
  async stopFleet(f: Fleet): Promise<void> {
    for (const p of f.procs)
      if (p && p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    await Promise.all(f.procs.map((p) => p?.exited));
  }

  /** The last lines of each process's output, for a failure message. */
  tails(f: Fleet, chars = 1500): string {
    return f.procs
      .map((p, h) =>
        p
          ? `--- host ${h} (exit ${p.child.exitCode ?? p.child.signalCode})\n${p.output().slice(-chars)}`
          : '',
      )
      .join('\n');
  }
}

/** Waits (bounded) for a campaign's `vtnode run --json` to exit; its exit code and summary. */
export async function campaignResult(
  proc: Proc,
  timeoutMs: number,
): Promise<{ code: number | null; json: RunJson }> {
  const code = await Promise.race([
    proc.exited,
    new Promise<never>((_, reject) =>
      setTimeout(
        () =>
          reject(new Error(`campaign still running after ${timeoutMs} ms:\n${proc.output().slice(-3000)}`)),
        timeoutMs,
      ),
    ),
  ]);
  const out = proc.output();
  const start = out.indexOf('{"campaign"');
  if (start < 0) throw new Error(`no summary (exit ${code}):\n${out.slice(-3000)}`);
  return { code, json: JSON.parse(out.slice(start).split('\n')[0]!) as RunJson };
}
