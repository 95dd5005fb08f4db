import type { Digest } from '../../protocol/digest.ts';
import type { StoredSample } from './store.ts';

// One sample id may be claimed by several origins: honestly (a worker died and its job was redone
// elsewhere under the same deterministic id) or not (a member republishing others' sample ids with
// its own rewards or candidates). Which claim counts must never follow an order an origin controls
// (peer ids, seqs, candidate text and timestamps are all chosen by the claimant): claims that agree
// count once, claims that disagree count only once audits or body checks have settled them.

/** What pass@k needs claims of one sample id to agree on. */
const outcomeOf = (d: Digest) => JSON.stringify([d.taskId, d.model, d.split, d.reward]);

/**
 * The task rows claims name: the hashes their v2 digests signed (a v1 digest names none, and so
 * contradicts no one). Two origins naming different rows for one sample claim different tasks.
 */
const taskRowsOf = (digests: readonly Digest[]) => new Set(digests.flatMap((d) => d.taskHash ?? []));

/** Whether digests of one sample id agree entirely: same task (and task row), model, split, reward and candidate. */
export function claimsAgree(digests: readonly Digest[]): boolean {
  const first = digests[0];
  if (!first) return true;
  return (
    taskRowsOf(digests).size <= 1 &&
    digests.every((d) => outcomeOf(d) === outcomeOf(first) && d.contentHash === first.contentHash)
  );
}

/** How the claims of one sample id resolve. */
export interface Resolution {
  sampleId: string;
  /** Every claim stored for the sample id, ordered by origin then seq. */
  claims: StoredSample[];
  /**
   * The claim that stands for the sample (its task, model and split; its body for generation
   * statistics and, when `exportable`, the training row); null when the claims disagree on the reward.
   */
  chosen: StoredSample | null;
  /**
   * The reward pass@k counts: the claimed reward every standing claim agrees on, or the collector's
   * audited reward when every claim failed its audit; null when it is disputed or nothing stands.
   */
  reward: number | null;
  /** The claims disagree (reward, task, model, split or candidate) and neither audits nor body checks settled it. */
  disputed: boolean;
  /** `chosen` may be a training row: its body was fetched and no standing claim contests its candidate. */
  exportable: boolean;
}

const byOrigin = (a: StoredSample, b: StoredSample) =>
  a.digest.origin < b.digest.origin
    ? -1
    : a.digest.origin > b.digest.origin
      ? 1
      : a.digest.seq - b.digest.seq;

/** A claim the collector proved false: its re-score contradicted it, or its origin served a body that does not match it. */
const disproved = (c: StoredSample) => c.audit === 'failed' || c.bodyState === 'rejected';

/** The claim to stand for agreeing claims: an audited one first, then one with a body, then the first by origin. */
function preferred(claims: readonly StoredSample[]): StoredSample {
  const rank = (c: StoredSample) => (c.audit === 'passed' ? 0 : c.bodyState === 'ok' ? 1 : 2);
  return [...claims].sort((a, b) => rank(a) - rank(b) || byOrigin(a, b))[0]!;
}

/** When every claim was disproved: the audited reward if the audits agree on it, else nothing counts. */
function resolveDisproved(sampleId: string, claims: StoredSample[]): Resolution {
  const audited = claims.filter((c) => c.audit === 'failed' && c.auditReward !== null);
  const agree =
    audited.length > 0 &&
    audited.every(
      (c) =>
        c.auditReward === audited[0]!.auditReward &&
        outcomeOf({ ...c.digest, reward: 0 }) === outcomeOf({ ...audited[0]!.digest, reward: 0 }),
    );
  return {
    sampleId,
    claims,
    chosen: agree ? audited[0]! : null,
    reward: agree ? audited[0]!.auditReward : null,
    disputed: audited.length > 1 && !agree,
    exportable: false,
  };
}

/** Resolves the claims of one sample id (any order in; the result depends on the claims only). */
export function resolveClaims(input: readonly StoredSample[]): Resolution {
  const claims = [...input].sort(byOrigin);
  const sampleId = claims[0]?.digest.sampleId ?? '';
  const live = claims.filter((c) => !disproved(c));
  const confirmed = live.filter((c) => c.audit === 'passed');
  // Against a claim an audit confirmed, a claim whose body never arrived cannot stand (its origin may withhold it).
  const standing = confirmed.length > 0 ? live.filter((c) => c.bodyState === 'ok') : live;
  if (standing.length === 0) return resolveDisproved(sampleId, claims);
  if (
    new Set(standing.map((c) => outcomeOf(c.digest))).size > 1 ||
    taskRowsOf(standing.map((c) => c.digest)).size > 1
  )
    return { sampleId, claims, chosen: null, reward: null, disputed: true, exportable: false };
  const reward = standing[0]!.digest.reward;
  const contents = new Set(standing.map((c) => c.digest.contentHash));
  if (contents.size === 1) {
    const chosen = preferred(standing);
    return { sampleId, claims, chosen, reward, disputed: false, exportable: chosen.bodyState === 'ok' };
  }
  // Several candidates for one reward: pass@k is settled; the training row only when audits
  // confirmed every standing candidate (then any of them is true; the lowest hash, for determinism).
  if (standing.every((c) => c.audit === 'passed')) {
    const chosen = [...standing].sort((a, b) =>
      a.digest.contentHash < b.digest.contentHash ? -1 : a.digest.contentHash > b.digest.contentHash ? 1 : 0,
    )[0]!;
    return { sampleId, claims, chosen, reward, disputed: false, exportable: true };
  }
  return { sampleId, claims, chosen: preferred(standing), reward, disputed: true, exportable: false };
}

/** Resolves every sample id of a dataset; ordered by sample id. */
export function resolveAll(samples: readonly StoredSample[]): Resolution[] {
  const groups = new Map<string, StoredSample[]>();
  for (const s of samples) {
    const list = groups.get(s.digest.sampleId);
    if (list) list.push(s);
    else groups.set(s.digest.sampleId, [s]);
  }
  return [...groups.keys()].sort().map((id) => resolveClaims(groups.get(id)!));
}
