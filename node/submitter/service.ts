import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import type { FleetNode } from '../../placement/fleet-view.ts';
import type { HedgeOptions } from '../../placement/hedge.ts';
import { sha256Hex } from '../../protocol/canonical.ts';
import type { SubmitterMessage, WorkerMessage } from '../../protocol/job.ts';
import { campaignSeedBase, Sampling } from '../../protocol/job.ts';
import { parseWith } from '../../protocol/parse.ts';
import type { Task } from '../../protocol/task.ts';
import { readTasksFile } from '../../sandbox/tasks-file.ts';
import { pause } from '../async/sleep.ts';
import { ControlStream } from '../control/server.ts';
import { logger } from '../logger.ts';
import type { Framed } from '../wire/framed.ts';
import type { StreamHost } from '../wire/streams.ts';
import { CampaignName, SplitFilter } from './campaign-schema.ts';
import type { Campaign, CampaignStore, StartReport } from './campaign-store.ts';
import type { CampaignSummary } from './campaign-summary.ts';
import { type CampaignOutcome, type CampaignRunner, runCampaign } from './runner.ts';

/** What `vtnode run` asks the daemon for. */
export const CampaignStartRequest = z.object({
  /** Absolute path of the tasks file. */
  tasksFile: z.string().min(1),
  /** Campaign name; default derived from the tasks file and models. */
  name: CampaignName.optional(),
  /** Models to run every task with. */
  models: z.array(z.string().min(1)).min(1).max(64),
  /** Samples per task and model. */
  k: z.number().int().min(1).max(256),
  /** Sampling; without `seedBase`, a new campaign gets a fresh one and a resumed one keeps its own. */
  sampling: Sampling.extend({ seedBase: Sampling.shape.seedBase.optional() }),
  split: SplitFilter,
  /** Continue an existing campaign of that name (otherwise an existing name is an error). */
  resume: z.boolean(),
  /** Time a worker has for a job without progress before it is re-placed, ms. */
  jobTimeoutMs: z
    .number()
    .int()
    .min(1000)
    .max(7 * 24 * 3_600_000)
    .optional(),
  /** Placements of a task's samples before the ones still unscored are given up. */
  maxAttempts: z.number().int().min(1).max(100).optional(),
});
export type CampaignStartRequest = z.infer<typeof CampaignStartRequest>;

export interface CampaignStatus {
  name: string;
  /** The seed base the campaign samples with. */
  seedBase: number;
  /** running, done, incomplete (finished with samples given up), cancelled or stalled (no eligible node). */
  status: CampaignState;
  summary: CampaignSummary;
  running: { jobId: string; taskId: string; peerId: string; samples: number }[];
  problem: string | null;
  outcome: CampaignOutcome | null;
  /** When this daemon started (or resumed) running the campaign, ms since the epoch; 0 when it did not. */
  startedAt: number;
  /** When its runner finished, ms since the epoch; 0 while it runs or when this daemon did not run it. */
  finishedAt: number;
}

export type CampaignState = 'running' | 'done' | 'incomplete' | 'cancelled' | 'stalled';

/**
 * What a campaign's status is: the live outcome when this daemon runs or ran it, else the stored
 * one (a campaign stored as running that no runner drives stalled with its daemon). A campaign that
 * finished with samples unscored (given up after maxAttempts placements) is incomplete, not done.
 */
export function campaignState(
  live: { running: boolean; outcome: CampaignOutcome['status'] | null },
  stored: 'running' | 'done' | 'cancelled',
  samples: { planned: number; scored: number },
): CampaignState {
  const finished = live.outcome ?? (live.running ? 'running' : stored === 'running' ? 'stalled' : stored);
  return finished === 'done' && samples.scored < samples.planned ? 'incomplete' : finished;
}

export interface CampaignServiceOptions {
  /** Persistent campaign state in the data dir. */
  store: CampaignStore;
  /** This node's peer id. */
  peerId: string;
  /** The fleet now. */
  nodes: () => readonly FleetNode[];
  /** The libp2p host job streams are opened from. */
  host: StreamHost;
  /** A job stream to this node's own executor. */
  local: () => Framed<WorkerMessage, SubmitterMessage>;
  /** Overrides for the runner (deadlines, attempts). */
  runner?: { jobDeadlineMs?: number; maxAttempts?: number; noNodeTimeoutMs?: number; hedge?: HedgeOptions };
}

/** What the daemon answers to a start request. */
export interface StartResponse {
  name: string;
  /** True when the campaign was already running here and the caller re-attached to it. */
  attached: boolean;
  /** The seed base the campaign samples with (`vtnode run --seed` reproduces it). */
  seedBase: number;
  report: StartReport;
}

interface Active {
  runner: CampaignRunner;
  campaign: Campaign;
  abort: AbortController;
  outcome: CampaignOutcome | null;
  startedAt: number;
  finishedAt: number;
}

/** Checks, before anything is written, that the fleet can run the campaign at all. */
export function preflight(
  tasks: readonly Task[],
  models: readonly string[],
  nodes: readonly FleetNode[],
): void {
  const problems: string[] = [];
  for (const model of models) {
    const serving = nodes.filter((n) => n.advert.models.some((m) => m.id === model));
    if (serving.length === 0) {
      const served = [...new Set(nodes.flatMap((n) => n.advert.models.map((m) => m.id)))];
      problems.push(
        `no node of the fleet serves model "${model}" (served: ${served.length ? served.join(', ') : 'none'})`,
      );
      continue;
    }
    const held = new Set(serving.flatMap((n) => n.advert.workspaces));
    const missing = new Map<string, number>();
    for (const t of tasks)
      if (!held.has(t.workspace.id)) missing.set(t.workspace.id, (missing.get(t.workspace.id) ?? 0) + 1);
    for (const [ws, count] of missing) {
      problems.push(
        `${count} task${count === 1 ? '' : 's'} use workspace ${ws}, which no node serving "${model}" holds ` +
          '(start a node with --workspace DIR on a built checkout of it)',
      );
    }
  }
  if (problems.length > 0) throw new Error(problems.join('; '));
}

/** The daemon's submitter role: starts, tracks and cancels campaigns. */
/** Shortest gap between two statuses a follower gets, ms (progress comes in bursts). */
export const FOLLOW_MIN_GAP_MS = 200;
/** Longest gap between two statuses a follower gets, ms. */
export const FOLLOW_BEAT_MS = 5000;

export function createCampaignService(options: CampaignServiceOptions) {
  const log = logger('vtnode:submitter');
  const active = new Map<string, Active>();
  /** Who waits for a campaign's next change (follow), by name. */
  const waiters = new Map<string, Set<() => void>>();
  const changed = (name: string) => {
    const set = waiters.get(name);
    waiters.delete(name);
    for (const wake of set ?? []) wake();
  };
  /** Resolves at the campaign's next change, after `ms`, or when `signal` aborts. */
  const nextChange = (name: string, ms: number, signal: AbortSignal) =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        waiters.get(name)?.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      const set = waiters.get(name) ?? new Set();
      set.add(done);
      waiters.set(name, set);
    });
  /** Nodes that returned a scored sample to this daemon: out of probation in every campaign it runs. */
  const proven = new Set<string>();

  /** A running campaign asked for again: `--resume` re-attaches to it (same tasks and models), else an error. */
  function attach(name: string, entry: Active, req: CampaignStartRequest, tasksHash: string): StartResponse {
    if (!req.resume)
      throw new Error(
        `campaign ${name} is running: \`vtnode run --campaign ${name} --resume\` re-attaches to it`,
      );
    const spec = entry.campaign.spec;
    const differs = [
      spec.tasksHash !== tasksHash && `its tasks file is ${spec.tasksHash}, this one ${tasksHash}`,
      spec.models.join(',') !== req.models.join(',') && `its models are ${spec.models.join(', ')}`,
      spec.k !== req.k && `its k is ${spec.k}`,
      spec.split !== req.split && `its split is ${spec.split}`,
    ].filter(Boolean);
    if (differs.length > 0)
      throw new Error(
        `campaign ${name} is running with other settings (${differs.join('; ')}): cannot re-attach`,
      );
    const { samples } = entry.campaign.summary();
    return {
      name,
      attached: true,
      seedBase: spec.sampling.seedBase,
      report: {
        created: false,
        planned: samples.planned,
        reused: samples.scored,
        changed: [],
        removed: 0,
        dropped: 0,
        requeued: 0,
        skipped: 0,
      },
    };
  }

  async function start(body: unknown): Promise<StartResponse> {
    const req = parseWith(CampaignStartRequest, body, 'campaign start request');
    const text = await readFile(req.tasksFile, 'utf8').catch((err: Error) => {
      throw new Error(`cannot read the tasks file: ${err.message}`);
    });
    const lines = await readTasksFile(req.tasksFile);
    if (lines.length === 0) throw new Error(`${req.tasksFile} holds no tasks`);
    const all = lines.map((l) => l.task);
    const tasks = req.split === 'all' ? all : all.filter((t) => t.split === req.split);
    if (tasks.length === 0)
      throw new Error(`${req.tasksFile} holds no ${req.split} tasks (of ${all.length})`);
    const tasksHash = `sha256:${sha256Hex(text)}`;
    const name = req.name ?? `run-${tasksHash.slice(7, 15)}`;
    const current = active.get(name);
    if (current && !current.outcome) return attach(name, current, req, tasksHash);
    // A finished campaign's entry only answered status calls: resuming starts it anew.
    if (current) active.delete(name);
    const existing = options.store.get(name);
    if (existing && !req.resume) {
      throw new Error(
        `campaign ${name} exists (${existing.status()}): pass --resume to continue it, or another --campaign`,
      );
    }
    if (!existing && req.resume) throw new Error(`there is no campaign ${name} to resume`);
    preflight(tasks, req.models, options.nodes());

    const now = Date.now();
    const seedBase = req.sampling.seedBase ?? existing?.spec.sampling.seedBase ?? campaignSeedBase(name, now);
    const sampling = { ...req.sampling, seedBase };
    const { campaign, report } = options.store.start({
      spec: { name, tasksHash, models: req.models, k: req.k, sampling, split: req.split },
      tasks: all.map((t) => ({ id: t.id, promptFingerprint: t.promptFingerprint, split: t.split })),
      now,
    });
    const abort = new AbortController();
    const runner = runCampaign({
      campaign,
      proven,
      tasks: new Map(tasks.map((t) => [t.id, t])),
      peerId: options.peerId,
      nodes: options.nodes,
      host: options.host,
      local: options.local,
      signal: abort.signal,
      ...options.runner,
      onProgress: () => changed(name),
      ...(req.jobTimeoutMs ? { jobDeadlineMs: req.jobTimeoutMs } : {}),
      ...(req.maxAttempts ? { maxAttempts: req.maxAttempts } : {}),
    });
    const entry: Active = { runner, campaign, abort, outcome: null, startedAt: Date.now(), finishedAt: 0 };
    active.set(name, entry);
    runner.done.then(
      (outcome) => {
        entry.finishedAt = Date.now();
        entry.outcome = outcome;
        log('campaign %s %s', name, outcome.status);
        changed(name);
      },
      (err: Error) => {
        entry.finishedAt = Date.now();
        entry.outcome = { status: 'stalled', exhausted: 0, problem: err.message };
        log.error('campaign %s failed: %s', name, err.message);
        changed(name);
      },
    );
    return { name, attached: false, seedBase, report };
  }

  function status(body: unknown): CampaignStatus {
    const { name } = parseWith(z.object({ name: CampaignName }), body, 'campaign status request');
    const campaign = options.store.get(name);
    if (!campaign) throw new Error(`there is no campaign ${name}`);
    const entry = active.get(name);
    const summary = campaign.summary();
    return {
      name,
      seedBase: campaign.spec.sampling.seedBase,
      status: campaignState(
        { running: !!entry, outcome: entry?.outcome?.status ?? null },
        campaign.status(),
        summary.samples,
      ),
      summary,
      running: entry?.runner.running() ?? [],
      problem: entry?.outcome?.problem ?? entry?.runner.problem() ?? null,
      outcome: entry?.outcome ?? null,
      startedAt: entry?.startedAt ?? 0,
      finishedAt: entry?.finishedAt ?? 0,
    };
  }

  /**
   * A campaign's status now, then at each change (at most every FOLLOW_MIN_GAP_MS, and every
   * FOLLOW_BEAT_MS without one, so a follower sees the clock move and knows the daemon lives), until a
   * status that is not running. What `vtnode run` follows instead of polling.
   */
  async function* follow(body: unknown, signal: AbortSignal): AsyncGenerator<CampaignStatus> {
    const { name } = parseWith(z.object({ name: CampaignName }), body, 'campaign follow request');
    for (;;) {
      const st = status({ name });
      yield st;
      if (st.status !== 'running' || signal.aborted) return;
      await nextChange(name, FOLLOW_BEAT_MS, signal);
      await pause(FOLLOW_MIN_GAP_MS, signal);
    }
  }

  function cancel(body: unknown): { cancelled: boolean } {
    const { name } = parseWith(z.object({ name: CampaignName }), body, 'campaign cancel request');
    const entry = active.get(name);
    if (!entry || entry.outcome) return { cancelled: false };
    entry.abort.abort();
    return { cancelled: true };
  }

  return {
    start,
    status,
    /** `follow` checked up front (a bad request or an unknown campaign is a 400, not a broken stream). */
    follow(body: unknown, signal: AbortSignal): ControlStream {
      status(body);
      return new ControlStream(follow(body, signal));
    },
    cancel,
    /** Cancels every running campaign (daemon shutdown); they resume with `vtnode run --resume`. */
    async stop(): Promise<void> {
      for (const entry of active.values()) entry.abort.abort();
      await Promise.all([...active.values()].map((e) => e.runner.done.catch(() => {})));
    },
  };
}
