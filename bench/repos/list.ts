/** The `--repos` argument of bench/repos.ts: a comma-separated list of checkouts, or a JSON file. */
import { readFile } from 'node:fs/promises';
import { basename, isAbsolute, resolve } from 'node:path';
import { z } from 'zod';
import { parseJsonWith, parseWith } from '../../protocol/parse.ts';
import type { RepoSpec } from './measure.ts';

const RepoEntry = z.union([
  z.string().min(1),
  z.object({
    name: z.string().min(1).optional(),
    root: z.string().min(1),
    runner: z.string().min(1).optional(),
    layout: z.string().min(1).optional(),
  }),
]);
const RepoList = z.array(RepoEntry).min(1);

/**
 * The repositories named by `arg`: `a,b,c` (paths), or a `.json` file holding `["path", …]` or
 * `[{ "name"?, "root", "runner"?, "layout"? }, …]`. Relative paths are taken from `cwd`.
 */
export async function readRepoList(arg: string, cwd = process.cwd()): Promise<RepoSpec[]> {
  const entries = arg.endsWith('.json')
    ? parseJsonWith(RepoList, await readFile(resolve(cwd, arg), 'utf8'), `--repos ${arg}`)
    : parseWith(RepoList, arg.split(',').filter(Boolean), '--repos');
  return entries.map((e) => {
    const spec = typeof e === 'string' ? { root: e } : e;
    const root = isAbsolute(spec.root) ? spec.root : resolve(cwd, spec.root);
    return { name: spec.name ?? basename(root), root, runner: spec.runner, layout: spec.layout };
  });
}
