import type { OriginSummary } from '../../protocol/fetch.ts';

// Anti-entropy over /vtnode/log/2, the pure part: every peer lists the origins it holds digests of
// (with its contiguous high-water mark, highest seq and count); the collector pulls an origin's
// digests after its own high-water mark from the peers that may hold some it lacks. A worker holds
// only its own digests; a collector holds every origin's it collected, so a dead worker's digests
// still reach a collector that started after it died.

/** A peer's summary of one origin. */
export interface Source {
  peer: string;
  summary: OriginSummary;
}

/** Identifies what a peer held of an origin when it was pulled (a change means it may hold more). */
export function summaryKey(s: OriginSummary): string {
  return `${s.highWater}/${s.maxSeq}/${s.count}`;
}

/**
 * Whether pulling `remote` can bring digests we lack: it holds a seq above our contiguous high-water
 * mark, and we have not already pulled this very state of it (`pulled`: its summaryKey then).
 */
export function worthPulling(localHighWater: number, remote: OriginSummary, pulled?: string): boolean {
  if (remote.count === 0 || remote.maxSeq <= localHighWater) return false;
  return pulled !== summaryKey(remote);
}

/**
 * For every origin some peer holds, the peers to pull it from, in order: the origin itself first
 * (the authority on its own log), then by what they hold (high-water mark, highest seq, count), then
 * by peer id. Peers with nothing new (see worthPulling) are left out; so are origins with no such peer.
 * `pulled` maps `${peer}\n${origin}` to the summaryKey of the last state pulled.
 */
export function planCatchUp(
  indices: ReadonlyMap<string, readonly OriginSummary[]>,
  localHighWater: (origin: string) => number,
  pulled: ReadonlyMap<string, string> = new Map(),
): Map<string, Source[]> {
  const plan = new Map<string, Source[]>();
  for (const [peer, summaries] of indices)
    for (const summary of summaries) {
      const { origin } = summary;
      if (!worthPulling(localHighWater(origin), summary, pulled.get(`${peer}\n${origin}`))) continue;
      const list = plan.get(origin) ?? [];
      list.push({ peer, summary });
      plan.set(origin, list);
    }
  for (const [origin, list] of plan)
    list.sort(
      (a, b) =>
        Number(b.peer === origin) - Number(a.peer === origin) ||
        b.summary.highWater - a.summary.highWater ||
        b.summary.maxSeq - a.summary.maxSeq ||
        b.summary.count - a.summary.count ||
        (a.peer < b.peer ? -1 : a.peer > b.peer ? 1 : 0),
    );
  return new Map([...plan].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
