import { readFile, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { workspaceIdentity } from '../../node/workspace/content-id.ts';
import { fingerprint, sha256Hex } from '../../protocol/canonical.ts';
import type { Task, TestRunner } from '../../protocol/task.ts';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const FIXTURES = join(REPO_ROOT, 'test', 'fixtures', 'sandbox');
export const NODE_WS = join(FIXTURES, 'node-basic');
export const VITEST_WS = join(FIXTURES, 'vitest-ts');
/** A vitest workspace whose setup file sets globals, with a tsconfig alias (the replay's node mode). */
export const VITEST_SETUP_WS = join(FIXTURES, 'vitest-setup');
/** One small workspace per judge (test/fixtures/judges/<name>), with the compliance scenarios. */
export const JUDGE_FIXTURES = join(REPO_ROOT, 'test', 'fixtures', 'judges');

/**
 * The vitest fixtures' node_modules: symlinks to the repo's (vitest and typescript are root
 * devDependencies), made here and never committed. The jest and mocha fixtures have their own
 * (`npm ci` in each, see .ci/run).
 */
export async function prepareFixtures(): Promise<void> {
  for (const ws of [VITEST_WS, VITEST_SETUP_WS, join(JUDGE_FIXTURES, 'vitest')])
    await symlink(join(REPO_ROOT, 'node_modules'), join(ws, 'node_modules')).catch(
      (err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err;
      },
    );
}

export interface TaskSpec {
  id: string;
  workspace: string;
  kind?: 'file' | 'tests';
  target: string;
  runner: TestRunner;
  testFiles: string[];
  typecheck?: string[] | null;
  timeoutMs?: number;
}

/** A hand-made task line for a fixture workspace (ids and hashes computed from the files). */
export async function makeTask(spec: TaskSpec): Promise<Task> {
  const ws = await workspaceIdentity(spec.workspace);
  const reference = await readFile(join(spec.workspace, spec.target), 'utf8');
  const messages = [{ role: 'user' as const, content: `Write ${spec.target}.` }];
  return {
    id: spec.id,
    kind: spec.kind ?? 'file',
    workspace: { id: ws.id, commit: ws.commit, clean: ws.clean, root: spec.workspace },
    module: 'fixture',
    group: 'fixture',
    split: 'train',
    target: spec.target,
    messages,
    promptFingerprint: fingerprint(messages),
    judge: {
      runner: spec.runner,
      testFiles: spec.testFiles,
      timeoutMs: spec.timeoutMs ?? 30_000,
      typecheck: spec.typecheck ?? null,
      flaky: false,
    },
    referenceHash: `sha256:${sha256Hex(reference)}`,
    minedAt: ws.commit ?? 'uncommitted',
    mustDeclare: [],
    minerVersion: 'fixture/1',
  };
}

/** The fixture corpus: correct references, one deliberately broken task, one `tests` task. */
export async function fixtureTasks(): Promise<Record<string, Task>> {
  return {
    math: await makeTask({
      id: 'node-basic/math',
      workspace: NODE_WS,
      target: 'src/math.js',
      runner: 'node:test',
      testFiles: ['test/math.test.js'],
    }),
    strings: await makeTask({
      id: 'vitest-ts/strings',
      workspace: VITEST_WS,
      target: 'src/strings.ts',
      runner: 'vitest',
      testFiles: ['test/strings.test.ts'],
      typecheck: ['npx', 'tsc', '--noEmit', '-p', 'tsconfig.json'],
    }),
    stack: await makeTask({
      id: 'vitest-ts/stack',
      workspace: VITEST_WS,
      target: 'src/stack.ts',
      runner: 'vitest',
      testFiles: ['test/stack.test.ts'],
      typecheck: ['tsc', '--noEmit', '-p', 'tsconfig.json'],
    }),
    clock: await makeTask({
      id: 'vitest-ts/clock-broken',
      workspace: VITEST_WS,
      target: 'src/clock.ts',
      runner: 'vitest',
      testFiles: ['test/clock.test.ts'],
      typecheck: ['tsc', '--noEmit', '-p', 'tsconfig.json'],
    }),
    stringsTests: await makeTask({
      id: 'vitest-ts/strings-tests',
      workspace: VITEST_WS,
      kind: 'tests',
      target: 'test/strings.test.ts',
      runner: 'vitest',
      testFiles: ['test/strings.test.ts', 'test/stack.test.ts'],
      typecheck: ['tsc', '--noEmit', '-p', 'tsconfig.json'],
    }),
  };
}

/** Wrong on every counted case of the vitest fixture's test/strings.test.ts: scores 0 honestly. */
export const WRONG_STRINGS = `
export function slugify(text: string): string {
  return text.toLowerCase();
}
export function capitalize(text: string): string {
  return \`\${text}!\`;
}
export function wordCounts(_text: string): Map<string, number> {
  return new Map();
}
`;

/** Code the static rules cannot read: built from strings at run time, awaited when the module loads. */
export const runtime = (code: string) =>
  `const __f = Object.getPrototypeOf(async () => {}).constructor;\nawait __f(${JSON.stringify(code)})();\n`;
