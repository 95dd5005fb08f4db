import type { Task } from '../../protocol/task.ts';

/** An eval task whose target text appears verbatim in a train task's prompt. */
export interface Leak {
  evalTask: string;
  evalTarget: string;
  trainTask: string;
}

/**
 * The leakage check: no eval task's target text (trimmed) may appear in any train task's prompt.
 * Returns every (eval task, train task) pair that leaks; mining must fail unless it is empty.
 */
export function checkLeakage(tasks: readonly Task[], referenceText: (task: Task) => string): Leak[] {
  const train = tasks.filter((t) => t.split === 'train');
  const evalTasks = tasks.filter((t) => t.split === 'eval');
  if (train.length === 0 || evalTasks.length === 0) return [];
  const prompts = train.map((t) => ({ id: t.id, text: t.messages.map((m) => m.content).join('\n') }));
  const leaks: Leak[] = [];
  const checked = new Map<string, string[]>();
  for (const e of evalTasks) {
    const needle = referenceText(e).trim();
    if (needle === '') continue;
    let hits = checked.get(needle);
    if (!hits) {
      hits = prompts.filter((p) => p.text.includes(needle)).map((p) => p.id);
      checked.set(needle, hits);
    }
    for (const id of hits) leaks.push({ evalTask: e.id, evalTarget: e.target, trainTask: id });
  }
  return leaks;
}
