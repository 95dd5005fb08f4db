import { resolve } from 'node:path';
import { openDatasetStore } from '../../node/collector/store.ts';
import type { startDaemon } from '../../node/daemon.ts';
import { workspaceId } from '../../node/workspace/content-id.ts';
import type { Scorer } from '../../sandbox/scorer.ts';
import { readTasks } from '../../sandbox/tasks-file.ts';
import { CliError, type Command } from '../command.ts';
import { dataDirFrom, mergeConfig, NODE_OPTIONS } from '../node-options.ts';
import { commandLine, duration, fraction, group, string } from '../options.ts';
import { openScorer, refuseUnreadyWorkspace } from '../scorer.ts';
import { startUi, UI_OPTIONS, uiSettings } from '../ui.ts';
import { acceptToken } from './join.ts';

const line = commandLine({
  prose: `Usage: vtnode collect --out DATASET [collect options] [node options]

Runs this node as a collector until stopped (Ctrl-C or \`vtnode leave\`): follows the fleet's
sample digests, fetches every body from its origin (or any node holding it), checks it against the
signed digest, catches up with every node's log on start and periodically (so nothing gossiped while
it was away is lost), spot-audits verified samples in its own sandbox, and keeps trust per origin.
The node must be in a fleet: \`vtnode init\` or \`vtnode join\` first with this --data-dir, or
--token TOKEN here (joins, as \`vtnode join\` does, and saves the fleet in the data dir). Audits
score against the node's --workspace checkouts (no workspace, no audits), in the sandbox unless
--unconfined.`,
  groups: [
    group('Collect options:', {
      token: string({ doc: 'join the fleet this token names first', value: 'TOKEN' }),
      out: string({ doc: 'dataset dir (created; reused on restart)', value: 'DATASET', required: true }),
      tasks: string({
        doc: "tasks.jsonl of the campaign (optional: every sample's task row is fetched from the nodes that ran it and kept only if it hashes to the hash the worker signed; a file's rows are checked the same way)",
        value: 'FILE',
      }),
      'min-reward': fraction({
        doc: 'reward that counts as verified',
        value: 'R',
        default: 1,
        defaultText: '1.0',
      }),
      'audit-fraction': fraction({
        doc: 'share of verified samples re-scored (default 0.05); every sample of a node caught lying is re-scored',
        default: 0.05,
      }),
      'catch-up-interval': duration({
        doc: 'how often to ask every node for missed digests',
        default: 30_000,
      }),
    }),
    NODE_OPTIONS,
    UI_OPTIONS,
  ],
});

export const command: Command = {
  name: 'collect',
  summary: 'run this node as a collector: digests in, verified dataset out',
  usage: line.usage,
  line,
  async run(argv) {
    const { values } = line.parse(argv);
    const uiAt = uiSettings(values);
    const minReward = values['min-reward'];
    const auditFraction = values['audit-fraction'];
    const catchUpIntervalMs = values['catch-up-interval'];
    const dataDir = dataDirFrom(values);
    const fleet = values.token ? await acceptToken(dataDir, values.token) : await dataDir.readFleet();
    if (!fleet)
      throw new CliError(
        `${dataDir.root} is not in a fleet: run \`vtnode init --fleet NAME\` or \`vtnode join TOKEN\` with this --data-dir first`,
      );
    const tasks = values.tasks ? await readTasks(values.tasks) : [];
    const config = mergeConfig(await dataDir.readConfig(), values);
    // Audits run the tasks' tests in these workspaces: one where they cannot run is refused up front.
    if (auditFraction > 0) for (const dir of config.workspaces) refuseUnreadyWorkspace(dir, tasks);
    await dataDir.writeConfig(config);

    const workspaces = new Map<string, string>();
    for (const dir of config.workspaces) workspaces.set(await workspaceId(dir), resolve(dir));
    let scorer: Scorer | null = null;
    if (workspaces.size > 0 && auditFraction > 0) {
      scorer = await openScorer({
        unconfined: values.unconfined,
        refusing: 'audits need the sandbox; --audit-fraction 0 collects without audits',
      });
    }

    // The dataset opens before the node listens: a corrupt index refuses the start at once.
    const store = openDatasetStore(resolve(values.out));
    // The node's modules (libp2p, gossipsub) load only when it starts: `collect --help` stays light.
    const { startDaemon } = await import('../../node/daemon.ts');
    const { startCollectorNode } = await import('../../node/collector/node.ts');
    let daemon: Awaited<ReturnType<typeof startDaemon>>;
    try {
      daemon = await startDaemon({ dataDir, fleet, config });
    } catch (err) {
      store.close();
      throw err;
    }
    const node = await startCollectorNode({
      store,
      fleet: {
        host: daemon.host,
        fleetId: fleet.fleet,
        members: daemon.membership,
        peers: () => [
          ...daemon.status().nodes.map((n) => n.peerId),
          ...daemon.host.getPeers().map((p) => p.toString()),
        ],
      },
      out: resolve(values.out),
      tasks,
      ...(values.tasks ? { tasksSource: `file:${resolve(values.tasks)}` } : {}),
      onOffence: (peer, why) => void daemon.offences.record(peer, why, Date.now()),
      minReward,
      auditFraction,
      scorer,
      workspaces,
      catchUpIntervalMs,
      statusFile: dataDir.path('collector.json'),
    });
    // The node advertises the collector role and shows its trust table in `vtnode status`; the
    // collector stops before the host it fetches over (on Ctrl-C and on `vtnode leave` alike).
    // Its audits run in the sandbox: the advert (and `vtnode status`) shows that one.
    const auditSandbox = scorer
      ? { backend: scorer.confinement.name, ok: true }
      : { backend: 'none' as const, ok: false, detail: 'audits off' };
    daemon.addRole(
      'collector',
      () => node.status(),
      () => node.stop(),
      () => auditSandbox,
    );
    const onSignal = () => void daemon.stop();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    process.stderr.write(
      `vtnode ${daemon.peerId} is collecting fleet "${fleet.fleet}" into ${resolve(values.out)}\n` +
        `  listening on ${daemon.addrs().join('\n               ')}\n` +
        `  ${values.tasks ? `${tasks.length} tasks added from ${values.tasks}` : 'task rows fetched from the nodes that ran the samples'}; audits: ${scorer ? `${auditFraction * 100}% of verified samples` : 'off (no --workspace)'}\n` +
        '  Ctrl-C or `vtnode leave` stops it.\n',
    );
    const ui = uiAt
      ? await startUi(uiAt, {
          status: () => daemon.status(),
          campaigns: () => daemon.campaigns(),
          dataset: () => ({ status: () => node.status(), samples: () => store.samples(), minReward }),
        }).catch(async (err: Error) => {
          await daemon.stop();
          throw err;
        })
      : null;
    await daemon.stopped;
    await ui?.close();
    await node.stop();
    const failure = daemon.failure();
    if (failure) throw new CliError(failure.message);
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    const s = node.status();
    process.stderr.write(
      `collector stopped: ${s.stats.samples} samples (${s.stats.digests} digests), ${s.stats.bodies} bodies, ${s.stats.pending} pending, ${s.stats.rejected} rejected\n`,
    );
    return 0;
  },
};
