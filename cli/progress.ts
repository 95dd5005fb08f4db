import type { CampaignStatus } from '../node/submitter/service.ts';

function pct(n: number, d: number): string {
  return d === 0 ? '0%' : `${Math.floor((100 * n) / d)}%`;
}

function duration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/**
 * The time left, from the pace of scored samples up to the newest one: between two scored samples
 * the estimate counts down (it never grows while the last samples score, as a rate over the whole
 * elapsed time would). Null before the first sample is scored and once every sample is.
 */
export function createEta(): (st: CampaignStatus, now: number) => number | null {
  let scored = -1;
  let at = 0;
  return (st, now) => {
    const { planned, scored: n } = st.summary.samples;
    if (n !== scored) {
      scored = n;
      at = now;
    }
    if (st.startedAt <= 0 || n === 0 || n >= planned || at <= st.startedAt) return null;
    const perSample = (at - st.startedAt) / n;
    return Math.max(0, perSample * (planned - n) - (now - at));
  };
}

/** One line of live progress: tasks placed/running/done, samples, tokens/s, cache hits, and the ETA given. */
export function progressLine(st: CampaignStatus, etaMs: number | null): string {
  return `${progressCounts(st)} | ETA ${etaMs === null ? '-' : duration(etaMs)}`;
}

/** The progress line without its ETA: what changes when the campaign moves. */
function progressCounts(st: CampaignStatus): string {
  const { samples, tasks } = st.summary;
  const tasksDone = tasks.filter((t) => t.samples >= t.planned).length;
  const running = new Set(st.running.map((r) => r.taskId)).size;
  const tps = st.summary.tokensPerSecond === null ? '-' : st.summary.tokensPerSecond.toFixed(1);
  const hits = st.summary.cacheHitRate === null ? '-' : pct(st.summary.cacheHitRate * 100, 100);
  return (
    `tasks ${tasksDone}/${tasks.length} done, ${running} running | samples ${samples.generated} generated, ` +
    `${samples.scored}/${samples.planned} scored, ${samples.verified} verified | ${tps} tok/s | cache hits ${hits}`
  );
}

export interface ProgressPrinterOptions {
  /** stderr is a terminal: the line is redrawn in place at every update. */
  tty: boolean;
  /** Without a terminal, the least time between two printed lines, ms (default 10 s). */
  minIntervalMs?: number;
}

/**
 * What `vtnode run` writes for each status it polls. On a terminal: the line redrawn in place. Without
 * one (CI logs, pipes): a line only when the campaign moved, at most every `minIntervalMs`, and the
 * last line when it ends. While paused (a question is on screen) nothing is written; `resume` redraws.
 */
export function createProgressPrinter(options: ProgressPrinterOptions) {
  const minInterval = options.minIntervalMs ?? 10_000;
  const eta = createEta();
  let paused = false;
  let printedCounts: string | null = null;
  let printedAt = -Infinity;
  return {
    /** The text to write to stderr for this status, or null. */
    update(st: CampaignStatus, now: number): string | null {
      const etaMs = eta(st, now);
      if (paused) return null;
      if (options.tty) return `\r\x1b[K${progressLine(st, etaMs)}`;
      const counts = progressCounts(st);
      const final = st.status !== 'running';
      // The same counts are not printed twice; a change waits for the interval, unless it is the end.
      if (counts === printedCounts) return null;
      if (!final && now - printedAt < minInterval) return null;
      printedCounts = counts;
      printedAt = now;
      return `${progressLine(st, etaMs)}\n`;
    },
    /** Stops writing (a question is asked on the terminal). */
    pause(): void {
      paused = true;
    },
    /** Writes again from the next update. */
    resume(): void {
      paused = false;
    },
  };
}

/** The final human summary: per node and per model. */
export function finalSummary(st: CampaignStatus): string {
  const s = st.summary;
  const lines = [
    `campaign ${st.name}: ${st.status}`,
    `samples: ${s.samples.planned} planned, ${s.samples.generated} generated, ${s.samples.scored} scored, ${s.samples.verified} verified (${pct(s.samples.verified, s.samples.scored)} of scored)`,
    ...(s.preexisting > 0
      ? [
          `  ${s.preexisting} of them generated before this campaign (the workers' logs held the same task, model and seed): not new data`,
        ]
      : []),
    `seed ${st.seedBase} (\`--seed ${st.seedBase}\` reproduces these samples)`,
    '',
    'per node:',
    ...s.nodes.map(
      (n) =>
        `  ${n.peerId.slice(-8)}  ${n.scored} scored, ${n.verified} verified, ${n.tokensPerSecond?.toFixed(1) ?? '-'} tok/s, cache hits ${n.cacheHitRate === null ? '-' : pct(n.cacheHitRate * 100, 100)}`,
    ),
    'per model:',
    ...s.models.map(
      (m) =>
        `  ${m.model}  ${m.scored}/${m.planned} scored, ${m.verified} verified, ${m.tokensPerSecond?.toFixed(1) ?? '-'} tok/s, cache hits ${m.cacheHitRate === null ? '-' : pct(m.cacheHitRate * 100, 100)}`,
    ),
  ];
  if (st.problem) lines.push('', `last problem: ${st.problem}`);
  return `${lines.join('\n')}\n`;
}
