import { basename, dirname, extname, join } from 'node:path';
import { claimFor, type SignedDigest } from '../../protocol/digest.ts';
import type { LostRange } from '../../protocol/fetch.ts';
import { ParseError, parseJsonWith, parseWith } from '../../protocol/parse.ts';
import { contentHash, SampleBody } from '../../protocol/sample.ts';
import { Task, taskHash } from '../../protocol/task.ts';
import type { TaskReply } from '../../protocol/task-fetch.ts';
import { DIGEST_ROW_COLUMNS, type DigestRow, digestOfRow, digestValues } from '../digests/row.ts';
import type { DigestSigner } from '../digests/signature.ts';
import { logger } from '../logger.ts';
import { type DatabaseSync, openDatabase, storageError, transaction } from '../sqlite.ts';
import { openSeqMark, type SeqMark } from './seq-mark.ts';

const log = logger('vtnode:worker:sample-log');

/** File name of the sample log in a node's data dir. */
export const SAMPLE_LOG_DB = 'samples.db';
/** File name of the sample log's sequence mark (seq-mark.ts), beside it. */
export const SAMPLE_LOG_MARK = 'samples.seq';

/** What to do with a corrupt sample log (named in the error that refuses it). */
export const SAMPLE_LOG_IF_CORRUPT =
  `Restore it from a backup, or move it aside with its -wal and -shm files (mv ${SAMPLE_LOG_DB} ${SAMPLE_LOG_DB}.corrupt): ` +
  `the node then starts an empty log that continues after the last sequence number it published (kept in ${SAMPLE_LOG_MARK}); ` +
  'samples only this node held are lost, collectors keep what they fetched.';

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
  /**
   * The sequence mark file (seq-mark.ts); default `samples.seq` beside the database, none for
   * `:memory:`. null = no mark (seqs then rely on the database alone).
   */
  markPath?: string | null;
  /** Most task rows kept (those of the jobs run most recently stay; default DEFAULT_MAX_TASK_ROWS). */
  maxTaskRows?: number;
}

/** Task rows a sample log keeps by default (a collector fetches them by hash, /vtnode/task/1). */
export const DEFAULT_MAX_TASK_ROWS = 10_000;

/** A run of sequence numbers the log handed out (and may have published) whose rows it no longer holds. */
export type { LostRange };

/** A sample as the log holds it. */
export interface LoggedSample {
  /** Per-origin sequence number: 1, 2, 3, ... without gaps. */
  seq: number;
  /** Peer id of the node that generated and scored it. */
  origin: string;
  body: SampleBody;
  /** The origin's signature of the sample's digest (see protocol/digest.ts digestSigningBytes). */
  sig: string;
  /** taskHash() of the task row its digest (v2) commits to; null or absent for a v1 digest (logged without its task). */
  taskHash?: string | null;
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
  /** Highest sequence number handed out, lost ones included (0 when empty). */
  highWater: number;
}

/**
 * The worker's durable sample log. A scored sample is appended (and committed with
 * synchronous=FULL) BEFORE it is reported to the submitter or gossiped, so whatever anyone was told
 * survives a crash. Appends are idempotent on the deterministic sample id. Sequence numbers are
 * per origin, increasing, without gaps, so a collector can catch up with "digests since seq N".
 * Each row keeps its digest's signature, so the digest can be served and relayed as the origin signed it.
 *
 * Sequence numbers never rewind: before a row with a new seq is committed, the seq is flushed to
 * the mark file beside the database. A log that opens with fewer rows than its mark says were
 * handed out (a truncated or deleted WAL, an older backup restored, the file moved aside) records
 * the missing seqs as a lost range, serves it to collectors (/vtnode/log/2 `lost`) so their
 * catch-up skips it, and continues after the mark.
 */
export interface SampleLog {
  /**
   * Appends a scored sample durably; a sample id already present returns the existing row. With its
   * task row (every job carries one), the row is kept by hash and the digest (v2) commits to it.
   */
  append(body: SampleBody, task?: Task): Appended;
  /** Task rows held among `hashes` (taskHash()), in the order asked, for /vtnode/task/1. */
  getTaskRows(hashes: readonly string[]): TaskReply[];
  /** A sample by id. */
  get(sampleId: string): LoggedSample | undefined;
  /** Samples by id, in the order asked, skipping unknown ids. */
  getMany(sampleIds: readonly string[]): LoggedSample[];
  /** Samples by sequence number, in the order asked, skipping unknown ones. */
  bySeq(seqs: readonly number[]): LoggedSample[];
  /** Signed digests with seq greater than `after`, ascending, at most `limit`. */
  digestsSince(after: number, limit: number): SignedDigest[];
  /** Lost ranges that end after `after`, ascending, at most `limit`. */
  lostSince(after: number, limit: number): LostRange[];
  counts(): SampleLogCounts;
  readonly origin: string;
  readonly path: string;
  close(): void;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
CREATE TABLE IF NOT EXISTS lost (first INTEGER PRIMARY KEY, last INTEGER NOT NULL, found_at INTEGER NOT NULL) STRICT;
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
  sig TEXT,
  task_hash TEXT
) STRICT;
CREATE TABLE IF NOT EXISTS tasks (hash TEXT PRIMARY KEY, json TEXT NOT NULL, used_at INTEGER NOT NULL) STRICT;
CREATE INDEX IF NOT EXISTS tasks_by_use ON tasks (used_at);
`;

/** Highest seq handed out: the last row's, or the end of the last lost range. */
const TOP = `SELECT MAX(
  (SELECT COALESCE(MAX(seq), 0) FROM samples),
  (SELECT COALESCE(MAX(last), 0) FROM lost)) AS seq`;

/**
 * Makes the database and the mark agree at open: rows missing below the mark become a lost range;
 * a mark behind the rows (a mark file deleted, or new beside an existing log) is raised to them.
 */
function reconcile(db: DatabaseSync, path: string, mark: SeqMark | null): void {
  if (!mark) return;
  const top = (db.prepare(TOP).get() as { seq: number }).seq;
  const marked = mark.value();
  if (marked > top) {
    transaction(db, () =>
      db
        .prepare('INSERT INTO lost (first, last, found_at) VALUES (?, ?, ?)')
        .run(top + 1, marked, Date.now()),
    );
    if (marked === top + 1)
      // The usual cause: the node stopped between flushing the mark and committing the row.
      log(
        `${path}: seq ${marked} was handed out but is not in the log (the node stopped mid-append?): recorded as lost`,
      );
    else
      log.warn(
        `${path}: the log holds seqs up to ${top}, but seqs up to ${marked} were handed out (${mark.path}): ` +
          `rows ${top + 1}..${marked} are lost (a truncated or deleted WAL, an older copy restored, or the file replaced). ` +
          `They are recorded as lost, collectors skip them, and new samples continue at seq ${marked + 1}.`,
      );
  } else if (marked < top) {
    if (!mark.created)
      log.warn(`${mark.path}: the mark (${marked}) is behind the log (${top}); raised to ${top}`);
    mark.advance(top);
  }
}

/** A row of the log: the signed digest's columns and the body as JSON. */
interface Row extends DigestRow {
  body: string;
}

function defaultMarkPath(path: string): string | null {
  if (path === ':memory:') return null;
  return join(dirname(path), `${basename(path, extname(path))}.seq`);
}

export function openSampleLog(options: SampleLogOptions): SampleLog {
  const { path, origin, signer } = options;
  if (!origin) throw new TypeError('openSampleLog: origin (the node peer id) is required');
  if (signer && signer.origin !== origin)
    throw new TypeError(`openSampleLog: the signer's key is ${signer.origin}'s, not the origin ${origin}'s`);
  const markPath = options.markPath === undefined ? defaultMarkPath(path) : options.markPath;
  const role = { what: "the worker's sample log", ifCorrupt: SAMPLE_LOG_IF_CORRUPT };
  const db = openDatabase(path, role);
  let mark: SeqMark | null = null;
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
    // A log from before task rows were kept: its rows keep v1 digests (no task hash).
    if (!columns.some((c) => c.name === 'task_hash'))
      db.exec('ALTER TABLE samples ADD COLUMN task_hash TEXT');
    if (signer) addSignatures(db, origin, signer, path);
    if (markPath) mark = openSeqMark(markPath, origin);
    reconcile(db, path, mark);
  } catch (err) {
    mark?.close();
    db.close();
    throw storageError(path, role, err);
  }

  const byId = db.prepare('SELECT * FROM samples WHERE sample_id = ?');
  const last = db.prepare(TOP);
  const insert = db.prepare(
    `INSERT INTO samples (${DIGEST_ROW_COLUMNS}, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const maxTaskRows = Math.max(1, options.maxTaskRows ?? DEFAULT_MAX_TASK_ROWS);
  // used_at is a use counter (not a clock): the latest job's row is the newest, even within one millisecond.
  const putTask = db.prepare(
    `INSERT INTO tasks (hash, json, used_at) VALUES (?, ?, (SELECT COALESCE(MAX(used_at), 0) + 1 FROM tasks))
     ON CONFLICT (hash) DO UPDATE SET used_at = excluded.used_at`,
  );
  // Least recently used first: the rows of old jobs go, those of recent ones stay.
  const evictTasks = db.prepare(
    'DELETE FROM tasks WHERE hash IN (SELECT hash FROM tasks ORDER BY used_at DESC, hash LIMIT -1 OFFSET ?)',
  );
  const taskByHash = db.prepare('SELECT json FROM tasks WHERE hash = ?');
  /** Keeps a task row by hash (bounded); returns its hash. */
  const keepTask = (task: Task): string => {
    const hash = taskHash(task);
    putTask.run(hash, JSON.stringify(task));
    evictTasks.run(maxTaskRows);
    return hash;
  };
  const bySeq = db.prepare('SELECT * FROM samples WHERE seq = ?');
  const since = db.prepare(`SELECT ${DIGEST_ROW_COLUMNS} FROM samples WHERE seq > ? ORDER BY seq LIMIT ?`);
  const countAll = db.prepare(
    'SELECT COUNT(*) AS samples, COALESCE(SUM(reward >= 1), 0) AS verified FROM samples',
  );
  const lostAfter = db.prepare('SELECT first, last FROM lost WHERE last > ? ORDER BY first LIMIT ?');

  const toLogged = (row: Row): LoggedSample => ({
    seq: row.seq,
    origin,
    body: parseJsonWith(SampleBody, row.body, `${path}: sample seq ${row.seq}`),
    sig: row.sig,
    taskHash: row.task_hash ?? null,
  });

  return {
    origin,
    path,
    append(input, taskInput) {
      if (!signer) throw new Error(`${path}: the sample log was opened read-only (no signer)`);
      const body = parseWith(SampleBody, input, 'sample body');
      const task = taskInput === undefined ? undefined : parseWith(Task, taskInput, 'task row');
      if (task && (task.id !== body.taskId || task.promptFingerprint !== body.promptFingerprint))
        throw new ParseError('task row', [
          {
            path: 'id',
            message: `is ${task.id} (${task.promptFingerprint}), the sample answers ${body.taskId}`,
          },
        ]);
      const hash = contentHash(body.candidate);
      if (hash !== body.contentHash)
        throw new ParseError('sample body', [
          { path: 'contentHash', message: `is ${body.contentHash}, the candidate hashes to ${hash}` },
        ]);
      return transaction(db, () => {
        const hash = task ? keepTask(task) : null;
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
        const signed = signer.sign(claimFor(body, origin, seq, hash));
        // The mark is on disk before the row is visible to anyone (gossip, /vtnode/log/2, the submitter).
        mark?.advance(seq);
        insert.run(...digestValues(signed), JSON.stringify(body));
        return { seq, origin, body, sig: signed.sig, taskHash: hash, created: true };
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
      return (since.all(after, limit) as unknown as DigestRow[]).map((r) => digestOfRow(r, origin));
    },
    getTaskRows(hashes) {
      const out: TaskReply[] = [];
      for (const hash of hashes) {
        const row = taskByHash.get(hash) as { json: string } | undefined;
        if (!row) continue;
        const task = parseJsonWith(Task, row.json, `${path}: task row ${hash}`);
        // A row damaged on disk is not served (the asker would count it against this node).
        if (taskHash(task) === hash) out.push({ hash, task });
        else log.warn(`${path}: task row ${hash} no longer hashes to its key; not served`);
      }
      return out;
    },
    lostSince(after, limit) {
      return (lostAfter.all(after, limit) as unknown as LostRange[]).map((r) => ({
        first: r.first,
        last: r.last,
      }));
    },
    counts() {
      const r = countAll.get() as { samples: number; verified: number };
      const highWater = (last.get() as { seq: number }).seq;
      return { samples: r.samples, verified: r.verified, highWater };
    },
    close() {
      mark?.close();
      mark = null;
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
