/**
 * The sandbox's logger (sandbox/ imports nothing but protocol/): debug lines when VTNODE_DEBUG names the
 * component (comma-separated prefixes, `*` for all), warnings always; everything on stderr.
 */
export interface SandboxLog {
  (message: string): void;
  warn(message: string): void;
}

export function sandboxLog(component: string): SandboxLog {
  const spec = process.env['VTNODE_DEBUG'] ?? '';
  const enabled = spec
    .split(',')
    .some((p) => p.trim() === '*' || (p.trim() !== '' && component.startsWith(p.trim())));
  const line = (level: string, message: string) =>
    process.stderr.write(`${new Date().toISOString()} ${level} ${component}: ${message}\n`);
  const log = ((message: string) => {
    if (enabled) line('debug', message);
  }) as SandboxLog;
  log.warn = (message) => line('warn', message);
  return log;
}
