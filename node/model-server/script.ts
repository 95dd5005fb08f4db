import { readFile } from 'node:fs/promises';
import { extname, isAbsolute, join } from 'node:path';
import { z } from 'zod';
import type { Task } from '../../protocol/task.ts';
import { logger } from '../logger.ts';
import { type Rng, rng, seedOf } from './random.ts';

const log = logger('vtnode:model-server:script');

/** Where the emulator's answers come from. */
export const ScriptMode = z.enum(['reference', 'mutants', 'garbage', 'truncate', 'mixed']);
export type ScriptMode = z.infer<typeof ScriptMode>;

/** What kind of answer the script produced (reported in the emulator's stats). */
export type CandidateKind = 'reference' | 'mutant' | 'garbage' | 'truncate' | 'unknown-prompt';

export interface Candidate {
  kind: CandidateKind;
  /** The full answer text before any max_tokens cut. */
  text: string;
}

/** A task the emulator can answer, with its reference content (null when unreadable). */
export interface ScriptedTask {
  task: Task;
  reference: string | null;
}

const LANG: Record<string, string> = {
  '.ts': 'ts',
  '.tsx': 'tsx',
  '.js': 'js',
  '.mjs': 'js',
  '.py': 'python',
  '.cs': 'csharp',
};

/** Reads each task's reference (workspace.root + target), keyed by promptFingerprint. */
export async function loadScriptedTasks(tasks: Task[]): Promise<Map<string, ScriptedTask>> {
  const byPrompt = new Map<string, ScriptedTask>();
  for (const task of tasks) {
    let reference: string | null = null;
    const root = task.workspace.root;
    if (root && isAbsolute(root)) {
      try {
        reference = await readFile(join(root, task.target), 'utf8');
      } catch (err) {
        log.warn(
          `task ${task.id}: cannot read reference ${join(root, task.target)}: ${(err as Error).message}; its answers will be garbage`,
        );
      }
    } else {
      log.warn(`task ${task.id}: workspace.root is missing or relative; its answers will be garbage`);
    }
    byPrompt.set(task.promptFingerprint, { task, reference });
  }
  return byPrompt;
}

function fence(code: string, lang: string): string {
  return `\`\`\`${lang}\n${code.endsWith('\n') ? code : `${code}\n`}\`\`\``;
}

function answer(code: string, lang: string): string {
  return `Here is the complete file.\n\n${fence(code, lang)}\n`;
}

type Mutation = { label: string; apply: (src: string) => string | null };

function replaceNth(src: string, re: RegExp, r: Rng, replace: (m: string) => string): string | null {
  const hits = [...src.matchAll(re)];
  if (hits.length === 0) return null;
  const hit = hits[r.int(hits.length)]!;
  const at = hit.index ?? 0;
  return src.slice(0, at) + replace(hit[0]) + src.slice(at + hit[0].length);
}

/** Small semantic mutations of the reference, as a weak model makes them. */
function mutations(r: Rng): Mutation[] {
  return [
    { label: 'equality', apply: (s) => replaceNth(s, /[!=]==/g, r, (m) => (m === '===' ? '!==' : '===')) },
    { label: 'boundary', apply: (s) => replaceNth(s, / [<>] /g, r, (m) => `${m.trimEnd()}= `) },
    {
      label: 'constant',
      apply: (s) => replaceNth(s, /(?<![\w.])\d+(?![\w.])/g, r, (m) => String(Number(m) + 1)),
    },
    {
      label: 'boolean',
      apply: (s) => replaceNth(s, /\b(true|false)\b/g, r, (m) => (m === 'true' ? 'false' : 'true')),
    },
    { label: 'arithmetic', apply: (s) => replaceNth(s, / [+-] /g, r, (m) => (m === ' + ' ? ' - ' : ' + ')) },
    {
      label: 'drop-return',
      apply: (s) => {
        const lines = s.split('\n');
        const idx = lines.flatMap((l, i) => (/\breturn\b/.test(l) ? [i] : []));
        if (idx.length === 0) return null;
        lines.splice(idx[r.int(idx.length)]!, 1);
        return lines.join('\n');
      },
    },
  ];
}

function garbage(r: Rng, lang: string): string {
  switch (r.int(3)) {
    case 0:
      return 'I am not able to complete this file without more context about the rest of the module.\n';
    case 1:
      return `First the types:\n\n${fence('export type Todo = unknown;', lang)}\n\nThen the code:\n\n${fence('export function todo() {}', lang)}\n`;
    default:
      return answer('export const = ((;\nfunction {\n', lang);
  }
}

function mutant(reference: string, r: Rng, lang: string): Candidate {
  const ops = mutations(r);
  // Try operators in a seeded order until one applies.
  for (let tries = 0; tries < ops.length; tries++) {
    const op = ops.splice(r.int(ops.length), 1)[0]!;
    const out = op.apply(reference);
    if (out !== null && out !== reference) return { kind: 'mutant', text: answer(out, lang) };
  }
  return { kind: 'garbage', text: garbage(r, lang) };
}

function overlong(reference: string, maxTokens: number, lang: string): string {
  const want = (maxTokens + 64) * 4;
  const body = reference.length > 0 ? reference : '// ...\n';
  let code = body;
  while (code.length < want) code += `\n// continued\n${body}`;
  return `Here is the complete file.\n\n\`\`\`${lang}\n${code}`;
}

/**
 * The scripted answer to one request: deterministic in (prompt, seed, choice). `reference` gives the
 * task's reference, `mutants` a mutated reference, `garbage` no/several/broken code blocks,
 * `truncate` an answer longer than `maxTokens` (the emulator cuts it: finish_reason "length"),
 * `mixed` a seeded choice among them (40/30/15/15).
 */
export function scriptCandidate(
  mode: ScriptMode,
  entry: ScriptedTask | null,
  promptKey: string,
  seed: number,
  choice: number,
  maxTokens: number,
): Candidate {
  const r = rng(seedOf(promptKey, seed, choice));
  if (entry === null)
    return {
      kind: 'unknown-prompt',
      text: answer('// vtnode model-server: no task in --tasks matches this prompt\n', 'text'),
    };
  const lang = LANG[extname(entry.task.target)] ?? '';
  if (entry.reference === null) return { kind: 'garbage', text: garbage(r, lang) };
  let pick: Exclude<ScriptMode, 'mixed'>;
  if (mode === 'mixed') {
    const x = r.next();
    pick = x < 0.4 ? 'reference' : x < 0.7 ? 'mutants' : x < 0.85 ? 'garbage' : 'truncate';
  } else {
    pick = mode;
  }
  switch (pick) {
    case 'reference':
      return { kind: 'reference', text: answer(entry.reference, lang) };
    case 'mutants':
      return mutant(entry.reference, r, lang);
    case 'garbage':
      return { kind: 'garbage', text: garbage(r, lang) };
    case 'truncate':
      return { kind: 'truncate', text: overlong(entry.reference, maxTokens, lang) };
  }
}
