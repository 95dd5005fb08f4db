import { existsSync } from 'node:fs';
import { watchBoxStorage } from './box-storage.ts';
import {
  type Confinement,
  REPORT_FD,
  type RunResult,
  type RunSpec,
  type SelfTestResult,
  type SpawnedProcess,
  type SpawnSpec,
} from './confinement.ts';
import { hostCpuWait } from './cpu-wait.ts';
import { hangRule, runGroup, sampledLimits } from './group-run.ts';
import { asRunLimits, type Limits, rlimitCpuSeconds } from './limits.ts';
import { listProcesses, processTree } from './procfs.ts';
import { spawnGroup } from './spawn-group.ts';

/** prlimit on Linux: unconfined runs get the same rlimits, so confined vs unconfined compares confinement only. */
const PRLIMIT = process.platform === 'linux' && existsSync('/usr/bin/prlimit') ? '/usr/bin/prlimit' : null;

/** The rlimit prefix for a run (empty where prlimit is missing). */
export function rlimitPrefix(limits: Limits, prlimit: string | null = PRLIMIT): string[] {
  if (!prlimit) return [];
  return [
    prlimit,
    `--cpu=${rlimitCpuSeconds(limits)}`,
    `--data=${limits.memoryBytes}`,
    `--nproc=${limits.processes}`,
    `--fsize=${limits.fileSizeBytes}`,
    '--core=0',
    '--',
  ];
}

/**
 * No confinement: the command runs as the caller with the given environment, in its own process
 * group, with the wall-clock backstop, the output cap, the box's quota and (on Linux) the rlimits and a
 * CPU budget and memory sampled over the group. No cgroup: a setsid child leaves the group unseen.
 * Nothing stops it reading, writing or connecting anywhere: for trusted input (`--unconfined`) and
 * benchmark baselines.
 */
export function createUnconfined(): Confinement {
  return {
    name: 'unconfined',
    describe: () => ({ backend: 'unconfined', rlimits: PRLIMIT !== null }),
    async run(spec: RunSpec): Promise<RunResult> {
      const linux = process.platform === 'linux';
      const storage = await watchBoxStorage(spec.box, spec.limits);
      return await runGroup({
        argv: [...rlimitPrefix(spec.limits), ...spec.argv],
        env: spec.env,
        cwd: spec.cwd,
        wallMs: spec.limits.wallMs,
        hang: hangRule(spec),
        cpuMs: spec.limits.cpuMs,
        outputBytes: spec.limits.outputBytes,
        signal: spec.signal,
        monitors: [
          storage,
          ...(linux ? [sampledLimits(spec.limits)] : []),
          ...(spec.reference ? [hostCpuWait()] : []),
        ],
        report: spec.reportPipe ? { fd: REPORT_FD, maxBytes: spec.reportPipe.maxBytes } : undefined,
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
