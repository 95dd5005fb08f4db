import { z } from 'zod';
import { Sampling } from '../../protocol/job.ts';
import { Sha256Id } from '../../protocol/task.ts';

/** Which tasks of the file a campaign runs. */
export const SplitFilter = z.enum(['train', 'eval', 'all']);
export type SplitFilter = z.infer<typeof SplitFilter>;

/** Campaign names: used in file names and logs. */
export const CampaignName = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/,
    'a campaign name is 1-128 characters of A-Z, a-z, 0-9, ., _ and -',
  );

/** What a campaign is: fixed when it is created; a resume must ask for the same. */
export const CampaignSpec = z.object({
  /** Campaign name (unique in the data dir). */
  name: CampaignName,
  /** sha256 of the tasks file the campaign was started (or last resumed) from. */
  tasksHash: Sha256Id,
  /** Models every task is run with. */
  models: z.array(z.string().min(1).max(256)).min(1).max(64),
  /** Samples per task and model. */
  k: z.number().int().min(1).max(256),
  /** Sampling parameters of every sample. */
  sampling: Sampling,
  /** Which split's tasks run. */
  split: SplitFilter,
});
export type CampaignSpec = z.infer<typeof CampaignSpec>;

/** A task as the campaign plans it. */
export const PlannedTask = z.object({
  /** Task id. */
  id: z.string().min(1).max(200),
  /** The task's prompt fingerprint: finished samples are reused only under the same one. */
  promptFingerprint: Sha256Id,
  /** The task's split. */
  split: z.enum(['train', 'eval']),
});
export type PlannedTask = z.infer<typeof PlannedTask>;

export const SCHEMA = `
CREATE TABLE IF NOT EXISTS campaigns (
  name TEXT PRIMARY KEY,
  spec TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('running', 'done', 'cancelled'))
) STRICT;
CREATE TABLE IF NOT EXISTS works (
  campaign TEXT NOT NULL REFERENCES campaigns(name) ON DELETE CASCADE,
  task_id TEXT NOT NULL,
  model TEXT NOT NULL,
  prompt_fingerprint TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  ord INTEGER NOT NULL,
  PRIMARY KEY (campaign, task_id, model)
) STRICT;
CREATE TABLE IF NOT EXISTS slots (
  campaign TEXT NOT NULL,
  task_id TEXT NOT NULL,
  model TEXT NOT NULL,
  idx INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('planned', 'placed', 'generated', 'scored')),
  peer_id TEXT,
  job_id TEXT,
  sample_id TEXT,
  result TEXT,
  reward REAL,
  prompt_tokens INTEGER,
  completion_tokens INTEGER,
  cached_tokens INTEGER,
  warm INTEGER,
  latency_ms REAL,
  tokens_per_second REAL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (campaign, task_id, model, idx),
  FOREIGN KEY (campaign, task_id, model) REFERENCES works(campaign, task_id, model) ON DELETE CASCADE
) STRICT;
CREATE INDEX IF NOT EXISTS slots_job ON slots (campaign, job_id);
`;
