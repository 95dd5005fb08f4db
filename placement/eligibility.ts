import type { AdvertModel } from '../protocol/advert.ts';
import type { FleetNode } from './fleet-view.ts';

/** What a job needs from a node. */
export interface JobRequirements {
  /** Model id the job generates with. */
  model: string;
  /** Content id of the workspace the job's samples are scored against. */
  workspaceId: string;
}

/** Jobs this submitter has placed on one node and not yet seen finish. */
export interface NodeOutstanding {
  /** Outstanding jobs on the node. */
  jobs: number;
  /**
   * Of those, jobs still generating (some sample neither generated nor scored): a job whose samples
   * are all generated only waits for the sandbox, and no longer holds one of the node's job slots.
   */
  generating: number;
  /** Models of those jobs (each listed once): their memory is reserved on the node. */
  models: readonly string[];
}

/** Outstanding work per peer id. */
export type OutstandingByNode = ReadonlyMap<string, NodeOutstanding>;

export interface EligibilityOptions {
  /** Configured memory estimates per model id, bytes, used when no advert reports the model's size. */
  modelMemoryBytes?: Readonly<Record<string, number>>;
  /** Estimate for a model with no reported or configured size, bytes; unset = such a model passes the memory check. */
  defaultModelMemoryBytes?: number;
  /** True while a node cools down after failures (usually `reputation.coolingDown`). */
  coolingDown?: (peerId: string, now: number) => boolean;
}

/** Why a node cannot take a job. */
export type Rejection =
  | { code: 'model'; detail: string }
  | { code: 'workspace'; detail: string }
  | { code: 'sandbox'; detail: string }
  | { code: 'capacity'; detail: string }
  | { code: 'memory'; detail: string; needBytes: number; headroomBytes: number }
  | { code: 'cooling-down'; detail: string }
  | { code: 'excluded'; detail: string };

export type RejectionCode = Rejection['code'];

/** A node that was considered and refused, with the reason. */
export interface RejectedNode {
  peerId: string;
  host: string | null;
  rejection: Rejection;
}

/** The eligible nodes for a job, and why each other node was refused. */
export interface EligibilityResult {
  /**
   * `fetching`: the node does not hold the job's workspace yet but advertises it is fetching and
   * installing it (--fetch-workspaces): eligible at a cost, after every node that holds it (placer.ts).
   */
  eligible: { node: FleetNode; model: AdvertModel; fetching: boolean }[];
  rejected: RejectedNode[];
}

/** The advert's entry for a model id; when several servers list it, a loaded one first. */
export function servedModel(models: readonly AdvertModel[], id: string): AdvertModel | undefined {
  return models.find((m) => m.id === id && m.loaded) ?? models.find((m) => m.id === id);
}

/**
 * Memory a model needs on a node where it is not loaded: the size the advert reports for it, else
 * the configured estimate, else the largest size any node in `fleet` reports for the same model id,
 * else `defaultModelMemoryBytes`, else null (unknown).
 */
export function modelMemoryBytes(
  model: string,
  reported: number | null | undefined,
  fleet: readonly FleetNode[],
  options: EligibilityOptions,
): number | null {
  if (reported != null) return reported;
  const configured = options.modelMemoryBytes?.[model];
  if (configured !== undefined) return configured;
  let seen: number | null = null;
  for (const node of fleet) {
    for (const m of node.advert.models) {
      if (m.id === model && m.memoryBytes != null && (seen === null || m.memoryBytes > seen))
        seen = m.memoryBytes;
    }
  }
  if (seen !== null) return seen;
  return options.defaultModelMemoryBytes ?? null;
}

/**
 * Checks one node against a job's requirements, in this order: serves the model, holds the
 * workspace (or advertises it is fetching it), sandbox self-test passed, has job capacity, not excluded, not cooling down, memory
 * headroom. Returns the first failed check, or null when the node is eligible.
 *
 * Memory: a model the node reports loaded, or one this submitter already has a job for on the node,
 * needs nothing more. Otherwise the model's size (see `modelMemoryBytes`) must fit in
 * free − reserved − (sizes of the not-loaded models this submitter's outstanding jobs reserve there).
 * A model of unknown size passes.
 */
export function checkNode(
  node: FleetNode,
  job: JobRequirements,
  now: number,
  context: {
    fleet: readonly FleetNode[];
    outstanding?: OutstandingByNode | undefined;
    exclude?: ReadonlySet<string> | undefined;
    options: EligibilityOptions;
  },
): Rejection | null {
  const { advert } = node;
  const model = servedModel(advert.models, job.model);
  if (!model) return { code: 'model', detail: `does not serve model ${job.model}` };
  if (!holdsOrFetches(node, job.workspaceId))
    return { code: 'workspace', detail: `does not hold workspace ${job.workspaceId}` };
  if (!advert.sandbox.ok) {
    const why = advert.sandbox.detail ? `: ${advert.sandbox.detail}` : '';
    return { code: 'sandbox', detail: `sandbox self-test failed (${advert.sandbox.backend})${why}` };
  }
  if (advert.load.capacity < 1) return { code: 'capacity', detail: 'advertises no job capacity' };
  if (context.exclude?.has(advert.peerId)) return { code: 'excluded', detail: 'excluded for this job' };
  if (context.options.coolingDown?.(advert.peerId, now))
    return { code: 'cooling-down', detail: 'cooling down after failures' };

  const mine = context.outstanding?.get(advert.peerId);
  if (model.loaded || mine?.models.includes(job.model)) return null;
  const need = modelMemoryBytes(job.model, model.memoryBytes, context.fleet, context.options);
  if (need === null) return null;
  let committed = 0;
  for (const other of mine?.models ?? []) {
    const served = servedModel(advert.models, other);
    if (!served || served.loaded) continue;
    committed += modelMemoryBytes(other, served.memoryBytes, context.fleet, context.options) ?? 0;
  }
  const headroom = advert.memory.free - advert.memory.reserved - committed;
  if (need > headroom)
    return {
      code: 'memory',
      detail: `needs ${formatBytes(need)} for model ${job.model}, has ${formatBytes(Math.max(0, headroom))} free`,
      needBytes: need,
      headroomBytes: headroom,
    };
  return null;
}

/** True when the node advertises it is fetching `workspaceId` and does not hold it yet. */
export function fetchingOnly(node: FleetNode, workspaceId: string): boolean {
  return (
    !node.advert.workspaces.includes(workspaceId) && (node.advert.fetching?.includes(workspaceId) ?? false)
  );
}

function holdsOrFetches(node: FleetNode, workspaceId: string): boolean {
  return node.advert.workspaces.includes(workspaceId) || fetchingOnly(node, workspaceId);
}

/** Splits `nodes` into the eligible ones (with the advertised model) and the refused ones (with reasons). */
export function eligibleNodes(
  nodes: readonly FleetNode[],
  job: JobRequirements,
  now: number,
  options: EligibilityOptions = {},
  extra: { outstanding?: OutstandingByNode | undefined; exclude?: ReadonlySet<string> | undefined } = {},
): EligibilityResult {
  const result: EligibilityResult = { eligible: [], rejected: [] };
  const context = { fleet: nodes, outstanding: extra.outstanding, exclude: extra.exclude, options };
  for (const node of nodes) {
    const rejection = checkNode(node, job, now, context);
    if (rejection) result.rejected.push({ peerId: node.advert.peerId, host: node.advert.host, rejection });
    else {
      const model = servedModel(node.advert.models, job.model)!;
      result.eligible.push({ node, model, fetching: fetchingOnly(node, job.workspaceId) });
    }
  }
  return result;
}

/**
 * One sentence saying why no node can take a job, for the submitter to print: the fleet-wide cause
 * when there is one ("no node serves model Y", "no node holds workspace X", "no node serving model Y
 * holds workspace X"), else each node's reason.
 */
export function explainNoEligible(job: JobRequirements, rejected: readonly RejectedNode[]): string {
  if (rejected.length === 0) return 'no nodes in the fleet view';
  const codes = new Set(rejected.map((r) => r.rejection.code));
  if (codes.size === 1 && codes.has('model')) return `no node serves model ${job.model}`;
  if ([...codes].every((c) => c === 'model' || c === 'workspace')) {
    const someLackModel = rejected.some((r) => r.rejection.code === 'model');
    // Nodes refused for the model were never checked for the workspace; say only what is known.
    return someLackModel
      ? `no node serving model ${job.model} holds workspace ${job.workspaceId}`
      : `no node holds workspace ${job.workspaceId}`;
  }
  const parts = rejected.map((r) => `${r.host ?? r.peerId}: ${r.rejection.detail}`);
  return `no eligible node for model ${job.model} and workspace ${job.workspaceId} (${parts.join('; ')})`;
}

function formatBytes(n: number): string {
  if (n >= 2 ** 30) return `${(n / 2 ** 30).toFixed(1)} GiB`;
  if (n >= 2 ** 20) return `${(n / 2 ** 20).toFixed(1)} MiB`;
  return `${n} B`;
}
