import type { UiServer } from '../node/ui/server.ts';
import type { SnapshotSourceOptions } from '../node/ui/sources.ts';
import { CliError } from './command.ts';
import { group, port, string, type ValuesOf } from './options.ts';

/** The web view's options, on the commands that run a node (start, join, collect). */
export const UI_OPTIONS = group('Web view options:', {
  ui: port({
    doc: 'serve the live web view and Prometheus /metrics on 127.0.0.1:PORT (default: any free port); the address is printed',
    bare: 0,
  }),
  'ui-host': string({
    doc: 'bind the web view to ADDR instead of loopback: every request then needs the token printed in the address',
    value: 'ADDR',
  }),
});

/** Where to serve the web view, or null when it is off (`--ui-host` alone turns it on, on any port). */
export function uiSettings(
  values: ValuesOf<typeof UI_OPTIONS.options>,
): { host: string; port: number } | null {
  if (values.ui === undefined && values['ui-host'] === undefined) return null;
  return { host: values['ui-host'] ?? '127.0.0.1', port: values.ui ?? 0 };
}

/** Starts the web view for a running node and prints its address on stderr (loaded only when asked for). */
export async function startUi(
  settings: { host: string; port: number },
  sources: SnapshotSourceOptions,
  signal?: AbortSignal,
): Promise<UiServer> {
  const [{ metrics }, { snapshotSource }, { startUiServer }] = await Promise.all([
    import('../node/metrics.ts'),
    import('../node/ui/sources.ts'),
    import('../node/ui/server.ts'),
  ]);
  const server = await startUiServer({
    host: settings.host,
    port: settings.port,
    snapshot: snapshotSource(sources),
    registry: metrics().registry,
    ...(signal ? { signal } : {}),
  }).catch((err: Error) => {
    throw new CliError(`the web view cannot listen on ${settings.host}:${settings.port}: ${err.message}`);
  });
  process.stderr.write(`  web view ${server.url} (Prometheus metrics at /metrics)\n`);
  return server;
}
