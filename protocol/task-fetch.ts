import { z } from 'zod';
import { canonicalJson } from './canonical.ts';
import { MAX_JOB_FRAME_BYTES } from './job.ts';
import { Sha256Id, Task, taskHash } from './task.ts';

/** Most task rows one /vtnode/task/1 request may ask for (a client pages longer lists). */
export const MAX_TASKS_PER_REQUEST = 32;
/** Largest task row a node serves or accepts, bytes of canonical JSON (a job, which carries one, is no larger). */
export const MAX_TASK_ROW_BYTES = MAX_JOB_FRAME_BYTES - 64 * 1024;
/** Largest frame on /vtnode/task/1, bytes (one row with its hash). */
export const MAX_TASK_FRAME_BYTES = MAX_JOB_FRAME_BYTES;

/**
 * /vtnode/task/1 request: the task rows with these content hashes (taskHash()), as the signed v2
 * digests of the asker's samples name them. A worker holds the rows of the jobs it ran, a collector
 * the rows it verified; the reply skips rows the server does not hold.
 */
export const TaskRequest = z.object({
  v: z.literal(1),
  /** Hashes wanted, at most MAX_TASKS_PER_REQUEST, no repeats. */
  hashes: z
    .array(Sha256Id)
    .min(1)
    .max(MAX_TASKS_PER_REQUEST)
    .refine((hashes) => new Set(hashes).size === hashes.length, { message: 'hashes repeat' }),
});
export type TaskRequest = z.infer<typeof TaskRequest>;

/** /vtnode/task/1 reply: one frame per row held, then the server closes the stream. */
export const TaskReply = z.object({
  /** The hash the row is served under (the asker checks the row hashes to it). */
  hash: Sha256Id,
  task: Task,
});
export type TaskReply = z.infer<typeof TaskReply>;

/**
 * Why a served task row is not the row `expected` names; null when it is. A row hashing to another
 * value is a swapped or altered row: whoever served it lied (the hash comes from the origin's signature).
 */
export function taskRowMismatch(expected: string, reply: TaskReply): string | null {
  if (reply.hash !== expected) return `served under ${reply.hash}, ${expected} was asked`;
  const bytes = Buffer.byteLength(canonicalJson(reply.task));
  if (bytes > MAX_TASK_ROW_BYTES) return `the row is ${bytes} bytes, more than ${MAX_TASK_ROW_BYTES}`;
  const actual = taskHash(reply.task);
  if (actual !== expected) return `the row hashes to ${actual}, not ${expected}`;
  return null;
}

/** Splits hashes into request-sized pages (no repeats, order kept). */
export function taskPages(hashes: Iterable<string>): string[][] {
  const unique = [...new Set(hashes)];
  const pages: string[][] = [];
  for (let i = 0; i < unique.length; i += MAX_TASKS_PER_REQUEST)
    pages.push(unique.slice(i, i + MAX_TASKS_PER_REQUEST));
  return pages;
}
