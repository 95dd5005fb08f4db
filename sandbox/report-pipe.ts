import { execFile } from 'node:child_process';
import { chownSync, closeSync, constants, openSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { PipedReport } from './confinement.ts';

const execFileAsync = promisify(execFile);

/** A run's report pipe: a real pipe (a FIFO, not the socket pair Node makes for 'pipe' stdio). */
export interface ReportPipe {
  /** The write end, to hand to the run's command (the host's copy is closed by closeWriteEnd). */
  writeFd: number;
  /** Closes the host's copy of the write end (once the command has it). */
  closeWriteEnd(): void;
  /** Everything written, once every writer has closed the pipe or destroy() was called. */
  text: Promise<PipedReport>;
  /** Stops reading (the text written so far is the result). */
  destroy(): void;
}

/**
 * Makes a pipe whose read end the host keeps and whose write end a run inherits (`owner`: the run's
 * uid, when it is not the caller's). It is a FIFO (made in a private folder and unlinked at once) because the run's main process re-opens its end through
 * /proc/self/fd to set O_CLOEXEC (report-fd.cjs), which a socket does not allow.
 */
export async function openReportPipe(
  maxBytes: number,
  owner?: { uid: number; gid: number },
): Promise<ReportPipe> {
  const dir = await mkdtemp(join(tmpdir(), 'vtnode-report-'));
  let readFd: number;
  let writeFd: number;
  try {
    const path = join(dir, 'report');
    await execFileAsync('mkfifo', ['-m', '600', path]);
    // The run's uid must be allowed to open it again (through its fd: the path is gone by then).
    if (owner) chownSync(path, owner.uid, owner.gid);
    readFd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
    // Blocking for the writer; the open returns at once because the reader is there.
    writeFd = openSync(path, constants.O_WRONLY);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const socket = new Socket({ fd: readFd, readable: true, writable: false });
  const parts: Buffer[] = [];
  let size = 0;
  let overflow = false;
  socket.on('data', (c: Buffer) => {
    if (size + c.length > maxBytes) overflow = true;
    else parts.push(c);
    size += c.length;
  });
  const text = new Promise<PipedReport>((resolve) => {
    const done = () => resolve({ text: Buffer.concat(parts).toString('utf8'), overflow });
    socket.once('end', done);
    socket.once('close', done);
    socket.once('error', done);
  });
  let writeOpen = true;
  return {
    writeFd,
    closeWriteEnd() {
      if (writeOpen) closeSync(writeFd);
      writeOpen = false;
    },
    text,
    destroy() {
      socket.destroy();
    },
  };
}
