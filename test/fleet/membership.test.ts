// Membership you can revoke, with real vtnode processes over TCP on loopback: admission with a
// signed invitation, certificates checked by every node (and renewed), revocation, key rotation.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { MembersReport } from '../../cli/commands/members.ts';
import { eventually, REPO, Sandbox, vtnode } from '../helpers/cli.ts';
import {
  initFleet,
  joinNode,
  peerIdOf,
  rawToken,
  startNode,
  status,
  type TestNode,
  tokenJson,
  waitForPeers,
} from '../helpers/fleet.ts';

const box = new Sandbox();
afterAll(() => box.cleanup());

const OUTSIDER = join(REPO, 'test/fleet/outsider.ts');
/**
 * Certificates live 60 s in this fleet, so members renew them (at 40 s) while the tests run; long
 * enough that a member restarted on a loaded machine still holds a valid one.
 */
const CERT_TTL = '60s';
/** The default grace period a peer has to show a certificate. */
const GRACE_MS = 10_000;
/** A daemon's start (module loading, sandbox self-test) takes seconds, more on a loaded machine. */
const START_MS = 60_000;

async function members(dataDir: string): Promise<MembersReport> {
  const res = await vtnode(['members', '--json', '--data-dir', dataDir]);
  if (res.code !== 0) throw new Error(`members failed: ${res.stderr}`);
  return JSON.parse(res.stdout) as MembersReport;
}

const fleetFile = async (dataDir: string) =>
  JSON.parse(await readFile(join(dataDir, 'fleet.json'), 'utf8')) as { psk: string; keys: unknown[] };

/**
 * When a node took each certificate it holds (admission, then each renewal) and until when it is valid:
 * its `certificate from PEER: …, valid until ISO` log lines, read from its output.
 */
function certificatesTaken(output: string): { at: number; until: number }[] {
  const out: { at: number; until: number }[] = [];
  // A node's log lines read `ISO-TIME level component: message`.
  for (const m of output.matchAll(/^(\S+) \w+ [\w:]+: certificate from \S+: .*valid until (\S+)$/gm))
    out.push({ at: Date.parse(m[1]!), until: Date.parse(m[2]!) });
  return out;
}

describe('membership (real processes over TCP on loopback)', () => {
  let a = { dataDir: '', token: '' };
  let aNode: TestNode;
  let b: TestNode;
  let c: TestNode;
  const ids: Record<string, string> = {};

  /** B's first certificate (test 1), renewed while the tests after it run (see below). */
  let firstCert = { issued: 0, expires: 0 };

  it("members join with the token and work: admitted, in every view, certificates of the fleet's lifetime", async () => {
    a = await initFleet(box, 'members', ['--cert-ttl', CERT_TTL]);
    aNode = startNode(box, a.dataDir);
    ids['a'] = await peerIdOf(a.dataDir, START_MS);
    [b, c] = await Promise.all([joinNode(box, a.token), joinNode(box, a.token)]);
    ids['b'] = await peerIdOf(b.dataDir, START_MS);
    ids['c'] = await peerIdOf(c.dataDir, START_MS);
    const all = [ids['a']!, ids['b']!, ids['c']!];
    for (const dir of [a.dataDir, b.dataDir, c.dataDir]) await waitForPeers(dir, all, 30_000);
    await aNode.proc.waitFor(new RegExp(`admitted ${ids['b']}`));

    const report = await members(a.dataDir);
    expect(report.admin).toBe(true);
    expect(report.gen).toBe(1);
    const row = report.members.find((m) => m.peerId === ids['b'])!;
    expect(row).toMatchObject({
      roles: ['worker', 'submitter', 'collector'],
      standing: 'member',
      revoked: false,
    });
    expect(row.connected).toBe(true);
    expect(row.expires! - row.issued!).toBe(60_000);
    firstCert = { issued: row.issued!, expires: row.expires! };
  }, 180_000);

  it('a tampered or expired token is refused by `vtnode join` before any network activity', async () => {
    const body = tokenJson(a.token);
    // A year more on the invitation: its signature no longer holds.
    const tampered = rawToken({
      ...body,
      invitation: { ...body.invitation, exp: body.invitation.exp + 365 * 86_400_000 },
    });
    const dir = await box.tempDir();
    const res = await vtnode(['join', tampered, '--data-dir', dir]);
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(
      /cannot join: the token does not verify \(invitation \w+: the signature does not match/,
    );
    const issued = await vtnode(['token', '--expires', '1s', '--data-dir', a.dataDir, '--json']);
    expect(issued.code).toBe(0);
    const { token: expired, expires } = JSON.parse(issued.stdout) as { token: string; expires: number };
    await new Promise((r) => setTimeout(r, Math.max(0, expires - Date.now() + 50)));
    const late = await vtnode(['join', expired, '--data-dir', dir]);
    expect(late.code).toBe(1);
    expect(late.stderr).toMatch(/cannot join: the token expired at/);
    // Only the fleet-key holder signs invitations.
    const fromMember = await vtnode(['token', '--data-dir', b.dataDir]);
    expect(fromMember.code).toBe(1);
    expect(fromMember.stderr).toMatch(/only a node holding the fleet key signs invitations/);
  }, 60_000);

  // The next two tests each wait out a peer's grace period (10 s) with outsiders of their own: they run
  // at once (concurrent tests, each with its own expect).
  it.concurrent('presented directly, a tampered or expired invitation is refused by the fleet-key holder, which then disconnects the peer', async ({
    expect,
  }) => {
    const body = tokenJson(a.token);
    const tampered = rawToken({
      ...body,
      invitation: { ...body.invitation, roles: ['worker', 'submitter'], exp: body.invitation.exp + 1 },
    });
    const issued = await vtnode(['token', '--expires', '1s', '--data-dir', a.dataDir, '--json']);
    const { token: expired, expires } = JSON.parse(issued.stdout) as { token: string; expires: number };
    await new Promise((r) => setTimeout(r, Math.max(0, expires - Date.now() + 50)));
    const forged = box.spawn(['invite', tampered], {}, [], OUTSIDER);
    const late = box.spawn(['invite', expired], {}, [], OUTSIDER);
    await forged.waitFor(/outsider: refused signature: invitation \w+: the signature does not match/, 20_000);
    await late.waitFor(/outsider: refused expired: invitation \w+: expired at/, 20_000);
    for (const p of [forged, late]) {
      await p.waitFor(/outsider: disconnected after \d+ ms/, GRACE_MS + 10_000);
      const ms = Number(/disconnected after (\d+) ms/.exec(p.output())![1]);
      expect(ms).toBeGreaterThanOrEqual(GRACE_MS - 1000);
    }
    await aNode.proc.waitFor(/refused join from \S+: invitation \w+: the signature does not match/);
    await aNode.proc.waitFor(/disconnecting \S+: no valid membership certificate within 10000 ms/);
  }, 60_000);

  it.concurrent('a node with the pre-shared key but no certificate gets no stream served, never appears, and is disconnected', async ({
    expect,
  }) => {
    const squatter = box.spawn(['squat', a.token], {}, [], OUTSIDER);
    await squatter.waitFor(/outsider: connected as (\S+)/, 20_000);
    const squatterId = /outsider: connected as (\S+)/.exec(squatter.output())![1]!;
    await squatter.waitFor(/outsider: log stream refused/, GRACE_MS + 15_000);
    await squatter.waitFor(/outsider: disconnected after \d+ ms/, GRACE_MS + 10_000);
    expect(squatter.output()).not.toMatch(/log stream answered/);
    await aNode.proc.waitFor(
      new RegExp(`/vtnode/log/2 stream from ${squatterId} failed: .*no valid membership certificate`),
      15_000,
    );
    for (const dir of [a.dataDir, b.dataDir]) {
      expect((await status(dir)).nodes.map((n) => n.peerId)).not.toContain(squatterId);
    }
  }, 60_000);

  it('`vtnode revoke` disconnects a member everywhere; it cannot come back with its certificate, nor with its token under a new identity', async () => {
    const res = await vtnode(['revoke', ids['c']!, '--data-dir', a.dataDir, '--json']);
    expect(res.code, res.stderr).toBe(0);
    const result = JSON.parse(res.stdout) as { revoked: { kind: string; id: string }[]; version: number };
    expect(result.revoked.map((r) => r.kind)).toEqual(['peer', 'invitation']);
    expect(result.revoked[1]!.id).toBe(tokenJson(a.token).invitation.nonce);
    const rest = [ids['a']!, ids['b']!];
    await waitForPeers(a.dataDir, rest, 15_000);
    await waitForPeers(b.dataDir, rest, 15_000);
    // Both revocations reached B (each travels on its own, by gossip and in hellos) and are saved in its data dir.
    expect(result.version).toBe(2);
    await eventually(
      async () => {
        const report = await members(b.dataDir);
        const saved = JSON.parse(await readFile(join(b.dataDir, 'revocations.json'), 'utf8')) as {
          entries: unknown[];
        };
        return (
          report.revocations === 2 &&
          saved.entries.length === 2 &&
          report.members.find((m) => m.peerId === ids['c'])?.revoked
        );
      },
      15_000,
      'B to hold and save both revocations',
    );

    // C comes back with its identity and its (unexpired) certificate: every connection is refused.
    c.proc.child.kill('SIGTERM');
    await c.proc.exited;
    const refusals = () =>
      (
        aNode.proc.output().match(new RegExp(`refused a connection from revoked member ${ids['c']}`, 'g')) ??
        []
      ).length;
    const before = refusals();
    const back = startNode(box, c.dataDir);
    await eventually(async () => refusals() > before, START_MS, 'A to refuse the revoked member');
    await peerIdOf(c.dataDir, START_MS);
    expect((await status(c.dataDir)).nodes.map((n) => n.peerId)).toEqual([ids['c']]);
    for (const dir of [a.dataDir, b.dataDir])
      expect((await status(dir)).nodes.map((n) => n.peerId)).not.toContain(ids['c']);
    back.proc.child.kill('SIGTERM');

    // The token C joined with is revoked too: a new identity cannot use it.
    const again = await joinNode(box, a.token);
    const code = await Promise.race([
      again.proc.exited,
      new Promise((r) => setTimeout(() => r('running'), START_MS)),
    ]);
    expect(code, again.proc.output()).toBe(1);
    expect(again.proc.output()).toMatch(
      /the fleet refused this node's invitation \(revoked\): invitation \w+: revoked by the fleet/,
    );
  }, 180_000);

  // Renewal comes due 40 s after admission: the tests above run meanwhile, instead of a wait of its own.
  it("B's certificate is renewed by the fleet-key holder before it expires, and B never drops out", async () => {
    const renewed = await eventually(
      async () => {
        const r = (await members(b.dataDir)).members.find((m) => m.self)!;
        return r.issued! > firstCert.issued ? r : null;
      },
      70_000,
      'B to renew its certificate',
    );
    expect(renewed.expires!).toBeGreaterThan(firstCert.expires);
    // Renewed as often as the tests before this one took (each at 40 s of its 60): each certificate
    // came before the one it replaced expired, so B never dropped out in between.
    const taken = certificatesTaken(b.proc.output());
    expect(taken.length, JSON.stringify(taken)).toBeGreaterThanOrEqual(2);
    for (let i = 1; i < taken.length; i++)
      expect(taken[i]!.at, JSON.stringify(taken)).toBeLessThan(taken[i - 1]!.until);
    await waitForPeers(a.dataDir, [ids['a']!, ids['b']!], 5000);
  }, 120_000);

  it('`vtnode rotate-key` keeps a valid member: new key generation and pre-shared key, and the member reconnects on them', async () => {
    const oldPsk = (await fleetFile(a.dataDir)).psk;
    const res = await vtnode(['rotate-key', '--switch-in', '4s', '--json', '--data-dir', a.dataDir]);
    expect(res.code, res.stderr).toBe(0);
    const result = JSON.parse(res.stdout) as {
      reached: string[];
      missed: unknown[];
      gen: number;
      psk: boolean;
    };
    expect(result).toMatchObject({ gen: 2, psk: true, missed: [] });
    expect(result.reached).toEqual([ids['b']]);
    await aNode.proc.waitFor(/switched to fleet key generation 2 and a new pre-shared key/, 20_000);
    await b.proc.waitFor(/switched to fleet key generation 2 and a new pre-shared key/, 20_000);
    const [fa, fb] = await Promise.all([fleetFile(a.dataDir), fleetFile(b.dataDir)]);
    expect(fb.psk).toBe(fa.psk);
    expect(fb.psk).not.toBe(oldPsk);
    expect(fb.keys).toHaveLength(2);
    // B holds a generation 2 certificate, and A counts it as a member.
    await eventually(
      async () => {
        const r = (await members(a.dataDir)).members.find((m) => m.peerId === ids['b']);
        return r?.gen === 2 && r.standing === 'member';
      },
      15_000,
      'A to see B under generation 2',
    );
    await waitForPeers(a.dataDir, [ids['a']!, ids['b']!], 15_000);
    // B restarts: its new connections use the new pre-shared key, and its new certificate is accepted.
    b.proc.child.kill('SIGTERM');
    await b.proc.exited;
    await waitForPeers(a.dataDir, [ids['a']!], 15_000);
    const b2 = startNode(box, b.dataDir);
    await waitForPeers(a.dataDir, [ids['a']!, ids['b']!], START_MS);
    await waitForPeers(b2.dataDir, [ids['a']!, ids['b']!], START_MS);
  }, 180_000);
});
