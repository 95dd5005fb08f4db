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

/** One line of live progress: tasks placed/running/done, samples, tokens/s, cache hits, ETA. */
export function progressLine(st: CampaignStatus, now: number): string {
  const { samples, tasks } = st.summary;
  const tasksDone = tasks.filter((t) => t.samples >= t.planned).length;
  const running = new Set(st.running.map((r) => r.taskId)).size;
  const elapsed = st.startedAt > 0 ? now - st.startedAt : 0;
  const rate = elapsed > 0 ? samples.scored / elapsed : 0;
  const eta =
    rate > 0 && samples.scored < samples.planned ? duration((samples.planned - samples.scored) / rate) : '-';
  const tps = st.summary.tokensPerSecond === null ? '-' : st.summary.tokensPerSecond.toFixed(1);
  const hits = st.summary.cacheHitRate === null ? '-' : pct(st.summary.cacheHitRate * 100, 100);
  return (
    `tasks ${tasksDone}/${tasks.length} done, ${running} running | samples ${samples.generated} generated, ` +
    `${samples.scored}/${samples.planned} scored, ${samples.verified} verified | ${tps} tok/s | cache hits ${hits} | ETA ${eta}`
  );
}

/** The final human summary: per node and per model. */
export function finalSummary(st: CampaignStatus): string {
  const s = st.summary;
  const lines = [
    `campaign ${st.name}: ${st.status}`,
    `samples: ${s.samples.planned} planned, ${s.samples.generated} generated, ${s.samples.scored} scored, ${s.samples.verified} verified (${pct(s.samples.verified, s.samples.scored)} of scored)`,
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
