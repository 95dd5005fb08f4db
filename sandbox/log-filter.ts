/**
 * VTNODE_DEBUG, parsed once for the whole program (pure: no environment, no I/O).
 *
 * Grammar: comma-separated entries, blanks around them ignored, empty entries ignored.
 * - `*` turns on debug lines for every component;
 * - any other word is a component prefix: `vtnode:` for all of vtnode's, `vtnode:sandbox` for the
 *   sandbox's, `libp2p:gossipsub` for one libp2p module (libp2p's logs go through the same logger);
 * - `level=LEVEL` (trace, debug, info, warn, error, silent; default info): `warn`, `error` raise the
 *   threshold of the components not named (`level=warn` hides the per-job info lines), `silent`
 *   silences everything; `trace` adds trace lines (libp2p's) to the named components only.
 *
 * A component named by a prefix (or `*`) logs at debug (trace with `level=trace`) unless silent;
 * the others at info or the level given, whichever is higher.
 */

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface LogFilter {
  /** The threshold for components no prefix names. */
  readonly level: LogLevel;
  /** True when `*` was given. */
  readonly all: boolean;
  /** The component prefixes, trimmed and non-empty. */
  readonly prefixes: readonly string[];
  /** What in the spec was not understood (one sentence each, naming the entry); the rest still applies. */
  readonly problems: readonly string[];
}

const RANK: Record<LogLevel, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, silent: 100 };

export function parseLogFilter(spec: string | undefined): LogFilter {
  let level: LogLevel = 'info';
  let all = false;
  const prefixes: string[] = [];
  const problems: string[] = [];
  for (const raw of (spec ?? '').split(',')) {
    const entry = raw.trim();
    if (entry === '') continue;
    if (entry === '*') all = true;
    else if (entry.startsWith('level=')) {
      const value = entry.slice('level='.length).trim().toLowerCase();
      if ((LOG_LEVELS as readonly string[]).includes(value)) level = value as LogLevel;
      else problems.push(`VTNODE_DEBUG: level "${value}" is not one of ${LOG_LEVELS.join(', ')}`);
    } else if (/\s/.test(entry))
      problems.push(`VTNODE_DEBUG: "${entry}" is not a component prefix (it holds blanks)`);
    else prefixes.push(entry);
  }
  return { level, all, prefixes, problems };
}

/** Whether the filter names `component` (by `*` or a prefix): its debug lines show. */
export function named(filter: LogFilter, component: string): boolean {
  return filter.all || filter.prefixes.some((p) => component.startsWith(p));
}

/**
 * The lowest level `component` logs at: debug when the filter names it (trace when the level is
 * trace), otherwise info or the level, whichever is higher. `silent` silences even named components.
 */
export function levelFor(filter: LogFilter, component: string): LogLevel {
  if (filter.level === 'silent') return 'silent';
  if (!named(filter, component)) return RANK[filter.level] < RANK.info ? 'info' : filter.level;
  return filter.level === 'trace' ? 'trace' : 'debug';
}

/** Whether a line at `level` shows for a component whose lowest level is `threshold`. */
export function shows(threshold: LogLevel, level: LogLevel): boolean {
  return level !== 'silent' && RANK[level] >= RANK[threshold];
}
