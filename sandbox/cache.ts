import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { sha256Hex } from '../protocol/canonical.ts';
import { SentinelState } from './integrity/sentinel.ts';
import { logger } from './log.ts';
import { ReplayKey } from './replay/judge.ts';
import { StrengthKey } from './strength.ts';

const log = logger('vtnode:sandbox:cache');

const Case = z.object({
  file: z.string(),
  name: z.string(),
  status: z.enum(['passed', 'failed', 'skipped', 'todo']),
  message: z.string().optional(),
});
const Reading = z.union([
  z.object({ ok: z.literal(true), state: SentinelState }),
  z.object({ ok: z.literal(false), problem: z.string() }),
]);

/** What a reference run left that later scores need (its verdict, its sentinels, its time), without the process. */
export const StoredReference = z.object({
  v: z.literal(3),
  /** sha256 of the reference text the run judged. */
  contentHash: z.string(),
  verdict: z.object({ cases: z.array(Case), errors: z.array(z.string()) }).nullable(),
  sentinels: z.array(z.tuple([z.string(), Reading])),
  exitDisagreement: z.string().nullable(),
  failure: z.string().nullable(),
  /** The reference run's wall and CPU time, ms: the hang rule's yardstick (sandbox/overrun.ts). */
  time: z.object({ wallMs: z.number().nonnegative(), cpuMs: z.number().nonnegative() }).nullable(),
  /** `tests` tasks: the answer key of test strength (sandbox/strength.ts). */
  strength: StrengthKey.optional(),
  /** `file` tasks: the differential replay's answer key (sandbox/replay/judge.ts). */
  replay: ReplayKey.optional(),
});
export type StoredReference = z.infer<typeof StoredReference>;

const StoredSelfTest = z.object({
  v: z.literal(1),
  at: z.number(),
  checks: z.array(z.object({ name: z.string(), ok: z.boolean(), detail: z.string() })),
});

/** Reference runs keyed by evaluation fingerprint (and task), kept across processes. */
export interface ReferenceCache {
  get(key: string): Promise<StoredReference | null>;
  put(key: string, value: StoredReference): Promise<void>;
}

/** A passed sandbox self-test, kept for a while so one-shot commands do not pay it on every call. */
export interface SelfTestCache {
  /** The checks of a passed self-test of this backend description younger than the TTL, or null. */
  get(backend: unknown): Promise<StoredSelfTestChecks | null>;
  put(backend: unknown, checks: StoredSelfTestChecks): Promise<void>;
}
export type StoredSelfTestChecks = z.infer<typeof StoredSelfTest>['checks'];

export interface ScoringCacheOptions {
  /** Folder of the cache (e.g. `<data dir>/cache`). */
  dir: string;
  /** How long a passed self-test is reused, ms (default one hour). */
  selfTestTtlMs?: number;
  /** Clock, for tests. */
  now?: () => number;
}

/** The key of a reference: everything its verdict depends on. */
export function referenceKey(
  fingerprint: string,
  taskId: string,
  referenceHash: string,
  kind: string,
): string {
  return sha256Hex(`${fingerprint}\0${taskId}\0${referenceHash}\0${kind}`);
}

async function readJson<T>(path: string, schema: z.ZodType<T>): Promise<T | null> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    return null;
  }
  const parsed = schema.safeParse(
    (() => {
      try {
        return JSON.parse(text);
      } catch {
        return undefined;
      }
    })(),
  );
  if (parsed.success) return parsed.data;
  // A torn or foreign file is dropped, never trusted: the reference is simply run again.
  log.warn(`ignoring the unreadable cache entry ${path}`);
  await rm(path, { force: true });
  return null;
}

async function writeAtomic(path: string, value: unknown): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}`;
  await writeFile(tmp, JSON.stringify(value), { mode: 0o600 });
  await rename(tmp, path);
}

/** File-backed caches under `dir`: one JSON file per entry, written atomically, validated on read. */
export function createScoringCache(options: ScoringCacheOptions): {
  references: ReferenceCache;
  selfTest: SelfTestCache;
} {
  const refDir = join(options.dir, 'references');
  const ttl = options.selfTestTtlMs ?? 60 * 60 * 1000;
  const now = options.now ?? Date.now;
  const selfTestPath = (backend: unknown) =>
    join(options.dir, `self-test-${sha256Hex(JSON.stringify(backend)).slice(0, 16)}.json`);
  return {
    references: {
      get: (key) => readJson(join(refDir, `${key}.json`), StoredReference),
      async put(key, value) {
        await mkdir(refDir, { recursive: true, mode: 0o700 });
        await writeAtomic(join(refDir, `${key}.json`), value);
      },
    },
    selfTest: {
      async get(backend) {
        const stored = await readJson(selfTestPath(backend), StoredSelfTest);
        if (!stored || now() - stored.at > ttl || now() < stored.at) return null;
        return stored.checks.every((c) => c.ok) ? stored.checks : null;
      },
      async put(backend, checks) {
        await mkdir(options.dir, { recursive: true, mode: 0o700 });
        await writeAtomic(selfTestPath(backend), { v: 1, at: now(), checks });
      },
    },
  };
}
