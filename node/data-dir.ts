import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { generateKeyPair, privateKeyFromProtobuf, privateKeyToProtobuf } from '@libp2p/crypto/keys';
import type { PrivateKey } from '@libp2p/interface';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { z } from 'zod';
import { FleetId, Psk } from '../protocol/fleet-id.ts';
import { FleetKey, Invitation } from '../protocol/membership.ts';
import { parseJsonWith } from '../protocol/parse.ts';
import { storageErrorOf } from './storage/errors.ts';

/** Where a node keeps its state: --data-dir, else $VTNODE_HOME, else ~/.vtnode. */
export function resolveDataDir(flag?: string): string {
  return resolve(flag ?? process.env['VTNODE_HOME'] ?? join(homedir(), '.vtnode'));
}

export const FleetFile = z.object({
  /** Fleet id. */
  fleet: FleetId,
  /** Pre-shared key (hex). */
  psk: Psk,
  /** Bootstrap addresses from the token this node joined with (empty for the node that ran init). */
  bootstrap: z.array(z.string()),
  /** When the data dir was initialised or joined, ms since epoch. */
  since: z.number().int(),
  /** The fleet's signing key chain (generation 1 first), as this node last verified it. */
  keys: z.array(FleetKey).default([]),
  /** The invitation this node joined with: exchanged for a certificate, kept for the record. */
  invitation: Invitation.nullable().default(null),
  /** Issue time of the last re-key order applied (a re-key order must be newer), ms since epoch. */
  rekeyedAt: z.number().int().min(0).default(0),
});
export type FleetFile = z.infer<typeof FleetFile>;

export const NodeConfig = z.object({
  /** Multiaddrs to listen on. */
  listen: z.array(z.string()).default([]),
  /** Multiaddrs to put in join tokens instead of the listen addresses. */
  announce: z.array(z.string()).default([]),
  /** Discover peers on the LAN by mDNS. */
  mdns: z.boolean().default(false),
  /** Withhold the host name from adverts. */
  privateHost: z.boolean().default(false),
  /** OpenAI-compatible model server base URLs; empty = auto-detect local servers. */
  modelServers: z.array(z.string()).default([]),
  /** Workspaces (built checkouts) this node scores against. */
  workspaces: z.array(z.string()).default([]),
  /** Advert interval, ms. */
  advertIntervalMs: z.number().int().min(200).default(5000),
  /** Run candidates without the sandbox (trusted input only). */
  unconfined: z.boolean().default(false),
  /** Jobs (k samples of one task each) the node runs at once. */
  maxJobs: z.number().int().min(1).max(64).default(2),
  /** A guest's manners: take no new jobs while the machine runs on battery. */
  pauseOnBattery: z.boolean().default(false),
  /** A guest's manners: take no new jobs while the 1-minute load average is above this; null = no limit. */
  maxLoad: z.number().positive().max(10_000).nullable().default(null),
  /** A guest's manners: take no new jobs while the owner used keyboard or mouse within this many ms (macOS); null = off. */
  pauseWhileUsedMs: z.number().int().min(1000).nullable().default(null),
  /** Fetch, install and serve the workspaces the fleet's other nodes advertise (docs/workspaces.md). */
  fetchWorkspaces: z.boolean().default(false),
});
export type NodeConfig = z.infer<typeof NodeConfig>;

export const StateFile = z.object({
  /** How many times the node has started: the high part of advert sequence numbers. */
  boots: z.number().int().min(0),
  /** Addresses of peers seen, to dial again after a restart. */
  peers: z.record(z.string(), z.array(z.string())).default({}),
});
export type StateFile = z.infer<typeof StateFile>;

export const ControlFile = z.object({
  /** Loopback port of the running daemon's control server. */
  port: z.number().int().min(1).max(65535),
  /** Bearer token a client must present. */
  token: z.string().min(32),
  /** Daemon process id. */
  pid: z.number().int().positive(),
});
export type ControlFile = z.infer<typeof ControlFile>;

/** Writes a file atomically (temp file + rename), readable by the owner only. */
export async function writePrivate(path: string, data: string | Uint8Array): Promise<void> {
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    await writeFile(tmp, data, { mode: 0o600 });
    await rename(tmp, path);
  } catch (err) {
    // A full disk leaves a partial temp file; and fs errors of writes do not name the file.
    await rm(tmp, { force: true }).catch(() => {});
    throw storageErrorOf(path, 'a node file', err);
  }
}

async function readOptional(path: string): Promise<string | null> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** The files of one node's data dir. */
export class DataDir {
  readonly root: string;
  constructor(root: string) {
    this.root = root;
  }
  path(name: string): string {
    return join(this.root, name);
  }

  /** 0700, or 0711 once allowTraversal was called (a root node's sandbox reads fetched workspaces). */
  private mode = 0o700;

  async ensure(): Promise<void> {
    await mkdir(this.root, { recursive: true, mode: this.mode });
    await chmod(this.root, this.mode);
  }

  /** Lets other uids pass through (never list) the data dir from now on: 0711, kept by ensure(). */
  async allowTraversal(): Promise<void> {
    this.mode = 0o711;
    await this.ensure();
  }

  /** The node's persistent identity; created on first use, so the peer id survives restarts. */
  async identity(): Promise<{ privateKey: PrivateKey; peerId: string }> {
    const file = this.path('identity.key');
    let bytes: Uint8Array | null = null;
    try {
      bytes = await readFile(file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    let privateKey: PrivateKey;
    if (bytes) {
      try {
        privateKey = privateKeyFromProtobuf(bytes);
      } catch (err) {
        throw new Error(`${file}: not a libp2p private key (${(err as Error).message})`);
      }
    } else {
      await this.ensure();
      privateKey = await generateKeyPair('Ed25519');
      await writePrivate(file, privateKeyToProtobuf(privateKey));
    }
    return { privateKey, peerId: peerIdFromPrivateKey(privateKey).toString() };
  }

  async readFleet(): Promise<FleetFile | null> {
    const text = await readOptional(this.path('fleet.json'));
    return text === null ? null : parseJsonWith(FleetFile, text, this.path('fleet.json'));
  }
  async writeFleet(fleet: FleetFile): Promise<void> {
    await this.ensure();
    await writePrivate(this.path('fleet.json'), `${JSON.stringify(fleet, null, 2)}\n`);
  }

  async readConfig(): Promise<NodeConfig> {
    const text = await readOptional(this.path('config.json'));
    return parseJsonWith(NodeConfig, text ?? '{}', this.path('config.json'));
  }
  async writeConfig(config: NodeConfig): Promise<void> {
    await this.ensure();
    await writePrivate(this.path('config.json'), `${JSON.stringify(config, null, 2)}\n`);
  }

  async readState(): Promise<StateFile> {
    const text = await readOptional(this.path('state.json'));
    return parseJsonWith(StateFile, text ?? '{"boots":0}', this.path('state.json'));
  }
  async writeState(state: StateFile): Promise<void> {
    await writePrivate(this.path('state.json'), `${JSON.stringify(state)}\n`);
  }

  async readControl(): Promise<ControlFile | null> {
    const text = await readOptional(this.path('control.json'));
    return text === null ? null : parseJsonWith(ControlFile, text, this.path('control.json'));
  }
}

/** The libp2p pnet key file text for a hex PSK. */
export function pnetKey(pskHex: string): Uint8Array {
  return new TextEncoder().encode(`/key/swarm/psk/1.0.0/\n/base16/\n${pskHex}`);
}

export function newPsk(): string {
  return randomBytes(32).toString('hex');
}
