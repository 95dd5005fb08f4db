import { sha256Hex } from '../../protocol/canonical.ts';
import type { OriginRecord } from './store.ts';

/** Trust of one origin, as `vtnode status` shows it. */
export interface OriginTrust extends OriginRecord {
  /** In (0, 1]: 1 for a node never caught, lower with every failed audit, rejected body or conflict. */
  trust: number;
  /** Every sample of a suspect origin is audited, whatever its claimed reward (an audit failure also quarantines its unaudited samples). */
  suspect: boolean;
}

/**
 * Trust from what the collector observed: (passed + 1) / (passed + 1 + 5·audit failures +
 * 2·rejected bodies + 5·conflicts). Deterministic, so two collectors that saw the same evidence agree.
 */
export function trustOf(r: OriginRecord): OriginTrust {
  const bad = 5 * r.auditFailures + 2 * r.rejectedBodies + 5 * r.conflicts;
  const trust = (r.auditsPassed + 1) / (r.auditsPassed + 1 + bad);
  return { ...r, trust: Math.round(trust * 1e6) / 1e6, suspect: bad > 0 };
}

/** Deterministic audit selection: a sample is chosen when its id hashes below `fraction`. */
export function selectedForAudit(sampleId: string, fraction: number): boolean {
  if (fraction <= 0) return false;
  if (fraction >= 1) return true;
  const x = Number.parseInt(sha256Hex(`audit:${sampleId}`).slice(0, 12), 16) / 2 ** 48;
  return x < fraction;
}
