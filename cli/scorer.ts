import { join } from 'node:path';
import { resolveDataDir } from '../node/data-dir.ts';
import { workspaceId } from '../node/workspace/content-id.ts';
import type { Task } from '../protocol/task.ts';
import { createScoringCache } from '../sandbox/cache.ts';
import { BackendUnavailableError } from '../sandbox/confinement.ts';
import { createCheckedScorer, SandboxSelfTestError, type Scorer } from '../sandbox/scorer.ts';
import { checkWorkspaceReady, describeReadiness, type Readiness } from '../sandbox/workspace-ready.ts';
import { CliError } from './command.ts';

/**
 * The platform's sandbox scorer for a command, self-tested; a missing backend or a failed self-test
 * becomes a CliError that says what the command refuses to do and what `--unconfined` means.
 */
export async function openScorer(options: {
  /** Run without the sandbox (trusted input only). */
  unconfined?: boolean;
  /** What the command refuses to do without a sandbox, e.g. "refusing to score". */
  refusing: string;
  /** The data dir whose cache/ keeps reference runs and self-tests (default: $VTNODE_HOME or ~/.vtnode). */
  dataDir?: string;
  signal?: AbortSignal;
}): Promise<Scorer> {
  try {
    return await createCheckedScorer({
      unconfined: options.unconfined ?? false,
      workspaceId,
      // Reference runs and a passed self-test are reused across calls (same evaluation fingerprint).
      cache: createScoringCache({ dir: join(options.dataDir ?? resolveDataDir(), 'cache') }),
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (err) {
    if (err instanceof SandboxSelfTestError || err instanceof BackendUnavailableError) {
      throw new CliError(
        `${err.message}\n(${options.refusing}; --unconfined runs without a sandbox, for trusted input only)`,
      );
    }
    throw err;
  }
}

/**
 * Refuses (CliError) a workspace where the tasks' judges cannot run: runner or dependencies not
 * installed, workspace packages not built. Without tasks (a node's advertised workspace), its
 * declared dependencies are checked. The message names what to run.
 */
export function refuseUnreadyWorkspace(workspaceDir: string, tasks: readonly Task[] = []): void {
  let readiness: Readiness;
  try {
    readiness = checkWorkspaceReady({
      workspace: workspaceDir,
      runners: [...new Set(tasks.map((t) => t.judge.runner))],
      packageDirs: ['', ...new Set(tasks.flatMap((t) => (t.judge.cwd ? [t.judge.cwd] : [])))],
    });
  } catch (err) {
    throw new CliError(`workspace ${workspaceDir}: ${(err as Error).message}`);
  }
  if (!readiness.ok) throw new CliError(describeReadiness(workspaceDir, readiness));
}
