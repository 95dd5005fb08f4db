import type { Task } from '../protocol/task.ts';

/** What choosing a demo's tasks looks at. */
export type DemoTask = Pick<Task, 'id' | 'kind' | 'split' | 'module'>;

/**
 * The demo's share of a mined corpus: `n` tasks (all when `n` is 0 or at least their number), taken
 * round-robin over split × kind (eval before train, so the eval table has rows whenever eval has
 * tasks), and within each, over modules (one task per module before a second one), by id. Deterministic;
 * the chosen tasks keep the input order.
 */
export function pickDemoTasks<T extends DemoTask>(tasks: readonly T[], n: number): T[] {
  if (n === 0 || n >= tasks.length) return [...tasks];
  const buckets = new Map<string, T[]>();
  for (const t of [...tasks].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))) {
    const key = `${t.split === 'eval' ? 0 : 1}:${t.kind}`;
    const list = buckets.get(key) ?? [];
    list.push(t);
    buckets.set(key, list);
  }
  const queues = [...buckets.entries()]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([, list]) => spreadOverModules(list));
  const chosen = new Set<string>();
  for (let round = 0; chosen.size < n; round++)
    for (const q of queues) if (round < q.length && chosen.size < n) chosen.add(q[round]!.id);
  return tasks.filter((t) => chosen.has(t.id));
}

/** The tasks reordered so each module's first task comes before any module's second, and so on. */
function spreadOverModules<T extends DemoTask>(list: readonly T[]): T[] {
  const byModule = new Map<string, T[]>();
  for (const t of list) byModule.set(t.module, [...(byModule.get(t.module) ?? []), t]);
  const modules = [...byModule.keys()].sort();
  const out: T[] = [];
  for (let i = 0; out.length < list.length; i++)
    for (const m of modules) {
      const t = byModule.get(m)![i];
      if (t) out.push(t);
    }
  return out;
}
