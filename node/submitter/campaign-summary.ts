import type { DatabaseSync } from '../sqlite.ts';

/** Sample counts: `planned` is every slot; a scored sample also counts as generated. */
export interface SampleCounts {
  /** Slots in the plan (tasks × models × k). */
  planned: number;
  /** Slots leased to a node now, not yet generated. */
  placed: number;
  /** Samples generated (scored or waiting for scoring). */
  generated: number;
  /** Samples scored. */
  scored: number;
  /** Scored samples with reward 1. */
  verified: number;
}

/** Generation figures over a set of samples. */
export interface GenerationStats {
  /** Completion tokens generated. */
  completionTokens: number;
  /** Prompt tokens sent. */
  promptTokens: number;
  /** Mean completion tokens/s per request, or null before any sample. */
  tokensPerSecond: number | null;
  /** Share of generated samples whose prompt was observed cached, or null before any sample. */
  cacheHitRate: number | null;
}

/** The campaign's figures for `vtnode run`'s display and its final JSON. */
export interface CampaignSummary extends GenerationStats {
  samples: SampleCounts;
  /**
   * Scored samples a worker had generated before this campaign began (its log already held that task,
   * model, index and seed, so it returned the logged row): a campaign run again with the same `--seed`.
   * Told apart by the sample's `scoredAt` (the worker's clock) against the campaign's creation.
   */
  preexisting: number;
  /** Per task (all models): the nodes that produced its samples, scored and verified counts. */
  tasks: { taskId: string; nodes: string[]; planned: number; samples: number; verified: number }[];
  /** Per node that generated anything. */
  nodes: ({ peerId: string; generated: number; scored: number; verified: number } & GenerationStats)[];
  /** Per model. */
  models: ({ model: string } & SampleCounts & GenerationStats)[];
}

const STATS = `
  COALESCE(SUM(s.completion_tokens), 0) AS completionTokens,
  COALESCE(SUM(s.prompt_tokens), 0) AS promptTokens,
  AVG(s.tokens_per_second) AS tokensPerSecond,
  AVG(s.warm) AS cacheHitRate`;

const COUNTS = `
  COUNT(*) AS planned,
  COALESCE(SUM(s.status = 'placed'), 0) AS placed,
  COALESCE(SUM(s.status IN ('generated', 'scored')), 0) AS generated,
  COALESCE(SUM(s.status = 'scored'), 0) AS scored,
  COALESCE(SUM(s.status = 'scored' AND s.reward >= 1), 0) AS verified`;

type Row = Record<string, number | string | null>;

const stats = (r: Row): GenerationStats => ({
  completionTokens: Number(r['completionTokens']),
  promptTokens: Number(r['promptTokens']),
  tokensPerSecond: r['tokensPerSecond'] === null ? null : Number(r['tokensPerSecond']),
  cacheHitRate: r['cacheHitRate'] === null ? null : Number(r['cacheHitRate']),
});

const counts = (r: Row): SampleCounts => ({
  planned: Number(r['planned']),
  placed: Number(r['placed']),
  generated: Number(r['generated']),
  scored: Number(r['scored']),
  verified: Number(r['verified']),
});

/** Summarises one campaign's slots (slots at or beyond k are not part of the plan). */
export function summarise(db: DatabaseSync, campaign: string, k: number): CampaignSummary {
  const all = db
    .prepare(`SELECT ${COUNTS}, ${STATS} FROM slots s WHERE s.campaign = ? AND s.idx < ?`)
    .get(campaign, k) as Row;
  const preexisting = db
    .prepare(
      `SELECT COUNT(*) AS n FROM slots s JOIN campaigns c ON c.name = s.campaign
       WHERE s.campaign = ? AND s.idx < ? AND s.status = 'scored'
         AND json_extract(s.result, '$.scoredAt') < c.created_at`,
    )
    .get(campaign, k) as Row;
  const tasks = db
    .prepare(
      `SELECT s.task_id AS taskId, COUNT(*) AS planned, COALESCE(SUM(s.status = 'scored'), 0) AS samples,
         COALESCE(SUM(s.status = 'scored' AND s.reward >= 1), 0) AS verified,
         (SELECT json_group_array(peer_id) FROM (SELECT DISTINCT peer_id FROM slots p
            WHERE p.campaign = s.campaign AND p.task_id = s.task_id AND p.status = 'scored' AND p.idx < ? ORDER BY peer_id)) AS nodes
       FROM slots s JOIN works w ON w.campaign = s.campaign AND w.task_id = s.task_id AND w.model = s.model
       WHERE s.campaign = ? AND s.idx < ? GROUP BY s.task_id ORDER BY MIN(w.ord)`,
    )
    .all(k, campaign, k) as Row[];
  const nodes = db
    .prepare(
      `SELECT s.peer_id AS peerId, COUNT(*) AS generated, COALESCE(SUM(s.status = 'scored'), 0) AS scored,
         COALESCE(SUM(s.status = 'scored' AND s.reward >= 1), 0) AS verified, ${STATS}
       FROM slots s WHERE s.campaign = ? AND s.idx < ? AND s.status IN ('generated', 'scored')
       GROUP BY s.peer_id ORDER BY s.peer_id`,
    )
    .all(campaign, k) as Row[];
  const models = db
    .prepare(
      `SELECT s.model AS model, ${COUNTS}, ${STATS} FROM slots s WHERE s.campaign = ? AND s.idx < ?
       GROUP BY s.model ORDER BY s.model`,
    )
    .all(campaign, k) as Row[];
  return {
    samples: counts(all),
    preexisting: Number(preexisting['n']),
    ...stats(all),
    tasks: tasks.map((t) => ({
      taskId: String(t['taskId']),
      nodes: JSON.parse(String(t['nodes'])) as string[],
      planned: Number(t['planned']),
      samples: Number(t['samples']),
      verified: Number(t['verified']),
    })),
    nodes: nodes.map((n) => ({
      peerId: String(n['peerId']),
      generated: Number(n['generated']),
      scored: Number(n['scored']),
      verified: Number(n['verified']),
      ...stats(n),
    })),
    models: models.map((m) => ({ model: String(m['model']), ...counts(m), ...stats(m) })),
  };
}
