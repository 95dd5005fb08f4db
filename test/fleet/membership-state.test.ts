// The membership state of a data dir (node/membership/state.ts): real files, an injected clock.
import { readFile } from 'node:fs/promises';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { afterAll, describe, expect, it } from 'vitest';
import { DataDir, type FleetFile, newPsk } from '../../node/data-dir.ts';
import { foundFleet, loadAuthority, planRotation, selfCertificate } from '../../node/membership/authority.ts';
import { membershipFiles } from '../../node/membership/files.ts';
import { loadMembershipState } from '../../node/membership/state.ts';
import {
  type Certificate,
  MembershipError,
  signCertificate,
  signRevocation,
  verifyKeyChain,
} from '../../protocol/membership.ts';
import { Sandbox } from '../helpers/cli.ts';

const box = new Sandbox();
afterAll(() => box.cleanup());

const T0 = 1_800_000_000_000;
const TTL = 3_600_000;

/** A founder's data dir, as `vtnode init` leaves it, and a clock the test moves. */
async function founder() {
  const clock = { now: T0 };
  const dataDir = new DataDir(await box.tempDir('vt-state-'));
  const { peerId } = await dataDir.identity();
  const keys = await foundFleet(dataDir, 'state', { certTtlMs: TTL, now: T0 });
  const fleet: FleetFile = {
    fleet: 'state',
    psk: newPsk(),
    bootstrap: [],
    since: T0,
    keys,
    invitation: null,
    rekeyedAt: 0,
  };
  await dataDir.writeFleet(fleet);
  const authority = (await loadAuthority(dataDir))!;
  const chain = await verifyKeyChain(keys, 'state');
  await membershipFiles(dataDir).writeCertificate(await selfCertificate(authority, chain, peerId, T0));
  const state = await loadMembershipState({ dataDir, peerId, now: () => clock.now });
  const issue = async (peer: string, roles: Certificate['roles'] = ['worker', 'collector']) =>
    signCertificate(authority.key(state.chain().current), {
      fleet: 'state',
      gen: state.chain().current,
      peerId: peer,
      roles,
      iat: clock.now,
      exp: clock.now + TTL,
      invitation: 'ab'.repeat(16),
    });
  return { clock, dataDir, peerId, state, authority, issue };
}

const newPeer = async () => peerIdFromPrivateKey(await generateKeyPair('Ed25519')).toString();

describe('membership state of a data dir', () => {
  it('the founder holds the fleet key and a valid admin certificate', async () => {
    const { state, peerId } = await founder();
    expect(state.authority()).not.toBeNull();
    expect(state.own()!.roles).toContain('admin');
    expect(state.standing(peerId, 'admin')).toBe('member');
    expect(state.members().map((m) => [m.peerId, m.self])).toEqual([[peerId, true]]);
  });

  it('a certificate counts for the peer it names, with its roles, until it expires', async () => {
    const { state, clock, issue } = await founder();
    const [peer, other] = [await newPeer(), await newPeer()];
    const cert = await issue(peer);
    expect(state.standing(peer)).toBe('unknown');
    await expect(state.accept(cert, other)).rejects.toThrow(/presented by/);
    expect(state.standing(peer)).toBe('unknown');
    await state.accept(cert, peer);
    expect(state.standing(peer)).toBe('member');
    expect(state.standing(peer, 'worker')).toBe('member');
    expect(state.standing(peer, 'submitter')).toBe('role');
    clock.now = cert.exp;
    expect(state.standing(peer)).toBe('expired');
    await expect(state.accept(cert, peer)).rejects.toThrow(/expired at/);
  });

  it('revocations: forged ones dropped, valid ones kept, saved, and still there after a restart', async () => {
    const { state, dataDir, peerId, authority, issue, clock } = await founder();
    const peer = await newPeer();
    await state.accept(await issue(peer), peer);
    const good = await signRevocation(authority.key(1), {
      fleet: 'state',
      gen: 1,
      kind: 'peer',
      id: peer,
      at: T0,
    });
    const forged = await signRevocation(await generateKeyPair('Ed25519'), {
      fleet: 'state',
      gen: 1,
      kind: 'peer',
      id: await newPeer(),
      at: T0,
    });
    const added = await state.addRevocations([forged, good, good]);
    expect(added.map((r) => r.id)).toEqual([peer]);
    expect(state.standing(peer)).toBe('revoked');
    expect(await state.addRevocations([good])).toEqual([]);
    const saved = JSON.parse(await readFile(dataDir.path('revocations.json'), 'utf8')) as {
      entries: unknown[];
    };
    expect(saved.entries).toHaveLength(1);
    await state.flush();
    const again = await loadMembershipState({ dataDir, peerId, now: () => clock.now });
    expect(again.standing(peer)).toBe('revoked');
    expect(again.members().find((m) => m.peerId === peer)).toMatchObject({
      revoked: true,
      standing: 'revoked',
    });
  });

  it('revocations merged at the same time (gossip and hellos) all end up on disk', async () => {
    const { state, dataDir, authority } = await founder();
    // Rounds of concurrent merges: unordered file writes left an older list on disk now and then.
    for (let round = 1; round <= 4; round++) {
      const peers = await Promise.all(Array.from({ length: 24 }, () => newPeer()));
      const entries = await Promise.all(
        peers.map((id) =>
          signRevocation(authority.key(1), { fleet: 'state', gen: 1, kind: 'peer', id, at: T0 }),
        ),
      );
      await Promise.all(entries.map((r) => state.addRevocations([r])));
      expect(state.revocations()).toHaveLength(24 * round);
      const saved = JSON.parse(await readFile(dataDir.path('revocations.json'), 'utf8')) as {
        entries: unknown[];
      };
      expect(saved.entries).toHaveLength(24 * round);
    }
  });

  it('a rotation: next-generation certificates wait for the switch, then old ones stop counting', async () => {
    const { state, dataDir, peerId, issue, clock } = await founder();
    const [kept, missed] = [await newPeer(), await newPeer()];
    await state.accept(await issue(kept), kept);
    await state.accept(await issue(missed), missed);
    const oldPsk = state.psk();
    const plan = await planRotation(dataDir, state.chain(), {
      signingKey: true,
      psk: newPsk(),
      switchAt: T0 + 30_000,
      now: T0,
    });
    const fresh = (await loadAuthority(dataDir))!;
    const next = await verifyKeyChain([...state.chain().records, plan.key!], 'state');
    const sign = (peer: string, roles: Certificate['roles']) =>
      signCertificate(fresh.key(2), {
        fleet: 'state',
        gen: 2,
        peerId: peer,
        roles,
        iat: T0,
        exp: T0 + TTL,
        invitation: null,
      });
    await state.stageRekey({ rekey: plan.rekey, cert: await selfCertificate(fresh, next, peerId, T0) });
    state.remember(await sign(kept, ['worker', 'collector']));
    // Before the switch nothing changes: the staged certificate does not replace the current one.
    expect(state.standing(kept)).toBe('member');
    expect(state.standing(missed)).toBe('member');
    clock.now = T0 + 30_000;
    expect(await state.applyRekey()).toEqual({ psk: true, key: true });
    expect(state.chain().current).toBe(2);
    expect(state.standing(kept)).toBe('member');
    expect(state.standing(missed)).toBe('old-generation');
    expect(state.own()!.gen).toBe(2);
    const fleet = JSON.parse(await readFile(dataDir.path('fleet.json'), 'utf8')) as FleetFile;
    expect(fleet.psk).not.toBe(oldPsk);
    expect(fleet.keys).toHaveLength(2);
    expect(fleet.rekeyedAt).toBe(T0);
    // The replaced private key is gone from fleet-key.json; the order is consumed.
    const keyFile = JSON.parse(await readFile(dataDir.path('fleet-key.json'), 'utf8')) as {
      keys: { gen: number }[];
    };
    expect(keyFile.keys.map((k) => k.gen)).toEqual([2]);
    await expect(readFile(dataDir.path('rekey.json'))).rejects.toThrow();
    // A restarted node reads the new generation.
    const again = await loadMembershipState({ dataDir, peerId, now: () => clock.now });
    expect(again.chain().current).toBe(2);
    expect(again.authority()!.key(2).publicKey.equals(next.keys.get(2))).toBe(true);
  });

  it('a member takes re-key orders only from a fleet-key holder, and applies a due one when it starts', async () => {
    const f = await founder();
    // A member's data dir: the founder's chain, a certificate from it.
    const dataDir = new DataDir(await box.tempDir('vt-state-member-'));
    const { peerId } = await dataDir.identity();
    await dataDir.writeFleet({ ...f.state.fleet(), bootstrap: [] });
    await membershipFiles(dataDir).writeCertificate(await f.issue(peerId));
    const member = await loadMembershipState({ dataDir, peerId, now: () => f.clock.now });
    await member.accept(f.state.own(), f.peerId);
    const plan = await planRotation(f.dataDir, f.state.chain(), {
      signingKey: false,
      psk: newPsk(),
      switchAt: T0 + 10_000,
      now: T0,
    });
    const push = { v: 1 as const, type: 'rekey' as const, rekey: plan.rekey, cert: null };
    const stranger = await newPeer();
    const refused = await member.receiveRekey(push, stranger).catch((e: Error) => e);
    expect(refused).toBeInstanceOf(MembershipError);
    expect((refused as MembershipError).code).toBe('role');
    await member.receiveRekey(push, f.peerId);
    // Stopped before the switch, started after it: the order is applied at load.
    f.clock.now = T0 + 20_000;
    const restarted = await loadMembershipState({ dataDir, peerId, now: () => f.clock.now });
    expect(restarted.psk()).toBe(plan.rekey.psk);
    expect(restarted.pendingRekey()).toBeNull();
    // The same order again, from the fleet-key holder (known again from its hello): stale.
    await restarted.accept(f.state.own(), f.peerId);
    const stale = await restarted.receiveRekey(push, f.peerId).catch((e: Error) => e);
    expect((stale as MembershipError).code).toBe('stale');
  });
});
