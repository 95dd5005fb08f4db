import { readFile } from 'node:fs/promises';
import { parseJsonWith } from '../../protocol/parse.ts';
import { Task } from '../../protocol/task.ts';

/** Reads a tasks.jsonl file: one Task per non-empty line; errors name the file, line and field. */
export async function readTasksFile(path: string): Promise<Task[]> {
  const text = await readFile(path, 'utf8');
  const tasks: Task[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    tasks.push(parseJsonWith(Task, line, `${path}:${i + 1}`));
  });
  return tasks;
}
