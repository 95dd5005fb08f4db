/**
 * Whether a process with this pid exists. EPERM means it exists but belongs to another user (a node
 * run by root, seen by its user's CLI; a run's uid): alive.
 */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
