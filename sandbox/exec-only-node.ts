import { createHash, randomBytes } from 'node:crypto';
import { chmod, copyFile, mkdir, realpath, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A copy of a node binary that boxes may execute but not read (mode 0111, on a read-only bind). Linux
 * marks a process that executes a file it cannot read as non-dumpable: its /proc/<pid>/{mem,fd,environ,
 * cwd,root} and ptrace are then out of reach of every other process of the box, although they share its
 * uid (only a holder of CAP_SYS_PTRACE in the namespace owning the file's uid may look: the host). A
 * test process can no longer open the runner's main process's report pipe, read or write its memory, or
 * reach the box through the main's /proc entries. Every node process of the box runs it (the judges'
 * argv, `process.execPath` of every child, `node` on PATH), so the test processes are non-dumpable too.
 */
export interface ExecOnlyNodeOptions {
  /** The node binary to copy (default: this process's). */
  node?: string;
  /** Folder holding the copies (default: $TMPDIR/vtnode-exec-node); one subfolder per binary. */
  dir?: string;
}

/** The copy's folder name: the binary's real path, size, modification time and inode. */
async function copyKey(node: string): Promise<string> {
  const st = await stat(node);
  const id = `${node}\0${st.size}\0${st.mtimeMs}\0${st.ino}`;
  return createHash('sha256').update(id).digest('hex').slice(0, 24);
}

/** Path of the exec-only copy of `node`, made once per binary (atomically: a rename into place). */
export async function execOnlyNode(options: ExecOnlyNodeOptions = {}): Promise<string> {
  const node = await realpath(options.node ?? process.execPath);
  const root = options.dir ?? join(tmpdir(), 'vtnode-exec-node');
  const dir = join(root, await copyKey(node));
  const path = join(dir, 'node');
  const st = await stat(path).catch(() => null);
  // Only a copy this user made is trusted (another user could plant a folder of that name).
  const mine = st !== null && st.uid === (process.getuid?.() ?? st.uid);
  if (st?.isFile() && mine && (st.mode & 0o777) === 0o111) return path;
  await mkdir(dir, { recursive: true, mode: 0o755 });
  const temp = join(dir, `.node-${randomBytes(6).toString('hex')}`);
  try {
    await copyFile(node, temp);
    await chmod(temp, 0o111);
    await rename(temp, path);
  } finally {
    await rm(temp, { force: true });
  }
  return path;
}

let memo: Promise<string> | null = null;

/** execOnlyNode() for this process's node, made once per scorer process (retried after a failure). */
export function sharedExecOnlyNode(): Promise<string> {
  memo ??= execOnlyNode().catch((err: Error) => {
    memo = null;
    throw new Error(`cannot make the exec-only copy of node: ${err.message}`);
  });
  return memo;
}
