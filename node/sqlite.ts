import { createRequire } from 'node:module';
import type { DatabaseSync as DatabaseSyncType } from 'node:sqlite';

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

/**
 * Opens a SQLite database for durable state: WAL journal, synchronous=FULL (a committed transaction
 * survives a crash or power loss), foreign keys on, and a busy timeout for a second process.
 */
export function openDatabase(path: string): DatabaseSync {
  const { DatabaseSync } = load();
  const db = new DatabaseSync(path);
  try {
    db.exec('PRAGMA journal_mode = WAL');
    db.exec('PRAGMA synchronous = FULL');
    db.exec('PRAGMA foreign_keys = ON');
    db.exec('PRAGMA busy_timeout = 5000');
  } catch (err) {
    db.close();
    throw err;
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
