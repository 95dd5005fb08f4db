/**
 * Advert bytes: what one node's adverts cost the fleet with the warm list sent whole in every advert
 * (before) and as deltas (protocol/warm-delta.ts, now). A node in a campaign is simulated with the
 * real warm set (node/models/warm.ts: an LRU of 64), a real signed membership certificate and the real
 * encoder (node/fleet/adverts.ts): each job it starts warms a new prompt (and now and then a prompt is
 * observed cold: its cache was evicted); it publishes on every change of its warm list or load and
 * on every heartbeat, as node/fleet/fleet.ts does; before, with the whole warm list in each, now
 * with the list as a delta to the previous advert. Bytes are the encoded adverts; gossipsub then sends
 * each to every member, so a member receives (fleet size) × (a node's bytes per second), before mesh
 * duplicates.
 *
 *   npx node bench/advert-bytes.ts [--minutes 10] [--jobs-per-minute 20] [--interval-ms 5000] [--fleet 1000] [--json]
 */
import { parseArgs } from 'node:util';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { encodeAdvert, fitAdvert } from '../node/fleet/adverts.ts';
import { createWarmSet } from '../node/models/warm.ts';
import { seededRandom } from '../placement/seeded-random.ts';
import type { Advert, WarmEntry } from '../protocol/advert.ts';
import { signCertificate } from '../protocol/membership.ts';
import { createWarmEncoder } from '../protocol/warm-delta.ts';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    'jobs-per-minute': { type: 'string', default: '20' },
    'interval-ms': { type: 'string', default: '5000' },
    fleet: { type: 'string', default: '1000' },
    json: { type: 'boolean', default: false },
  },
});
const minutes = Number(values.minutes);
const jobsPerMinute = Number(values['jobs-per-minute']);
const intervalMs = Number(values['interval-ms']);
const fleetSize = Number(values.fleet);
const MODEL = 'qwen3-coder:30b';

async function baseAdvert(): Promise<Omit<Advert, 'warm' | 'seq' | 'load'>> {
  const fleetKey = await generateKeyPair('Ed25519');
  const peerId = '12D3KooWKmjA6zfrLC5LxN4U3SLf4i41Shu4c4VKeWYejs33s1G2';
  const cert = await signCertificate(fleetKey, {
    fleet: 'bench-fleet',
    gen: 1,
    peerId,
    roles: ['worker'],
    iat: 1_700_000_000_000,
    exp: 1_800_000_000_000,
    invitation: 'a'.repeat(32),
  });
  return {
    v: 1,
    peerId,
    sentAt: 1_700_000_000_000,
    leaving: false,
    version: '0.1.0',
    host: 'studio-07.local',
    addrs: ['/ip4/192.168.1.27/tcp/4001', '/ip6/fe80::1/tcp/4001'],
    models: [
      {
        id: 'qwen3-coder:30b',
        server: 'ollama',
        context: 32768,
        concurrency: 4,
        loaded: true,
        memoryBytes: 19e9,
      },
      {
        id: 'devstral:24b',
        server: 'ollama',
        context: 32768,
        concurrency: 2,
        loaded: false,
        memoryBytes: null,
      },
    ],
    memory: { total: 192e9, free: 120e9, reserved: 19e9 },
    workspaces: [`sha256:${'b'.repeat(64)}`],
    sandbox: { backend: 'seatbelt', ok: true },
    roles: ['worker'],
    cert,
  };
}

/** A moment of the node's state: a change (a job started or ended) or a heartbeat tick. */
interface Moment {
  t: number;
  kind: 'change' | 'tick';
  warm: WarmEntry[];
  running: number;
}

/** The node's changes and heartbeat ticks over the trace, each with its state then. */
function moments(): Moment[] {
  const warm = createWarmSet();
  const rnd = seededRandom(42);
  const out: Moment[] = [];
  const snap = (t: number, kind: Moment['kind']) => out.push({ t, kind, warm: warm.entries(), running });
  const id = (p: number) => `sha256:${p.toString(16).padStart(64, '0')}`;
  let running = 0;
  let prompt = 0;
  const ends: number[] = [];
  for (let t = 0; t < minutes * 60_000; t += 100) {
    if (t % intervalMs === 0) snap(t, 'tick');
    while (ends.length > 0 && ends[0]! <= t) {
      ends.shift();
      running -= 1;
      snap(t, 'change');
    }
    if (rnd() < (100 * jobsPerMinute) / 60_000) {
      // A job starts: its prompt warms (a task seen before comes back 30 % of the time); now and
      // then an older prompt is observed cold (its cache was evicted).
      const p = prompt > 0 && rnd() < 0.3 ? Math.floor(rnd() * prompt) : prompt++;
      warm.observe(id(p), MODEL, 'warm');
      if (rnd() < 0.1 && prompt > 3) warm.observe(id(prompt - 3), MODEL, 'cold');
      running += 1;
      ends.push(t + 8000 + rnd() * 8000);
      ends.sort((a, b) => a - b);
      snap(t, 'change');
    }
  }
  return out;
}

/** Before: every change and every tick published at once, the warm list whole in each. */
function before(base: Base, trace: Moment[]): number[] {
  return trace.map((m, seq) => advertBytes(base, m, seq, {}));
}

/** Now: the same adverts, the warm list as a delta to the previous one (protocol/warm-delta.ts). */
function now(base: Base, trace: Moment[]): number[] {
  const encoder = createWarmEncoder();
  return trace.map((m, seq) => advertBytes(base, m, seq, encoder.encode(m.warm)));
}

type Base = Awaited<ReturnType<typeof baseAdvert>>;

function advertBytes(base: Base, m: Moment, seq: number, warm: Partial<Advert>): number {
  const advert = fitAdvert({
    ...base,
    seq,
    warm: m.warm,
    load: { queued: 0, running: m.running, capacity: 4 },
  });
  return encodeAdvert({ ...advert, ...warm }).length;
}

async function trace(): Promise<{ whole: number[]; delta: number[] }> {
  const base = await baseAdvert();
  const events = moments();
  return { whole: before(base, events), delta: now(base, events) };
}

const { whole, delta } = await trace();
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const seconds = minutes * 60;
const row = (bytes: number[]) => ({
  adverts: bytes.length,
  meanBytes: Math.round(sum(bytes) / bytes.length),
  bytesPerSecond: Math.round(sum(bytes) / seconds),
  fleetReceiveMBps: Number((((sum(bytes) / seconds) * fleetSize) / 1e6).toFixed(2)),
});
const result = { minutes, jobsPerMinute, intervalMs, fleet: fleetSize, whole: row(whole), delta: row(delta) };
if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
else {
  process.stdout.write(
    `one node, ${minutes} min, ${jobsPerMinute} jobs/min, heartbeat ${intervalMs} ms\n` +
      `  before (whole warm list, every change and heartbeat): ${whole.length} adverts, ${result.whole.meanBytes} B/advert, ${result.whole.bytesPerSecond} B/s; a member of ${fleetSize} receives ${result.whole.fleetReceiveMBps} MB/s\n` +
      `  now (warm deltas):                                  ${delta.length} adverts, ${result.delta.meanBytes} B/advert, ${result.delta.bytesPerSecond} B/s; a member of ${fleetSize} receives ${result.delta.fleetReceiveMBps} MB/s ` +
      `(${(sum(delta) / sum(whole)).toFixed(3)}× the bytes)\n`,
  );
}
