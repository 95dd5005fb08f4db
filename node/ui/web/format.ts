// Number formatting for the page (pure; unit-tested with the snapshot builders).

/** Bytes as GiB with one decimal. */
export function gib(bytes: number): string {
  return `${(bytes / 2 ** 30).toFixed(1)} GiB`;
}

/** A share as a whole percentage, or '–' when unknown. */
export function percent(x: number | null): string {
  return x === null ? '–' : `${Math.round(x * 100)}%`;
}

/** A duration in ms as `1h 02m`, `3m 05s` or `12s`; '–' when unknown. */
export function duration(ms: number | null): string {
  if (ms === null) return '–';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
}

/** A rate with at most one decimal, or '–'. */
export function rate(x: number | null): string {
  return x === null ? '–' : x >= 100 ? String(Math.round(x)) : x.toFixed(1);
}
