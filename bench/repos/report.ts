/** Markdown tables of the public-repositories bench (pure). */
import { percent } from './coverage.ts';
import type { RepoResult } from './measure.ts';
import type { ReasonCount } from './reasons.ts';

/** Median of the numbers, or null for none. */
export function median(xs: readonly number[]): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

const dash = '—';
const pct = (part: number, whole: number) => {
  const p = percent(part, whole);
  return p === null ? dash : `${part}/${whole} (${p} %)`;
};
const secs = (ms: number | null) => (ms === null ? dash : (ms / 1000).toFixed(ms < 10_000 ? 2 : 1));
const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

/** The per-candidate CPU figures of a repository's calibration, medians in ms. */
export function cpuMedians(r: RepoResult): {
  tests: number | null;
  typecheck: number | null;
  host: number | null;
  wall: number | null;
} {
  const rows = r.calibration.rows;
  const of = (xs: (number | null)[]) => median(xs.filter((x): x is number => x !== null));
  return {
    tests: of(rows.map((x) => x.testsCpuMs)),
    typecheck: of(rows.map((x) => x.typecheckCpuMs)),
    host: of(rows.map((x) => x.hostCpuMs)),
    wall: of(rows.map((x) => x.wallMs)),
  };
}

/** Mining table: what the tests reach (the bench's own graph) against what the miner mined. */
export function miningTable(results: readonly RepoResult[]): string {
  const head =
    '| repository | runner · layout | code files | tests | reached sources | reaching tests | pairs | miner graph, any runner: sources / tests | mined (file + tests) | file tasks on reached sources | tests tasks on reaching tests | pairs in a judge | mine wall / CPU s |\n' +
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n';
  const rows = results.map((r) => {
    const c = r.coverage;
    const mined = r.mine.refused ? 'refused' : `${r.mine.tasks} (${r.mine.file} + ${r.mine.tests})`;
    const runner = [r.spec.runner ?? r.mine.runner ?? '?', r.spec.layout].filter(Boolean).join(' · ');
    const g = r.minerGraph;
    const graph = `${pct(g.agreedSources, c.reachedSources)} / ${pct(g.reachingTests, c.reachingTests)}`;
    return `| ${cell(r.spec.name)} | ${cell(runner)} | ${r.reach.codeFiles} | ${r.reach.tests} | ${c.reachedSources} | ${c.reachingTests} | ${c.pairs} | ${graph} | ${mined} | ${pct(c.fileTasksOnReached, c.reachedSources)} | ${pct(c.testsTasksOnReaching, c.reachingTests)} | ${pct(c.pairsJudged, c.pairs)} | ${secs(r.mine.wallMs)} / ${secs(r.mine.cpuMs)} |`;
  });
  return head + rows.join('\n') + '\n';
}

/** Calibration table: kept share of the sample and what a candidate costs. */
export function calibrationTable(results: readonly RepoResult[]): string {
  const head =
    '| repository | calibrated (sample) | kept | tests CPU s / run | type-check CPU s / run | host CPU s / score | wall s / score | fresh tsc CPU s (wall s) |\n' +
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n';
  const rows = results.map((r) => {
    const cal = r.calibration;
    const m = cpuMedians(r);
    const f = r.freshTsc;
    const tsc = f
      ? `${secs(f.cpuMs)} (${secs(f.wallMs)})${f.timedOut ? ' timed out' : f.exitCode === 0 ? '' : ` exit ${f.exitCode}`}${f.from === 'task' ? '' : ' ¹'}`
      : dash;
    const kept = cal.sampled === 0 ? dash : pct(cal.kept, cal.sampled);
    return `| ${cell(r.spec.name)} | ${cal.sampled} | ${kept} | ${secs(m.tests)} | ${secs(m.typecheck)} | ${secs(m.host)} | ${secs(m.wall)} | ${tsc} |`;
  });
  return head + rows.join('\n') + '\n';
}

/** A bullet list of grouped reasons, the `limit` most frequent. */
export function reasonList(reasons: readonly ReasonCount[], limit = 10): string {
  if (reasons.length === 0) return '- (none)\n';
  const shown = reasons.slice(0, limit).map((r) => `- ${r.count} × ${r.reason}`);
  const rest = reasons.slice(limit).reduce((n, r) => n + r.count, 0);
  if (rest > 0) shown.push(`- ${rest} × (${reasons.length - limit} other reasons)`);
  return `${shown.join('\n')}\n`;
}

/** The whole report: both tables, then each repository's refusal, skip reasons and drop reasons. */
export function renderReport(results: readonly RepoResult[]): string {
  const parts = ['### Mining\n\n', miningTable(results), '\n### Calibration\n\n', calibrationTable(results)];
  for (const r of results) {
    parts.push(`\n### ${r.spec.name} (\`${r.commit?.slice(0, 12) ?? 'no git'}\`)\n\n`);
    if (r.mine.refused) parts.push(`Mine refused: ${r.mine.refused}\n\n`);
    parts.push('Miner skip reasons (files):\n\n', reasonList(r.mine.skipped));
    if (r.calibration.sampled > 0)
      parts.push('\nCalibration drops by first reason (tasks):\n\n', reasonList(r.calibration.dropped));
  }
  return parts.join('');
}
