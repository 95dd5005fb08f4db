// A node still fetching a workspace (--fetch-workspaces) takes jobs for it (issue 13, build 2): the
// samples generate at once and are scored once the workspace is ready; a fetch that fails ends the
// job as a sandbox error (placed again elsewhere), never with a score. A node that neither holds nor
// fetches the workspace refuses the job.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { StreamHost } from '../../node/wire/streams.ts';
import { createJobExecutor, type FetchingWorkspaces } from '../../node/worker/executor.ts';
import { openSampleLog, type SampleLog } from '../../node/worker/sample-log.ts';
import { seededSigner } from '../helpers/digests.ts';
import { fakeModels, fakeScorer, localJob, until } from '../helpers/fake-worker.ts';
import { jobRequest, sampleTask } from '../helpers/samples.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A workspace fetch the test finishes (or fails) when it likes. */
function pendingFetch(id: string) {
  let finish!: (root: string) => void;
  let fail!: (err: Error) => void;
  const ready = new Promise<string>((resolve, reject) => {
    finish = resolve;
    fail = reject;
  });
  ready.catch(() => {});
  let fetching = true;
  let asked = 0;
  const fetchingWorkspaces: FetchingWorkspaces = {
    has: (w) => fetching && w === id,
    whenReady: (w, signal) => {
      asked++;
      if (w !== id) return Promise.reject(new Error('not fetching it'));
      return Promise.race([
        ready,
        new Promise<string>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
      ]);
    },
  };
  return {
    fetchingWorkspaces,
    asked: () => asked,
    finish: (root: string) => {
      fetching = false;
      finish(root);
    },
    fail: (err: Error) => {
      fetching = false;
      fail(err);
    },
  };
}

async function setup(fetch: FetchingWorkspaces | undefined) {
  const dir = await mkdtemp(join(tmpdir(), 'vt-fetching-'));
  const signer = await seededSigner(11);
  const sampleLog: SampleLog = openSampleLog({
    path: join(dir, 'samples.db'),
    origin: signer.origin,
    signer,
  });
  const scored: string[] = [];
  const executor = createJobExecutor({
    host: { handle: async () => {}, unhandle: async () => {} } as unknown as StreamHost,
    peerId: signer.origin,
    models: fakeModels(),
    scorer: {
      ...fakeScorer(),
      score: async (r) => {
        scored.push(r.workspaceDir);
        return fakeScorer().score(r);
      },
    },
    workspaces: new Map(),
    ...(fetch ? { fetching: fetch } : {}),
    sampleLog,
    maxJobs: 2,
  });
  let open = true;
  /** Stops the executor and closes the log at once, as the worker role does. */
  const stop = async () => {
    await executor.stop();
    if (open) sampleLog.close();
    open = false;
  };
  cleanups.push(async () => {
    await stop();
    await rm(dir, { recursive: true, force: true });
  });
  return { executor, origin: signer.origin, scored, stop };
}

/** Sends one job on a local stream and collects what the worker answers until the stream ends. */
function runJob(executor: ReturnType<typeof createJobExecutor>, origin: string) {
  return localJob(executor, jobRequest(sampleTask('t-fetching'), origin, [0, 1], 2));
}

const WS_ID = sampleTask('t-fetching').workspace.id;

describe('a job for a workspace the node is fetching', () => {
  it('is accepted, generates at once, and is scored in the workspace once it is ready', async () => {
    const fetch = pendingFetch(WS_ID);
    const { executor, origin, scored } = await setup(fetch.fetchingWorkspaces);
    const job = runJob(executor, origin);
    await until(() => fetch.asked() === 2, 'both samples generated and waiting for the workspace');
    // Generated (the submitter hears it), not scored.
    expect(job.messages.map((m) => m.type)).toEqual(['accepted', 'generated', 'generated']);
    expect(scored).toEqual([]);
    // Waiting for the workspace counts as waiting to score: the job is in the advert's load.
    expect(executor.load().queued + executor.load().running).toBe(1);
    fetch.finish('/ws/ready');
    const messages = await job.done;
    expect(messages.filter((m) => m.type === 'sample')).toHaveLength(2);
    expect(messages.at(-1)).toMatchObject({ type: 'end', status: 'done' });
    expect(scored).toEqual(['/ws/ready', '/ws/ready']);
  });

  it('fails as a sandbox error, with no sample, when the fetch fails', async () => {
    const fetch = pendingFetch(WS_ID);
    const { executor, origin, scored } = await setup(fetch.fetchingWorkspaces);
    const job = runJob(executor, origin);
    await until(() => fetch.asked() >= 1, 'a sample waiting for the workspace');
    fetch.fail(new Error('npm ci exited with 1'));
    const messages = await job.done;
    expect(messages.filter((m) => m.type === 'sample')).toEqual([]);
    expect(messages.at(-1)).toMatchObject({
      type: 'end',
      status: 'failed',
      reason: 'sandbox-error',
      message: expect.stringMatching(/could not be made ready here: npm ci exited with 1|no longer holds/),
    });
    expect(scored).toEqual([]);
  });

  it('ends as shutdown when the node stops, before the node closes its sample log', async () => {
    // stop() used to return before the aborted job's end path read the log, which the worker role
    // then closed: "statement has been finalized", an unhandled rejection that crashes a daemon.
    const fetch = pendingFetch(WS_ID);
    const { executor, origin, stop } = await setup(fetch.fetchingWorkspaces);
    const job = runJob(executor, origin);
    await until(() => fetch.asked() === 2, 'both samples waiting for the workspace');
    await stop();
    const messages = await job.done;
    expect(messages.at(-1)).toMatchObject({ type: 'end', status: 'failed', reason: 'shutdown' });
  });

  it('is refused by a node that neither holds nor fetches the workspace', async () => {
    const { executor, origin } = await setup(pendingFetch('sha256:other').fetchingWorkspaces);
    const messages = await runJob(executor, origin).done;
    expect(messages).toEqual([expect.objectContaining({ type: 'refused', reason: 'workspace-missing' })]);
  });
});
