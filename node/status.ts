import type { FleetNode } from '../placement/fleet-view.ts';
import type { AdvertModel } from '../protocol/advert.ts';
import type { OriginTrust } from './collector/trust.ts';

/** One row of `vtnode status --json` (documented in the README: later tools rely on it). */
export interface NodeStatus {
  peerId: string;
  /** Last 8 characters of the peer id. */
  shortId: string;
  self: boolean;
  host: string | null;
  addrs: string[];
  version: string;
  roles: string[];
  models: AdvertModel[];
  memory: { total: number; free: number; reserved: number };
  load: { queued: number; running: number; capacity: number };
  /** Present while the node takes no new jobs (a guest on battery or under load): why. */
  paused?: string;
  warm: number;
  workspaces: string[];
  /** Workspaces the node is fetching and installing (--fetch-workspaces); absent when none. */
  fetching?: string[];
  sandbox: { backend: string; ok: boolean; detail?: string };
  seq: number;
  /** The node's clock when it sent its newest advert, ms since epoch (doctor's clock-skew check). */
  sentAt: number;
  /** Milliseconds since the node's newest advert arrived (0 for the node itself when just published). */
  lastSeenMs: number;
}

export interface FleetStatus {
  fleet: string;
  self: string;
  nodes: NodeStatus[];
  /** Present while this node's worker cannot log samples (a full disk, a broken sample log): why. */
  storage?: string;
  /** This node's guest manners (`--pause-on-battery`, `--max-load`), when it runs a worker. */
  guest?: {
    /** Why it takes no new jobs now, or null. */
    paused: string | null;
    /** When the current pause began, ms since epoch, or null. */
    since: number | null;
    /** Jobs accepted since the node started. */
    accepted: number;
    /** Jobs accepted when the current pause began, or null. */
    acceptedAtPause: number | null;
  };
  /** Present on a collector node: its dataset, counts and trust per origin (node/collector/node.ts). */
  collector?: {
    dataset: string;
    contentDigest: string;
    /** Per origin: its record (samples, audits, rejected bodies, conflicts), trust and whether it is suspect. */
    trust: OriginTrust[];
    /** Present while the dataset's disk is full: why. */
    storage?: string;
  };
}

export function shortPeerId(peerId: string): string {
  return peerId.slice(-8);
}

export function nodeStatus(node: FleetNode, now: number): NodeStatus {
  const a = node.advert;
  return {
    peerId: a.peerId,
    shortId: shortPeerId(a.peerId),
    self: node.self,
    host: a.host,
    addrs: a.addrs,
    version: a.version,
    roles: a.roles,
    models: a.models,
    memory: a.memory,
    load: a.load,
    ...(a.paused ? { paused: a.paused } : {}),
    warm: a.warm.length,
    workspaces: a.workspaces,
    ...(a.fetching?.length ? { fetching: a.fetching } : {}),
    sandbox: a.sandbox,
    seq: a.seq,
    sentAt: a.sentAt,
    lastSeenMs: Math.max(0, now - node.receivedAt),
  };
}
