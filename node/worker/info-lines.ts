import type { JobRequest } from '../../protocol/job.ts';
import type { SampleBody } from '../../protocol/sample.ts';

/**
 * The info lines a worker prints per job and per verified sample (pure: text only), so a node in
 * the foreground shows the campaigns running through it.
 */

/** Short form of a `sha256:` id (the 8 hex characters the CLI shows), anything else as is. */
export function shortId(id: string): string {
  return id.startsWith('sha256:') ? id.slice('sha256:'.length, 'sha256:'.length + 8) : id;
}

/** A reward as printed: up to 3 decimals, no trailing zeros. */
export function showReward(reward: number): string {
  return String(Math.round(reward * 1000) / 1000);
}

/** The job is accepted: `already` of its samples are in the log from an earlier run. */
export function jobAcceptedLine(job: JobRequest, already: number): string {
  const resumed = already > 0 ? ` (${already} already scored)` : '';
  return `job ${job.jobId} accepted: campaign ${job.campaign}, task ${job.task.id}, model ${job.model}, ${job.samples.length} samples${resumed}`;
}

/** The job is over: `rewards` of its samples in the log, `failure` the reason it stopped early. */
export function jobFinishedLine(
  job: JobRequest,
  rewards: readonly number[],
  failure: { reason: string } | null,
): string {
  const passed = rewards.filter((r) => r >= 1).length;
  const mean = rewards.length ? showReward(rewards.reduce((a, b) => a + b, 0) / rewards.length) : '-';
  const how = failure ? `stopped (${failure.reason})` : 'finished';
  return `job ${job.jobId} ${how}: campaign ${job.campaign}, task ${job.task.id}, model ${job.model}, ${rewards.length} of ${job.samples.length} samples scored, ${passed} passed, mean reward ${mean}`;
}

/** A sample is scored, signed and durable in the log: `verified` when its tests all pass (reward 1), else `scored`. */
export function sampleLine(body: SampleBody): string {
  const what = body.score.reward >= 1 ? 'verified' : 'scored';
  return `sample ${shortId(body.sampleId)} ${what}: task ${body.taskId}, model ${body.model}, index ${body.index}, reward ${showReward(body.score.reward)}${body.generation.truncated ? ' (truncated)' : ''}`;
}
