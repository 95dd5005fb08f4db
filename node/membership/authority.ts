import { randomBytes } from 'node:crypto';
import { generateKeyPair } from '@libp2p/crypto/keys';
import type { PrivateKey } from '@libp2p/interface';
import {
  type Certificate,
  type FleetKey,
  genesisKey,
  type InvitableRole,
  type Invitation,
  type KeyChain,
  type Rekey,
  signCertificate,
  signInvitation,
  signRekey,
  successorKey,
} from '../../protocol/membership.ts';
import type { DataDir } from '../data-dir.ts';
import { encodePrivateKey, FILES, type FleetKeyFile, fleetPrivateKey, membershipFiles } from './files.ts';

/** Default lifetime of a membership certificate (renewed automatically when a third is left). */
export const DEFAULT_CERT_TTL_MS = 30 * 24 * 3_600_000;

/** What a node holding the fleet signing key can sign. */
export interface Authority {
  /** Lifetime of the certificates it issues, ms. */
  readonly certTtlMs: number;
  /** The private key of generation `gen`; throws if this node does not hold it. */
  key(gen: number): PrivateKey;
  /** Generations held. */
  gens(): number[];
}

function authorityOf(file: FleetKeyFile, path: string): Authority {
  const cache = new Map<number, PrivateKey>();
  return {
    certTtlMs: file.certTtlMs,
    key(gen) {
      let key = cache.get(gen);
      if (!key) {
        key = fleetPrivateKey(file, gen, path);
        cache.set(gen, key);
      }
      return key;
    },
    gens: () => file.keys.map((k) => k.gen),
  };
}

/** The fleet key holder's authority from `fleet-key.json`, or null when this node does not hold the key. */
export async function loadAuthority(dataDir: DataDir): Promise<Authority | null> {
  const file = await membershipFiles(dataDir).readFleetKey();
  return file ? authorityOf(file, dataDir.path(FILES.fleetKey)) : null;
}

/** Creates a fleet's signing key (generation 1), saved in `fleet-key.json`; returns the key chain to publish. */
export async function foundFleet(
  dataDir: DataDir,
  fleet: string,
  options: { certTtlMs: number; now: number },
): Promise<FleetKey[]> {
  const key = await generateKeyPair('Ed25519');
  await membershipFiles(dataDir).writeFleetKey({
    keys: [{ gen: 1, privateKey: encodePrivateKey(key) }],
    certTtlMs: options.certTtlMs,
  });
  return [await genesisKey(key, fleet, options.now)];
}

/** A fresh invitation signed by the current fleet key. */
export function invite(
  authority: Authority,
  chain: KeyChain,
  options: { roles: InvitableRole[]; ttlMs: number; now: number },
): Promise<Invitation> {
  return signInvitation(authority.key(chain.current), {
    fleet: chain.fleet,
    gen: chain.current,
    roles: options.roles,
    iat: options.now,
    exp: options.now + options.ttlMs,
    nonce: randomBytes(16).toString('hex'),
  });
}

/** The certificate a fleet-key holder gives itself: every role, admin included. */
export function selfCertificate(
  authority: Authority,
  chain: KeyChain,
  peerId: string,
  now: number,
): Promise<Certificate> {
  return signCertificate(authority.key(chain.current), {
    fleet: chain.fleet,
    gen: chain.current,
    peerId,
    roles: ['worker', 'submitter', 'collector', 'admin'],
    iat: now,
    exp: now + authority.certTtlMs,
    invitation: null,
  });
}

export interface RotationPlan {
  /** The signed order every member receives. */
  rekey: Rekey;
  /** The new generation's key record, or null when the signing key stays. */
  key: FleetKey | null;
}

/**
 * Prepares a rotation: a new signing key generation (saved in `fleet-key.json` beside the current
 * one before anything is sent, so a crash cannot lose it) and/or a new pre-shared key, in a re-key
 * order signed by the current generation.
 */
export async function planRotation(
  dataDir: DataDir,
  chain: KeyChain,
  options: { signingKey: boolean; psk: string | null; switchAt: number; now: number },
): Promise<RotationPlan> {
  const files = membershipFiles(dataDir);
  const file = await files.readFleetKey();
  if (!file) throw new Error('this node does not hold the fleet key');
  const current = authorityOf(file, dataDir.path(FILES.fleetKey)).key(chain.current);
  let key: FleetKey | null = null;
  if (options.signingKey) {
    const next = await generateKeyPair('Ed25519');
    const gen = chain.current + 1;
    await files.writeFleetKey({
      ...file,
      keys: [...file.keys.filter((k) => k.gen <= chain.current), { gen, privateKey: encodePrivateKey(next) }],
    });
    key = await successorKey(current, next, { fleet: chain.fleet, gen, now: options.now });
  }
  const rekey = await signRekey(current, {
    fleet: chain.fleet,
    gen: chain.current,
    key,
    psk: options.psk,
    switchAt: options.switchAt,
    iat: options.now,
  });
  return { rekey, key };
}

/** After a switch to generation `gen`: drops the older private keys from `fleet-key.json`. */
export async function retireOldKeys(dataDir: DataDir, gen: number): Promise<void> {
  const files = membershipFiles(dataDir);
  const file = await files.readFleetKey();
  if (file) await files.writeFleetKey({ ...file, keys: file.keys.filter((k) => k.gen >= gen) });
}
