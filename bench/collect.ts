// Collector benchmark: one worker process holding N samples (default 10,000, ~2 KiB candidates),
// one collector (this process) on loopback.
//   npx node bench/collect.ts [--samples 10000]
// Prints: digest ingest rate over /vtnode/log/2 (catch-up, every signature verified) and over
// gossip, each ÷ the rate of inserting the same digests into the dataset index directly (same run);
// body fetch rate over /vtnode/sample/2 ÷ reading the same bodies from the worker's sample log
// locally (same run); collector RSS before and after.
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { multiaddr } from '@multiformats/multiaddr';
import { sleep } from '../node/async/sleep.ts';
import { createCollector } from '../node/collector/collector.ts';
import { openDatasetStore } from '../node/collector/store.ts';
import { newPsk } from '../node/data-dir.ts';
import { createDigestGossip } from '../node/digests/gossip.ts';
import { fetchDigests } from '../node/digests/servers.ts';
import { checkRelayed } from '../node/digests/signature.ts';
import { createHost } from '../node/fleet/host.ts';
import { openSampleLog } from '../node/worker/sample-log.ts';
import { digestTopic } from '../protocol/topics.ts';

const { values } = parseArgs({ options: { samples: { type: 'string', default: '10000' } } });
const N = Number(values.samples);
const FLEET = 'bench';
const dir = await mkdtemp(join(tmpdir(), 'vtnode-bench-collect-'));
const mib = (b: number) => `${(b / 1024 / 1024).toFixed(1)} MiB`;
const rate = (n: number, ms: number) => (n / ms) * 1000;

try {
  const psk = newPsk();
  const logPath = join(dir, 'worker.db');
  const child = spawn(
    process.execPath,
    [join(import.meta.dirname, 'collect/worker.ts'), psk, FLEET, logPath, String(N)],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  let out = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  const waitFor = async (re: RegExp, ms = 300_000) => {
    const end = Date.now() + ms;
    while (!re.test(out)) {
      if (Date.now() > end || child.exitCode !== null) throw new Error(`worker: no ${re}\n${out}`);
      await sleep(50);
    }
    return re.exec(out)!;
  };
  const addr = (await waitFor(/ready (\S+)\n/))[1]!;
  const host = await createHost({
    privateKey: await generateKeyPair('Ed25519'),
    psk,
    listen: ['/ip4/127.0.0.1/tcp/0'],
    mdns: false,
    topics: [digestTopic(FLEET)],
  });
  await host.start();
  const ma = multiaddr(addr);
  await host.dial(ma);
  const worker = ma.getPeerId()!;
  const rssStart = process.memoryUsage().rss;

  // Baselines: the same digests into an index directly; the same bodies read from the log locally.
  const log = openSampleLog({ path: logPath, origin: worker }); // read-only: no signer
  const digests = [] as ReturnType<typeof log.digestsSince>;
  for (let after = 0; after < N; after += 500) digests.push(...log.digestsSince(after, 500));
  const base = openDatasetStore(join(dir, 'baseline'));
  let t = performance.now();
  for (const d of digests) base.addDigest(d);
  const baseIngestMs = performance.now() - t;
  base.close();
  t = performance.now();
  const ids = digests.map((d) => d.sampleId);
  for (let i = 0; i < ids.length; i += 64) log.getMany(ids.slice(i, i + 64));
  const baseReadMs = performance.now() - t;
  log.close();

  // Catch-up: digests over /vtnode/log/2 (signatures verified), then bodies over /vtnode/sample/2.
  const store = openDatasetStore(join(dir, 'dataset'));
  const collector = createCollector({ host, peers: () => [worker], store, fetchConcurrency: 4 });
  t = performance.now();
  let after = 0;
  let storeMs = 0;
  for (;;) {
    const page = await fetchDigests(host, worker, worker, after);
    const s = performance.now();
    const { valid, forged } = checkRelayed(worker, page.digests);
    if (forged.length > 0) throw new Error(`${forged.length} digests do not verify: ${forged[0]!.why}`);
    store.addDigests(valid);
    storeMs += performance.now() - s;
    if (page.digests.length === 0) break;
    after = page.digests.at(-1)!.seq;
  }
  const logIngestMs = performance.now() - t;
  t = performance.now();
  await collector.fetchPending();
  await collector.idle();
  const fetchMs = performance.now() - t;
  const counts = store.counts();
  const rssAfterFetch = process.memoryUsage().rss;
  await collector.stop();
  store.close();

  // Gossip: the worker publishes every digest; a second dataset ingests what arrives.
  const gossipStore = openDatasetStore(join(dir, 'gossip'));
  let received = 0;
  let last = 0;
  const gossip = createDigestGossip({
    host,
    fleetId: FLEET,
    onDigest: (d) => {
      gossipStore.addDigest(d);
      received++;
      last = performance.now();
    },
  });
  const topic = digestTopic(FLEET);
  const meshEnd = Date.now() + 20_000;
  while (host.services.pubsub.getSubscribers(topic).length === 0 && Date.now() < meshEnd) await sleep(100);
  await sleep(1500);
  t = performance.now();
  child.stdin.write('publish\n');
  await waitFor(/published (\d+)/);
  const publishMs = performance.now() - t;
  const quietEnd = Date.now() + 30_000;
  while (received < N && Date.now() < quietEnd) await sleep(100);
  const gossipMs = (received ? last : performance.now()) - t;
  gossip.stop();
  // What gossip dropped, catch-up recovers.
  t = performance.now();
  let gAfter = gossipStore.highWater(worker);
  let recovered = 0;
  for (;;) {
    const page = await fetchDigests(host, worker, worker, gAfter);
    recovered += gossipStore
      .addDigests(checkRelayed(worker, page.digests).valid)
      .filter((r) => r === 'new').length;
    if (page.digests.length === 0) break;
    gAfter = page.digests.at(-1)!.seq;
  }
  const recoverMs = performance.now() - t;
  const gossipTotal = gossipStore.counts().digests;
  gossipStore.close();
  const rssEnd = process.memoryUsage().rss;

  const rows = [
    ['digest ingest, direct index insert (baseline)', `${rate(N, baseIngestMs).toFixed(0)} /s`, '1'],
    [
      'digest ingest over /vtnode/log/2 (catch-up, verified)',
      `${rate(N, logIngestMs).toFixed(0)} /s (${(logIngestMs / 1000).toFixed(2)} s, ${(storeMs / 1000).toFixed(2)} s of it verifying and storing)`,
      `${(baseIngestMs / logIngestMs).toFixed(2)}× baseline`,
    ],
    [
      'digest ingest over gossip',
      `${rate(received, gossipMs).toFixed(0)} /s, ${received}/${N} arrived (publish took ${(publishMs / 1000).toFixed(2)} s)`,
      `${(rate(received, gossipMs) / rate(N, baseIngestMs)).toFixed(2)}× baseline`,
    ],
    [
      'then catch-up after gossip',
      `${recovered} recovered in ${(recoverMs / 1000).toFixed(2)} s: ${gossipTotal}/${N} held`,
      '',
    ],
    ['body read from the sample log locally (baseline)', `${rate(N, baseReadMs).toFixed(0)} /s`, '1'],
    [
      'body fetch over /vtnode/sample/2, verify, store',
      `${rate(counts.bodies, fetchMs).toFixed(0)} /s (${counts.bodies} bodies, ${(fetchMs / 1000).toFixed(2)} s)`,
      `${(baseReadMs / fetchMs).toFixed(2)}× baseline`,
    ],
    [
      'collector RSS: start / after fetch / end',
      `${mib(rssStart)} / ${mib(rssAfterFetch)} / ${mib(rssEnd)}`,
      '',
    ],
  ];
  for (const [a, b, c] of rows) console.log(`${a!.padEnd(50)} ${b!.padEnd(60)} ${c}`);
  child.stdin.end();
  await new Promise((r) => child.on('exit', r));
  await host.stop();
} finally {
  await rm(dir, { recursive: true, force: true });
}
