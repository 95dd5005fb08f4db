import { claimFor, type SignedDigest } from '../../protocol/digest.ts';
import { ParseError, parseJsonWith, parseWith } from '../../protocol/parse.ts';
import { contentHash, SampleBody } from '../../protocol/sample.ts';
import type { DigestSigner } from '../digests/signature.ts';
import { logger } from '../logger.ts';
import { type DatabaseSync, openDatabase, transaction } from '../sqlite.ts';

const log = logger('vtnode:worker:sample-log');

/** File name of the sample log in a node's data dir. */
export const SAMPLE_LOG_DB = 'samples.db';

export interface SampleLogOptions {
  /** Database file (in the node's data dir), or `:memory:` for tests. */
  path: string;
  /** Peer id of this node: the origin of every sample in the log (fixed for the file's life). */
  origin: string;
  /**
   * Signs each appended sample's digest with this node's key (its origin must be `origin`); without
   * one the log is read-only (append throws), as a benchmark or a tool reading another node's log opens it.
   */
  signer?: DigestSigner;
}

/** A sample as the log holds it. */
export interface LoggedSample {
  /** Per-origin sequence number: 1, 2, 3, ... without gaps. */
  seq: number;
  /** Peer id of the node that generated and scored it. */
  origin: string;
  body: SampleBody;
  /** The origin's signature of the sample's digest (see protocol/digest.ts digestSigningBytes). */
  sig: string;
}

/** Outcome of an append. */
export interface Appended extends LoggedSample {
  /** False when the sample id was already in the log: the existing row is returned, no new seq. */
  created: boolean;
}

export interface SampleLogCounts {
  /** Samples in the log. */
  samples: number;
  /** Samples with reward 1. */
  verified: number;
  /** Highest sequence number (0 when empty). */
  highWater: number;
}

/**
 * The worker's durable sample log. A scored sample is appended (and committed with
 * synchronous=FULL) BEFORE it is reported to the submitter or gossiped, so whatever anyone was told
 * survives a crash. Appends are idempotent on the deterministic sample id. Sequence numbers are
 * per origin, increasing, without gaps, so a collector can catch up with "digests since seq N".
 * Each row keeps its digest's signature, so the digest can be served and relayed as the origin signed it.
 */
export interface SampleLog {
  /** Appends a scored sample durably; a sample id already present returns the existing row. */
  append(body: SampleBody): Appended;
  /** A sample by id. */
  get(sampleId: string): LoggedSample | undefined;
  /** Samples by id, in the order asked, skipping unknown ids. */
  getMany(sampleIds: readonly string[]): LoggedSample[];
  /** Samples by sequence number, in the order asked, skipping unknown ones. */
  bySeq(seqs: readonly number[]): LoggedSample[];
  /** Signed digests with seq greater than `after`, ascending, at most `limit`. */
  digestsSince(after: number, limit: number): SignedDigest[];
  counts(): SampleLogCounts;
  readonly origin: string;
  readonly path: string;
  close(): void;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
CREATE TABLE IF NOT EXISTS samples (
  seq INTEGER PRIMARY KEY,
  sample_id TEXT NOT NULL UNIQUE,
  task_id TEXT NOT NULL,
  model TEXT NOT NULL,
  split TEXT NOT NULL,
  reward REAL NOT NULL,
  content_hash TEXT NOT NULL,
  eval_fingerprint TEXT NOT NULL,
  body TEXT NOT NULL,
  sig TEXT
) STRICT;
`;

interface Row {
  seq: number;
  sample_id: string;
  task_id: string;
  model: string;
  split: string;
  reward: number;
  content_hash: string;
  eval_fingerprint: string;
  body: string;
  sig: string;
}

export function openSampleLog(options: SampleLogOptions): SampleLog {
  const { path, origin, signer } = options;
  if (!origin) throw new TypeError('openSampleLog: origin (the node peer id) is required');
  if (signer && signer.origin !== origin)
    throw new TypeError(`openSampleLog: the signer's key is ${signer.origin}'s, not the origin ${origin}'s`);
  const db = openDatabase(path);
  try {
    db.exec(SCHEMA);
    const stored = db.prepare('SELECT value FROM meta WHERE key = ?').get('origin') as
      | { value: string }
      | undefined;
    if (!stored) db.prepare('INSERT INTO meta (key, value) VALUES (?, ?)').run('origin', origin);
    else if (stored.value !== origin)
      throw new Error(
        `${path}: sample log belongs to peer ${stored.value}, not ${origin} (a log's sequence numbers are per origin; use the data dir of that node)`,
      );
    // A log written before digests were signed gets the column; with the node's key, its rows are signed.
    const columns = db.prepare('PRAGMA table_info(samples)').all() as { name: string }[];
    if (!columns.some((c) => c.name === 'sig')) db.exec('ALTER TABLE samples ADD COLUMN sig TEXT');
    if (signer) addSignatures(db, origin, signer, path);
  } catch (err) {
    db.close();
    throw err;
  }

  const byId = db.prepare('SELECT * FROM samples WHERE sample_id = ?');
  const last = db.prepare('SELECT COALESCE(MAX(seq), 0) AS seq FROM samples');
  const insert = db.prepare(
    `INSERT INTO samples (seq, sample_id, task_id, model, split, reward, content_hash, eval_fingerprint, body, sig)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const bySeq = db.prepare('SELECT * FROM samples WHERE seq = ?');
  const since = db.prepare(
    'SELECT seq, sample_id, task_id, model, split, reward, content_hash, eval_fingerprint, sig FROM samples WHERE seq > ? ORDER BY seq LIMIT ?',
  );
  const countAll = db.prepare(
    'SELECT COUNT(*) AS samples, COALESCE(SUM(reward >= 1), 0) AS verified, COALESCE(MAX(seq), 0) AS highWater FROM samples',
  );

  const toLogged = (row: Row): LoggedSample => ({
    seq: row.seq,
    origin,
    body: parseJsonWith(SampleBody, row.body, `${path}: sample seq ${row.seq}`),
    sig: row.sig,
  });

  return {
    origin,
    path,
    append(input) {
      if (!signer) throw new Error(`${path}: the sample log was opened read-only (no signer)`);
      const body = parseWith(SampleBody, input, 'sample body');
      const hash = contentHash(body.candidate);
      if (hash !== body.contentHash)
        throw new ParseError('sample body', [
          { path: 'contentHash', message: `is ${body.contentHash}, the candidate hashes to ${hash}` },
        ]);
      return transaction(db, () => {
        const existing = byId.get(body.sampleId) as Row | undefined;
        if (existing) {
          if (existing.content_hash !== body.contentHash)
            log(
              'sample %s already logged with another candidate; keeping seq %d',
              body.sampleId,
              existing.seq,
            );
          return { ...toLogged(existing), created: false };
        }
        const seq = (last.get() as { seq: number }).seq + 1;
        const { sig } = signer.sign(claimFor(body, origin, seq));
        insert.run(
          seq,
          body.sampleId,
          body.taskId,
          body.model,
          body.split,
          body.score.reward,
          body.contentHash,
          body.score.evalFingerprint,
          JSON.stringify(body),
          sig,
        );
        return { seq, origin, body, sig, created: true };
      });
    },
    get(sampleId) {
      const row = byId.get(sampleId) as Row | undefined;
      return row ? toLogged(row) : undefined;
    },
    getMany(sampleIds) {
      const out: LoggedSample[] = [];
      for (const id of sampleIds) {
        const row = byId.get(id) as Row | undefined;
        if (row) out.push(toLogged(row));
      }
      return out;
    },
    bySeq(seqs) {
      const out: LoggedSample[] = [];
      for (const seq of seqs) {
        const row = bySeq.get(seq) as Row | undefined;
        if (row) out.push(toLogged(row));
      }
      return out;
    },
    digestsSince(after, limit) {
      if (!Number.isInteger(after) || after < 0)
        throw new RangeError(`after must be a non-negative integer, got ${after}`);
      if (!Number.isInteger(limit) || limit < 1)
        throw new RangeError(`limit must be a positive integer, got ${limit}`);
      return (since.all(after, limit) as unknown as Row[]).map((r) => ({
        v: 1 as const,
        sampleId: r.sample_id,
        taskId: r.task_id,
        model: r.model,
        split: r.split as SignedDigest['split'],
        reward: r.reward,
        contentHash: r.content_hash,
        evalFingerprint: r.eval_fingerprint,
        origin,
        seq: r.seq,
        sig: r.sig,
      }));
    },
    counts() {
      const r = countAll.get() as { samples: number; verified: number; highWater: number };
      return { samples: r.samples, verified: r.verified, highWater: r.highWater };
    },
    close() {
      if (db.isOpen) db.close();
    },
  };
}

/** Signs the rows a log holds unsigned (logged before digests were signed), in one transaction. */
function addSignatures(db: DatabaseSync, origin: string, signer: DigestSigner, path: string) {
  const unsigned = db.prepare('SELECT seq, body FROM samples WHERE sig IS NULL ORDER BY seq').all() as {
    seq: number;
    body: string;
  }[];
  if (unsigned.length === 0) return;
  const set = db.prepare('UPDATE samples SET sig = ? WHERE seq = ?');
  transaction(db, () => {
    for (const r of unsigned) {
      const body = parseJsonWith(SampleBody, r.body, `${path}: sample seq ${r.seq}`);
      set.run(signer.sign(claimFor(body, origin, r.seq)).sig, r.seq);
    }
  });
  log('%s: signed the digests of %d samples logged before digests were signed', path, unsigned.length);
}
