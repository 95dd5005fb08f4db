import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import type { FleetNode } from '../../placement/fleet-view.ts';
import { sha256Hex } from '../../protocol/canonical.ts';
import type { SubmitterMessage, WorkerMessage } from '../../protocol/job.ts';
import { Sampling } from '../../protocol/job.ts';
import { parseWith } from '../../protocol/parse.ts';
import type { Task } from '../../protocol/task.ts';
import { readTasksFile } from '../../sandbox/tasks-file.ts';
import { logger } from '../logger.ts';
import type { Framed } from '../wire/framed.ts';
import type { StreamHost } from '../wire/streams.ts';
import { CampaignName, SplitFilter } from './campaign-schema.ts';
import type { CampaignStore, StartReport } from './campaign-store.ts';
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
  sampling: Sampling,
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
});
export type CampaignStartRequest = z.infer<typeof CampaignStartRequest>;

export interface CampaignStatus {
  name: string;
  /** running, done, cancelled or stalled (no eligible node). */
  status: 'running' | 'done' | 'cancelled' | 'stalled';
  summary: CampaignSummary;
  running: { jobId: string; taskId: string; peerId: string; samples: number }[];
  problem: string | null;
  outcome: CampaignOutcome | null;
  startedAt: number;
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
  runner?: { jobDeadlineMs?: number; maxAttempts?: number; noNodeTimeoutMs?: number };
}

interface Active {
  runner: CampaignRunner;
  abort: AbortController;
  outcome: CampaignOutcome | null;
  startedAt: number;
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
export function createCampaignService(options: CampaignServiceOptions) {
  const log = logger('vtnode:submitter');
  const active = new Map<string, Active>();

  async function start(body: unknown): Promise<{ name: string; report: StartReport }> {
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
    if (active.has(name)) throw new Error(`campaign ${name} is already running`);
    const existing = options.store.get(name);
    if (existing && !req.resume) {
      throw new Error(
        `campaign ${name} exists (${existing.status()}): pass --resume to continue it, or another --campaign`,
      );
    }
    if (!existing && req.resume) throw new Error(`there is no campaign ${name} to resume`);
    preflight(tasks, req.models, options.nodes());

    const { campaign, report } = options.store.start({
      spec: { name, tasksHash, models: req.models, k: req.k, sampling: req.sampling, split: req.split },
      tasks: all.map((t) => ({ id: t.id, promptFingerprint: t.promptFingerprint, split: t.split })),
      now: Date.now(),
    });
    const abort = new AbortController();
    const runner = runCampaign({
      campaign,
      tasks: new Map(tasks.map((t) => [t.id, t])),
      peerId: options.peerId,
      nodes: options.nodes,
      host: options.host,
      local: options.local,
      signal: abort.signal,
      ...options.runner,
      ...(req.jobTimeoutMs ? { jobDeadlineMs: req.jobTimeoutMs } : {}),
    });
    const entry: Active = { runner, abort, outcome: null, startedAt: Date.now() };
    active.set(name, entry);
    runner.done.then(
      (outcome) => {
        entry.outcome = outcome;
        log('campaign %s %s', name, outcome.status);
      },
      (err: Error) => {
        entry.outcome = { status: 'stalled', exhausted: 0, problem: err.message };
        log.error('campaign %s failed: %s', name, err.message);
      },
    );
    return { name, report };
  }

  function status(body: unknown): CampaignStatus {
    const { name } = parseWith(z.object({ name: CampaignName }), body, 'campaign status request');
    const campaign = options.store.get(name);
    if (!campaign) throw new Error(`there is no campaign ${name}`);
    const entry = active.get(name);
    const stored = campaign.status();
    return {
      name,
      status: entry?.outcome?.status ?? (entry ? 'running' : stored === 'running' ? 'stalled' : stored),
      summary: campaign.summary(),
      running: entry?.runner.running() ?? [],
      problem: entry?.outcome?.problem ?? entry?.runner.problem() ?? null,
      outcome: entry?.outcome ?? null,
      startedAt: entry?.startedAt ?? 0,
    };
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
    cancel,
    /** Cancels every running campaign (daemon shutdown); they resume with `vtnode run --resume`. */
    async stop(): Promise<void> {
      for (const entry of active.values()) entry.abort.abort();
      await Promise.all([...active.values()].map((e) => e.runner.done.catch(() => {})));
    },
  };
}
