import type { AdvertModel } from '../protocol/advert.ts';
import type { FleetNode } from './fleet-view.ts';

export interface ThroughputOptions {
  /** Weight of each new measurement in the moving average, in (0, 1] (default 0.2). */
  smoothing?: number;
  /** Share of the prompt that must be cached for a sample to count as warm (default 0.9). */
  warmShare?: number;
}

/** What one finished sample tells the submitter about its node. */
export interface SampleTiming {
  /** Prompt tokens the server reported. */
  promptTokens: number;
  /** Prompt tokens served from the cache (0 when the server reports none). */
  cachedTokens: number;
  /** Completion tokens generated. */
  completionTokens: number;
  /** Time the request took on the server, ms. */
  latencyMs: number;
}

/**
 * Measured speed per (node, model): an exponential moving average of completion tokens per second
 * per request, from warm samples (the prompt cached, so the time is decoding) when there are any,
 * else from cold ones. `weight` turns it into a placement weight, capacity × rate, so a node owns
 * a share of prompts in proportion to the throughput it showed; a node not yet measured gets the
 * fleet's median rate. Pure: the submitter feeds it the usage and latency of each result.
 */
export interface Throughput {
  /** Records one sample's usage and latency; samples with no tokens or no time are ignored. */
  record(peerId: string, model: string, sample: SampleTiming): void;
  /** Measured completion tokens/s per request, or null when nothing was measured. */
  rate(peerId: string, model: string): number | null;
  /** Placement weight for PlacerOptions.weight: advertised capacity × measured (or median) rate. */
  weight(node: FleetNode, model: AdvertModel): number;
  /** Drops a node's measurements (e.g. after it restarted with other hardware). */
  forget(peerId: string): void;
}

interface Ewma {
  warm: number | null;
  cold: number | null;
}

export function createThroughput(options: ThroughputOptions = {}): Throughput {
  const smoothing = options.smoothing ?? 0.2;
  if (!(smoothing > 0 && smoothing <= 1))
    throw new RangeError(`smoothing must be in (0, 1], got ${smoothing}`);
  const warmShare = options.warmShare ?? 0.9;
  if (!(warmShare >= 0 && warmShare <= 1))
    throw new RangeError(`warmShare must be in [0, 1], got ${warmShare}`);
  /** peerId → model → averages. */
  const rates = new Map<string, Map<string, Ewma>>();

  const rateOf = (peerId: string, model: string): number | null => {
    const e = rates.get(peerId)?.get(model);
    return e ? (e.warm ?? e.cold) : null;
  };

  /** Median rate per model, computed once per change of the measurements (weight() asks per node). */
  const medians = new Map<string, number | null>();
  const median = (model: string): number | null => {
    if (medians.has(model)) return medians.get(model)!;
    const m = computeMedian(model);
    medians.set(model, m);
    return m;
  };

  const computeMedian = (model: string): number | null => {
    const forModel: number[] = [];
    const any: number[] = [];
    for (const byModel of rates.values()) {
      for (const [m, e] of byModel) {
        const r = e.warm ?? e.cold;
        if (r === null) continue;
        any.push(r);
        if (m === model) forModel.push(r);
      }
    }
    const values = forModel.length > 0 ? forModel : any;
    if (values.length === 0) return null;
    values.sort((a, b) => a - b);
    const mid = values.length >> 1;
    return values.length % 2 === 1 ? values[mid]! : (values[mid - 1]! + values[mid]!) / 2;
  };

  return {
    record(peerId, model, sample) {
      for (const [name, v] of Object.entries(sample))
        if (!Number.isFinite(v) || v < 0)
          throw new RangeError(`${name} must be a non-negative number, got ${v}`);
      if (sample.completionTokens === 0 || sample.latencyMs === 0) return;
      const rate = sample.completionTokens / (sample.latencyMs / 1000);
      const warm = sample.promptTokens > 0 && sample.cachedTokens >= warmShare * sample.promptTokens;
      let byModel = rates.get(peerId);
      if (!byModel) {
        byModel = new Map();
        rates.set(peerId, byModel);
      }
      const e = byModel.get(model) ?? { warm: null, cold: null };
      if (warm) e.warm = e.warm === null ? rate : e.warm + smoothing * (rate - e.warm);
      else e.cold = e.cold === null ? rate : e.cold + smoothing * (rate - e.cold);
      byModel.set(model, e);
      medians.clear();
    },
    rate: rateOf,
    weight(node, model) {
      const capacity = Math.max(1, node.advert.load.capacity);
      const rate = rateOf(node.advert.peerId, model.id) ?? median(model.id) ?? 1;
      return capacity * rate;
    },
    forget(peerId) {
      if (rates.delete(peerId)) medians.clear();
    },
  };
}
