/**
 * `vtnode doctor`: gathers facts about this machine and the node of a data dir (its saved config
 * says which model servers and workspaces), and turns them into checks (node/doctor/checks.ts).
 * Everything heavy is imported here, on use: the CLI loads this module only when doctor runs.
 */
import { existsSync } from 'node:fs';
import { readdir, statfs } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { TestRunner } from '../../protocol/task.ts';
import { DEFAULT_UID_BASE } from '../../sandbox/uid-pool.ts';
import { connectControl, DaemonBusyError, NoDaemonError } from '../control/client.ts';
import { DataDir, type NodeConfig } from '../data-dir.ts';
import { logger } from '../logger.ts';
import type { FleetStatus } from '../status.ts';
import { DEFAULT_DISK_LIMITS } from '../storage/disk-guard.ts';
import {
  type Check,
  checkClock,
  checkDetectedServers,
  checkDisk,
  checkIdentity,
  checkModelServer,
  checkNodeVersion,
  checkPort,
  checkReach,
  checkSandbox,
  checkWorkspace,
  type PortFacts,
  type ReachFacts,
  type SandboxFacts,
  type ServerFacts,
  tcpPorts,
  type WorkspaceFacts,
} from './checks.ts';

const log = logger('vtnode:doctor');

export interface DoctorOptions {
  /** The node's data dir (absolute). */
  dataDir: string;
  /** Milliseconds a model server's probe may take (default 5000). */
  probeTimeoutMs?: number;
  /** Aborts the checks that wait (self-test, probes, the daemon's status). */
  signal?: AbortSignal;
}

/** The platform backend and its self-test (run afresh: the doctor does not trust a cached pass). */
async function gatherSandbox(unconfined: boolean, signal?: AbortSignal): Promise<SandboxFacts> {
  const { createConfinement } = await import('../../sandbox/backend.ts');
  const facts: SandboxFacts = {
    platform: process.platform,
    unconfined,
    backend: null,
    unavailable: null,
    selfTest: null,
  };
  try {
    const confinement = await createConfinement();
    facts.backend = confinement.name;
    facts.selfTest = await confinement.selfTest(signal);
  } catch (err) {
    signal?.throwIfAborted();
    if (facts.backend === null) facts.unavailable = (err as Error).message;
    else
      facts.selfTest = {
        ok: false,
        checks: [{ name: 'self-test', ok: false, detail: (err as Error).message }],
      };
  }
  return facts;
}

async function gatherServers(config: NodeConfig, options: DoctorOptions): Promise<Check[]> {
  const { probeServer } = await import('../models/probe.ts');
  const { detectLocalServers, WELL_KNOWN_PORTS } = await import('../models/registry.ts');
  const timeoutMs = options.probeTimeoutMs ?? 5000;
  const signal = options.signal;
  if (config.modelServers.length === 0)
    return [
      checkDetectedServers(
        await detectLocalServers({ timeoutMs, ...(signal ? { signal } : {}) }),
        WELL_KNOWN_PORTS,
      ),
    ];
  const facts = await Promise.all(
    config.modelServers.map(async (url): Promise<ServerFacts> => {
      try {
        return {
          url,
          server: await probeServer(url, { timeoutMs, ...(signal ? { signal } : {}) }),
          error: null,
        };
      } catch (err) {
        signal?.throwIfAborted();
        return { url, server: null, error: (err as Error).message };
      }
    }),
  );
  return facts.map(checkModelServer);
}

/** Whether a workspace's runner (as the miner detects it), dependencies and type-checker resolve. */
async function gatherWorkspace(dir: string): Promise<WorkspaceFacts> {
  const facts: WorkspaceFacts = {
    dir,
    exists: existsSync(dir),
    runner: null,
    runnerError: null,
    readiness: null,
    typescript: { error: 'not checked' },
  };
  if (!facts.exists) return facts;
  const { readProject } = await import('../tasks/project.ts');
  const { listWorkspaceFiles } = await import('../tasks/files.ts');
  const { detectRunner } = await import('../tasks/runners.ts');
  const { checkWorkspaceReady } = await import('../../sandbox/workspace-ready.ts');
  const { resolveTypescript } = await import('../../sandbox/typecheck/resolve-typescript.mjs');
  let runner: TestRunner | null = null;
  try {
    // Without parsed test files: the runner a package declares (dependency, config file, test script).
    const detected = detectRunner(readProject(dir, await listWorkspaceFiles(dir)), []);
    if ('error' in detected) facts.runnerError = detected.error;
    else runner = detected.runner.name;
  } catch (err) {
    facts.runnerError = (err as Error).message;
  }
  facts.runner = runner;
  try {
    facts.readiness = checkWorkspaceReady({ workspace: dir, runners: runner ? [runner] : [] });
  } catch (err) {
    facts.readiness = { ok: false, problems: [(err as Error).message], fixes: [] };
  }
  try {
    const ts = resolveTypescript(dir);
    facts.typescript = { version: ts.version, source: ts.source };
  } catch (err) {
    facts.typescript = { error: (err as Error).message };
  }
  return facts;
}

async function gatherPorts(config: NodeConfig, daemon: FleetStatus | null): Promise<PortFacts[]> {
  const { DEFAULT_PORT, portFree } = await import('../net.ts');
  const fallback = config.listen.length === 0;
  const listen = fallback ? [`/ip4/0.0.0.0/tcp/${DEFAULT_PORT}`] : config.listen;
  const self = daemon?.nodes.find((n) => n.self);
  return Promise.all(
    tcpPorts(listen).map(async ({ addr, host, port }) => ({
      addr,
      port,
      // Bound on the listen address's own host: a port held on loopback may be free on another one.
      free: await portFree(port, host),
      heldByDaemon: !!self?.addrs.some((a) => tcpPorts([a]).some((p) => p.port === port)),
      fallback,
    })),
  );
}

/** The running daemon's fleet status, or null when none runs (a busy one is a warning). */
async function daemonStatus(
  dataDir: DataDir,
  signal?: AbortSignal,
): Promise<{ status: FleetStatus | null; check: Check }> {
  try {
    const control = await connectControl(dataDir, signal);
    const status = await control.call<FleetStatus>('GET', '/status', undefined, AbortSignal.timeout(10_000));
    const pid = (await dataDir.readControl())?.pid;
    return {
      status,
      check: {
        name: 'daemon',
        status: 'ok',
        detail: `running (pid ${pid}), ${status.nodes.length} node${status.nodes.length === 1 ? '' : 's'} in view`,
        fix: null,
      },
    };
  } catch (err) {
    signal?.throwIfAborted();
    if (err instanceof NoDaemonError)
      return {
        status: null,
        check: {
          name: 'daemon',
          status: 'warn',
          detail: `no daemon runs for ${dataDir.root}`,
          fix: '`vtnode start` (or `vtnode service install` to run it at boot)',
        },
      };
    const busy = err instanceof DaemonBusyError;
    return {
      status: null,
      check: {
        name: 'daemon',
        status: busy ? 'warn' : 'fail',
        detail: (err as Error).message,
        fix: busy
          ? 'run doctor again when the machine is less loaded'
          : 'restart the node (`vtnode leave`, then `vtnode start`)',
      },
    };
  }
}

/** Runs every check for the node of a data dir; never throws for what it finds. */
export async function runDoctor(options: DoctorOptions): Promise<Check[]> {
  const { signal } = options;
  const dataDir = new DataDir(options.dataDir);
  const checks: Check[] = [checkNodeVersion(process.version)];
  try {
    const fleet = await dataDir.readFleet();
    const identity = existsSync(dataDir.path('identity.key'));
    checks.push(checkIdentity({ dataDir: dataDir.root, identity, fleet: fleet?.fleet ?? null }));
  } catch (err) {
    log('reading fleet.json: %s', (err as Error).message);
    checks.push({
      name: 'identity',
      status: 'fail',
      detail: (err as Error).message,
      fix: `restore ${dataDir.path('fleet.json')} from a backup, or join the fleet again with a fresh data dir`,
    });
  }
  let config: NodeConfig;
  try {
    config = await dataDir.readConfig();
  } catch (err) {
    checks.push({
      name: 'config',
      status: 'fail',
      detail: (err as Error).message,
      fix: `fix or remove ${dataDir.path('config.json')} (\`vtnode start\` with node options writes a new one)`,
    });
    return checks;
  }
  const daemon = existsSync(dataDir.root) ? await daemonStatus(dataDir, signal) : null;
  if (daemon) checks.push(daemon.check);
  const [sandbox, servers, workspaces, ports, disk] = await Promise.all([
    gatherSandbox(config.unconfined, signal),
    gatherServers(config, options),
    Promise.all(config.workspaces.map(gatherWorkspace)),
    gatherPorts(config, daemon?.status ?? null),
    diskFree(dataDir.root),
  ]);
  checks.push(checkSandbox(sandbox), await gatherReach(dataDir, config.workspaces, config.unconfined));
  checks.push(...servers, ...workspaces.map(checkWorkspace), ...ports.map(checkPort));
  checks.push(disk);
  const { DEFAULT_SKEW_MS } = await import('../../protocol/membership.ts');
  const now = Date.now();
  const peers = (daemon?.status?.nodes ?? [])
    .filter((n) => !n.self)
    .map((n) => ({ peerId: n.peerId, host: n.host, sentAt: n.sentAt, receivedAt: now - n.lastSeenMs }));
  checks.push(checkClock({ daemon: !!daemon?.status, peers, maxSkewMs: DEFAULT_SKEW_MS }));
  return checks;
}

/** The workspaces fetched into the data dir (folders of its `workspaces`, the partial ones left out). */
async function fetchedWorkspaces(dataDir: DataDir): Promise<string[]> {
  const root = dataDir.path('workspaces');
  const entries = await readdir(root, { withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isDirectory() && !e.name.startsWith('.')).map((e) => join(root, e.name));
}

/** The paths a confined run reads, as the sandbox's first pool uid sees them (sandbox/reach.ts). */
async function gatherReach(dataDir: DataDir, workspaces: string[], unconfined: boolean): Promise<Check> {
  const facts: ReachFacts = { skipped: null, uid: DEFAULT_UID_BASE, paths: [], stageTools: false };
  if (unconfined) facts.skipped = 'this node scores without the sandbox';
  else if (process.platform !== 'linux') facts.skipped = `runs keep the caller's uid on ${process.platform}`;
  else if (process.getuid?.() !== 0) facts.skipped = "not root: runs keep the caller's uid";
  if (facts.skipped) return checkReach(facts);
  const { findObstacle } = await import('../../sandbox/reach.ts');
  const paths = [...(await fetchedWorkspaces(dataDir)), ...workspaces, dirname(dirname(process.execPath))];
  for (const path of paths.filter((p) => existsSync(p)))
    facts.paths.push({ path, blocked: await findObstacle(path, facts.uid) });
  const { findStageTools } = await import('../../sandbox/bwrap.ts');
  facts.stageTools = (await findStageTools()) !== null;
  return checkReach(facts);
}

/** Free space of the data dir's disk (the nearest existing folder above it before init). */
async function diskFree(dir: string): Promise<Check> {
  let at = dir;
  while (!existsSync(at)) at = at.slice(0, Math.max(1, at.lastIndexOf('/')));
  const fs = await statfs(at);
  return checkDisk({
    dir: at,
    freeBytes: Number(fs.bavail) * Number(fs.bsize),
    minFreeBytes: DEFAULT_DISK_LIMITS.minFreeBytes,
  });
}
