import type { Confinement, RunResult, RunSpec, SelfTestResult } from './confinement.ts';
import { runGroup } from './group-run.ts';
import { listProcesses } from './procfs.ts';

/**
 * No confinement: the command runs as the caller with the given environment, in its own process
 * group, with the wall-clock and output caps only. For trusted input (`--unconfined`) and baselines.
 */
export function createUnconfined(): Confinement {
  return {
    name: 'unconfined',
    describe: () => ({ backend: 'unconfined' }),
    run(spec: RunSpec): Promise<RunResult> {
      return runGroup({
        argv: spec.argv,
        env: spec.env,
        cwd: spec.cwd,
        wallMs: spec.limits.wallMs,
        outputBytes: spec.limits.outputBytes,
        signal: spec.signal,
        ...(process.platform === 'linux'
          ? {
              members: async (child) =>
                child.pid === undefined ? [] : (await listProcesses()).filter((p) => p.pgid === child.pid),
            }
          : {}),
      });
    },
    async selfTest(): Promise<SelfTestResult> {
      return {
        ok: true,
        checks: [{ name: 'unconfined', ok: true, detail: 'explicitly requested: nothing is enforced' }],
      };
    },
  };
}
