import type { ComponentLogger, Logger as Libp2pLogger } from '@libp2p/interface';
import { emit, logging } from '../sandbox/log.ts';
import { levelFor, shows } from '../sandbox/log-filter.ts';

/**
 * The program's one logger (sandbox/log.ts: pino, VTNODE_DEBUG parsed once), and libp2p's logs
 * through it: `createLibp2p({ logger: libp2pLogger() })`.
 */
export { createLogging, type Logger, type Logging, logger, setLogging } from '../sandbox/log.ts';

/** libp2p's printf extensions (%p peer id, %a multiaddr, %b/%t bytes, %c CID, %e error) as %s. */
function libp2pLine(formatter: unknown, args: unknown[]): [string, unknown[]] {
  if (formatter instanceof Error) return ['%s', [formatter, ...args]];
  if (typeof formatter !== 'string') return ['%O', [formatter, ...args]];
  const shown = args.map((a) => (a instanceof Uint8Array ? Buffer.from(a).toString('hex') : a));
  return [formatter.replace(/%([pabtce])/g, '%s'), shown];
}

function libp2pComponent(name: string): Libp2pLogger {
  const log = ((formatter: unknown, ...args: unknown[]) =>
    emit(name, 'debug', ...libp2pLine(formatter, args))) as Libp2pLogger;
  // libp2p's "error" lines are mostly expected failures of remote peers (a dial refused, a stream
  // reset): debug-level detail for us, shown when the component is named, at warn level then.
  log.error = (formatter: unknown, ...args: unknown[]) => {
    if (log.enabled) emit(name, 'warn', ...libp2pLine(formatter, args));
  };
  log.trace = (formatter: unknown, ...args: unknown[]) => emit(name, 'trace', ...libp2pLine(formatter, args));
  Object.defineProperty(log, 'enabled', {
    get: () => shows(levelFor(logging().filter, name), 'debug'),
  });
  log.newScope = (scope: string) => libp2pComponent(`${name}:${scope}`);
  return log;
}

/** libp2p's ComponentLogger over the program's logger: its components log when VTNODE_DEBUG names them. */
export function libp2pLogger(): ComponentLogger {
  return { forComponent: libp2pComponent };
}
