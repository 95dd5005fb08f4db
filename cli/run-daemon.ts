import { type DaemonOptions, startDaemon } from '../node/daemon.ts';
import type { DataDir, FleetFile, NodeConfig } from '../node/data-dir.ts';
import { createModelService } from '../node/models/service.ts';
import { CliError } from './command.ts';
import { refuseUnreadyWorkspace } from './scorer.ts';
import { startUi } from './ui.ts';

/** Runs a node in the foreground until SIGINT/SIGTERM or `vtnode leave`; resolves to the exit code. */
export async function runDaemonForeground(
  dataDir: DataDir,
  fleet: FleetFile,
  config: NodeConfig,
  extra: Pick<DaemonOptions, 'wrapScorer'> & { ui?: { host: string; port: number } | null } = {},
): Promise<number> {
  // A node advertises its workspaces: one where tests cannot run must not be advertised.
  for (const dir of config.workspaces) refuseUnreadyWorkspace(dir);
  const abort = new AbortController();
  const onSignal = () => abort.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const daemon = await startDaemon({
    dataDir,
    fleet,
    config,
    models: createModelService({ urls: config.modelServers, autodetect: config.modelServers.length === 0 }),
    signal: abort.signal,
    ...(extra.wrapScorer ? { wrapScorer: extra.wrapScorer } : {}),
  });
  process.stderr.write(
    `vtnode ${daemon.peerId} is in fleet "${fleet.fleet}"\n` +
      `  listening on ${daemon.addrs().join('\n               ')}\n` +
      `  data dir ${dataDir.root}\n` +
      '  `vtnode status` shows the fleet; Ctrl-C or `vtnode leave` stops this node.\n',
  );
  const ui = extra.ui
    ? await startUi(extra.ui, { status: () => daemon.status(), campaigns: () => daemon.campaigns() }).catch(
        async (err: Error) => {
          await daemon.stop();
          throw err;
        },
      )
    : null;
  await daemon.stopped;
  await ui?.close();
  process.removeListener('SIGINT', onSignal);
  process.removeListener('SIGTERM', onSignal);
  const failure = daemon.failure();
  if (failure) throw new CliError(failure.message);
  process.stderr.write('vtnode stopped\n');
  return 0;
}
