/**
 * Who owns a run that did not finish: the candidate (`timeout`, reward 0) or the host (`starved`, an
 * infrastructure error). Pure: the measurements come from the caller (sandbox/cpu-wait.ts, group-run.ts).
 *
 * The yardstick is the reference's own run under the same tests: a run is the candidate's timeout once
 * it has had `factor` times the reference's wall time (at least `floorMs`) with a CPU on offer — wall
 * time minus the time it waited for a CPU it wanted — or has received that much CPU time. A run stopped
 * by the backstop before either is the host's doing: it was kept from the CPU it asked for.
 */

/** The hang rule's constants (they go into the evaluation fingerprint through the limits). */
export interface HangPolicy {
  /** The bounds are this multiple of the reference's own wall and CPU time. */
  factor: number;
  /** ... never less than this, milliseconds (a fast reference does not make a tight bound) ... */
  floorMs: number;
  /** ... and never more than this share of the run's wall backstop (the rest is room for a loaded host). */
  backstopShare: number;
}

export const DEFAULT_HANG_POLICY: HangPolicy = { factor: 3, floorMs: 30_000, backstopShare: 2 / 3 };

/** The reference run's measured time under the same tests (cached with the reference), milliseconds. */
export interface ReferenceTime {
  wallMs: number;
  cpuMs: number;
}

/**
 * Where the time a run waited for a CPU was read. `cgroup-psi`: the run's own cgroup (cgroup v2
 * `cpu.pressure`, "some"), exact. `host-psi`: the host's /proc/pressure/cpu "some" over the run's window,
 * an upper bound (any task waiting counts). `host-idle`: the window minus the time the host's CPUs were
 * idle (from their idle counters), an upper bound (a run waits only while no CPU is idle).
 */
export type WaitSource = 'cgroup-psi' | 'host-psi' | 'host-idle';

/** Time a run waited for a CPU, an upper bound, and where it was read. */
export interface CpuWait {
  ms: number;
  source: WaitSource;
}

export interface OverrunInput {
  /** Wall time the run has used, milliseconds. */
  wallMs: number;
  /** CPU time the run has received (user + system, all its processes), milliseconds. */
  cpuMs: number;
  /** The reference's own time: the yardstick. */
  reference: ReferenceTime;
  /** Time the run waited for a CPU (an upper bound), or null when nothing on the host tells. */
  waited: CpuWait | null;
  /** The run's wall-clock backstop, milliseconds. */
  backstopMs: number;
  policy: HangPolicy;
}

export interface OverrunVerdict {
  /** `timeout`: the candidate's (reward 0); `starved`: the host's (infrastructure, never a reward). */
  verdict: 'timeout' | 'starved';
  /** Wall time with a CPU on offer the run may use before it is the candidate's timeout, ms. */
  boundMs: number;
  /** CPU time the run may receive before it is the candidate's timeout, ms. */
  cpuBoundMs: number;
  /** Wall time the run had a CPU on offer (wall minus waited; 0 when nothing tells), ms. */
  offeredMs: number;
  /** One sentence: what was measured and why it decides. */
  why: string;
}

const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

function check(name: string, value: number, positive = false): void {
  if (!Number.isFinite(value) || value < 0 || (positive && value === 0))
    throw new RangeError(
      `overrun: ${name} must be a ${positive ? 'positive' : 'non-negative'} number, got ${value}`,
    );
}

/** The wall and CPU bounds of a run whose reference took `reference`, under a backstop of `backstopMs`. */
export function hangBounds(
  reference: ReferenceTime,
  backstopMs: number,
  policy: HangPolicy,
): { wallMs: number; cpuMs: number } {
  check('policy.factor', policy.factor, true);
  check('policy.floorMs', policy.floorMs);
  check('backstopMs', backstopMs, true);
  if (!(policy.backstopShare > 0 && policy.backstopShare <= 1))
    throw new RangeError(`overrun: policy.backstopShare must be in (0, 1], got ${policy.backstopShare}`);
  check('reference.wallMs', reference.wallMs);
  check('reference.cpuMs', reference.cpuMs);
  const cap = backstopMs * policy.backstopShare;
  const bound = (ms: number) => Math.round(Math.min(cap, Math.max(policy.floorMs, policy.factor * ms)));
  return { wallMs: bound(reference.wallMs), cpuMs: bound(reference.cpuMs) };
}

/**
 * Decides a run that has not finished (during the run: `timeout` means stop it now; at the backstop:
 * final). Timeout when it had `boundMs` of wall time with a CPU on offer, or received `cpuBoundMs` of CPU;
 * otherwise starved — also when nothing tells how long it waited (the host gets the benefit of the doubt,
 * never the candidate a 0 by guess).
 */
export function judgeOverrun(input: OverrunInput): OverrunVerdict {
  check('wallMs', input.wallMs);
  check('cpuMs', input.cpuMs);
  if (input.waited) check('waited.ms', input.waited.ms);
  const bounds = hangBounds(input.reference, input.backstopMs, input.policy);
  const yardstick = `${input.policy.factor} × the reference's ${s(input.reference.wallMs)} wall / ${s(input.reference.cpuMs)} CPU, at least ${s(input.policy.floorMs)}`;
  const base = { boundMs: bounds.wallMs, cpuBoundMs: bounds.cpuMs };
  if (input.cpuMs >= bounds.cpuMs) {
    const why = `the run received ${s(input.cpuMs)} of CPU without finishing (bound ${s(bounds.cpuMs)}: ${yardstick})`;
    return { ...base, verdict: 'timeout', offeredMs: offered(input), why };
  }
  if (!input.waited)
    return {
      ...base,
      verdict: 'starved',
      offeredMs: 0,
      why: `nothing on this host tells how long the run waited for a CPU (${s(input.wallMs)} of wall time, ${s(input.cpuMs)} of CPU)`,
    };
  const got = offered(input);
  const waited = `waited ${s(Math.min(input.waited.ms, input.wallMs))} for a CPU (${input.waited.source})`;
  if (got >= bounds.wallMs)
    return {
      ...base,
      verdict: 'timeout',
      offeredMs: got,
      why: `the run did not finish in ${s(got)} with a CPU on offer (bound ${s(bounds.wallMs)}: ${yardstick}); in ${s(input.wallMs)} of wall time it ${waited} and used ${s(input.cpuMs)} of CPU`,
    };
  return {
    ...base,
    verdict: 'starved',
    offeredMs: got,
    why: `the host kept the run from a CPU: in ${s(input.wallMs)} of wall time it ${waited}, so it had a CPU on offer for only ${s(got)} of the ${s(bounds.wallMs)} it is owed (${yardstick})`,
  };
}

function offered(input: OverrunInput): number {
  if (!input.waited) return 0;
  return Math.max(0, input.wallMs - Math.min(input.waited.ms, input.wallMs));
}
