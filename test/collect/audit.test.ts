import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCollector, scorerAuditor } from '../../node/collector/collector.ts';
import { openDatasetStore } from '../../node/collector/store.ts';
import { selectedForAudit } from '../../node/collector/trust.ts';
import { newPsk } from '../../node/data-dir.ts';
import type { Host } from '../../node/fleet/host.ts';
import { workspaceIdentity } from '../../node/workspace/content-id.ts';
import type { Task } from '../../protocol/task.ts';
import { createCheckedScorer, type Scorer } from '../../sandbox/scorer.ts';
import { sampleBody } from '../helpers/samples.ts';
import { makeTask, NODE_WS } from '../sandbox/fixtures.ts';
import { connect, serveLog, tempDir, testHost, testWorker } from './helpers.ts';

let tmp: Awaited<ReturnType<typeof tempDir>>;
let scorer: Scorer;
let task: Task;
let reference: string;
const hosts: Host[] = [];

beforeAll(async () => {
  tmp = await tempDir('vtnode-audit-test-');
  scorer = await createCheckedScorer({ workspaceId: async (d) => (await workspaceIdentity(d)).id });
  task = await makeTask({
    id: 'node-basic/math',
    workspace: NODE_WS,
    target: 'src/math.js',
    runner: 'node:test',
    testFiles: ['test/math.test.js'],
  });
  reference = await readFile(join(NODE_WS, 'src/math.js'), 'utf8');
}, 60_000);

afterAll(async () => {
  await scorer?.close();
  await Promise.all(hosts.map((h) => h.stop()));
  await tmp.cleanup();
});

describe('spot audits', () => {
  it('selects a deterministic fraction of sample ids', () => {
    const ids = Array.from({ length: 4000 }, (_, i) => `sha256:${i.toString(16).padStart(64, '0')}`);
    const chosen = ids.filter((id) => selectedForAudit(id, 0.05));
    expect(chosen.length).toBeGreaterThan(140);
    expect(chosen.length).toBeLessThan(260);
    expect(ids.filter((id) => selectedForAudit(id, 0.05))).toEqual(chosen);
    expect(ids.some((id) => selectedForAudit(id, 0))).toBe(false);
    expect(ids.every((id) => selectedForAudit(id, 1))).toBe(true);
  });

  it('catches a worker that inflates rewards: trust drops, its unverified samples are quarantined', async () => {
    const psk = newPsk();
    const { host: w, log } = await testWorker(psk);
    const c = await testHost(psk);
    hosts.push(w, c);
    const broken = reference.replace('return a + b;', 'return a - b;');
    expect(broken).not.toBe(reference);
    // What an inflating worker logs: every reward 1, whatever its sandbox said.
    const mk = (index: number, candidate: string) =>
      log.append({
        ...sampleBody(task.id, 'qwen', index, { candidate }),
        promptFingerprint: task.promptFingerprint,
      });
    mk(0, reference);
    mk(1, broken);
    mk(2, `${reference}\n`);
    await serveLog(w, log);
    await connect(c, w);

    const store = openDatasetStore(join(tmp.dir, 'ds'));
    store.putTasks([task]);
    const collector = createCollector({
      host: c,
      peers: () => [w.peerId.toString()],
      store,
      auditFraction: 1,
      auditor: scorerAuditor(scorer, new Map([[task.workspace.id, NODE_WS]])),
    });
    await collector.catchUp();
    await collector.idle();

    const samples = store.samples();
    expect(samples.map((s) => [s.body?.index, s.audit, s.quarantined])).toEqual([
      [0, 'passed', false],
      [1, 'failed', true],
      [2, 'passed', false],
    ]);
    // add() is wrong: the add test fails, the others pass (reward = pass rate < 1).
    expect(samples[1]!.auditReward).toBeLessThan(1);
    const [trust] = collector.trust();
    expect(trust).toMatchObject({ auditsPassed: 2, auditFailures: 1, suspect: true });
    expect(trust!.trust).toBeLessThan(0.5);
    expect(collector.stats()).toMatchObject({ audits: 3, auditFailures: 1 });
    await collector.stop();
    store.close();
  }, 120_000);

  it('audits reward-0 claims too: a worker that deflates a passing candidate is caught and quarantined', async () => {
    const psk = newPsk();
    const { host: w, log } = await testWorker(psk);
    const c = await testHost(psk);
    hosts.push(w, c);
    // The reference passes every test; this worker claims 0 for it (and 1 for another passing one).
    log.append({
      ...sampleBody(task.id, 'qwen', 0, { candidate: reference, reward: 0 }),
      promptFingerprint: task.promptFingerprint,
    });
    log.append({
      ...sampleBody(task.id, 'qwen', 1, { candidate: `${reference}\n` }),
      promptFingerprint: task.promptFingerprint,
    });
    await serveLog(w, log);
    await connect(c, w);
    const store = openDatasetStore(join(tmp.dir, 'ds-deflate'));
    store.putTasks([task]);
    const collector = createCollector({
      host: c,
      peers: () => [w.peerId.toString()],
      store,
      auditFraction: 1,
      auditor: scorerAuditor(scorer, new Map([[task.workspace.id, NODE_WS]])),
    });
    await collector.catchUp();
    await collector.idle();
    const samples = store.samples();
    expect(
      samples.map((s) => [s.body?.index, s.digest.reward, s.audit, s.auditReward, s.quarantined]),
    ).toEqual([
      [0, 0, 'failed', 1, true],
      [1, 1, 'passed', 1, false],
    ]);
    expect(collector.trust()[0]).toMatchObject({ auditFailures: 1, suspect: true });
    await collector.stop();
    store.close();
  }, 120_000);

  it('audits both sides of claims that disagree on one sample id, the reward-0 side too, even at audit fraction 0', async () => {
    const psk = newPsk();
    const { host: honestHost, log: honest } = await testWorker(psk);
    const { host: hijackHost, log: hijacker } = await testWorker(psk);
    const c = await testHost(psk);
    hosts.push(honestHost, hijackHost, c);
    const body = {
      ...sampleBody(task.id, 'qwen', 0, { candidate: reference }),
      promptFingerprint: task.promptFingerprint,
    };
    honest.append(body);
    // The hijacker republishes the honest sample id with reward 0 (the same candidate: a re-score says 1).
    hijacker.append({ ...body, score: { ...body.score, reward: 0, passed: 0, failed: 4 } });
    for (const [h, log] of [
      [honestHost, honest],
      [hijackHost, hijacker],
    ] as const) {
      await serveLog(h, log);
      await connect(c, h);
    }
    const store = openDatasetStore(join(tmp.dir, 'ds-hijack'));
    store.putTasks([task]);
    const collector = createCollector({
      host: c,
      peers: () => [honestHost.peerId.toString(), hijackHost.peerId.toString()],
      store,
      auditFraction: 0,
      auditor: scorerAuditor(scorer, new Map([[task.workspace.id, NODE_WS]])),
    });
    await collector.catchUp();
    await collector.idle();
    const byOrigin = new Map(store.samples().map((s) => [s.digest.origin, s]));
    expect(byOrigin.get(honestHost.peerId.toString())).toMatchObject({ audit: 'passed', quarantined: false });
    expect(byOrigin.get(hijackHost.peerId.toString())).toMatchObject({
      audit: 'failed',
      auditReward: 1,
      quarantined: true,
    });
    const { buildReport } = await import('../../node/collector/report.ts');
    expect(buildReport(store.samples()).models[0]).toMatchObject({ samples: 1, pass1: 1 });
    await collector.stop();
    store.close();
  }, 120_000);

  it('does not audit without the workspace, and audits nothing of an honest worker at fraction 0', async () => {
    const psk = newPsk();
    const { host: w, log } = await testWorker(psk);
    const c = await testHost(psk);
    hosts.push(w, c);
    log.append({
      ...sampleBody(task.id, 'qwen', 0, { candidate: reference }),
      promptFingerprint: task.promptFingerprint,
    });
    await serveLog(w, log);
    await connect(c, w);
    const store = openDatasetStore(join(tmp.dir, 'ds2'));
    store.putTasks([task]);
    const collector = createCollector({
      host: c,
      peers: () => [w.peerId.toString()],
      store,
      auditFraction: 1,
      auditor: scorerAuditor(scorer, new Map()),
    });
    await collector.catchUp();
    await collector.idle();
    expect(store.samples()[0]).toMatchObject({ bodyState: 'ok', audit: 'none', quarantined: false });
    await collector.stop();
    store.close();
  }, 60_000);
});

describe('the audit queue', () => {
  it('drains again after the disk was full mid-drain: no row stays unaudited for good', async () => {
    const psk = newPsk();
    const { host: w, log } = await testWorker(psk);
    const c = await testHost(psk);
    hosts.push(w, c);
    for (let i = 0; i < 4; i++)
      log.append({
        ...sampleBody(task.id, 'qwen', i, { candidate: `${reference}${'\n'.repeat(i)}` }),
        promptFingerprint: task.promptFingerprint,
      });
    await serveLog(w, log);
    await connect(c, w);
    const store = openDatasetStore(join(tmp.dir, 'ds-blocked'));
    store.putTasks([task]);
    // The disk fills during the first audit, and frees again once the drain has stopped.
    let full: string | null = null;
    let audits = 0;
    const collector = createCollector({
      host: c,
      peers: () => [w.peerId.toString()],
      store,
      auditFraction: 1,
      storage: { blocked: () => full, failed: () => false },
      auditor: {
        audit: async (_task, body) => {
          if (++audits === 1) full = 'the disk is full';
          return { reward: body.score.reward };
        },
      },
    });
    await collector.catchUp();
    await collector.idle();
    expect(store.samples().filter((s) => s.audit === 'none')).toHaveLength(3);
    full = null;
    // The next catch-up re-queues the unaudited rows: the drain starts again and ends them all.
    await collector.catchUp();
    await collector.idle();
    expect(store.samples().map((s) => s.audit)).toEqual(['passed', 'passed', 'passed', 'passed']);
    expect(audits).toBe(4);
    await collector.stop();
    store.close();
  }, 60_000);
});
