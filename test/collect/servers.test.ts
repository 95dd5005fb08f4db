import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { newPsk } from '../../node/data-dir.ts';
import {
  combineSources,
  createLogServer,
  createSampleServer,
  fetchBodies,
  fetchDigests,
} from '../../node/digests/servers.ts';
import type { Host } from '../../node/fleet/host.ts';
import { dialFramed } from '../../node/wire/streams.ts';
import { openSampleLog, type SampleLog } from '../../node/worker/sample-log.ts';
import { MAX_SAMPLE_IDS_PER_REQUEST } from '../../protocol/fetch.ts';
import { SAMPLE_PROTOCOL } from '../../protocol/topics.ts';
import { sampleBody } from '../helpers/samples.ts';
import { connect, testHost } from './helpers.ts';

let server: Host;
let client: Host;
let log: SampleLog;
const ids: string[] = [];

beforeAll(async () => {
  const psk = newPsk();
  [server, client] = await Promise.all([testHost(psk), testHost(psk)]);
  log = openSampleLog({ path: ':memory:', origin: server.peerId.toString() });
  for (let i = 0; i < 150; i++) ids.push(log.append(sampleBody(`t${i % 7}`, 'qwen', i)).body.sampleId);
  await createSampleServer({ host: server, source: log });
  await createLogServer({ host: server, source: log });
  await connect(client, server);
}, 30_000);

afterAll(async () => {
  await Promise.all([client?.stop(), server?.stop()]);
  log?.close();
});

describe('/vtnode/sample/1 and /vtnode/log/1', () => {
  it('serves bodies by id in the order asked, skipping unknown ids, split into bounded requests', async () => {
    const unknown = `sha256:${'0'.repeat(64)}`;
    const wanted = [ids[149]!, unknown, ...ids.slice(0, 100)];
    const got = await fetchBodies(client, server.peerId, wanted);
    expect(got.map((r) => r.body.sampleId)).toEqual([ids[149], ...ids.slice(0, 100)]);
    expect(got[0]).toMatchObject({ origin: server.peerId.toString(), seq: 150 });
  });

  it('resets a request over the id cap or malformed, and stays up for the next one', async () => {
    const tooMany = Array.from(
      { length: MAX_SAMPLE_IDS_PER_REQUEST + 1 },
      (_, i) => `sha256:${i.toString(16).padStart(64, '0')}`,
    );
    for (const request of [{ v: 1, sampleIds: tooMany }, { v: 1, sampleIds: ['nope'] }, { v: 2 }]) {
      const wire = await dialFramed(client, server.peerId, SAMPLE_PROTOCOL, { schema: z.unknown() });
      await wire.send(request);
      await wire.closeWrite().catch(() => {});
      await expect(wire.read()).rejects.toThrow();
    }
    expect(await fetchBodies(client, server.peerId, [ids[0]!])).toHaveLength(1);
  });

  it('pages digests after a seq with the server’s high-water mark', async () => {
    const page = await fetchDigests(client, server.peerId, 140, 5);
    expect(page.highWater).toBe(150);
    expect(page.digests.map((d) => d.seq)).toEqual([141, 142, 143, 144, 145]);
    expect((await fetchDigests(client, server.peerId, 150)).digests).toEqual([]);
  });

  it('combines sources: the first that holds an id wins, order kept', () => {
    const other = openSampleLog({ path: ':memory:', origin: 'peer-other' });
    const extra = other.append(sampleBody('x', 'qwen', 999)).body.sampleId;
    const both = combineSources(log, other);
    expect(both.getMany([extra, ids[3]!, 'sha256:missing']).map((r) => [r.origin, r.body.sampleId])).toEqual([
      ['peer-other', extra],
      [server.peerId.toString(), ids[3]],
    ]);
    other.close();
  });
});
