// Child process for the multi-process collect tests: a worker's collection side only (no models):
// joins a fleet with a token, serves /vtnode/sample/2 and /vtnode/log/2 from its sample log, and
// appends a sample every `intervalMs` (publishing its digest), printing `seq <n>` after each, until
// `total` samples; then prints `done` and keeps serving until killed.
// Args: TOKEN LOG_PATH NAME TOTAL INTERVAL_MS [NAMESPACE]. Samples are drawn from NAMESPACE (default
// NAME): two workers of one namespace produce the same sample ids with the same candidates, as an
// honest worker does when it redoes the job of a worker that died.
// VT_TASK_ROWS=honest|tamper: each sample is logged with its task row (3 tasks of the namespace, as
// an executor logs a job's task) and /vtnode/task/1 serves the rows; `tamper` serves every row
// altered (same id, another prompt) under its true hash, and also runs a task of its own NAME that
// no other worker runs (every fifth sample).
// VT_WITHHOLD_LAST=1: the last body is served only after SIGUSR2 (see withholdLast).
import { dirname, join } from 'node:path';
import { multiaddr } from '@multiformats/multiaddr';
import { acceptToken } from '../../cli/commands/join.ts';
import { DataDir } from '../../node/data-dir.ts';
import { digestOf } from '../../node/digests/codec.ts';
import { createDigestGossip } from '../../node/digests/gossip.ts';
import {
  type BodySource,
  createLogServer,
  createSampleServer,
  logBodies,
  logDigests,
} from '../../node/digests/servers.ts';
import { digestSigner } from '../../node/digests/signature.ts';
import { createTaskServer } from '../../node/digests/task-server.ts';
import { createFleet } from '../../node/fleet/fleet.ts';
import { startMemberHost } from '../../node/membership/member-host.ts';
import { openSampleLog } from '../../node/worker/sample-log.ts';
import { advertTopic, digestTopic } from '../../protocol/topics.ts';
import { sampleTask } from '../helpers/samples.ts';
import { type WorkerProcPlan, workerProcBody } from './helpers.ts';

const [token, logPath, name, total, intervalMs, namespace = name] = process.argv.slice(2);
// A member like any other: the token's invitation is exchanged for a certificate (its own data dir
// beside the log keeps identity and certificate, so a restarted worker is the same member).
const dataDir = new DataDir(join(dirname(logPath!), `${name}-node`));
const fleet = await acceptToken(dataDir, token!);
const { privateKey } = await dataDir.identity();
const { host, membership } = await startMemberHost({
  dataDir,
  privateKey,
  listen: ['/ip4/127.0.0.1/tcp/0'],
  mdns: false,
  topics: [advertTopic(fleet.fleet), digestTopic(fleet.fleet)],
});
const log = openSampleLog({
  path: logPath!,
  origin: host.peerId.toString(),
  signer: digestSigner(privateKey),
});
const bodies = logBodies(log);
await createSampleServer({ host, source: process.env.VT_WITHHOLD_LAST ? withholdLast(bodies) : bodies });
await createLogServer({ host, source: logDigests(log) });
const taskRows = process.env.VT_TASK_ROWS;
const plan: WorkerProcPlan = {
  name: name!,
  namespace: namespace!,
  ...(taskRows === 'honest' || taskRows === 'tamper' ? { taskRows } : {}),
};
if (taskRows === 'honest') await createTaskServer({ host, source: log });
if (taskRows === 'tamper')
  await createTaskServer({
    host,
    source: {
      getTaskRows: (hashes) =>
        log.getTaskRows(hashes).map((r) => ({
          hash: r.hash,
          task: {
            ...r.task,
            messages: [{ role: 'user', content: 'TAMPERED: write add() and print process.env' }],
          },
        })),
    },
  });
/**
 * VT_WITHHOLD_LAST=1: the body of the last sample (seq TOTAL) is not served (each request for it prints
 * `withheld seq N`) until the process gets SIGUSR2 (it prints `released`): a body whose fetch is late.
 */
function withholdLast(source: BodySource): BodySource {
  const last = Number(total);
  let released = false;
  process.on('SIGUSR2', () => {
    released = true;
    process.stdout.write('released\n');
  });
  return {
    getRows(keys) {
      const rows = source.getRows(keys);
      if (released || !rows.some((r) => r.seq === last)) return rows;
      process.stdout.write(`withheld seq ${last}\n`);
      return rows.filter((r) => r.seq !== last);
    },
  };
}
const gossip = createDigestGossip({ host, fleetId: fleet.fleet, members: membership });
// Advertise like a daemon does, so every member (a restarted collector too) learns this worker's address.
createFleet({
  host,
  fleetId: fleet.fleet,
  intervalMs: 1000,
  seqBase: 1,
  bootstrap: fleet.bootstrap,
  members: membership,
  describe: () => ({
    version: '0.1.0',
    host: null,
    addrs: host.getMultiaddrs().map((a) => a.toString().replace(/\/p2p\/.*$/, '')),
    models: [],
    memory: { total: 1, free: 1, reserved: 0 },
    load: { queued: 0, running: 0, capacity: 0 },
    warm: [],
    workspaces: [],
    sandbox: { backend: 'none', ok: false, detail: 'test worker' },
    roles: ['worker'],
    cert: membership.certificate(),
  }),
});
for (const addr of fleet.bootstrap) await host.dial(multiaddr(addr), { signal: AbortSignal.timeout(10_000) });
// Digests count only once the fleet has admitted this worker.
const deadline = Date.now() + 20_000;
while (!membership.certificate()) {
  if (Date.now() > deadline) throw new Error('worker-proc: not admitted within 20 s');
  await new Promise((r) => setTimeout(r, 50));
}
process.stdout.write(`ready ${host.peerId.toString()}\n`);

let i = log.counts().samples;
const step = async () => {
  if (i >= Number(total)) {
    process.stdout.write('done\n');
    return;
  }
  const body = workerProcBody(plan, i);
  const taskId = body.taskId;
  // The task's prompt is the helpers' default (the body's promptFingerprint); its group is its id.
  const logged = taskRows ? log.append(body, { ...sampleTask(taskId), group: taskId }) : log.append(body);
  await gossip.publish(digestOf(logged));
  process.stdout.write(`seq ${logged.seq}\n`);
  i++;
  setTimeout(() => void step(), Number(intervalMs));
};
void step();
