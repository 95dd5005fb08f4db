import type { Task } from '../../protocol/task.ts';
import { getOrInsert } from './multimap.ts';

/** An eval task whose target text appears verbatim in a train task's prompt. */
export interface Leak {
  evalTask: string;
  evalTarget: string;
  trainTask: string;
}

/**
 * The leakage check: no eval task's target text (trimmed) may appear in any train task's prompt.
 * Returns every (eval task, train task) pair that leaks; mining must fail unless it is empty.
 *
 * Exact, and fast on large repositories: if a text occurs verbatim in a prompt, every line of it that
 * is complete inside the text (not the first or last) is also a complete line of the prompt. So an
 * index from line to prompts narrows the candidates to the prompts holding the text's rarest inner
 * line, and only those are searched. Texts of fewer than three lines are searched in every prompt.
 */
export function checkLeakage(tasks: readonly Task[], referenceText: (task: Task) => string): Leak[] {
  const train = tasks.filter((t) => t.split === 'train');
  const evalTasks = tasks.filter((t) => t.split === 'eval');
  if (train.length === 0 || evalTasks.length === 0) return [];
  const prompts = train.map((t) => ({ id: t.id, text: t.messages.map((m) => m.content).join('\n') }));
  const byLine = new Map<string, number[]>();
  prompts.forEach((p, i) => {
    for (const line of new Set(p.text.split('\n'))) getOrInsert(byLine, line, () => []).push(i);
  });
  const all = prompts.map((_, i) => i);
  const leaks: Leak[] = [];
  const checked = new Map<string, string[]>();
  for (const e of evalTasks) {
    const needle = referenceText(e).trim();
    if (needle === '') continue;
    let hits = checked.get(needle);
    if (!hits) {
      const inner = needle.split('\n').slice(1, -1);
      let candidates = all;
      for (const line of inner) {
        const holders = byLine.get(line) ?? [];
        if (holders.length < candidates.length) candidates = holders;
        if (candidates.length === 0) break;
      }
      hits = candidates.filter((i) => prompts[i]!.text.includes(needle)).map((i) => prompts[i]!.id);
      checked.set(needle, hits);
    }
    for (const id of hits) leaks.push({ evalTask: e.id, evalTarget: e.target, trainTask: id });
  }
  return leaks;
}
