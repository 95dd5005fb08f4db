import type { PeerId } from '@libp2p/interface';
import { TopicValidatorResult } from '@libp2p/interface';
import { peerIdFromString } from '@libp2p/peer-id';
import { canonicalJson } from '../../protocol/canonical.ts';
import {
  type AdmitReply,
  AdmitReply as AdmitReplySchema,
  AdmitRequest,
  admissionFor,
  Hello,
  type MemberRole,
  MembershipError,
  type MembershipErrorCode,
  RekeyPush,
  type RekeyReply,
  RekeyReply as RekeyReplySchema,
  type Revocation,
  renewalDue,
  renewalFor,
  signCertificate,
  verifyCertificate,
  verifyRevocation,
} from '../../protocol/membership.ts';
import { ParseError, parseJsonWith } from '../../protocol/parse.ts';
import {
  ADMIT_PROTOCOL,
  JOB_PROTOCOL,
  LOG_PROTOCOL,
  MEMBER_PROTOCOL,
  REKEY_PROTOCOL,
  revocationTopic,
  SAMPLE_PROTOCOL,
  TASK_PROTOCOL,
} from '../../protocol/topics.ts';
import { sleep } from '../async/sleep.ts';
import type { Host } from '../fleet/host.ts';
import { logger } from '../logger.ts';
import { installStreamGate, type StreamGate } from '../wire/gate.ts';
import { dialFramed, handleFramed } from '../wire/streams.ts';
import { selfCertificate } from './authority.ts';
import type { MemberRow, MembershipState, Standing } from './state.ts';

/** Default time a connected peer has to show a valid certificate before it is disconnected, ms. */
export const DEFAULT_GRACE_MS = 10_000;
/** Application gossip score of a peer without a valid certificate: below the publish and gossip thresholds. */
export const NON_MEMBER_SCORE = -60;
const HELLO_FRAME_BYTES = 1024 * 1024;
const HELLO_TIMEOUT_MS = 10_000;

/** The role a peer needs to open a stream of a protocol to us (inbound), or for us to open one to it. */
const INBOUND_ROLE: Record<string, MemberRole> = {
  [JOB_PROTOCOL]: 'submitter',
  [SAMPLE_PROTOCOL]: 'collector',
  [LOG_PROTOCOL]: 'collector',
  [TASK_PROTOCOL]: 'collector',
};
const OUTBOUND_ROLE: Record<string, MemberRole> = { [JOB_PROTOCOL]: 'worker' };

/** Verification failures that are the record's fault (others may be clock or rotation skew). */
const DEFINITE: ReadonlySet<MembershipErrorCode> = new Set([
  'malformed',
  'fleet',
  'chain',
  'signature',
  'revoked',
  'peer',
  'role',
]);

export type Verdict = 'accept' | 'ignore' | 'reject';

/** What the gossip validators ask of membership. */
export interface OriginCheck {
  /**
   * May gossip signed by `origin` be accepted? A certificate the message carries (adverts do) is
   * verified and remembered first. `reject` for a forged or revoked one, `ignore` while unknown.
   */
  origin(
    origin: string,
    options?: { role?: MemberRole; cert?: unknown },
  ): Promise<{ verdict: Verdict; reason: string }>;
}

export interface MembershipServiceOptions {
  /** The started libp2p host (created with the state's psk, denyPeer and peerScore). */
  host: Host;
  /** The node's membership state. */
  state: MembershipState;
  /** Time a connected peer has to show a valid certificate before it is disconnected, ms. */
  graceMs?: number;
  /** Called when this node cannot become a member (a fleet-key holder refused its invitation). */
  onFatal?: (err: Error) => void;
  /** Called when this node's certificate changes (its adverts carry it). */
  onCertificate?: () => void;
}

export interface MembershipService extends StreamGate, OriginCheck {
  /** This node's certificate, or null while it waits for admission. */
  certificate(): ReturnType<MembershipState['own']>;
  /** Every member known, with whether it is connected now. */
  members(): (MemberRow & { connected: boolean })[];
  /** Publishes revocations this node signed and disconnects their subjects. */
  publishRevocations(entries: Revocation[]): Promise<Revocation[]>;
  /** Connected peers holding a valid certificate. */
  connectedMembers(): string[];
  /** Sends a re-key order to one member; resolves to its answer. */
  pushRekey(peer: string, push: RekeyPush): Promise<RekeyReply>;
  /** Arms the switch to the pending re-key order at its switch time. */
  scheduleSwitch(): void;
  /** Called with every peer that becomes a verified member (the rotation reaches latecomers so). */
  onMember(fn: (peer: string) => void): void;
  stop(): Promise<void>;
}

export function standingReason(s: Standing): string {
  switch (s) {
    case 'unknown':
      return 'no valid membership certificate';
    case 'revoked':
      return 'revoked';
    case 'expired':
      return 'its certificate expired';
    case 'old-generation':
      return 'its certificate is from a replaced fleet key';
    case 'role':
      return 'its certificate does not grant the role';
    default:
      return 'a member';
  }
}

/**
 * Membership on the network: the certificate exchange right after connecting (/vtnode/member/1),
 * admission and renewal (/vtnode/admit/1), re-key orders (/vtnode/rekey/1), the revocation topic,
 * the stream gate every vtnode protocol passes, and the grace timer that disconnects a peer that
 * shows no valid certificate.
 */
export async function startMembershipService(options: MembershipServiceOptions): Promise<MembershipService> {
  const log = logger('vtnode:members');
  const { host, state } = options;
  const graceMs = options.graceMs ?? DEFAULT_GRACE_MS;
  const self = state.peerId;
  const topic = revocationTopic(state.fleetId);
  const pubsub = host.services.pubsub;
  const graceTimers = new Map<string, NodeJS.Timeout>();
  const waiters = new Set<() => void>();
  const memberListeners: ((peer: string) => void)[] = [];
  let stopped = false;
  let admitting = false;
  let renewing = 0;
  let switchTimer: NodeJS.Timeout | null = null;
  let flushTicks = 0;

  const connected = (peer: string) => host.getConnections(peerIdFromString(peer)).length > 0;
  const connectedPeers = () => [...new Set(host.getConnections().map((c) => c.remotePeer.toString()))];

  /** Wakes everything waiting on a standing, and tells listeners about new members. */
  const changed = (peer?: string) => {
    for (const w of [...waiters]) w();
    waiters.clear();
    if (peer && state.standing(peer) === 'member') {
      clearGrace(peer);
      for (const fn of memberListeners) fn(peer);
    }
  };
  const nextChange = (ms: number, signal?: AbortSignal) =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener('abort', done, { once: true });
      waiters.add(done);
    });

  function clearGrace(peer: string) {
    const t = graceTimers.get(peer);
    if (t) clearTimeout(t);
    graceTimers.delete(peer);
  }

  function disconnect(peer: string, why: string) {
    clearGrace(peer);
    if (!connected(peer)) return;
    log.warn(`disconnecting ${peer}: ${why}`);
    host
      .hangUp(peerIdFromString(peer))
      .catch((err: Error) => log('hanging up on %s failed: %s', peer, err.message));
  }

  /** Starts the grace period of a connected peer that is not (or no longer) a member. */
  function watch(peer: string) {
    if (stopped || peer === self || graceTimers.has(peer)) return;
    const standing = state.standing(peer);
    if (standing === 'member') return;
    if (standing === 'revoked') return disconnect(peer, 'revoked');
    graceTimers.set(
      peer,
      setTimeout(() => {
        graceTimers.delete(peer);
        const now = state.standing(peer);
        if (now !== 'member') disconnect(peer, `${standingReason(now)} within ${graceMs} ms of connecting`);
      }, graceMs),
    );
  }

  // ── certificate exchange ──
  const myHello = (): Hello => ({ v: 1, type: 'hello', cert: state.own(), revocations: state.revocations() });

  async function receiveHello(hello: Hello, from: string): Promise<void> {
    await addRevocations(hello.revocations);
    if (hello.cert) {
      try {
        await state.accept(hello.cert, from);
      } catch (err) {
        log.warn(`certificate from ${from} refused: ${(err as Error).message}`);
      }
    }
    changed(from);
    watch(from);
    if (!state.own() && state.fleet().invitation && state.standing(from, 'admin') === 'member')
      void requestAdmission(from);
  }

  async function hello(peer: string): Promise<void> {
    const signal = AbortSignal.timeout(HELLO_TIMEOUT_MS);
    const wire = await dialFramed<typeof Hello, Hello>(host, peerIdFromString(peer), MEMBER_PROTOCOL, {
      schema: Hello,
      maxFrameBytes: HELLO_FRAME_BYTES,
      ungated: true,
      signal,
    });
    try {
      await wire.send(myHello());
      const reply = await wire.expect('a hello', { signal });
      await wire.close();
      await receiveHello(reply, peer);
    } catch (err) {
      wire.abort(err as Error);
      throw err;
    }
  }

  /** Hellos a peer, retrying a few times while it stays connected. */
  async function greet(peer: string): Promise<void> {
    for (let attempt = 1; attempt <= 3 && !stopped && connected(peer); attempt++) {
      try {
        await hello(peer);
        return;
      } catch (err) {
        log('hello to %s failed (attempt %d): %s', peer, attempt, (err as Error).message);
        await sleep(1000);
      }
    }
  }
  const greetAll = () => {
    for (const peer of connectedPeers()) void greet(peer);
  };

  // ── admission and renewal ──
  async function ask(peer: string, request: AdmitRequest): Promise<AdmitReply> {
    const signal = AbortSignal.timeout(HELLO_TIMEOUT_MS);
    const wire = await dialFramed<typeof AdmitReplySchema, AdmitRequest>(
      host,
      peerIdFromString(peer),
      ADMIT_PROTOCOL,
      { schema: AdmitReplySchema, ungated: true, signal },
    );
    try {
      await wire.send(request);
      const reply = await wire.expect('an admission reply', { signal });
      await wire.close();
      return reply;
    } catch (err) {
      wire.abort(err as Error);
      throw err;
    }
  }

  async function takeCertificate(reply: AdmitReply & { type: 'certificate' }, from: string): Promise<void> {
    const cert = await verifyCertificate(reply.cert, state.context(), { peerId: self });
    await state.setOwn(cert);
    log(
      'certificate from %s: roles %s, valid until %s',
      from,
      cert.roles.join(','),
      new Date(cert.exp).toISOString(),
    );
    options.onCertificate?.();
    changed(self);
    greetAll();
  }

  async function requestAdmission(admin: string): Promise<void> {
    const invitation = state.fleet().invitation;
    if (admitting || !invitation || state.own()) return;
    admitting = true;
    try {
      const reply = await ask(admin, { v: 1, type: 'join', invitation });
      if (reply.type === 'certificate') return await takeCertificate(reply, admin);
      if (reply.code === 'not-admin') return;
      const err = new Error(`the fleet refused this node's invitation (${reply.code}): ${reply.reason}`);
      log.error(err.message);
      options.onFatal?.(err);
    } catch (err) {
      log.warn(`admission through ${admin} failed: ${(err as Error).message}`);
    } finally {
      admitting = false;
    }
  }

  async function answerAdmission(request: AdmitRequest, peer: string): Promise<AdmitReply> {
    const authority = state.authority();
    if (!authority)
      return { v: 1, type: 'refused', code: 'not-admin', reason: 'this node does not hold the fleet key' };
    const ctx = state.context();
    try {
      const fields =
        request.type === 'join'
          ? await admissionFor(request.invitation, peer, ctx, authority.certTtlMs)
          : await renewalFor(state.certificateOf(peer), peer, ctx, authority.certTtlMs);
      const cert = await signCertificate(authority.key(ctx.chain.current), fields);
      state.remember(cert);
      changed(peer);
      log(
        '%s %s (roles %s, invitation %s)',
        request.type === 'join' ? 'admitted' : 'renewed',
        peer,
        cert.roles.join(','),
        cert.invitation ?? '-',
      );
      return { v: 1, type: 'certificate', cert };
    } catch (err) {
      if (!(err instanceof MembershipError)) throw err;
      log.warn(`refused ${request.type} from ${peer}: ${err.message}`);
      return { v: 1, type: 'refused', code: err.code, reason: err.message };
    }
  }

  /** Renews this node's certificate when a third of its lifetime is left (a fleet-key holder signs its own). */
  async function renewIfDue(): Promise<void> {
    const own = state.own();
    const authority = state.authority();
    const now = Date.now();
    if (authority && (!own || own.gen !== state.chain().current || renewalDue(own, now))) {
      await state.setOwn(await selfCertificate(authority, state.chain(), self, now));
      options.onCertificate?.();
      return greetAll();
    }
    if (!own || !renewalDue(own, now) || now < renewing) return;
    renewing = now + 5000;
    for (const peer of connectedPeers()) {
      if (state.standing(peer, 'admin') !== 'member') continue;
      try {
        const reply = await ask(peer, { v: 1, type: 'renew' });
        if (reply.type === 'certificate') return await takeCertificate(reply, peer);
        log.warn(`renewal refused by ${peer}: ${reply.reason}`);
      } catch (err) {
        log.warn(`renewal through ${peer} failed: ${(err as Error).message}`);
      }
    }
  }

  // ── revocations ──
  async function addRevocations(values: readonly unknown[]): Promise<Revocation[]> {
    const added = await state.addRevocations(values);
    for (const r of added) {
      log.warn(`revoked ${r.kind} ${r.id}`);
      if (r.kind === 'peer') disconnect(r.id, 'revoked');
    }
    if (added.length > 0) changed();
    return added;
  }

  async function publishRevocations(entries: Revocation[]): Promise<Revocation[]> {
    const added = await addRevocations(entries);
    for (const r of entries) {
      try {
        await pubsub.publish(topic, new TextEncoder().encode(JSON.stringify(r)));
      } catch (err) {
        // Hellos carry the whole list: a member that misses the gossip catches up on its next connection.
        log.warn(`publishing the revocation of ${r.id} failed: ${(err as Error).message}`);
      }
    }
    // Connected members get the whole list now rather than at their next connection.
    greetAll();
    return added;
  }

  const decodeRevocation = (data: Uint8Array, from: string) =>
    parseJsonWith(Hello.shape.revocations.element, new TextDecoder().decode(data), `revocation from ${from}`);

  pubsub.topicValidators.set(topic, async (_from: PeerId, msg) => {
    if (msg.type !== 'signed') return TopicValidatorResult.Reject;
    try {
      await verifyRevocation(decodeRevocation(msg.data, msg.from.toString()), state.context());
      return TopicValidatorResult.Accept;
    } catch (err) {
      if (err instanceof ParseError || err instanceof MembershipError) {
        log.warn(`rejected a revocation: ${err.message}`);
        return TopicValidatorResult.Reject;
      }
      throw err;
    }
  });
  const onMessage = (evt: CustomEvent) => {
    const msg = evt.detail as { topic: string; type: string; data: Uint8Array; from?: PeerId };
    if (msg.topic !== topic || msg.type !== 'signed' || !msg.from) return;
    void addRevocations([decodeRevocation(msg.data, msg.from.toString())]).catch((err: Error) =>
      log.warn(`revocation not applied: ${err.message}`),
    );
  };
  pubsub.addEventListener('message', onMessage);
  pubsub.subscribe(topic);

  // ── re-keying ──
  async function pushRekey(peer: string, push: RekeyPush): Promise<RekeyReply> {
    const signal = AbortSignal.timeout(HELLO_TIMEOUT_MS);
    const wire = await dialFramed<typeof RekeyReplySchema, RekeyPush>(
      host,
      peerIdFromString(peer),
      REKEY_PROTOCOL,
      {
        schema: RekeyReplySchema,
        signal,
      },
    );
    try {
      await wire.send(push);
      const reply = await wire.expect('a rekey answer', { signal });
      await wire.close();
      return reply;
    } catch (err) {
      wire.abort(err as Error);
      throw err;
    }
  }

  async function switchKeys(): Promise<void> {
    switchTimer = null;
    if (stopped || !state.pendingRekey()) return;
    const changes = await state.applyRekey();
    log.warn(
      `switched to ${changes.key ? `fleet key generation ${state.chain().current}` : 'the same fleet key'}` +
        `${changes.psk ? ' and a new pre-shared key (new connections use it)' : ''}`,
    );
    options.onCertificate?.();
    changed();
    greetAll();
    for (const peer of connectedPeers()) watch(peer);
  }

  function scheduleSwitch(): void {
    const pending = state.pendingRekey();
    if (!pending || stopped) return;
    if (switchTimer) clearTimeout(switchTimer);
    switchTimer = setTimeout(
      () => void switchKeys().catch((err: Error) => log.error('switching keys failed', err)),
      Math.max(0, pending.rekey.switchAt - Date.now()),
    );
  }

  // ── stream handlers ──
  await handleFramed<typeof Hello, Hello>(
    host,
    MEMBER_PROTOCOL,
    async (wire, connection) => {
      const from = connection.remotePeer.toString();
      const hello = await wire.expect('a hello');
      await receiveHello(hello, from);
      await wire.send(myHello());
    },
    { schema: Hello, maxFrameBytes: HELLO_FRAME_BYTES, ungated: true, maxInboundStreams: 4 },
  );
  await handleFramed<typeof AdmitRequest, AdmitReply>(
    host,
    ADMIT_PROTOCOL,
    async (wire, connection) => {
      const request = await wire.expect('an admission request');
      await wire.send(await answerAdmission(request, connection.remotePeer.toString()));
    },
    { schema: AdmitRequest, ungated: true, maxInboundStreams: 2 },
  );
  await handleFramed<typeof RekeyPush, RekeyReply>(
    host,
    REKEY_PROTOCOL,
    async (wire, connection) => {
      const push = await wire.expect('a rekey order');
      try {
        const pending = await state.receiveRekey(push, connection.remotePeer.toString());
        log.warn(`rekey order received: switching at ${new Date(pending.rekey.switchAt).toISOString()}`);
        scheduleSwitch();
        await wire.send({ v: 1, type: 'ack' });
      } catch (err) {
        if (!(err instanceof MembershipError)) throw err;
        log.warn(`refused a rekey order: ${err.message}`);
        await wire.send({ v: 1, type: 'refused', reason: err.message });
      }
    },
    { schema: RekeyPush, maxInboundStreams: 2 },
  );

  // ── gate ──
  const gate: StreamGate = {
    async check(peer, protocol, direction, signal) {
      if (peer === self) return;
      const role = (direction === 'inbound' ? INBOUND_ROLE : OUTBOUND_ROLE)[protocol];
      const deadline = Date.now() + graceMs;
      for (;;) {
        const standing = state.standing(peer, role);
        if (standing === 'member') return;
        const left = deadline - Date.now();
        // Waiting helps only a connected peer whose certificate is on its way (its hello, its admission).
        if (standing === 'revoked' || standing === 'role' || left <= 0 || signal?.aborted || !connected(peer))
          throw new Error(
            `${peer} may not use ${protocol}: ${standingReason(standing)}${role ? ` (${role})` : ''}`,
          );
        await nextChange(left, signal);
      }
    },
  };
  const uninstallGate = installStreamGate(host, gate);

  // ── connections ──
  const onConnect = (evt: CustomEvent<PeerId>) => {
    const peer = evt.detail.toString();
    watch(peer);
    void greet(peer);
  };
  const onDisconnect = (evt: CustomEvent<PeerId>) => {
    clearGrace(evt.detail.toString());
    changed();
  };
  host.addEventListener('peer:connect', onConnect);
  host.addEventListener('peer:disconnect', onDisconnect);
  for (const peer of connectedPeers()) {
    watch(peer);
    void greet(peer);
  }

  const tickMs = Math.max(200, Math.min(5000, graceMs / 2));
  const tick = setInterval(() => {
    for (const peer of connectedPeers()) watch(peer);
    void renewIfDue().catch((err: Error) => log.warn(`renewing the certificate failed: ${err.message}`));
    if (++flushTicks % 4 === 0)
      void state.flush().catch((err: Error) => log.warn(`saving members failed: ${err.message}`));
  }, tickMs);
  await renewIfDue();
  scheduleSwitch();
  if (!state.own() && !state.fleet().invitation)
    log.warn(
      'this node holds no valid membership certificate and no invitation: join again with a fresh token',
    );

  return {
    ...gate,
    async origin(origin, opts = {}) {
      const cert = opts.cert;
      // The certificate this node already verified for the origin, byte for byte, is not checked again.
      const known = state.certificateOf(origin);
      if (cert && (!known || canonicalJson(cert) !== canonicalJson(known))) {
        try {
          await state.accept(cert, origin);
          changed(origin);
        } catch (err) {
          const code = err instanceof MembershipError ? err.code : 'malformed';
          return { verdict: DEFINITE.has(code) ? 'reject' : 'ignore', reason: (err as Error).message };
        }
      }
      const standing = state.standing(origin, opts.role);
      if (standing === 'member') {
        state.seen(origin);
        return { verdict: 'accept', reason: 'a member' };
      }
      const verdict = standing === 'revoked' || standing === 'role' ? 'reject' : 'ignore';
      return { verdict, reason: `${origin}: ${standingReason(standing)}` };
    },
    certificate: () => state.own(),
    members: () => state.members().map((m) => ({ ...m, connected: !m.self && connected(m.peerId) })),
    publishRevocations,
    connectedMembers: () => connectedPeers().filter((p) => state.standing(p) === 'member'),
    pushRekey,
    scheduleSwitch,
    onMember: (fn) => void memberListeners.push(fn),
    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(tick);
      if (switchTimer) clearTimeout(switchTimer);
      for (const t of graceTimers.values()) clearTimeout(t);
      graceTimers.clear();
      changed();
      uninstallGate();
      host.removeEventListener('peer:connect', onConnect);
      host.removeEventListener('peer:disconnect', onDisconnect);
      pubsub.removeEventListener('message', onMessage);
      for (const p of [MEMBER_PROTOCOL, ADMIT_PROTOCOL, REKEY_PROTOCOL])
        await host.unhandle(p).catch(() => {});
      await state.flush();
    },
  };
}
