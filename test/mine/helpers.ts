import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../..');
export const ledgerRoot = join(repoRoot, 'examples/ledger');
export const nodeTestFixture = join(repoRoot, 'test/fixtures/mine/node-test-repo');

const made: string[] = [];

/** A fresh temp dir, removed by cleanupTemp(). */
export async function tempDir(prefix = 'vtnode-mine-'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** Removes every temp dir made by this test file. */
export async function cleanupTemp(): Promise<void> {
  await Promise.all(made.splice(0).map((d) => rm(d, { recursive: true, force: true })));
}

/** Writes `files` (path -> text) under a new temp dir; commits them when `git` is true. */
export async function makeRepo(
  files: Record<string, string>,
  options: { git?: boolean } = {},
): Promise<string> {
  const dir = await tempDir();
  for (const [path, text] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), text);
  }
  if (options.git) await gitCommitAll(dir);
  return dir;
}

/** `git init` + commit everything, with a fixed identity. */
export async function gitCommitAll(dir: string): Promise<void> {
  const env = {
    ...process.env,
    GIT_AUTHOR_NAME: 't',
    GIT_AUTHOR_EMAIL: 't@example.com',
    GIT_COMMITTER_NAME: 't',
    GIT_COMMITTER_EMAIL: 't@example.com',
  };
  await run('git', ['init', '-q', dir], { env });
  await run('git', ['-C', dir, 'add', '-A'], { env });
  await run('git', ['-C', dir, 'commit', '-q', '-m', 'fixture'], { env });
}

/** Copies a directory tree (without node_modules) into a temp dir. */
export async function copyTree(src: string): Promise<string> {
  const dir = await tempDir();
  await cp(src, dir, { recursive: true, filter: (p) => !p.includes('/node_modules') });
  return dir;
}

/** Runs `vtnode <args>` under the current (Node 22) runtime; never throws on a non-zero exit. */
export async function vtnode(
  args: string[],
  cwd = repoRoot,
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [join(repoRoot, 'bin/vtnode.js'), ...args], {
      cwd,
      timeout: 60_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/** A minimal vitest package.json. */
export const vitestPackage = JSON.stringify({
  name: 'fixture',
  private: true,
  type: 'module',
  devDependencies: { vitest: '4.1.12', typescript: '5.9.3' },
});

/** A tsconfig covering src and tests. */
export const tsconfig = JSON.stringify({
  compilerOptions: {
    strict: true,
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    allowImportingTsExtensions: true,
    noEmit: true,
  },
  include: ['src', 'tests'],
});
