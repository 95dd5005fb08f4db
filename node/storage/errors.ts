/**
 * Storage faults: what went wrong with a file a node keeps (a database, a sidecar, a dataset body),
 * classified from node:sqlite and node:fs errors, and an error type that names the file and says
 * what to do. Pure: no I/O.
 */

/** What kind of storage fault an error is. */
export type StorageFault =
  /** The file is a database whose pages fail SQLite's checks. */
  | 'corrupt'
  /** The file is not a SQLite database (garbage, another format, a truncated header). */
  | 'not-a-database'
  /** No space left (ENOSPC, EDQUOT, SQLITE_FULL). */
  | 'full'
  /** The file or its folder cannot be written (EROFS, EACCES, EPERM, SQLITE_READONLY). */
  | 'read-only'
  /** The device failed a read or a write (EIO, SQLITE_IOERR). */
  | 'io';

// SQLite primary result codes (https://sqlite.org/rescode.html); node:sqlite reports extended codes.
const SQLITE_PERM = 3;
const SQLITE_READONLY = 8;
const SQLITE_IOERR = 10;
const SQLITE_CORRUPT = 11;
const SQLITE_FULL = 13;
const SQLITE_CANTOPEN = 14;
const SQLITE_NOTADB = 26;

const ERRNO_FAULTS: Record<string, StorageFault> = {
  ENOSPC: 'full',
  EDQUOT: 'full',
  EFBIG: 'full',
  EROFS: 'read-only',
  EACCES: 'read-only',
  EPERM: 'read-only',
  EIO: 'io',
};

/** The storage fault an error from node:sqlite or node:fs stands for; null for any other error. */
export function classifyStorageError(err: unknown): StorageFault | null {
  if (err instanceof StorageError) return err.fault;
  if (typeof err !== 'object' || err === null) return null;
  const e = err as { code?: unknown; errcode?: unknown; message?: unknown };
  if (typeof e.errcode === 'number') {
    switch (e.errcode & 0xff) {
      case SQLITE_CORRUPT:
        return 'corrupt';
      case SQLITE_NOTADB:
        return 'not-a-database';
      case SQLITE_FULL:
        return 'full';
      case SQLITE_READONLY:
      case SQLITE_PERM:
      case SQLITE_CANTOPEN:
        return 'read-only';
      case SQLITE_IOERR:
        // SQLITE_IOERR_WRITE and friends carry ENOSPC as "disk I/O error" on some systems.
        return 'io';
      default:
        return null;
    }
  }
  if (typeof e.code === 'string' && e.code in ERRNO_FAULTS) return ERRNO_FAULTS[e.code]!;
  return null;
}

const PROBLEM: Record<StorageFault, string> = {
  corrupt: 'is corrupt',
  'not-a-database': 'is not a SQLite database',
  full: 'cannot be written: no space left on its disk',
  'read-only': 'cannot be opened for writing',
  io: 'failed with an I/O error',
};

/**
 * A storage fault on one file, meant for the operator: the message names the file, what it holds,
 * what is wrong and what to do. The CLI prints it without a stack trace and exits non-zero.
 */
export class StorageError extends Error {
  /** The file (or folder) at fault. */
  readonly path: string;
  readonly fault: StorageFault;

  constructor(options: {
    /** The file at fault. */
    path: string;
    /** The kind of fault. */
    fault: StorageFault;
    /** What the file holds, e.g. "the worker's sample log". */
    what: string;
    /** What the operator should do about it. */
    advice: string;
    /** The underlying error's text, if any. */
    detail?: string;
    /** The underlying error. */
    cause?: unknown;
  }) {
    const detail = options.detail ? ` (${options.detail})` : '';
    super(`${options.path}: ${options.what} ${PROBLEM[options.fault]}${detail}. ${options.advice}`, {
      cause: options.cause,
    });
    this.name = 'StorageError';
    this.path = options.path;
    this.fault = options.fault;
  }
}

/** Advice for a fault the file's owner has no specific advice for. */
export function defaultAdvice(fault: StorageFault): string {
  switch (fault) {
    case 'full':
      return 'Free space on that disk (or move the data dir to a larger one) and start again.';
    case 'read-only':
      return 'Check the permissions of the file and its folder, and that the disk is mounted read-write.';
    case 'io':
      return 'Check the disk (dmesg, Disk Utility); copy the data dir to a healthy disk before starting again.';
    default:
      return 'Move the file aside and start again.';
  }
}

/** The error's own text (node:sqlite puts the SQLite message in errstr). */
export function errorText(err: unknown): string {
  if (typeof err === 'object' && err !== null) {
    const e = err as { errstr?: unknown; message?: unknown };
    if (typeof e.message === 'string' && e.message) return e.message;
    if (typeof e.errstr === 'string') return e.errstr;
  }
  return String(err);
}

/**
 * `err` as a StorageError naming `path` and what it holds when it is a storage fault (`ifCorrupt`
 * advises on corrupt files, the default advice on the rest); any other error is returned unchanged.
 */
export function storageErrorOf(path: string, what: string, err: unknown, ifCorrupt?: string): unknown {
  if (err instanceof StorageError) return err;
  const fault = classifyStorageError(err);
  if (!fault) return err;
  const corrupt = fault === 'corrupt' || fault === 'not-a-database';
  return new StorageError({
    path,
    fault,
    what,
    detail: errorText(err),
    advice: corrupt && ifCorrupt ? ifCorrupt : defaultAdvice(fault),
    cause: err,
  });
}
