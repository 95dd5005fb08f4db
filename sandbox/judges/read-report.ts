import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { VerdictError } from './verdict.ts';

/** Largest report accepted, bytes. */
export const MAX_REPORT_BYTES = 32 * 1024 * 1024;

/**
 * Reads a runner's report from inside a box without trusting the box: the path must be a regular file
 * (a symlink planted by the candidate is refused, never followed) and not larger than the cap.
 */
export async function readReport(path: string, maxBytes = MAX_REPORT_BYTES): Promise<string> {
  let fh: Awaited<ReturnType<typeof open>>;
  try {
    fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new VerdictError('the runner wrote no report');
    if (code === 'ELOOP') throw new VerdictError('the report is a symlink (refused)');
    throw new VerdictError(`cannot open the report (${code ?? (err as Error).message})`);
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new VerdictError('the report is not a regular file');
    if (st.size > maxBytes) throw new VerdictError(`the report is larger than ${maxBytes} bytes`);
    if (st.nlink > 1) throw new VerdictError('the report is hard-linked elsewhere (refused)');
    const buf = Buffer.alloc(st.size);
    const { bytesRead } = await fh.read(buf, 0, st.size, 0);
    return buf.subarray(0, bytesRead).toString('utf8');
  } finally {
    await fh.close();
  }
}
