import { format } from 'node:util';
import pino, { type DestinationStream } from 'pino';
import pretty from 'pino-pretty';
import { type LogFilter, type LogLevel, levelFor, parseLogFilter, shows } from './log-filter.ts';

/**
 * The program's one logger (pino). It lives in sandbox/ because sandbox/ may import nothing of ours
 * but protocol/, and everything else (node/, cli/) may import sandbox/; node/logger.ts re-exports it
 * and adds the libp2p bridge.
 *
 * `logger(component)` gives a callable debug log (shown when VTNODE_DEBUG names the component, see
 * log-filter.ts) with `.info`, `.warn`, `.error` (shown at the default threshold) and `.enabled`
 * (whether debug lines show). Messages are printf-style (node:util format); an Error among the
 * arguments is shown by its message in the line and kept whole (message, stack) in its `err` field.
 *
 * Lines go to stderr, so stdout stays clean for JSON output: one JSON object per line when stderr is
 * not a TTY, readable lines (pino-pretty, in-process, no worker thread) when it is.
 */
export interface Logger {
  (message: string, ...args: unknown[]): void;
  info(message: string, ...args: unknown[]): void;
  warn(message: string, ...args: unknown[]): void;
  error(message: string, ...args: unknown[]): void;
  /** Whether debug lines of this component show. */
  readonly enabled: boolean;
}

export interface LoggingOptions {
  /** VTNODE_DEBUG's value (default: the environment's). */
  spec?: string | undefined;
  /** Where lines go (default: stderr, written synchronously so nothing is lost on exit). */
  destination?: NodeJS.WritableStream | undefined;
  /** Readable lines instead of JSON (default: whether the destination is a TTY). */
  pretty?: boolean | undefined;
  /** Colours in readable lines (default: same as `pretty` on a TTY). */
  colorize?: boolean | undefined;
}

export interface Logging {
  /** The parsed VTNODE_DEBUG. */
  readonly filter: LogFilter;
  /** Whether lines are readable text rather than JSON. */
  readonly pretty: boolean;
  /** The pino logger of one component, at that component's level. */
  component(name: string): pino.Logger;
}

export function createLogging(options: LoggingOptions = {}): Logging {
  const filter = parseLogFilter('spec' in options ? options.spec : process.env['VTNODE_DEBUG']);
  const out = options.destination ?? process.stderr;
  const isTty = (out as { isTTY?: boolean }).isTTY === true;
  const readable = options.pretty ?? isTty;
  const toStderr = options.destination === undefined;
  const stream: DestinationStream = readable
    ? pretty({
        destination: toStderr ? 2 : out,
        sync: true,
        colorize: options.colorize ?? isTty,
        ignore: 'pid,hostname,component',
        messageFormat: '{component}: {msg}',
        translateTime: 'SYS:HH:MM:ss.l',
      })
    : toStderr
      ? pino.destination({ fd: 2, sync: true })
      : (out as DestinationStream);
  const root = pino(
    {
      level: 'trace',
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      serializers: { err: pino.stdSerializers.err },
    },
    stream,
  );
  const children = new Map<string, pino.Logger>();
  const logging: Logging = {
    filter,
    pretty: readable,
    component(name) {
      let child = children.get(name);
      if (!child) {
        child = root.child({ component: name }, { level: levelFor(filter, name) });
        children.set(name, child);
      }
      return child;
    },
  };
  for (const problem of filter.problems) logging.component('vtnode:log').warn(problem);
  return logging;
}

let current: Logging | undefined;

/** The program's logging, made from the environment on first use. */
export function logging(): Logging {
  current ??= createLogging();
  return current;
}

/**
 * Replaces the program's logging (tests capture lines this way); loggers made before follow, since
 * each line looks the logging up.
 */
export function setLogging(next: Logging): void {
  current = next;
}

/** The message and the fields of one line: the first Error among the arguments becomes `err`. */
export function lineOf(message: string, args: readonly unknown[]): { msg: string; err?: Error } {
  const err = args.find((a): a is Error => a instanceof Error);
  const shown = args.map((a) => (a instanceof Error ? a.message : a));
  const msg = format(message, ...shown);
  return err ? { msg, err } : { msg };
}

/** Writes one line at `level` for `component`, if it shows. */
export function emit(
  component: string,
  level: Exclude<LogLevel, 'silent'>,
  message: string,
  args: readonly unknown[],
) {
  const log = logging().component(component);
  if (!log.isLevelEnabled(level)) return;
  const { msg, err } = lineOf(message, args);
  if (err) log[level]({ err }, msg);
  else log[level](msg);
}

export function logger(component: string): Logger {
  const log = ((message: string, ...args: unknown[]) => emit(component, 'debug', message, args)) as Logger;
  log.info = (message, ...args) => emit(component, 'info', message, args);
  log.warn = (message, ...args) => emit(component, 'warn', message, args);
  log.error = (message, ...args) => emit(component, 'error', message, args);
  Object.defineProperty(log, 'enabled', {
    get: () => shows(levelFor(logging().filter, component), 'debug'),
  });
  return log;
}
