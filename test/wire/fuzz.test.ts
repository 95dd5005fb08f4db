// Protocol fuzzing (issue 11, build 6): a real vtnode daemon (a worker, so every stream protocol is
// served) is fed seeded hostile frames on every stream protocol and mutated messages on every gossip
// topic by certified members in this process, plus slowloris streams. Asserted: the node never exits
// and keeps answering `vtnode status`, its RSS stays bounded, every case ends (no hung stream), an
// offender is banned (streams) or its gossip rejected, and an honest member is served throughout.
//   VTNODE_FUZZ_CASES=N     cases per protocol and per topic (default 30)
//   VTNODE_FUZZ_SEED=S      seed (default 1111)
//   VTNODE_FUZZ_REPLAY=name:i   only case i of one protocol or topic (e.g. job:17, advert:3)

import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { digestSigner } from '../../node/digests/signature.ts';
import { createEmulator, type Emulator } from '../../node/model-server/emulator.ts';
import { dialFramed } from '../../node/wire/streams.ts';
import { Advert } from '../../protocol/advert.ts';
import { SignedDigest } from '../../protocol/digest.ts';
import { LogReply, LogRequest, SampleReply, SampleRequest } from '../../protocol/fetch.ts';
import { SubmitterMessage } from '../../protocol/job.ts';
import { AdmitRequest, Hello, RekeyPush, Revocation } from '../../protocol/membership.ts';
import {
  ADMIT_PROTOCOL,
  advertTopic,
  digestTopic,
  JOB_PROTOCOL,
  LOG_PROTOCOL,
  MEMBER_PROTOCOL,
  REKEY_PROTOCOL,
  revocationTopic,
  SAMPLE_PROTOCOL,
} from '../../protocol/topics.ts';
import { bareAdvert } from '../helpers/adverts.ts';
import { eventually, Sandbox } from '../helpers/cli.ts';
import { signedDigest } from '../helpers/digests.ts';
import { initFleet, peerIdOf, startNode, status, type TestNode, tokenJson } from '../helpers/fleet.ts';
import { FUZZ_KINDS, fuzzCase, fuzzPayload } from '../helpers/fuzz.ts';
import { type StreamOutcome, sendRaw, slowloris } from '../helpers/fuzz-streams.ts';
import { admitMember, type TestMember } from '../helpers/member.ts';
import { jobRequest, sampleBody, sampleTask } from '../helpers/samples.ts';

const CASES = Number(process.env.VTNODE_FUZZ_CASES ?? 30);
const SEED = Number(process.env.VTNODE_FUZZ_SEED ?? 1111);
const REPLAY = process.env.VTNODE_FUZZ_REPLAY?.split(':');
/** Cases per fuzzer identity on the stream protocols: below the ledger's threshold of 5, so none is banned mid-run. */
const STREAM_CASES_PER_ID = 4;
/** Cases per fuzzer identity on gossip: a third rejected message would graylist it (score −20 per rejection, squared). */
const GOSSIP_CASES_PER_ID = 2;
/** Time the node has to end a fuzzed stream, ms. */
const CASE_BOUND_MS = 15_000;
/** The daemon's first-frame deadline (node/wire/streams.ts) plus slack, ms. */
const SLOWLORIS_BOUND_MS = 45_000;
/**
 * Most the node's RSS may grow from the baseline (after start and a warm-up) to the end, MiB. A
 * stream holds at most one frame (≤ 4 MiB on /vtnode/job/1, 1 MiB elsewhere) and the fuzz runs
 * one stream at a time plus 12 slowloris streams; V8 keeps some garbage between collections.
 * A leak per case (buffers or streams kept) would exceed it over a long run.
 */
const RSS_GROWTH_BOUND_MIB = 128;
/** Time one protocol's or topic's cases may take: a revocation case took ≈ 0.4 s on a loaded 2-core machine. */
const FUZZ_TEST_TIMEOUT_MS = 60_000 + CASES * 1500;
const FAKE_SIG = `${'A'.repeat(86)}==`;

const box = new Sandbox();
const FLEET = 'fuzz';
let emulator: Emulator;
let node: TestNode;
let nodeId = '';
let nodeAddr = '';
let token = '';
let honest: TestMember;
const honestLatencies: number[] = [];
const rss: number[] = [];
/** Per protocol or topic: cases delivered, by outcome. */
const delivered = new Map<string, Record<string, number>>();
let slowlorisRun: Promise<{ name: string; drip: StreamOutcome; silent: StreamOutcome }[]>;

const rssMiB = (): number => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${node.proc.child.pid}/status`, 'utf8'));
  return Number(m![1]) / 1024;
};
const nodeLog = (): string => node.proc.output();
const count = (pattern: RegExp): number => nodeLog().match(new RegExp(pattern, 'g'))?.length ?? 0;
const alive = () => node.proc.child.exitCode === null && node.proc.child.signalCode === null;

const topics = () => [advertTopic(FLEET), digestTopic(FLEET)];
/** Members still running (stopped in afterAll if a test fails midway). */
const members = new Set<TestMember>();
const member = async (): Promise<TestMember> => {
  const m = await admitMember(box, { token, addr: nodeAddr, topics: topics() });
  members.add(m);
  return m;
};

interface StreamTarget {
  name: string;
  protocol: string;
  schema: z.ZodType;
  /** A valid first message of the protocol, as `me` would send it. */
  valid(me: TestMember): unknown;
}

const STREAMS: StreamTarget[] = [
  {
    name: 'job',
    protocol: JOB_PROTOCOL,
    schema: SubmitterMessage,
    valid: (me) => jobRequest(sampleTask('fuzz-task'), me.peerId, [0, 1], 4),
  },
  {
    name: 'sample',
    protocol: SAMPLE_PROTOCOL,
    schema: SampleRequest,
    valid: (me) => ({
      v: 2,
      samples: [
        { origin: nodeId, seq: 1 },
        { origin: me.peerId, seq: 2 },
      ],
    }),
  },
  {
    name: 'log',
    protocol: LOG_PROTOCOL,
    schema: LogRequest,
    valid: () => ({ v: 2, kind: 'digests', origin: nodeId, after: 0, limit: 50 }),
  },
  {
    name: 'member',
    protocol: MEMBER_PROTOCOL,
    schema: Hello,
    valid: () => ({ v: 1, type: 'hello', cert: null, revocations: [] }),
  },
  {
    name: 'admit',
    protocol: ADMIT_PROTOCOL,
    schema: AdmitRequest,
    valid: () => ({ v: 1, type: 'join', invitation: tokenJson(token).invitation }),
  },
  {
    name: 'rekey',
    protocol: REKEY_PROTOCOL,
    schema: RekeyPush,
    valid: () => {
      const now = Date.now();
      return {
        v: 1,
        type: 'rekey',
        rekey: {
          v: 1,
          type: 'rekey',
          fleet: FLEET,
          gen: 1,
          key: null,
          psk: 'ab'.repeat(32),
          switchAt: now + 60_000,
          iat: now,
          sig: FAKE_SIG,
        },
        cert: null,
      };
    },
  },
];

interface GossipTarget {
  name: string;
  topic: string;
  schema: z.ZodType;
  /** A valid message of the topic, as `me` would publish it. */
  valid(me: TestMember): unknown;
  /** Node log lines that say it rejected one. */
  rejected: RegExp;
  /** Case kinds the node must reject (the rest may be valid in shape). */
  mustReject: readonly string[];
}

const MALFORMED = [
  'random bytes',
  'random payload',
  'oversized length',
  'truncated frame',
  'not UTF-8',
  'wrong top-level type',
  'many frames',
];

const GOSSIP: GossipTarget[] = [
  {
    name: 'advert',
    topic: advertTopic(FLEET),
    schema: Advert,
    valid: (me): Advert => bareAdvert(me.peerId, 'fuzzer'),
    rejected: /rejected an advert/,
    mustReject: MALFORMED,
  },
  {
    name: 'digest',
    topic: digestTopic(FLEET),
    schema: SignedDigest,
    valid: (me) => signedDigest(digestSigner(me.privateKey), 1, sampleBody('fuzz-task', 'coder', 0)),
    rejected: /rejected a digest from/,
    mustReject: MALFORMED,
  },
  {
    name: 'revocation',
    topic: revocationTopic(FLEET),
    schema: Revocation,
    // Valid in shape; only the fleet key could sign it, so every one is rejected.
    valid: (me) => ({
      v: 1,
      type: 'revocation',
      fleet: FLEET,
      gen: 1,
      kind: 'peer',
      id: me.peerId,
      at: Date.now(),
      sig: FAKE_SIG,
    }),
    rejected: /rejected a revocation/,
    mustReject: FUZZ_KINDS,
  },
];

/** The case indices to run for `name` (all, or the one being replayed). */
function indices(name: string): number[] {
  if (REPLAY) return REPLAY[0] === name ? [Number(REPLAY[1])] : [];
  return Array.from({ length: CASES }, (_, i) => i);
}

const replayHint = (name: string, i: number) => `VTNODE_FUZZ_SEED=${SEED} VTNODE_FUZZ_REPLAY=${name}:${i}`;

/** An honest request on /vtnode/log/2 and /vtnode/sample/2, answered correctly (bounded). */
async function honestRound(): Promise<void> {
  const started = Date.now();
  const signal = AbortSignal.timeout(10_000);
  const log = await dialFramed<typeof LogReply, LogRequest>(honest.host, honest.node, LOG_PROTOCOL, {
    schema: LogReply,
    signal,
  });
  await log.send({ v: 2, kind: 'origins' });
  const reply = await log.expect('an origins reply', { signal });
  expect(reply).toMatchObject({ kind: 'origins', more: false });
  await log.close({ signal });
  const sample = await dialFramed<typeof SampleReply, SampleRequest>(
    honest.host,
    honest.node,
    SAMPLE_PROTOCOL,
    { schema: SampleReply, signal },
  );
  await sample.send({ v: 2, samples: [{ origin: nodeId, seq: 1 }] });
  // The node holds no sample yet: the reply is the stream closed without a row.
  expect(await sample.read({ signal })).toBeUndefined();
  await sample.close({ signal });
  honestLatencies.push(Date.now() - started);
}

/** Node health between batches: alive, RSS sampled; with `cli`, also answering `vtnode status` (a process start, so once per protocol). */
async function checkNode(cli = false): Promise<void> {
  expect(alive(), `the node exited:\n${nodeLog().slice(-3000)}`).toBe(true);
  rss.push(rssMiB());
  if (cli) expect((await status(node.dataDir)).self).toBe(nodeId);
}

/** Admitted ahead of use, so admission overlaps the cases of the previous identity. */
const LOOKAHEAD = 2;

/** `n` fresh certified members, each prepared by `prepare`, admitted LOOKAHEAD ahead; each is stopped after its turn. */
async function* identities(n: number, prepare?: (m: TestMember) => Promise<void>) {
  const make = async () => {
    const m = await member();
    await prepare?.(m);
    return m;
  };
  const ahead: Promise<TestMember>[] = [];
  for (let i = 0; i < Math.min(n, LOOKAHEAD); i++) ahead.push(make());
  for (let i = 0; i < n; i++) {
    const m = await ahead.shift()!;
    if (i + LOOKAHEAD < n) ahead.push(make());
    yield m;
    members.delete(m);
    await m.stop();
  }
}

function tally(name: string, outcome: string): void {
  const t = delivered.get(name) ?? {};
  t[outcome] = (t[outcome] ?? 0) + 1;
  delivered.set(name, t);
}

beforeAll(async () => {
  emulator = await createEmulator({ emulate: 'llama-server', models: ['coder'], tasks: [], timeScale: 0.01 });
  const init = await initFleet(box, FLEET, ['--model-server', emulator.url]);
  token = init.token;
  node = startNode(box, init.dataDir);
  nodeId = await peerIdOf(init.dataDir);
  nodeAddr = `${(await status(init.dataDir)).nodes[0]!.addrs[0]!}/p2p/${nodeId}`;
  // A worker serves /vtnode/job/1, /vtnode/sample/2 and /vtnode/log/2 once its models are known.
  await eventually(async () => (await status(init.dataDir)).nodes[0]!.models.length > 0, 60_000, 'the model');
  honest = await member();
  honest.host.services.pubsub.subscribe(advertTopic(FLEET));
  await honestRound();
  await checkNode(true);
  // Slowloris on every stream protocol, running beside the fuzz below: one identity per protocol
  // (two offences each, so none is banned), a frame dripped a byte a second and a silent stream.
  slowlorisRun = Promise.all(
    STREAMS.map(async (t) => {
      const me = await member();
      const frame = fuzzCase(t.valid(me), SEED, FUZZ_KINDS.indexOf('many frames')).bytes;
      const [drip, silent] = await Promise.all([
        slowloris(me.host, me.node, t.protocol, frame.subarray(0, 60), 1000, SLOWLORIS_BOUND_MS),
        slowloris(me.host, me.node, t.protocol, new Uint8Array(), 0, SLOWLORIS_BOUND_MS),
      ]);
      members.delete(me);
      await me.stop();
      return { name: t.name, drip, silent };
    }),
  );
  process.stdout.write(`fuzz: seed ${SEED}, ${CASES} cases per protocol and topic\n`);
}, 120_000);

afterAll(async () => {
  for (const m of members) await m.stop();
  await box.cleanup();
  await emulator?.close();
});

describe('protocol fuzzing', () => {
  it.each(STREAMS.map((t) => [t.name, t] as const))(
    'stream protocol %s: every case ends, the node survives, the honest member is served',
    async (name, target) => {
      const all = indices(name);
      let b = 0;
      for await (const me of identities(Math.ceil(all.length / STREAM_CASES_PER_ID))) {
        for (const i of all.slice(b, b + STREAM_CASES_PER_ID)) {
          const c = fuzzCase(target.valid(me), SEED, i);
          const outcome = await sendRaw(me.host, me.node, target.protocol, c.bytes, CASE_BOUND_MS);
          expect(outcome, `case ${name}:${i} (${c.kind}); replay with ${replayHint(name, i)}`).not.toMatch(
            /hung|refused/,
          );
          tally(name, outcome);
        }
        b += STREAM_CASES_PER_ID;
        await honestRound();
        await checkNode();
      }
      await checkNode(true);
    },
    FUZZ_TEST_TIMEOUT_MS,
  );

  it.each(STREAMS.map((t) => [t.name, t] as const))(
    'stream protocol %s: a peer that keeps sending bad frames is banned (streams and connection refused)',
    async (_name, target) => {
      const me = await member();
      const bansBefore = count(new RegExp(`${me.peerId} banned until`));
      expect(bansBefore).toBe(0);
      // 'not UTF-8' is malformed on every protocol: the fifth offence bans.
      const bad = fuzzCase(target.valid(me), SEED, FUZZ_KINDS.indexOf('not UTF-8')).bytes;
      // The node ends each stream (a refusal may come first); none is refused before the fifth.
      for (let i = 0; i < 5; i++)
        expect(await sendRaw(me.host, me.node, target.protocol, bad, CASE_BOUND_MS)).not.toMatch(
          /hung|refused/,
        );
      await eventually(async () => count(new RegExp(`${me.peerId} banned until`)) === 1, 10_000, 'the ban');
      await eventually(async () => me.host.getConnections(me.node).length === 0, 10_000, 'the hang-up');
      // A valid request is refused now: the node's gater refuses the connection.
      const valid = fuzzCase(target.valid(me), SEED, FUZZ_KINDS.indexOf('many frames')).bytes;
      expect(await sendRaw(me.host, me.node, target.protocol, valid, CASE_BOUND_MS)).toBe('refused');
      members.delete(me);
      await me.stop();
      await honestRound();
      await checkNode(true);
    },
    60_000,
  );

  it.each(GOSSIP.map((t) => [t.name, t] as const))(
    'gossip topic %s: mutated messages are rejected, the node survives, the honest member is served',
    async (name, target) => {
      const all = indices(name);
      const before = count(target.rejected);
      let mustReject = 0;
      let b = 0;
      const subscribed = async (me: TestMember) => {
        const pubsub = me.host.services.pubsub;
        pubsub.subscribe(target.topic);
        await eventually(
          async () => pubsub.getSubscribers(target.topic).some((p) => p.equals(me.node)),
          10_000,
          `the node's subscription to ${target.topic}`,
        );
      };
      for await (const me of identities(Math.ceil(all.length / GOSSIP_CASES_PER_ID), subscribed)) {
        const pubsub = me.host.services.pubsub;
        for (const i of all.slice(b, b + GOSSIP_CASES_PER_ID)) {
          const c = fuzzPayload(target.valid(me), SEED, i);
          const sent = await pubsub.publish(target.topic, c.bytes).catch((err: Error) => err);
          expect(
            sent,
            `case ${name}:${i} (${c.kind}) not published; replay with ${replayHint(name, i)}`,
          ).not.toBeInstanceOf(Error);
          if (target.mustReject.includes(c.kind)) mustReject++;
          const want = before + mustReject;
          // Each must-reject case is seen rejected before the next is sent (so every case reached the validator).
          await eventually(
            async () => count(target.rejected) >= want,
            10_000,
            `case ${name}:${i} (${c.kind}) rejected`,
          );
          tally(name, target.mustReject.includes(c.kind) ? 'rejected' : 'published');
        }
        b += GOSSIP_CASES_PER_ID;
        await honestRound();
        await checkNode();
      }
      await checkNode(true);
    },
    FUZZ_TEST_TIMEOUT_MS,
  );

  it('slowloris: a dripped frame and a silent stream are cut at the first-frame deadline on every protocol', async () => {
    const results = await slowlorisRun;
    for (const r of results) {
      expect(r, `slowloris on ${r.name}`).toMatchObject({ drip: 'reset', silent: 'reset' });
      tally(`${r.name} slowloris`, 'reset');
      tally(`${r.name} slowloris`, 'reset');
    }
    expect(count(/no request within 30000 ms/)).toBeGreaterThanOrEqual(2 * STREAMS.length);
    await honestRound();
  }, 60_000);

  it('the node never exited, kept answering status, and its memory stayed bounded; adverts still reach the honest member', async () => {
    await checkNode(true);
    const pubsub = honest.host.services.pubsub;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no advert from the node within 10 s')), 10_000);
      const onMessage = (evt: CustomEvent) => {
        const msg = evt.detail as { topic: string; from?: { toString(): string } };
        if (msg.topic !== advertTopic(FLEET) || msg.from?.toString() !== nodeId) return;
        clearTimeout(timer);
        pubsub.removeEventListener('message', onMessage);
        resolve();
      };
      pubsub.addEventListener('message', onMessage);
    });
    const [first] = rss;
    const peak = Math.max(...rss);
    const last = rss.at(-1)!;
    const sorted = [...honestLatencies].sort((a, b) => a - b);
    const summary = {
      seed: SEED,
      casesPerTarget: CASES,
      delivered: Object.fromEntries(delivered),
      totalCases: [...delivered.values()].reduce(
        (n, t) => n + Object.values(t).reduce((a, b) => a + b, 0),
        0,
      ),
      rssMiB: {
        baseline: first!.toFixed(1),
        peak: peak.toFixed(1),
        end: last.toFixed(1),
        // Sampled after each batch: quartiles of the run, to tell a leak (steady climb) from GC slack.
        quartiles: [0.25, 0.5, 0.75].map((q) => rss[Math.floor(q * (rss.length - 1))]!.toFixed(1)),
      },
      honest: { rounds: sorted.length, p50Ms: sorted[Math.floor(sorted.length / 2)], maxMs: sorted.at(-1) },
    };
    process.stdout.write(`fuzz summary: ${JSON.stringify(summary, null, 1)}\n`);
    expect(peak - first!).toBeLessThan(RSS_GROWTH_BOUND_MIB);
    // Hostile input is refused by the schemas, never by a handler tripping over it.
    const bugs =
      nodeLog().match(/^.*(unhandled|uncaught|TypeError|ReferenceError|out of memory).*$/gim) ?? [];
    expect(bugs).toEqual([]);
    expect(honest.host.getConnections(honest.node).length).toBeGreaterThan(0);
  }, 30_000);
});

// Every valid message the cases are derived from is valid (else the fuzz would test nothing deeper than the schema).
describe('fuzz bases', () => {
  it('are valid messages of their protocol or topic', async () => {
    const me = { peerId: honest.peerId, privateKey: honest.privateKey } as TestMember;
    for (const t of [...STREAMS, ...GOSSIP]) {
      const res = t.schema.safeParse(t.valid(me));
      expect(res.success, `${t.name}: ${res.error?.message}`).toBe(true);
    }
  });
});
