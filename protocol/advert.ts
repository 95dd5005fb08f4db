import { z } from 'zod';
import { Certificate } from './membership.ts';
import { Sha256Id } from './task.ts';

/** Kinds of OpenAI-compatible model servers vtnode recognises. `openai` = compatible but unidentified. */
export const ServerKind = z.enum([
  'ollama',
  'llama-server',
  'lm-studio',
  'vllm',
  'mlx',
  'vtnode-emulator',
  'openai',
]);
export type ServerKind = z.infer<typeof ServerKind>;

const count = z.number().int().min(0);
const bytes = z.number().int().min(0);

/** A model one node serves. */
export const AdvertModel = z.object({
  /** Model id as the server lists it in /v1/models. */
  id: z.string().min(1).max(256),
  /** Which server serves it. */
  server: ServerKind,
  /** Context length in tokens, when the server says. */
  context: count.nullable(),
  /** Requests the server runs at once for this model. */
  concurrency: z.number().int().min(1).max(1024),
  /** True when the server reports the model loaded in memory now. */
  loaded: z.boolean(),
  /** Bytes the loaded model occupies, when the server says (Ollama /api/ps). */
  memoryBytes: bytes.nullable(),
});
export type AdvertModel = z.infer<typeof AdvertModel>;

/** A prompt whose KV cache a node has observed warm on one of its models. */
export const WarmEntry = z.object({
  /** promptFingerprint of the task. */
  prompt: Sha256Id,
  /** Model whose cache holds it. */
  model: z.string().min(1).max(256),
});
export type WarmEntry = z.infer<typeof WarmEntry>;

export const MAX_ADVERT_WARM = 64;

/**
 * The warm list as a change to the sender's previous one (protocol/warm-delta.ts): `drop` leaves,
 * `front` moves to the front, the rest keeps its order, cut to `len`.
 */
export const WarmDelta = z.object({
  /** Revision of the sender's list this delta applies to (`warmRev` of an earlier advert). */
  from: z.number().int().min(0),
  /** Entries that move (or are added) to the front, newest first. */
  front: z.array(WarmEntry).max(MAX_ADVERT_WARM),
  /** Entries that left the list other than off its end (observed cold: the server evicted them). */
  drop: z.array(WarmEntry).max(MAX_ADVERT_WARM).default([]),
  /** Length of the list after the change (the rest of the old list, in order, fills up to it). */
  len: z.number().int().min(0).max(MAX_ADVERT_WARM),
});
export type WarmDelta = z.infer<typeof WarmDelta>;

export const SandboxBackend = z.enum(['bwrap', 'seatbelt', 'unconfined', 'none']);
export type SandboxBackend = z.infer<typeof SandboxBackend>;

export const MAX_ADVERT_ADDRS = 16;
export const MAX_ADVERT_MODELS = 64;
export const MAX_ADVERT_WORKSPACES = 32;

/** What every node gossips about itself, periodically and on change. */
export const Advert = z
  .object({
    /** Schema version of the advert. */
    v: z.literal(1),
    /** The node's libp2p peer id (must equal the gossip message's signer). */
    peerId: z.string().min(1).max(128),
    /** Per-node sequence number; receivers keep the newest. Restarts continue from the stored value. */
    seq: count,
    /** Sender's clock at publish time, ms since epoch (informational; freshness uses the receiver's clock). */
    sentAt: count,
    /** True in the last advert a node sends before it leaves. */
    leaving: z.boolean(),
    /** vtnode version of the sender. */
    version: z.string().min(1).max(64),
    /** Host name, or null when the node runs with --private-host. */
    host: z.string().max(255).nullable(),
    /** Multiaddrs the node listens on (with no /p2p suffix), so peers can dial it directly. */
    addrs: z.array(z.string().min(1).max(256)).max(MAX_ADVERT_ADDRS),
    /** Models served by the node's model servers. */
    models: z.array(AdvertModel).max(MAX_ADVERT_MODELS),
    /** Memory in bytes: total, free, and reserved by loaded models / running jobs. */
    memory: z.object({ total: bytes, free: bytes, reserved: bytes }),
    /**
     * Work on the node: jobs queued (nothing in progress: waiting for a sandbox slot or a job slot),
     * running (generating or scoring), of those still `generating` (absent from older nodes: count
     * every running job), of the queued ones `waiting` for a job slot to generate (absent from older
     * nodes, which keep no such job), and `capacity`, the jobs it generates at once (its job slots).
     */
    load: z.object({
      queued: count,
      running: count,
      generating: count.optional(),
      waiting: count.optional(),
      capacity: count,
    }),
    /**
     * Why the node takes no new jobs now (a guest on battery or under load: capacity is then 0); absent
     * while it takes jobs. Running jobs go on.
     */
    paused: z.string().min(1).max(200).optional(),
    /**
     * Prompts observed warm, newest first, capped. Empty when `warmDelta` is present (nodes older than warm deltas
     * then see no warm list: placement without affinity to that node, never a wrong one).
     */
    warm: z.array(WarmEntry).max(MAX_ADVERT_WARM),
    /** Revision of the sender's warm list: it grows by one at each change. Absent from nodes older than warm deltas. */
    warmRev: z.number().int().min(0).optional(),
    /** The warm list as a change to revision `from`, instead of whole in `warm`. */
    warmDelta: WarmDelta.optional(),
    /** Content ids of the workspaces the node holds, ready to score against. */
    workspaces: z.array(Sha256Id).max(MAX_ADVERT_WORKSPACES),
    /** Content ids of workspaces the node is fetching and installing now (--fetch-workspaces); absent = none. */
    fetching: z.array(Sha256Id).max(4).optional(),
    /** The node's sandbox: backend and whether its startup self-test passed. */
    sandbox: z.object({ backend: SandboxBackend, ok: z.boolean(), detail: z.string().max(500).optional() }),
    /** Roles the node plays besides worker. */
    roles: z.array(z.enum(['worker', 'collector', 'submitter'])).max(3),
    /** The node's membership certificate (null while it waits for admission): lets every node check
     * the origin of gossip it receives through others. */
    cert: Certificate.nullable().optional(),
  })
  .check((ctx) => {
    const a = ctx.value;
    if (a.warmDelta && a.warm.length > 0)
      ctx.issues.push({
        code: 'custom',
        input: a.warm,
        path: ['warm'],
        message: 'must be empty with warmDelta',
      });
    if (a.warmDelta && a.warmRev === undefined)
      ctx.issues.push({
        code: 'custom',
        input: a.warmRev,
        path: ['warmRev'],
        message: 'is required with warmDelta',
      });
    if (a.warmDelta && a.warmRev !== undefined && a.warmDelta.from > a.warmRev)
      ctx.issues.push({
        code: 'custom',
        input: a.warmDelta.from,
        path: ['warmDelta', 'from'],
        message: 'is after warmRev',
      });
  });
export type Advert = z.infer<typeof Advert>;

/** Largest advert a node publishes or accepts, bytes of JSON. */
export const MAX_ADVERT_BYTES = 32 * 1024;
