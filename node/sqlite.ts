import { chmodSync, closeSync, existsSync, openSync, readSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { DatabaseSync as DatabaseSyncType } from 'node:sqlite';
import { StorageError, storageErrorOf } from './storage/errors.ts';

export type DatabaseSync = DatabaseSyncType;

let sqlite: typeof import('node:sqlite') | undefined;

/**
 * Loads node:sqlite once. Node 22 prints "ExperimentalWarning: SQLite is an experimental feature"
 * on first load; that one warning (and only it, only during the load) is dropped, so `vtnode`
 * output stays clean. Every other warning still goes through `process.emitWarning` untouched.
 */
function load(): typeof import('node:sqlite') {
  if (sqlite) return sqlite;
  const emitWarning = process.emitWarning;
  process.emitWarning = function filtered(this: NodeJS.Process, warning: string | Error, ...rest: unknown[]) {
    const text = typeof warning === 'string' ? warning : warning.message;
    const type = typeof rest[0] === 'string' ? rest[0] : (rest[0] as { type?: string } | undefined)?.type;
    const name = typeof warning === 'string' ? type : warning.name;
    if (name === 'ExperimentalWarning' && /\bSQLite\b/.test(text)) return;
    // biome-ignore lint/suspicious/noExplicitAny: forwarding every overload of emitWarning unchanged
    return (emitWarning as any).call(this, warning, ...rest);
  } as typeof process.emitWarning;
  try {
    sqlite = createRequire(import.meta.url)('node:sqlite') as typeof import('node:sqlite');
  } finally {
    process.emitWarning = emitWarning;
  }
  return sqlite;
}

/** What a database holds and what to do when it is corrupt: named in the error that refuses it. */
export interface DatabaseRole {
  /** What the file holds, e.g. "the worker's sample log". */
  what: string;
  /** What the operator should do when the file is corrupt or not a database. */
  ifCorrupt: string;
}

const SQLITE_MAGIC = 'SQLite format 3\0';

/** Refuses a file that is there but does not start with SQLite's header (garbage, another format, cut short). */
function checkHeader(path: string, role: DatabaseRole): void {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw storageError(path, role, err);
  }
  try {
    const head = Buffer.alloc(100);
    const n = readSync(fd, head, 0, 100, 0);
    if (n === 0) return; // an empty file is a new database
    if (n < 100 || head.toString('latin1', 0, 16) !== SQLITE_MAGIC)
      throw new StorageError({
        path,
        fault: 'not-a-database',
        what: role.what,
        detail: n < 100 ? `${n} bytes, shorter than a database header` : 'no SQLite header',
        advice: role.ifCorrupt,
      });
  } finally {
    closeSync(fd);
  }
}

/**
 * Creates the database file readable by its owner only (0600), and narrows an existing one and its
 * -wal and -shm files to 0600: they hold private code and keys' work. SQLite creates the -wal and -shm
 * files with the database file's mode.
 */
function makePrivate(path: string): void {
  try {
    closeSync(openSync(path, 'a', 0o600));
  } catch {
    // A missing folder, a read-only file: SQLite's open below refuses it, naming the fault.
  }
  for (const file of [path, `${path}-wal`, `${path}-shm`]) {
    try {
      if (existsSync(file)) chmodSync(file, 0o600);
    } catch {
      // Not this user's file: opening it for writing says what is wrong.
    }
  }
}

/** A node:sqlite or node:fs error on `path` as a StorageError naming the file; other errors unchanged. */
export function storageError(path: string, role: DatabaseRole, err: unknown): unknown {
  return storageErrorOf(path, role.what, err, role.ifCorrupt);
}

/** Runs SQLite's quick_check (every page and index, in one pass) and refuses a database that fails it. */
function checkIntegrity(db: DatabaseSync, path: string, role: DatabaseRole): void {
  const rows = db.prepare('PRAGMA quick_check(8)').all() as { quick_check: string }[];
  const problems = rows.map((r) => r.quick_check).filter((r) => r !== 'ok');
  if (problems.length > 0)
    throw new StorageError({
      path,
      fault: 'corrupt',
      what: role.what,
      detail: problems.slice(0, 3).join('; '),
      advice: role.ifCorrupt,
    });
}

const DEFAULT_ROLE: DatabaseRole = {
  what: 'the database',
  ifCorrupt: 'Move it aside (with its -wal and -shm files) and start again.',
};

/**
 * Opens a SQLite database for durable state: WAL journal, synchronous=FULL (a committed transaction
 * survives a crash or power loss), foreign keys on, and a busy timeout for a second process.
 * A file that is not a database, or whose pages fail SQLite's quick_check, is refused with a
 * StorageError naming the file, what it holds and what to do (`role`); so is one that cannot be
 * opened for writing. `:memory:` skips the file checks.
 */
export function openDatabase(path: string, role: DatabaseRole = DEFAULT_ROLE): DatabaseSync {
  const { DatabaseSync } = load();
  const onDisk = path !== ':memory:';
  if (onDisk) {
    checkHeader(path, role);
    makePrivate(path);
  }
  let db: DatabaseSync;
  try {
    db = new DatabaseSync(path);
  } catch (err) {
    throw storageError(path, role, err);
  }
  try {
    db.exec('PRAGMA journal_mode = WAL');
    db.exec('PRAGMA synchronous = FULL');
    db.exec('PRAGMA foreign_keys = ON');
    db.exec('PRAGMA busy_timeout = 5000');
    if (onDisk) checkIntegrity(db, path, role);
  } catch (err) {
    db.close();
    throw storageError(path, role, err);
  }
  return db;
}

/** Runs `fn` in a write transaction (BEGIN IMMEDIATE): committed if it returns, rolled back if it throws. */
export function transaction<T>(db: DatabaseSync, fn: () => T): T {
  db.exec('BEGIN IMMEDIATE');
  try {
    const out = fn();
    db.exec('COMMIT');
    return out;
  } catch (err) {
    if (db.isTransaction) db.exec('ROLLBACK');
    throw err;
  }
}

/**
 * Runs `fn`'s writes with synchronous=NORMAL: committed without waiting for the disk. For writes a
 * crash may lose without harm (progress shown to the user, state a restart resets anyway): in WAL
 * mode they stay in order with the others, and the next synchronous=FULL commit flushes them too.
 */
export function withoutFlush<T>(db: DatabaseSync, fn: () => T): T {
  db.exec('PRAGMA synchronous = NORMAL');
  try {
    return fn();
  } finally {
    db.exec('PRAGMA synchronous = FULL');
  }
}
