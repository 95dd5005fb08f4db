import { z } from 'zod';
import {
  type Certificate,
  type KeyChain,
  Nonce,
  PeerIdText,
  type Revocation,
  signCertificate,
  signRevocation,
  verifyKeyChain,
} from '../../protocol/membership.ts';
import { parseWith } from '../../protocol/parse.ts';
import { type DataDir, newPsk } from '../data-dir.ts';
import { logger } from '../logger.ts';
import { type Authority, loadAuthority, planRotation, selfCertificate } from './authority.ts';
import type { MembershipService } from './service.ts';
import type { MembershipState } from './state.ts';

/** What a fleet-key holder does to the fleet's membership: revoke, rotate. Each needs its running daemon. */

function requireAuthority(state: MembershipState): Authority {
  const authority = state.authority();
  if (!authority)
    throw new Error(
      'this node does not hold the fleet key: run this on the node that created the fleet (`vtnode init`)',
    );
  return authority;
}

export interface RevokeResult {
  /** The revocations signed (a peer's also revokes the invitation it was admitted with). */
  revoked: { kind: 'peer' | 'invitation'; id: string }[];
  /** Entries in the revocation list now (its version). */
  version: number;
}

/**
 * Revokes a member by peer id (and the invitation it joined with, so its token cannot admit it again
 * under a new identity) or an invitation by nonce; gossips the revocations and disconnects the member.
 */
export async function revoke(
  state: MembershipState,
  service: MembershipService,
  id: string,
): Promise<RevokeResult> {
  const authority = requireAuthority(state);
  const kind = PeerIdText.safeParse(id).success ? 'peer' : Nonce.safeParse(id).success ? 'invitation' : null;
  if (!kind) throw new Error(`${id}: neither a peer id nor an invitation nonce (32 hex digits)`);
  if (id === state.peerId) throw new Error('a node cannot revoke itself');
  const chain = state.chain();
  const now = Date.now();
  const sign = (k: 'peer' | 'invitation', subject: string) =>
    signRevocation(authority.key(chain.current), {
      fleet: chain.fleet,
      gen: chain.current,
      kind: k,
      id: subject,
      at: now,
    });
  const entries: Revocation[] = [await sign(kind, id)];
  const invitation = kind === 'peer' ? state.certificateOf(id)?.invitation : null;
  if (invitation) entries.push(await sign('invitation', invitation));
  await service.publishRevocations(entries);
  return { revoked: entries.map((e) => ({ kind: e.kind, id: e.id })), version: state.revocations().length };
}

/** The body of the control channel's `POST /members/revoke`. */
export const RevokeRequest = z.object({
  /** A peer id, or an invitation nonce. */
  id: z.string().min(1).max(128),
});

/** The body of the control channel's `POST /members/rotate`. */
export const RotateRequest = z.object({
  /** Replace the signing key with a new generation. */
  signingKey: z.boolean(),
  /** Replace the pre-shared key. */
  psk: z.boolean(),
  /** Time from now to the switch, ms: members must receive the order before it. */
  switchInMs: z
    .number()
    .int()
    .min(1000)
    .max(7 * 24 * 3_600_000),
});
export type RotateOptions = z.infer<typeof RotateRequest>;

/** Parses a control request body; errors name the route and field. */
export function controlBody<S extends z.ZodType>(schema: S, body: unknown, route: string): z.output<S> {
  return parseWith(schema, body ?? {}, route);
}

export interface RotateResult {
  /** When every node switches, ms since epoch. */
  switchAt: number;
  /** Key generation after the switch. */
  gen: number;
  psk: boolean;
  /** Members that acknowledged the order. */
  reached: string[];
  /** Members connected but not reached (they must rejoin with a new token after the switch). */
  missed: { peer: string; reason: string }[];
}

/**
 * Rotates the fleet's keys without losing its members: a re-key order (signed by the current key)
 * with the new pre-shared key and/or new key generation goes over the authenticated mesh to every
 * connected member, each with its certificate under the new generation; members reached later
 * (before the switch) get it when they connect; at `switchAt` every node that holds it switches.
 */
export async function rotate(
  dataDir: DataDir,
  state: MembershipState,
  service: MembershipService,
  options: RotateOptions,
): Promise<RotateResult> {
  const log = logger('vtnode:members');
  requireAuthority(state);
  if (!options.signingKey && !options.psk)
    throw new Error('nothing to rotate: keep neither the signing key nor the pre-shared key');
  const pending = state.pendingRekey();
  if (pending)
    throw new Error(
      `a rotation is already under way (switch at ${new Date(pending.rekey.switchAt).toISOString()})`,
    );
  const now = Date.now();
  const switchAt = now + options.switchInMs;
  const chain = state.chain();
  const plan = await planRotation(dataDir, chain, {
    signingKey: options.signingKey,
    psk: options.psk ? newPsk() : null,
    switchAt,
    now,
  });
  const fresh = (await loadAuthority(dataDir))!;
  const next: KeyChain = plan.key ? await verifyKeyChain([...chain.records, plan.key], chain.fleet) : chain;
  const certFor = async (peer: string): Promise<Certificate | null> => {
    const current = state.certificateOf(peer);
    if (!plan.key || !current) return null;
    const cert = await signCertificate(fresh.key(next.current), {
      fleet: next.fleet,
      gen: next.current,
      peerId: peer,
      roles: current.roles,
      iat: now,
      exp: Date.now() + fresh.certTtlMs,
      invitation: current.invitation,
    });
    state.remember(cert);
    return cert;
  };
  await state.stageRekey({
    rekey: plan.rekey,
    cert: plan.key ? await selfCertificate(fresh, next, state.peerId, now) : null,
  });

  const reached = new Set<string>();
  const missed = new Map<string, string>();
  const deliver = async (peer: string) => {
    if (reached.has(peer) || state.pendingRekey()?.rekey.sig !== plan.rekey.sig) return;
    try {
      const reply = await service.pushRekey(peer, {
        v: 1,
        type: 'rekey',
        rekey: plan.rekey,
        cert: await certFor(peer),
      });
      if (reply.type === 'ack') {
        reached.add(peer);
        missed.delete(peer);
      } else missed.set(peer, reply.reason);
    } catch (err) {
      missed.set(peer, (err as Error).message);
    }
  };
  await Promise.all(service.connectedMembers().map(deliver));
  // Members that connect (or reconnect) before the switch get the order too.
  service.onMember((peer) => void deliver(peer));
  service.scheduleSwitch();
  log.warn(
    `rotation: switching at ${new Date(switchAt).toISOString()}; ${reached.size} member(s) reached, ${missed.size} not`,
  );
  return {
    switchAt,
    gen: next.current,
    psk: options.psk,
    reached: [...reached],
    missed: [...missed].map(([peer, reason]) => ({ peer, reason })),
  };
}
