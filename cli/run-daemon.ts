import { type DaemonOptions, startDaemon } from '../node/daemon.ts';
import type { DataDir, FleetFile, NodeConfig } from '../node/data-dir.ts';
import { createModelService } from '../node/models/service.ts';
import { scaledHedge } from '../placement/hedge.ts';
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
    ...guestInterval(),
    ...hedgeScale(),
    ...workspaceServing(),
    ...(extra.wrapScorer ? { wrapScorer: extra.wrapScorer } : {}),
  });
  process.stderr.write(
    `vtnode ${daemon.peerId} is in fleet "${fleet.fleet}"\n` +
      `  listening on ${daemon.addrs().join('\n               ')}\n` +
      `  data dir ${dataDir.root}\n` +
      guestLine(config) +
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

function guestLine(config: NodeConfig): string {
  const rules = [
    config.pauseOnBattery && 'on battery',
    config.maxLoad !== null && `while the load is above ${config.maxLoad}`,
    config.pauseWhileUsedMs !== null &&
      (process.platform === 'darwin'
        ? `while the keyboard or mouse was used in the last ${config.pauseWhileUsedMs / 1000} s`
        : null),
  ].filter(Boolean);
  const unsupported =
    config.pauseWhileUsedMs !== null && process.platform !== 'darwin'
      ? '  --pause-while-used works on macOS only: ignored here\n'
      : '';
  return (rules.length > 0 ? `  takes no new jobs ${rules.join(' or ')}\n` : '') + unsupported;
}

/**
 * VTNODE_WORKSPACE_BYTES_PER_SECOND: the bandwidth cap of the workspaces this node serves;
 * VTNODE_WORKSPACE_CHUNK_BYTES: their chunk size (tests make it small, so a fetch has many chunks).
 */
function workspaceServing(): Pick<DaemonOptions, 'workspaceBytesPerSecond' | 'workspaceChunkBytes'> {
  const rate = Number(process.env['VTNODE_WORKSPACE_BYTES_PER_SECOND']);
  const chunk = Number(process.env['VTNODE_WORKSPACE_CHUNK_BYTES']);
  return {
    ...(Number.isFinite(rate) && rate > 0 ? { workspaceBytesPerSecond: rate } : {}),
    ...(Number.isInteger(chunk) && chunk >= 1024 ? { workspaceChunkBytes: chunk } : {}),
  };
}

/**
 * VTNODE_HEDGE_SCALE: the waits before a silent job is backed up elsewhere, times this (tests run the
 * same rules on a faster clock; placement/hedge.ts scaledHedge).
 */
function hedgeScale(): Pick<DaemonOptions, 'hedge'> {
  const scale = Number(process.env['VTNODE_HEDGE_SCALE']);
  return scale > 0 && scale <= 1 ? { hedge: scaledHedge(scale) } : {};
}

/** VTNODE_GUEST_INTERVAL_MS: how often a guest checks power and load (tests shorten the 10 s default). */
function guestInterval(): Pick<DaemonOptions, 'guestIntervalMs'> {
  const ms = Number(process.env['VTNODE_GUEST_INTERVAL_MS']);
  return Number.isInteger(ms) && ms >= 50 ? { guestIntervalMs: ms } : {};
}
