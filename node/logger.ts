import { format } from 'node:util';

/**
 * A logger per component, in the style of @libp2p/logger: `log()` prints only when the component
 * matches VTNODE_DEBUG (comma-separated prefixes, `*` for all); `log.error()` and `log.warn()` always print.
 * Everything goes to stderr so stdout stays clean for JSON output.
 */
export interface Logger {
  (message: string, ...args: unknown[]): void;
  info(message: string, ...args: unknown[]): void;
  warn(message: string, ...args: unknown[]): void;
  error(message: string, ...args: unknown[]): void;
  readonly enabled: boolean;
}

function enabledFor(component: string): boolean {
  const spec = process.env['VTNODE_DEBUG'];
  if (!spec) return false;
  return spec.split(',').some((p) => p === '*' || component.startsWith(p.trim()));
}

function line(level: string, component: string, message: string, args: unknown[]): string {
  const shown = args.map((a) => (a instanceof Error ? a.message : a));
  return `${new Date().toISOString()} ${level} ${component}: ${format(message, ...shown)}\n`;
}

export function logger(component: string): Logger {
  const enabled = enabledFor(component);
  const log = ((message: string, ...args: unknown[]) => {
    if (enabled) process.stderr.write(line('debug', component, message, args));
  }) as Logger;
  log.info = (message, ...args) => process.stderr.write(line('info', component, message, args));
  log.warn = (message, ...args) => process.stderr.write(line('warn', component, message, args));
  log.error = (message, ...args) => process.stderr.write(line('error', component, message, args));
  Object.defineProperty(log, 'enabled', { value: enabled });
  return log;
}
