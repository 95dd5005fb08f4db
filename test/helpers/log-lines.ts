import { z } from 'zod';

/**
 * A child's stderr, as the program's logger writes it when stderr is not a TTY: one pino JSON object
 * per line. Tests read the lines as records, or as the text `TIME LEVEL COMPONENT: MESSAGE` (what the
 * old hand-written loggers printed), so regexes over a child's output keep working.
 */
export const LogRecord = z.looseObject({
  level: z.number().int(),
  time: z.string(),
  pid: z.number().int(),
  component: z.string(),
  msg: z.string(),
  err: z.looseObject({ type: z.string(), message: z.string(), stack: z.string() }).optional(),
});
export type LogRecord = z.infer<typeof LogRecord>;

const LEVELS: Record<number, string> = {
  10: 'trace',
  20: 'debug',
  30: 'info',
  40: 'warn',
  50: 'error',
  60: 'fatal',
};

/** The record of one log line, or null when the line is not one (CLI messages, other output). */
export function parseLogLine(line: string): LogRecord | null {
  if (!line.startsWith('{')) return null;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  const parsed = LogRecord.safeParse(value);
  return parsed.success ? parsed.data : null;
}

/** Every log record in `text` (other lines skipped). */
export function logRecords(text: string): LogRecord[] {
  return text.split('\n').flatMap((l) => parseLogLine(l) ?? []);
}

/** A log line as text (`TIME LEVEL COMPONENT: MESSAGE`); any other line unchanged. */
export function renderLogLine(line: string): string {
  const r = parseLogLine(line);
  return r ? `${r.time} ${LEVELS[r.level] ?? r.level} ${r.component}: ${r.msg}` : line;
}

/**
 * Turns a stream's chunks into text, rendering each complete log line (a line split across chunks
 * waits for its end); `end()` gives what is left.
 */
export function logTextStream(): { push(chunk: string | Buffer): string; end(): string } {
  let partial = '';
  return {
    push(chunk) {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop()!;
      return lines.map((l) => `${renderLogLine(l)}\n`).join('');
    },
    end() {
      const rest = partial;
      partial = '';
      return renderLogLine(rest);
    },
  };
}

/** A whole stderr as text, log lines rendered. */
export function logText(text: string): string {
  return text
    .split('\n')
    .map((l) => renderLogLine(l))
    .join('\n');
}
