import { z } from 'zod';
import { fingerprint } from './canonical.ts';

/** Hex sha256 with its algorithm prefix, as produced by `fingerprint()`. */
export const Sha256Id = z.string().regex(/^sha256:[0-9a-f]{64}$/, 'expected sha256:<64 hex digits>');

/** A relative POSIX path inside a workspace: no absolute paths, no `..` segments. */
export const RelPath = z
  .string()
  .min(1)
  .refine((p) => !p.startsWith('/') && !p.includes('\\') && !p.split('/').includes('..'), {
    message: 'expected a relative path inside the workspace (no leading /, no .., no backslashes)',
  });

export const ChatMessage = z.object({
  role: z.enum(['system', 'user', 'assistant']),
  content: z.string(),
});
export type ChatMessage = z.infer<typeof ChatMessage>;

export const TestRunner = z.enum(['vitest', 'node:test', 'jest', 'mocha']);
export type TestRunner = z.infer<typeof TestRunner>;

/** How a task is judged: which runner executes which test files, and the strict type-check. */
export const JudgeSpec = z.object({
  /** Test runner that executes `testFiles`. */
  runner: TestRunner,
  /** Workspace-relative test files that exercise the target (only those run). */
  testFiles: z.array(RelPath).min(1),
  /** Wall-clock limit for one test run, milliseconds. */
  timeoutMs: z.number().int().positive().max(3_600_000),
  /** Type-check argv run in the workspace root (e.g. `["npx","tsc","--noEmit","-p","tsconfig.json"]`), or null if the workspace has none. */
  typecheck: z.array(z.string().min(1)).min(1).nullable(),
  /** True when the tests use timers and may be flaky. */
  flaky: z.boolean().default(false),
  /** Type-level test files (`*.test-d.ts`) that exercise the target: checked by `typecheck`, never executed. */
  typeTests: z.array(RelPath).optional(),
  /** Workspace-relative directory the runner runs in (a monorepo member with its own config); the workspace root when absent. */
  cwd: RelPath.optional(),
  /** `tests` tasks: the sources under test, whose mutants measure the strength of a candidate's tests. */
  mutate: z.array(RelPath).optional(),
  /** Environment the repository's test script sets for its runner (allow-listed: TZ, LANG, BABEL_ENV, …); TZ is UTC otherwise. */
  env: z
    .record(
      z
        .string()
        .regex(
          /^(?:TZ|LANG|LC_ALL|BABEL_ENV|NODE_ENV|TS_NODE_PROJECT|TS_NODE_TRANSPILE_ONLY)$/,
          'not an allowed judge variable',
        ),
      z.string().max(200),
    )
    .optional(),
});
export type JudgeSpec = z.infer<typeof JudgeSpec>;

/** The reference snapshot a task was mined from. */
export const WorkspaceRef = z.object({
  /** Content id of the workspace: hash of its tracked files (see node/workspace/content-id.ts). */
  id: Sha256Id,
  /** Git commit of the workspace, or null for a non-git tree. */
  commit: z.string().nullable(),
  /** False when the tree had uncommitted changes (or was not a git tree) when mined. */
  clean: z.boolean(),
  /** Absolute path the task was mined from: a hint for local scoring, never trusted for identity. */
  root: z.string().optional(),
});
export type WorkspaceRef = z.infer<typeof WorkspaceRef>;

/** One task: one JSON line of tasks.jsonl. */
export const Task = z.object({
  /** Stable id: derived from workspace id, kind and target. */
  id: z.string().min(1).max(200),
  /** `file`: write a masked source file; `tests`: write a masked test file. */
  kind: z.enum(['file', 'tests']),
  workspace: WorkspaceRef,
  /** Module (top-level unit) the target belongs to. */
  module: z.string().min(1),
  /** Source-sharing group the split is decided on. */
  group: z.string().min(1),
  split: z.enum(['train', 'eval']),
  /** Workspace-relative path of the masked file. */
  target: RelPath,
  /** The prompt, OpenAI chat format. */
  messages: z.array(ChatMessage).min(1),
  /** fingerprint() of `messages`. */
  promptFingerprint: Sha256Id,
  judge: JudgeSpec,
  /** sha256 of the reference content of `target`. */
  referenceHash: Sha256Id,
  /** Git commit the task was mined at, or `"uncommitted"` for a non-git tree. */
  minedAt: z.string().min(1),
  /** Symbols the target must declare and export (file tasks). */
  mustDeclare: z.array(z.string()).default([]),
  /** Version of the miner that produced the row. */
  minerVersion: z.string().min(1),
});
export type Task = z.infer<typeof Task>;

/**
 * Content hash of a task row: fingerprint() (sha256 of the canonical JSON) of the row as Task parses
 * it, defaults filled in, so a file's row and the same row carried by a job hash alike. A worker's
 * signed digest (v2) commits to it: a fetched row whose hash differs is not the row the sample answers.
 */
export function taskHash(task: Task): string {
  return fingerprint(Task.parse(task));
}
