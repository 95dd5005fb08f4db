import { z } from 'zod';
import { Digest, MAX_LOG_DIGESTS_PER_FRAME } from './digest.ts';
import { SampleBody } from './sample.ts';
import { Sha256Id } from './task.ts';

/** Most sample ids one /vtnode/sample/1 request may ask for. */
export const MAX_SAMPLE_IDS_PER_REQUEST = 64;

/** /vtnode/sample/1 request: bodies of these sample ids (the reply skips ids the node does not hold). */
export const SampleRequest = z.object({
  v: z.literal(1),
  /** Sample ids wanted, at most MAX_SAMPLE_IDS_PER_REQUEST, no repeats. */
  sampleIds: z
    .array(Sha256Id)
    .min(1)
    .max(MAX_SAMPLE_IDS_PER_REQUEST)
    .refine((ids) => new Set(ids).size === ids.length, { message: 'sample ids repeat' }),
});
export type SampleRequest = z.infer<typeof SampleRequest>;

/** /vtnode/sample/1 reply: one frame per body held, then the server closes the stream. */
export const SampleReply = z.object({
  /** Peer id of the worker that generated and scored the sample (the server may be another holder). */
  origin: z.string().min(1).max(128),
  /** The origin's sequence number of the sample. */
  seq: z.number().int().min(1),
  body: SampleBody,
});
export type SampleReply = z.infer<typeof SampleReply>;

/** /vtnode/log/1 request: the server's own digests with seq greater than `after`. */
export const LogRequest = z.object({
  v: z.literal(1),
  /** Highest seq the asker already holds contiguously (0 = from the start). */
  after: z.number().int().min(0),
  /** Most digests wanted in this page. */
  limit: z.number().int().min(1).max(MAX_LOG_DIGESTS_PER_FRAME),
});
export type LogRequest = z.infer<typeof LogRequest>;

/** Most lost ranges one /vtnode/log/1 reply carries. */
export const MAX_LOST_RANGES_PER_REPLY = 64;

/** Seqs the server handed out (and may have published) but no longer holds: its log lost them. */
export const LostRange = z
  .object({
    /** First lost seq. */
    first: z.number().int().min(1),
    /** Last lost seq, inclusive. */
    last: z.number().int().min(1),
  })
  .refine((r) => r.first <= r.last, { message: 'first is after last', path: ['last'] });
export type LostRange = z.infer<typeof LostRange>;

/** /vtnode/log/1 reply: one page of digests, ascending by seq, and the server's high-water mark. */
export const LogReply = z
  .object({
    digests: z.array(Digest).max(MAX_LOG_DIGESTS_PER_FRAME),
    /** The server's highest seq: the asker is caught up once it holds every seq up to it. */
    highWater: z.number().int().min(0),
    /**
     * Seq ranges the server's log lost (a truncated WAL, a restored backup): every one, or when more
     * than fit, those ending after the asked seq. Their seqs will never be served: the asker counts
     * them as held, and a sample it holds under a lost seq may come again under a new one. Absent = none.
     */
    lost: z.array(LostRange).max(MAX_LOST_RANGES_PER_REPLY).optional(),
  })
  .refine((r) => (r.lost ?? []).every((l) => l.last <= r.highWater), {
    message: 'a lost range ends after highWater',
    path: ['lost'],
  });
export type LogReply = z.infer<typeof LogReply>;
