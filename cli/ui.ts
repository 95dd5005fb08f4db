import type { UiServer } from '../node/ui/server.ts';
import type { SnapshotSourceOptions } from '../node/ui/sources.ts';
import { CliError, intOption } from './command.ts';

/** The web view's options, on the commands that run a node (start, join, collect). */
export const uiOptions = {
  ui: { type: 'boolean' },
  'ui-port': { type: 'string' },
  'ui-host': { type: 'string' },
} as const;

export const uiOptionsUsage = `Web view options:
  --ui [PORT]              serve the live web view and Prometheus /metrics on 127.0.0.1:PORT
                           (default: any free port); the address is printed
  --ui-host ADDR           bind the web view to ADDR instead of loopback: every request then
                           needs the token printed in the address`;

/**
 * `--ui PORT` and `--ui=PORT` as `--ui --ui-port PORT` (node:util parseArgs has no optional values):
 * a `--ui` followed by a number takes it as the port; followed by anything else it stands alone.
 */
export function expandUiFlag(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      out.push(...argv.slice(i));
      break;
    }
    const inline = /^--ui=(.*)$/.exec(arg);
    if (inline) {
      out.push('--ui', '--ui-port', inline[1]!);
    } else if (arg === '--ui' && /^\d+$/.test(argv[i + 1] ?? '')) {
      out.push('--ui', '--ui-port', argv[i + 1]!);
      i++;
    } else {
      out.push(arg);
    }
  }
  return out;
}

/** Where to serve the web view, or null when it is off (`--ui-port`/`--ui-host` alone turn it on). */
export function uiSettings(values: {
  ui?: boolean;
  'ui-port'?: string;
  'ui-host'?: string;
}): { host: string; port: number } | null {
  if (!values.ui && values['ui-port'] === undefined && values['ui-host'] === undefined) return null;
  const port = intOption(values['ui-port'], 'ui-port', 0);
  if (port > 65535) throw new CliError(`--ui-port must be 0-65535, got ${port}`, 2);
  const host = values['ui-host'] ?? '127.0.0.1';
  if (host.trim() === '') throw new CliError('--ui-host must be an address, e.g. 0.0.0.0', 2);
  return { host, port };
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
