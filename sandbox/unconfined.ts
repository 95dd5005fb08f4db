import { existsSync } from 'node:fs';
import type {
  Confinement,
  RunResult,
  RunSpec,
  SelfTestResult,
  SpawnedProcess,
  SpawnSpec,
} from './confinement.ts';
import { runGroup } from './group-run.ts';
import { asRunLimits, type Limits } from './limits.ts';
import { listProcesses, processTree } from './procfs.ts';
import { spawnGroup } from './spawn-group.ts';

/** prlimit on Linux: unconfined runs get the same rlimits, so confined vs unconfined compares confinement only. */
const PRLIMIT = process.platform === 'linux' && existsSync('/usr/bin/prlimit') ? '/usr/bin/prlimit' : null;

/** The rlimit prefix for a run (empty where prlimit is missing). */
export function rlimitPrefix(limits: Limits, prlimit: string | null = PRLIMIT): string[] {
  if (!prlimit) return [];
  return [
    prlimit,
    `--cpu=${limits.cpuSeconds}`,
    `--data=${limits.memoryBytes}`,
    `--nproc=${limits.processes}`,
    `--fsize=${limits.fileSizeBytes}`,
    '--core=0',
    '--',
  ];
}

/**
 * No confinement: the command runs as the caller with the given environment, in its own process
 * group, with the wall-clock and output caps and (on Linux) the rlimits. Nothing stops it reading,
 * writing or connecting anywhere: for trusted input (`--unconfined`) and benchmark baselines.
 */
export function createUnconfined(): Confinement {
  return {
    name: 'unconfined',
    describe: () => ({ backend: 'unconfined', rlimits: PRLIMIT !== null }),
    run(spec: RunSpec): Promise<RunResult> {
      return runGroup({
        argv: [...rlimitPrefix(spec.limits), ...spec.argv],
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
    spawn(spec: SpawnSpec): Promise<SpawnedProcess> {
      return spawnGroup({
        argv: [...rlimitPrefix(asRunLimits(spec.limits)), ...spec.argv],
        env: spec.env,
        cwd: spec.cwd,
        signal: spec.signal,
        ...(process.platform === 'linux'
          ? {
              members: async (child) =>
                child.pid === undefined ? [] : (await listProcesses()).filter((p) => p.pgid === child.pid),
              tree: processTree,
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
