import type { AdvertModel } from '../protocol/advert.ts';
import {
  type EligibilityOptions,
  type EligibilityResult,
  eligibleNodes,
  explainNoEligible,
  type OutstandingByNode,
  type RejectedNode,
} from './eligibility.ts';
import type { FleetNode } from './fleet-view.ts';
import { hrwRank } from './hrw.ts';
import type { Reputation } from './reputation.ts';

export interface PlacerOptions extends EligibilityOptions {
  /** Load slack ε ≥ 0 of the bound ⌈(1+ε)·mean⌉ (default 0.1); Infinity turns the bound off. */
  epsilon?: number;
  /** Reputation book: its cool-downs make nodes ineligible and its penalties scale weights down. */
  reputation?: Reputation;
  /** Base weight of a node for a model, > 0 (default: the node's advertised job capacity). */
  weight?: (node: FleetNode, model: AdvertModel) => number;
  /** Send a job to a node whose advert shows its prompt warm, when under the cap (default true). */
  warmAffinity?: boolean;
  /** Add the node's advertised queued + running jobs to this submitter's own outstanding jobs (default true). */
  countAdvertisedLoad?: boolean;
}

/** One job to place: all k samples of one task with one model. */
export interface PlacementRequest {
  /** The task (only its id, prompt fingerprint and workspace id matter here). */
  task: { id: string; promptFingerprint: string; workspace: { id: string } };
  /** Model id to generate with. */
  model: string;
  /** Peer ids not to use for this job (e.g. nodes that refused it). */
  exclude?: Iterable<string>;
}

/** An eligible node as the placer ranked it for one job. */
export interface RankedNode {
  peerId: string;
  /** Effective weight: base weight × reputation factor. */
  weight: number;
  /** Rendezvous score for the job's key (highest first). */
  score: number;
  /** Load counted for the node, jobs. */
  load: number;
  /** Most jobs the node may hold after taking this one. */
  cap: number;
  /** Position of the job's (prompt, model) in the node's advertised warm list (0 = newest), or null. */
  warmIndex: number | null;
  /** The node is fetching the job's workspace, not holding it yet: ranked after every holder. */
  fetching: boolean;
}

/**
 * Why the chosen node won: warm for the prompt, rendezvous owner, the next node after owners at their
 * cap, or a node still fetching the workspace (no node holding it had room).
 */
export type PlacementReason = 'warm' | 'owner' | 'spill' | 'fetching';

export type Placement =
  | {
      ok: true;
      /** Chosen node's peer id. */
      peerId: string;
      node: FleetNode;
      reason: PlacementReason;
      /** The chosen node's ranking entry. */
      chosen: RankedNode;
      /** Every eligible node, in rendezvous order. */
      ranked: RankedNode[];
      /** Nodes refused, with reasons. */
      rejected: RejectedNode[];
    }
  | {
      ok: false;
      /** One sentence for the user: why no node can take the job. */
      message: string;
      rejected: RejectedNode[];
    };

/** Decides where jobs go. Pure: the fleet, the time and this submitter's outstanding jobs are inputs. */
export interface Placer {
  /**
   * Places one job. Eligible nodes (see eligibility.ts) are ranked by weighted rendezvous hashing of
   * (prompt fingerprint, model). A node whose advert shows the prompt warm for the model wins if it
   * stays within its cap (the newest warm entry first, then rendezvous order); otherwise the highest
   * ranked node within its cap wins. There always is one: the caps sum to more than the load.
   *
   * Nodes still fetching the workspace are eligible at a cost: they are ranked after every node that
   * holds it (among themselves by the same rules), so they are chosen only when no holder is eligible,
   * and room (room.ts `withRoom`) reaches them only when no holder has a free slot. Their generation
   * starts at once; their scoring waits for the fetch.
   */
  place(
    request: PlacementRequest,
    nodes: readonly FleetNode[],
    now: number,
    outstanding?: OutstandingByNode,
  ): Placement;
  /** The rendezvous key of a job: same prompt and model, same key, same owner. */
  key(promptFingerprint: string, model: string): string;
}

/** Default base weight: the job capacity the node advertises. */
export function capacityWeight(node: FleetNode): number {
  return node.advert.load.capacity;
}

/** Alternative base weight: the model's advertised request concurrency. */
export function concurrencyWeight(_node: FleetNode, model: AdvertModel): number {
  return model.concurrency;
}

/**
 * Cap of a node of weight `weight` among nodes of total weight `totalWeight` carrying `totalLoad`
 * jobs, when one more job arrives: ⌈(1+ε)·(totalLoad+1)·weight/totalWeight⌉. With equal weights that
 * is ⌈(1+ε)·mean⌉ with the new job counted in the mean.
 */
export function loadCap(epsilon: number, totalLoad: number, weight: number, totalWeight: number): number {
  if (epsilon === Number.POSITIVE_INFINITY) return Number.POSITIVE_INFINITY;
  const share = ((1 + epsilon) * (totalLoad + 1) * weight) / totalWeight;
  // Guard against 3.0000000000000004 becoming 4.
  return Math.max(1, Math.ceil(share - 1e-9));
}

export function createPlacer(options: PlacerOptions = {}): Placer {
  const epsilon = options.epsilon ?? 0.1;
  if (Number.isNaN(epsilon) || epsilon < 0) throw new RangeError(`epsilon must be >= 0, got ${epsilon}`);
  const warmAffinity = options.warmAffinity ?? true;
  const countAdvertised = options.countAdvertisedLoad ?? true;
  const baseWeight = options.weight ?? capacityWeight;
  const reputation = options.reputation;
  const eligibility: EligibilityOptions = {
    ...options,
    coolingDown: (peerId, now) =>
      (options.coolingDown?.(peerId, now) ?? false) || (reputation?.coolingDown(peerId, now) ?? false),
  };
  const key = (prompt: string, model: string) => `${prompt}\n${model}`;

  /** One tier of eligible nodes in rendezvous order, each with its load and cap within the tier. */
  const rankTier = (
    tier: EligibilityResult['eligible'],
    request: PlacementRequest,
    now: number,
    outstanding?: OutstandingByNode,
  ): RankedNode[] => {
    const info = new Map<string, { load: number; warmIndex: number | null; fetching: boolean }>();
    const candidates: { id: string; weight: number }[] = [];
    let totalLoad = 0;
    let totalWeight = 0;
    for (const { node, model, fetching } of tier) {
      const peerId = node.advert.peerId;
      const base = baseWeight(node, model);
      if (!(base > 0) || !Number.isFinite(base))
        throw new RangeError(`weight of ${peerId} for ${model.id} must be a positive number, got ${base}`);
      const weight = base * (reputation?.weightFactor(peerId, now) ?? 1);
      const own = outstanding?.get(peerId)?.jobs ?? 0;
      const advertised = countAdvertised ? node.advert.load.queued + node.advert.load.running : 0;
      const load = own + advertised;
      const warmIndex = node.advert.warm.findIndex(
        (w) => w.prompt === request.task.promptFingerprint && w.model === request.model,
      );
      info.set(peerId, { load, warmIndex: warmIndex < 0 ? null : warmIndex, fetching });
      candidates.push({ id: peerId, weight });
      totalLoad += load;
      totalWeight += weight;
    }
    return hrwRank(key(request.task.promptFingerprint, request.model), candidates).map((c) => {
      const { load, warmIndex, fetching } = info.get(c.id)!;
      return {
        peerId: c.id,
        weight: c.weight,
        score: c.score,
        load,
        cap: loadCap(epsilon, totalLoad, c.weight, totalWeight),
        warmIndex,
        fetching,
      };
    });
  };

  /** The choice within one tier: a warm node within its cap, else the first in rendezvous order within its cap. */
  const choose = (ranked: RankedNode[]): { chosen: RankedNode; reason: PlacementReason } => {
    const fits = (r: RankedNode) => r.load + 1 <= r.cap;
    const fetching = ranked[0]!.fetching;
    if (warmAffinity) {
      // Stable sort keeps rendezvous order among nodes where the prompt is equally recent.
      const warm = ranked
        .filter((r) => r.warmIndex !== null && fits(r))
        .sort((a, b) => a.warmIndex! - b.warmIndex!);
      if (warm[0]) return { chosen: warm[0], reason: fetching ? 'fetching' : 'warm' };
    }
    const index = ranked.findIndex(fits);
    // Unreachable while the caps sum to more than the load; fall back to the owner regardless.
    const chosen = ranked[Math.max(0, index)]!;
    return { chosen, reason: fetching ? 'fetching' : index > 0 ? 'spill' : 'owner' };
  };

  return {
    key,
    place(request, nodes, now, outstanding) {
      const job = { model: request.model, workspaceId: request.task.workspace.id };
      const exclude = request.exclude ? new Set(request.exclude) : undefined;
      const { eligible, rejected } = eligibleNodes(nodes, job, now, eligibility, { outstanding, exclude });
      if (eligible.length === 0) return { ok: false, message: explainNoEligible(job, rejected), rejected };

      // Holders first; nodes still fetching the workspace after them, each tier ranked on its own.
      const holders = rankTier(
        eligible.filter((e) => !e.fetching),
        request,
        now,
        outstanding,
      );
      const fetching = rankTier(
        eligible.filter((e) => e.fetching),
        request,
        now,
        outstanding,
      );
      const ranked = [...holders, ...fetching];
      const byPeer = new Map(eligible.map((e) => [e.node.advert.peerId, e.node]));
      const { chosen, reason } = choose(holders.length > 0 ? holders : fetching);
      return {
        ok: true,
        peerId: chosen.peerId,
        node: byPeer.get(chosen.peerId)!,
        reason,
        chosen,
        ranked,
        rejected,
      };
    },
  };
}
