/** An LRU set of prompt keys: the emulator's model of a server's KV prompt cache. */
export interface PromptCache {
  /** True when `key` is cached; marks it most recently used. */
  hit(key: string): boolean;
  /** Inserts `key` as most recently used, evicting the least recently used beyond capacity. */
  add(key: string): void;
  /** Keys, most recently used first. */
  keys(): string[];
  /** Drops every key. */
  clear(): void;
}

export function createPromptCache(capacity: number): PromptCache {
  const entries = new Map<string, true>();
  return {
    hit(key) {
      if (!entries.has(key)) return false;
      entries.delete(key);
      entries.set(key, true);
      return true;
    },
    add(key) {
      entries.delete(key);
      entries.set(key, true);
      while (entries.size > capacity) entries.delete(entries.keys().next().value as string);
    },
    keys: () => [...entries.keys()].reverse(),
    clear: () => entries.clear(),
  };
}
