/** Hands out distinct unprivileged uids to concurrent runs, so runs can be told apart and cannot signal each other. */
export interface UidPool {
  /** Takes the lowest free uid; throws when all are in use. */
  acquire(): number;
  /** Returns a uid to the pool. */
  release(uid: number): void;
}

export interface UidPoolOptions {
  /** First uid of the range. */
  base: number;
  /** Number of uids in the range (the most concurrent runs). */
  size: number;
}

export function createUidPool(options: UidPoolOptions): UidPool {
  const used = new Set<number>();
  return {
    acquire() {
      for (let uid = options.base; uid < options.base + options.size; uid++) {
        if (!used.has(uid)) {
          used.add(uid);
          return uid;
        }
      }
      throw new Error(`uid pool exhausted: ${options.size} runs already in progress`);
    },
    release(uid) {
      used.delete(uid);
    },
  };
}
