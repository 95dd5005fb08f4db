import { readFile } from 'node:fs/promises';
import { parseJsonWith } from '../protocol/parse.ts';
import { Task } from '../protocol/task.ts';

/** One task with the exact line it came from (written back unchanged by calibration). */
export interface TaskLine {
  task: Task;
  line: string;
  lineNo: number;
}

/** Why an input file could not be read, said as a sentence for the user (not a raw errno). */
export function unreadable(what: string, path: string, err: NodeJS.ErrnoException): string {
  switch (err.code) {
    case 'ENOENT':
      return `the ${what} ${path} does not exist`;
    case 'EISDIR':
      return `${path} is a folder, not the ${what}`;
    case 'EACCES':
    case 'EPERM':
      return `cannot read the ${what} ${path}: permission denied`;
    default:
      return `cannot read the ${what} ${path}: ${err.message}`;
  }
}

/** Reads tasks.jsonl; every line is parsed with the Task schema and errors name the file and line. */
export async function readTasksFile(path: string): Promise<TaskLine[]> {
  const text = await readFile(path, 'utf8').catch((err: NodeJS.ErrnoException) => {
    throw new Error(`${unreadable('tasks file', path, err)} (\`vtnode mine --out FILE\` writes one)`);
  });
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
