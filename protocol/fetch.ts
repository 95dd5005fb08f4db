import { z } from 'zod';
import { MAX_LOG_DIGESTS_PER_FRAME, SignedDigest } from './digest.ts';
import { SampleBody } from './sample.ts';

/** Most samples one /vtnode/sample/2 request may ask for. */
export const MAX_SAMPLES_PER_REQUEST = 64;
/** Most origins one /vtnode/log/2 `origins` reply frame lists. */
export const MAX_ORIGINS_PER_FRAME = 1000;

/** A peer id as the wire carries it. */
const PeerIdText = z.string().min(1).max(128);

/** One sample of one origin: the exact row a digest names. */
export const SampleKey = z.object({
  /** Peer id of the worker that generated and scored the sample. */
  origin: PeerIdText,
  /** The origin's sequence number of the sample. */
  seq: z.number().int().min(1),
});
export type SampleKey = z.infer<typeof SampleKey>;

/**
 * /vtnode/sample/2 request: the bodies of these exact (origin, seq) rows. A worker holds only its
 * own rows, a collector every row it verified; the reply skips rows the server does not hold.
 */
export const SampleRequest = z.object({
  v: z.literal(2),
  /** Rows wanted, at most MAX_SAMPLES_PER_REQUEST, no repeats. */
  samples: z
    .array(SampleKey)
    .min(1)
    .max(MAX_SAMPLES_PER_REQUEST)
    .refine((keys) => new Set(keys.map((k) => `${k.origin}#${k.seq}`)).size === keys.length, {
      message: 'samples repeat',
    }),
});
export type SampleRequest = z.infer<typeof SampleRequest>;

/** /vtnode/sample/2 reply: one frame per row held, then the server closes the stream. */
export const SampleReply = z.object({
  /** The origin of the row (the server may be another holder). */
  origin: PeerIdText,
  /** The origin's sequence number of the row. */
  seq: z.number().int().min(1),
  body: SampleBody,
});
export type SampleReply = z.infer<typeof SampleReply>;

/** /vtnode/log/2 request: the origins the server holds digests of (a page, by peer id). */
export const OriginsRequest = z.object({
  v: z.literal(2),
  kind: z.literal('origins'),
  /** Only origins whose peer id sorts after this one (paging; omitted = from the start). */
  after: PeerIdText.optional(),
});
export type OriginsRequest = z.infer<typeof OriginsRequest>;

/** /vtnode/log/2 request: one origin's signed digests with seq greater than `after`. */
export const DigestsRequest = z.object({
  v: z.literal(2),
  kind: z.literal('digests'),
  /** Whose digests: the server's own, or any origin it holds (a collector relays what it collected). */
  origin: PeerIdText,
  /** Highest seq the asker already holds contiguously (0 = from the start). */
  after: z.number().int().min(0),
  /** Most digests wanted in this page. */
  limit: z.number().int().min(1).max(MAX_LOG_DIGESTS_PER_FRAME),
});
export type DigestsRequest = z.infer<typeof DigestsRequest>;

export const LogRequest = z.discriminatedUnion('kind', [OriginsRequest, DigestsRequest]);
export type LogRequest = z.infer<typeof LogRequest>;

/** What a server holds of one origin. */
export const OriginSummary = z.object({
  origin: PeerIdText,
  /** Highest seq held contiguously from 1. */
  highWater: z.number().int().min(0),
  /** Highest seq held (above highWater when the server has gaps). */
  maxSeq: z.number().int().min(0),
  /** Digests held. */
  count: z.number().int().min(0),
});
export type OriginSummary = z.infer<typeof OriginSummary>;

/** /vtnode/log/2 reply to `origins`: a page of origins, ascending by peer id. */
export const OriginsReply = z.object({
  kind: z.literal('origins'),
  origins: z.array(OriginSummary).max(MAX_ORIGINS_PER_FRAME),
  /** True when more origins follow (ask again after the last one). */
  more: z.boolean(),
});
export type OriginsReply = z.infer<typeof OriginsReply>;

/**
 * /vtnode/log/2 reply to `digests`: one page of the origin's signed digests, ascending by seq, each
 * as its origin signed it (the asker verifies every signature, whoever served it).
 */
export const DigestsReply = z.object({
  kind: z.literal('digests'),
  digests: z.array(SignedDigest).max(MAX_LOG_DIGESTS_PER_FRAME),
  /** The server's contiguous high-water mark for the origin. */
  highWater: z.number().int().min(0),
});
export type DigestsReply = z.infer<typeof DigestsReply>;

export const LogReply = z.discriminatedUnion('kind', [OriginsReply, DigestsReply]);
export type LogReply = z.infer<typeof LogReply>;
