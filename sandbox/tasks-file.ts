import { readFile } from 'node:fs/promises';
import { parseJsonWith } from '../protocol/parse.ts';
import { Task } from '../protocol/task.ts';

/** One task with the exact line it came from (written back unchanged by calibration). */
export interface TaskLine {
  task: Task;
  line: string;
  lineNo: number;
}

/** Reads tasks.jsonl; every line is parsed with the Task schema and errors name the file and line. */
export async function readTasksFile(path: string): Promise<TaskLine[]> {
  const text = await readFile(path, 'utf8');
  const out: TaskLine[] = [];
  const seen = new Set<string>();
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (line === '') continue;
    const task = parseJsonWith(Task, line, `${path}:${i + 1}`);
    if (seen.has(task.id)) throw new Error(`${path}:${i + 1}: duplicate task id ${task.id}`);
    seen.add(task.id);
    out.push({ task, line, lineNo: i + 1 });
  }
  return out;
}

/** The tasks of a tasks.jsonl file (see readTasksFile). */
export async function readTasks(path: string): Promise<Task[]> {
  return (await readTasksFile(path)).map((l) => l.task);
}
