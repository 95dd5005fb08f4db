// The scorer's type-check stage: the warm type-check service (one per workspace, tsconfig and
// TypeScript) where it serves the judge's command, else a fresh `tsc` in a fresh box. Either way the
// verdict is tsc's; the service also reads the target's exported API, compared with the reference's.
import type { Task } from '../../protocol/task.ts';
import type { Confinement, RunResult } from '../confinement.ts';
import type { Logger } from '../log.ts';
import { apiDifferences, type ExportedApi } from './api.ts';
import type { TypecheckResult } from './client.ts';
import { tscStyle } from './protocol.ts';
import { createTypecheckRegistry, type TypecheckRegistryOptions } from './registry.ts';

/** What the service answered, for the score's record. */
export interface ServiceCheckSummary {
  status: TypecheckResult['status'];
  /** CPU of this check as the service measured it (the sampled one for a timeout). */
  cpuMs: number;
  /** `affected`: only what the overlay can affect was checked; `all`: everything. */
  scope: TypecheckResult['scope'];
  checkedFiles: number | null;
  typescript: string | null;
}

/** A verdict: tsc's, plus the differences of the target's exported API from the reference's. */
export interface TypecheckVerdict {
  typecheck: 'passed' | 'failed';
  /** tsc-style diagnostics of a failed check. */
  diagnostics: string;
  /** `file` tasks checked by the service: how the candidate's exported API differs (empty: it does not). */
  apiDifferences: string[];
  /** The fresh tsc run, when one ran. */
  run: RunResult | null;
  /** The service's answer, when it checked. */
  service: ServiceCheckSummary | null;
}

/** No verdict, for infrastructure reasons (a wall-clock backstop on a loaded machine, a service error). */
export interface TypecheckInfra {
  infra: string;
  run: RunResult | null;
  service: ServiceCheckSummary | null;
}

export interface TypecheckRequest {
  task: Task;
  /** The workspace (real path). */
  workspaceDir: string;
  /** Its content id: a service whose workspace changed is retired. */
  workspaceId: string;
  candidate: string;
  signal?: AbortSignal;
}

export interface TypecheckStageOptions {
  confinement: Confinement;
  /** The fresh `tsc` in a fresh box, for commands the service does not serve (and when it is off). */
  fresh: (task: Task, workspaceDir: string, candidate: string, signal?: AbortSignal) => Promise<RunResult>;
  /** Use the service (default true); false runs every check as a fresh tsc. */
  service?: boolean;
  /** Budgets and flags of the services (see TypecheckServiceOptions). */
  serviceOptions?: Omit<TypecheckRegistryOptions, 'confinement' | 'log'>;
  log?: Logger;
}

export interface TypecheckStage {
  check(request: TypecheckRequest): Promise<TypecheckVerdict | TypecheckInfra>;
  /** Stops every service. */
  close(): Promise<void>;
}

const TAIL = 4000;
const tail = (s: string) => (s.length > TAIL ? `…${s.slice(-TAIL)}` : s);

function summaryOf(r: TypecheckResult): ServiceCheckSummary {
  return {
    status: r.status,
    cpuMs: r.cpuMs,
    scope: r.scope,
    checkedFiles: r.checkedFiles,
    typescript: r.typescript,
  };
}

export function createTypecheckStage(options: TypecheckStageOptions): TypecheckStage {
  const registry =
    options.service === false
      ? null
      : createTypecheckRegistry({
          confinement: options.confinement,
          ...options.serviceOptions,
          ...(options.log ? { log: options.log } : {}),
        });
  /** The reference's exported API per (workspace content, task): one check of the unchanged workspace. */
  const referenceApis = new Map<string, Promise<{ api: ExportedApi | null } | { infra: string }>>();

  async function viaFreshTsc(req: TypecheckRequest): Promise<TypecheckVerdict | TypecheckInfra> {
    const run = await options.fresh(req.task, req.workspaceDir, req.candidate, req.signal);
    if (run.timedOut && !run.cpuExceeded)
      return { infra: 'the type-check hit its wall-clock limit (a loaded machine?)', run, service: null };
    const ok = run.exitCode === 0 && !run.outputCapped && run.survivors === 0;
    return {
      typecheck: ok ? 'passed' : 'failed',
      diagnostics: ok ? '' : tail(`${run.stdout}${run.stderr}`),
      apiDifferences: [],
      run,
      service: null,
    };
  }

  /** A service answer without a verdict: the CPU budget is the candidate's doing, the rest is not. */
  function noVerdict(r: TypecheckResult): TypecheckVerdict | TypecheckInfra {
    if (r.status === 'timeout' && r.limit === 'cpu')
      return {
        typecheck: 'failed',
        diagnostics: `the type-check exceeded its CPU budget: ${r.error}`,
        apiDifferences: [],
        run: null,
        service: summaryOf(r),
      };
    return { infra: `the type-check service gave no verdict: ${r.error}`, run: null, service: summaryOf(r) };
  }

  function referenceApi(
    req: TypecheckRequest,
    check: (overlay: Record<string, string>) => Promise<TypecheckResult>,
  ): Promise<{ api: ExportedApi | null } | { infra: string }> {
    const key = `${req.workspaceId}\0${req.task.id}`;
    let known = referenceApis.get(key);
    if (!known) {
      known = check({}).then((r) =>
        r.status === 'passed' || r.status === 'failed'
          ? { api: r.api }
          : { infra: `the reference's exported API could not be read: ${r.error}` },
      );
      referenceApis.set(key, known);
      // Not kept when it failed: the next candidate tries again.
      known.then(
        (r) => 'infra' in r && referenceApis.delete(key),
        () => referenceApis.delete(key),
      );
    }
    return known;
  }

  return {
    async check(req) {
      const service =
        registry?.serviceFor(req.workspaceDir, req.task.judge.typecheck!, req.workspaceId) ?? null;
      if (!service) return viaFreshTsc(req);
      // The exported API is compared for source files; a tests candidate exports nothing to keep.
      const target = req.task.kind === 'file' ? req.task.target : undefined;
      const check = (overlay: Record<string, string>) =>
        service.check(overlay, {
          ...(target ? { target } : {}),
          ...(req.signal ? { signal: req.signal } : {}),
        });
      const r = await check({ [req.task.target]: req.candidate });
      if (r.status !== 'passed' && r.status !== 'failed') return noVerdict(r);
      const verdict: TypecheckVerdict = {
        typecheck: r.status,
        diagnostics: r.status === 'failed' ? tail(r.diagnostics.map(tscStyle).join('\n')) : '',
        apiDifferences: [],
        run: null,
        service: summaryOf(r),
      };
      if (r.status === 'failed' || !target || !r.api) return verdict;
      const ref = await referenceApi(req, check);
      if ('infra' in ref) return { infra: ref.infra, run: null, service: verdict.service };
      return { ...verdict, apiDifferences: ref.api ? apiDifferences(ref.api, r.api) : [] };
    },
    async close() {
      await registry?.close();
    },
  };
}
