import { hostname } from 'node:os';
import { peerIdFromString } from '@libp2p/peer-id';
import type { HedgeOptions } from '../placement/hedge.ts';
import { advertTopic, digestTopic } from '../protocol/topics.ts';
import { VTNODE_VERSION } from '../protocol/version.ts';
import type { Scorer } from '../sandbox/scorer.ts';
import { sleep } from './async/sleep.ts';
import { connectControl, NoDaemonError } from './control/client.ts';
import { startControlServer } from './control/server.ts';
import type { DataDir, FleetFile, NodeConfig } from './data-dir.ts';
import { digestOf } from './digests/codec.ts';
import { createDigestGossip } from './digests/gossip.ts';
import { createLogServer, createSampleServer, logBodies, logDigests } from './digests/servers.ts';
import { digestSigner } from './digests/signature.ts';
import { createTaskServer } from './digests/task-server.ts';
import type { AdvertBody } from './fleet/adverts.ts';
import { createFleet } from './fleet/fleet.ts';
import type { Host } from './fleet/host.ts';
import { createGuestGate, type GuestGate } from './guest/gate.ts';
import { type PowerSource, platformIdleSource, platformPowerSource } from './guest/power.ts';
import { logger } from './logger.ts';
import { controlBody, RevokeRequest, RotateRequest, revoke, rotate } from './membership/admin.ts';
import { startMemberHost } from './membership/member-host.ts';
import { DEFAULT_GRACE_MS, type MembershipService } from './membership/service.ts';
import { metrics } from './metrics.ts';
import type { ModelService } from './models/service.ts';
import { DEFAULT_PORT, portFree, withoutPeerId } from './net.ts';
import { type FleetStatus, nodeStatus } from './status.ts';
import { CAMPAIGN_DB, openCampaignStore } from './submitter/campaign-store.ts';
import { type CampaignStatus, createCampaignService } from './submitter/service.ts';
import { memory } from './system.ts';
import { createOffenceLedger, type OffenceLedger } from './wire/offences.ts';
import { guardStreams } from './wire/streams.ts';
import { startWorkerRole, type WorkerRole } from './worker/role.ts';
import { openSampleLog, SAMPLE_LOG_DB } from './worker/sample-log.ts';
import { createWorkspaceAcquirer, type WorkspaceAcquirer } from './workspace/acquire.ts';
import { calibrateWorkspace } from './workspace/calibrate.ts';
import { workspaceIdentity } from './workspace/content-id.ts';
import { buildManifest, type ServedWorkspace } from './workspace/manifest.ts';
import { createWorkspaceServer } from './workspace/serve.ts';

export interface DaemonOptions {
  /** The node's data dir (identity, fleet, config, state). */
  dataDir: DataDir;
  /** The fleet this node belongs to. */
  fleet: FleetFile;
  /** Listen, announce, discovery and resource options. */
  config: NodeConfig;
  /** The node's model servers; none = the node serves no model (a collector, a submitter only). */
  models?: ModelService;
  /** Aborting it stops the daemon gracefully (a leaving advert first). */
  signal?: AbortSignal;
  /** Decorates the worker's scorer (the test harness builds adversarial workers so; the CLI passes none). */
  wrapScorer?: (scorer: Scorer) => Scorer;
  /** Time a connected peer has to show a valid membership certificate before it is disconnected, ms. */
  graceMs?: number;
  /** Bandwidth cap of the workspaces this node serves, bytes per second (default none). */
  workspaceBytesPerSecond?: number;
  /** Chunk size of the workspaces this node serves, bytes (default DEFAULT_CHUNK_BYTES). */
  workspaceChunkBytes?: number;
  /** Cap on the workspaces --fetch-workspaces keeps in the data dir, bytes (default 20 GiB). */
  workspacesMaxBytes?: number;
  /** The machine's power state for `pauseOnBattery` (default: this platform's). */
  power?: PowerSource;
  /** Time between a guest's power and load checks, ms (default 10 s; VTNODE_GUEST_INTERVAL_MS in tests). */
  guestIntervalMs?: number;
  /** When this node's campaigns back up a silent job elsewhere (default placement/hedge.ts's; VTNODE_HEDGE_SCALE in tests). */
  hedge?: HedgeOptions;
  /** Info lines per job and per verified sample on stderr (default true; `vtnode run`'s own node: false). */
  jobLines?: boolean;
}

export interface Daemon {
  readonly peerId: string;
  /** The libp2p host (a collector wires its fetch protocols and catch-up onto it). */
  readonly host: Host;
  /** Membership: certificates, the stream gate, the gossip origin check. */
  readonly membership: MembershipService;
  /** Offences per peer (node/wire/offences.ts): a collector records a peer that served a false task row. */
  readonly offences: OffenceLedger;
  /**
   * Adds a role to this node: it appears in the advert's roles, `section()` under its name in
   * `vtnode status --json`, and `stop()` runs before the node stops. `sandbox()`, when given, is the
   * advert's sandbox while the node runs no worker (a collector's audits).
   */
  addRole(
    role: 'collector',
    section: () => unknown,
    stop: () => Promise<void>,
    sandbox?: () => AdvertBody['sandbox'],
  ): void;
  /** Dialable addresses with /p2p/<peer id>. */
  addrs(): string[];
  status(): FleetStatus;
  /** The newest campaigns this node submitted (at most `limit`, default 8), newest first. */
  campaigns(limit?: number): CampaignStatus[];
  /** Publishes a leaving advert, then stops everything. */
  stop(): Promise<void>;
  /** Resolves once the daemon has stopped. */
  readonly stopped: Promise<void>;
  /** Why the daemon stopped on its own (this node's invitation refused), or null. */
  failure(): Error | null;
}

async function listenAddrs(config: NodeConfig): Promise<string[]> {
  if (config.listen.length > 0) return config.listen;
  // The default port, unless something else has it (a second node on this machine): then any port.
  const port = (await portFree(DEFAULT_PORT)) ? DEFAULT_PORT : 0;
  return [`/ip4/0.0.0.0/tcp/${port}`];
}

/**
 * Starts a vtnode: libp2p host, fleet membership, control channel. A start that fails (a corrupt
 * database, a full disk, a port taken) undoes what it had started, so the process can exit.
 */
export async function startDaemon(options: DaemonOptions): Promise<Daemon> {
  const undo: (() => unknown)[] = [];
  try {
    return await launch(options, undo);
  } catch (err) {
    for (const step of undo.reverse())
      await Promise.resolve()
        .then(step)
        .catch(() => {});
    throw err;
  }
}

async function launch(options: DaemonOptions, undo: (() => unknown)[]): Promise<Daemon> {
  const log = logger('vtnode:daemon');
  const { dataDir, fleet, config } = options;

  try {
    await connectControl(dataDir);
    throw new Error(`a vtnode daemon is already running for ${dataDir.root} (stop it with \`vtnode leave\`)`);
  } catch (err) {
    if (!(err instanceof NoDaemonError)) throw err;
  }

  const { privateKey, peerId } = await dataDir.identity();
  const state = await dataDir.readState();
  state.boots += 1;
  await dataDir.writeState(state);

  // The node's databases open before anything listens: a corrupt or unwritable file refuses the start.
  const sampleLog = options.models
    ? openSampleLog({ path: dataDir.path(SAMPLE_LOG_DB), origin: peerId, signer: digestSigner(privateKey) })
    : null;
  if (sampleLog) undo.push(() => sampleLog.close());
  const campaignStore = openCampaignStore({ path: dataDir.path(CAMPAIGN_DB) });
  undo.push(() => campaignStore.close());

  const workspaces = new Map<string, string>();
  for (const dir of config.workspaces) {
    const id = await workspaceIdentity(dir);
    workspaces.set(id.id, dir);
    log('workspace %s has content id %s', dir, id.id);
  }

  // Peers that misuse the stream protocols are banned for a while (see node/wire/offences.ts).
  const offences = createOffenceLedger();
  let failure: Error | null = null;
  // Until `stop` exists (a refusal can come while the daemon is still starting), a request is remembered.
  let requestStop = () => {};
  // Set once the fleet is up; a new certificate goes out in the next advert.
  let touchFleet = () => {};
  const {
    host,
    state: members,
    membership,
  } = await startMemberHost({
    dataDir,
    privateKey,
    listen: await listenAddrs(config),
    mdns: config.mdns,
    topics: [advertTopic(fleet.fleet), digestTopic(fleet.fleet)],
    denyPeer: (peer) => offences.banned(peer, Date.now()),
    graceMs: options.graceMs ?? DEFAULT_GRACE_MS,
    onFatal: (err) => {
      failure = err;
      requestStop();
    },
    onCertificate: () => touchFleet(),
  });
  guardStreams(host, {
    ledger: offences,
    onBan: (peer) => void host.hangUp(peerIdFromString(peer)).catch(() => {}),
  });
  undo.push(() => host.stop());

  const addrs = () =>
    host
      .getMultiaddrs()
      .map((ma) => withoutPeerId(ma.toString()))
      .filter((a) => !a.includes('/ip4/0.0.0.0/'));

  // Roles added after start (a collector), with the status section each adds to `vtnode status`.
  const extraRoles = new Map<'collector', () => unknown>();
  // The sandbox of a role that scores without being a worker (a collector's audits).
  let roleSandbox: (() => AdvertBody['sandbox']) | null = null;
  const roleStops: (() => Promise<void>)[] = [];
  // Set once the worker role is up (after the fleet, so the node appears at once).
  let worker: WorkerRole | null = null;
  // A guest's manners: pauses the worker on battery or under load (config.pauseOnBattery, maxLoad).
  let guest: GuestGate | null = null;
  let acceptedAtPause: number | null = null;
  // --fetch-workspaces: pulls the workspaces other nodes advertise (set once the fleet is up).
  let acquirer: WorkspaceAcquirer | null = null;
  const describe = (): AdvertBody => {
    const mem = memory();
    return {
      version: VTNODE_VERSION,
      host: config.privateHost ? null : hostname(),
      addrs: addrs().slice(0, 16),
      models: options.models?.models() ?? [],
      memory: { total: mem.total, free: mem.free, reserved: 0 },
      load: worker?.load() ?? { queued: 0, running: 0, capacity: 0 },
      ...(worker && guest?.paused() ? { paused: guest.paused()! } : {}),
      warm: options.models?.warm.entries() ?? [],
      workspaces: [...workspaces.keys()],
      ...(acquirer?.fetching().length ? { fetching: acquirer.fetching().slice(0, 4) } : {}),
      sandbox: worker?.sandbox() ??
        roleSandbox?.() ?? { backend: 'none', ok: false, detail: 'serves no model' },
      roles: [...(worker ? (['worker'] as const) : []), 'submitter', ...extraRoles.keys()],
      cert: membership.certificate(),
    };
  };

  // Remember members' addresses as they are learnt (a node killed with -9 saves nothing on the way out).
  let savedPeers = JSON.stringify(state.peers);
  let saving: NodeJS.Timeout | null = null;
  const savePeers = () => {
    saving ??= setTimeout(() => {
      saving = null;
      const peers = fleetMembership.knownPeers();
      if (JSON.stringify(peers) === savedPeers) return;
      savedPeers = JSON.stringify(peers);
      void dataDir
        .readState()
        .then((latest) => dataDir.writeState({ ...latest, peers }))
        .catch((err: Error) => log.warn('saving known peers failed', err));
    }, 1000);
  };

  const fleetMembership = createFleet({
    host,
    fleetId: fleet.fleet,
    intervalMs: config.advertIntervalMs,
    seqBase: state.boots,
    describe,
    bootstrap: fleet.bootstrap,
    knownPeers: state.peers,
    onChange: savePeers,
    members: membership,
  });
  undo.push(() => fleetMembership.stop());
  touchFleet = () => fleetMembership.touch();
  // Every node relays digests (gossipsub needs the topic subscribed); workers publish theirs.
  const digests = createDigestGossip({ host, fleetId: fleet.fleet, members: membership });
  guest = options.models
    ? createGuestGate({
        policy: {
          pauseOnBattery: config.pauseOnBattery,
          maxLoad: config.maxLoad,
          pauseWhileUsedMs: config.pauseWhileUsedMs,
        },
        power: options.power ?? platformPowerSource(),
        idle: platformIdleSource(),
        ...(options.guestIntervalMs ? { intervalMs: options.guestIntervalMs } : {}),
        log: logger('vtnode:guest'),
        onChange: () => {
          acceptedAtPause = guest?.paused() ? (worker?.executor.accepted() ?? 0) : null;
          fleetMembership.touch();
        },
      })
    : null;
  undo.push(() => guest?.stop());
  await guest?.start();
  worker = options.models
    ? await startWorkerRole({
        paused: () => guest?.paused() ?? null,
        onSample: (s) => void digests.publish(digestOf(s)),
        host,
        peerId,
        // Opened above whenever the node serves models.
        sampleLog: sampleLog!,
        dataDir,
        models: options.models,
        workspaces,
        // The acquirer starts below (it needs the worker's scorer): jobs for what it fetches are taken.
        fetching: {
          has: (id) => acquirer?.has(id) ?? false,
          whenReady: (id, signal) =>
            acquirer?.whenReady(id, signal) ??
            Promise.reject(new Error(`workspace ${id} is not being fetched`)),
        },
        unconfined: config.unconfined,
        maxJobs: config.maxJobs,
        onChange: () => fleetMembership.touch(),
        jobLines: options.jobLines ?? true,
        ...(options.wrapScorer ? { wrapScorer: options.wrapScorer } : {}),
      })
    : null;
  undo.push(() => worker?.stop());
  // Every workspace held is served to members that fetch it (node/workspace/serve.ts); indexing
  // re-reads every file, so it runs after start, and a workspace that cannot be served is still held.
  const served = new Map<string, ServedWorkspace>();
  await createWorkspaceServer({
    host,
    workspaces: () => served,
    ...(options.workspaceBytesPerSecond ? { bytesPerSecond: options.workspaceBytesPerSecond } : {}),
  });
  for (const [id, dir] of workspaces)
    void buildManifest(dir, options.workspaceChunkBytes ? { chunkBytes: options.workspaceChunkBytes } : {})
      .then((s) =>
        s.manifest.id === id
          ? served.set(id, s)
          : log.warn('workspace %s changed since start: not serving it', dir),
      )
      .catch((err: Error) => log.warn('not serving workspace %s: %s', dir, err.message));
  if (config.fetchWorkspaces && worker) {
    await shareWorkspacesDir(dataDir, log);
    acquirer = createWorkspaceAcquirer({
      host,
      dir: dataDir.path('workspaces'),
      nodes: () => fleetMembership.view.nodes(),
      held: workspaces,
      served,
      onOffence: (peer, why) => {
        const r = offences.record(peer, `workspace: ${why}`, Date.now());
        if (r.fresh) void host.hangUp(peerIdFromString(peer)).catch(() => {});
      },
      onChange: () => fleetMembership.touch(),
      // Scored in this node's sandbox before the workspace is advertised.
      calibrate: (root, signal) => calibrateWorkspace({ root, scorer: () => worker.readyScorer(), signal }),
      intervalMs: config.advertIntervalMs,
      inUse: () => new Set(worker?.executor.workspacesInUse() ?? []),
      ...(options.workspacesMaxBytes ? { maxBytes: options.workspacesMaxBytes } : {}),
    });
    const restored = await acquirer.restore();
    if (restored.length) log('restored fetched workspaces %s', restored.join(', '));
    acquirer.start();
    undo.push(() => acquirer?.stop());
  }
  // Workers serve their sample bodies, digest logs and the task rows of their jobs to collectors.
  const fetchServers = worker
    ? [
        await createSampleServer({ host, source: logBodies(worker.sampleLog) }),
        await createLogServer({ host, source: logDigests(worker.sampleLog) }),
        await createTaskServer({ host, source: worker.sampleLog }),
      ]
    : [];
  const campaigns = createCampaignService({
    store: campaignStore,
    peerId,
    nodes: () => fleetMembership.view.nodes(),
    host,
    local: () => {
      if (!worker) throw new Error('this node runs no worker');
      return worker.executor.local();
    },
    ...(options.hedge ? { runner: { hedge: options.hedge } } : {}),
  });
  if (worker) {
    const running = worker;
    metrics().setLoadSource(() => running.load());
    undo.push(() => metrics().setLoadSource(null));
  }
  const unsubscribeModels = options.models?.onChange(() => fleetMembership.touch());
  const onWarm = () => fleetMembership.touch();
  options.models?.warm.addEventListener('change', onWarm);

  const status = (): FleetStatus => {
    const now = Date.now();
    return {
      fleet: fleet.fleet,
      self: peerId,
      nodes: fleetMembership.view.nodes().map((n) => nodeStatus(n, now)),
      ...(worker?.storageBlocked() ? { storage: worker.storageBlocked()! } : {}),
      ...(worker && guest
        ? {
            guest: {
              paused: guest.paused(),
              since: guest.since(),
              accepted: worker.executor.accepted(),
              acceptedAtPause,
            },
          }
        : {}),
      ...Object.fromEntries([...extraRoles].map(([role, section]) => [role, section()])),
    };
  };

  let resolveStopped!: () => void;
  const stopped = new Promise<void>((resolve) => {
    resolveStopped = resolve;
  });
  let stopping: Promise<void> | null = null;

  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      log('stopping');
      unsubscribeModels?.();
      metrics().setLoadSource(null);
      options.models?.warm.removeEventListener('change', onWarm);
      if (saving) clearTimeout(saving);
      await campaigns.stop();
      campaignStore.close();
      for (const f of fetchServers) await f.stop();
      await acquirer?.stop();
      await Promise.all(roleStops.map((f) => f()));
      digests.stop();
      guest?.stop();
      await worker?.stop();
      await fleetMembership.stop();
      // Let the leaving advert reach the mesh before the connections close.
      await sleep(300);
      await membership.stop();
      const latest = await dataDir.readState();
      latest.peers = fleetMembership.knownPeers();
      await dataDir.writeState(latest);
      await control.close();
      await options.models?.close();
      await host.stop();
      const { rm } = await import('node:fs/promises');
      await rm(dataDir.path('control.json'), { force: true });
      resolveStopped();
    })();
    return stopping;
  };

  const control = await startControlServer({
    dataDir,
    routes: {
      'GET /status': () => status(),
      'GET /metrics': () => ({
        rss: process.memoryUsage().rss,
        heapUsed: process.memoryUsage().heapUsed,
        adverts: fleetMembership.advertDelays(),
      }),
      'GET /addrs': () => ({ peerId, addrs: addrs().map((a) => `${a}/p2p/${peerId}`) }),
      'POST /campaign/start': (body) => campaigns.start(body),
      'POST /campaign/status': (body) => campaigns.status(body),
      'POST /campaign/follow': (body, signal) => campaigns.follow(body, signal),
      'POST /campaign/cancel': (body) => campaigns.cancel(body),
      'GET /members': () => ({
        fleet: fleet.fleet,
        self: peerId,
        gen: members.chain().current,
        admin: members.authority() !== null,
        revocations: members.revocations().length,
        members: membership.members(),
      }),
      'POST /members/revoke': (body) =>
        revoke(members, membership, controlBody(RevokeRequest, body, 'POST /members/revoke').id),
      'POST /members/rotate': (body) =>
        rotate(dataDir, members, membership, controlBody(RotateRequest, body, 'POST /members/rotate')),
      'POST /leave': () => {
        setTimeout(() => void stop(), 10);
        return { leaving: true };
      },
    },
  });

  options.signal?.addEventListener('abort', () => void stop(), { once: true });
  requestStop = () => void stop();
  if (failure) requestStop();
  log('started %s, listening on %s', peerId, addrs().join(' '));

  return {
    peerId,
    host,
    addRole(role, section, stopRole, sandbox) {
      extraRoles.set(role, section);
      if (sandbox) roleSandbox = sandbox;
      roleStops.push(stopRole);
      fleetMembership.touch();
    },
    addrs: () => addrs().map((a) => `${a}/p2p/${peerId}`),
    membership,
    offences,
    status,
    campaigns: (limit = 8) =>
      campaignStore
        .list()
        .slice(0, limit)
        .map((c) => campaigns.status({ name: c.name })),
    stop,
    stopped,
    failure: () => failure,
  };
}

/**
 * As root, the sandbox runs every candidate under a dedicated uid (sandbox/bwrap.ts), which cannot
 * traverse the data dir (0700): a fetched workspace under it would be unreadable in the box, and
 * every run of its tests would fail. So the data dir becomes 0711 (others may pass through to a
 * path they know, never list it; the identity key and fleet file stay 0600) and the workspaces dir
 * 0755. A node that runs as its user needs neither: its runs keep the caller's uid.
 */
async function shareWorkspacesDir(dataDir: DataDir, log: ReturnType<typeof logger>): Promise<void> {
  const { chmod, mkdir } = await import('node:fs/promises');
  const dir = dataDir.path('workspaces');
  await mkdir(dir, { recursive: true, mode: 0o755 });
  if (process.getuid?.() !== 0) return;
  await dataDir.allowTraversal();
  await chmod(dir, 0o755);
  log('data dir %s made traversable (0711) so sandboxed runs can read fetched workspaces', dataDir.root);
}
