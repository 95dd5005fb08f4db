import type { z } from 'zod';

/** A value that failed its schema: names the input (a file and line, a peer, a message) and each bad field. */
export class ParseError extends Error {
  readonly input: string;
  readonly issues: { path: string; message: string }[];

  constructor(input: string, issues: { path: string; message: string }[]) {
    const detail = issues.map((i) => `${i.path || '(root)'}: ${i.message}`).join('; ');
    super(`${input}: ${detail}`);
    this.name = 'ParseError';
    this.input = input;
    this.issues = issues;
  }
}

/** Parses `value` with `schema`; throws a ParseError naming `input` and every failing field. */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown, input: string): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw new ParseError(
    input,
    result.error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message })),
  );
}

/** Parses one line of JSON text with `schema`; bad JSON and bad fields both name `input`. */
export function parseJsonWith<S extends z.ZodType>(schema: S, text: string, input: string): z.output<S> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new ParseError(input, [{ path: '', message: `not JSON (${(err as Error).message})` }]);
  }
  return parseWith(schema, value, input);
}
