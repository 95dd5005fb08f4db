// One option parser for every command: each command declares its options once (flag, kind, default,
// doc, value name) and from that declaration come the node:util parseArgs config, the typed and
// validated values, and the "Options:" section of its usage text. Pure: no I/O.
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { CliError } from './command.ts';

/** One declared option: how it is parsed, converted, checked and shown in the usage text. */
export interface OptionSpec<T = unknown, Present extends boolean = boolean> {
  /** What parseArgs reads: a value (`string`) or a bare flag (`boolean`). */
  readonly type: 'string' | 'boolean';
  /** Repeatable: every occurrence is kept, in order. */
  readonly multiple: boolean;
  /** The one-letter alias (`-k`), if any. */
  readonly short?: string;
  /** What the option does, for the usage text. */
  readonly doc: string;
  /** The value's name in the usage text (`FILE`, `N`, `DUR`); none for a boolean. */
  readonly valueName?: string;
  /** The value when the option is not given. */
  readonly default?: T;
  /** How the default is shown in the usage text (default: the default, formatted). */
  readonly defaultText?: string;
  /** The command refuses to run without it. */
  readonly required: boolean;
  /** The option may be given without a value (`--ui` or `--ui 8080`): its value then. */
  readonly bare?: T;
  /** With `bare`: the tokens after the flag taken as its value (others stand alone). */
  readonly looksLikeValue?: RegExp;
  /** The words an enum option takes (shown in the usage text). */
  readonly choices?: readonly string[];
  /** What a valid value is, for errors: `a whole number ≥ 1`. */
  readonly expected: string;
  /** True for kinds whose text is a number or a duration (tests feed them bad numbers). */
  readonly numeric: boolean;
  /** One typed value converted, or INVALID. */
  convert(text: string): unknown;
  /** Phantom: the value's type and whether it is always present (never read). */
  readonly __type?: [T, Present];
}

/** A command's options, by long name (a one-letter name is typed `-k`). */
export type OptionTable = Record<string, OptionSpec>;

type ValueOf<S> = S extends OptionSpec<infer V, boolean> ? V : never;
type IsPresent<S> = S extends OptionSpec<unknown, infer P> ? P : never;

/** The typed values object a table parses into: options with a default or required are always there. */
export type ValuesOf<T extends OptionTable> = {
  -readonly [K in keyof T as IsPresent<T[K]> extends true ? K : never]: ValueOf<T[K]>;
} & {
  -readonly [K in keyof T as IsPresent<T[K]> extends true ? never : K]?: ValueOf<T[K]> | undefined;
};

/** What every builder takes. */
interface Init<T> {
  /** What the option does (one line; the usage text wraps it). */
  doc: string;
  /** The one-letter alias. */
  short?: string;
  /** The value's name in the usage text. */
  value?: string;
  /** The value when the option is not given. */
  default?: T;
  /** How the default is shown, when the value alone would not say it. */
  defaultText?: string;
  /** The command refuses to run without it. */
  required?: boolean;
}

type PresentOf<O> = O extends { default: unknown } ? true : O extends { required: true } ? true : false;

function spec<T, P extends boolean>(
  init: Init<T>,
  rest: Omit<OptionSpec<T, P>, 'doc' | 'required' | 'short' | 'default' | 'defaultText' | 'valueName'> & {
    valueName?: string;
  },
): OptionSpec<T, P> {
  return {
    doc: init.doc,
    required: init.required ?? false,
    ...(init.short !== undefined ? { short: init.short } : {}),
    ...(init.default !== undefined ? { default: init.default } : {}),
    ...(init.defaultText !== undefined ? { defaultText: init.defaultText } : {}),
    ...rest,
    ...(init.value !== undefined ? { valueName: init.value } : {}),
  };
}

/** What `convert` returns for a value that is not valid (null may be a valid value: `off`). */
export const INVALID: unique symbol = Symbol('invalid');

const INTEGER = /^[+-]?\d+$/;
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** The expectation of a whole number within optional bounds. */
function intExpected(min?: number, max?: number): string {
  if (min !== undefined && max !== undefined) return `a whole number from ${min} to ${max}`;
  if (min !== undefined) return `a whole number ≥ ${min}`;
  if (max !== undefined) return `a whole number ≤ ${max}`;
  return 'a whole number';
}

/** An integer, optionally bounded (inclusive). */
export function int<const O extends Init<number> & { min?: number; max?: number }>(
  o: O,
): OptionSpec<number, PresentOf<O>> {
  return spec<number, PresentOf<O>>(o, {
    type: 'string',
    multiple: false,
    valueName: 'N',
    expected: intExpected(o.min, o.max),
    numeric: true,
    convert(text) {
      if (!INTEGER.test(text)) return INVALID;
      const n = Number(text);
      if (!Number.isSafeInteger(n)) return INVALID;
      if ((o.min !== undefined && n < o.min) || (o.max !== undefined && n > o.max)) return INVALID;
      return n;
    },
  });
}

/** A non-negative integer. */
export function count<const O extends Init<number> & { max?: number }>(o: O) {
  return int({ ...o, min: 0 });
}

/** Bounds of a real number: `min`/`max` inclusive, `above`/`below` exclusive. */
interface NumberBounds {
  /** Smallest allowed value. */
  min?: number;
  /** Largest allowed value. */
  max?: number;
  /** The value must be greater than this. */
  above?: number;
  /** The value must be smaller than this. */
  below?: number;
}

function numberExpected(b: NumberBounds): string {
  const lo = b.above !== undefined ? `(${b.above}` : b.min !== undefined ? `[${b.min}` : null;
  const hi = b.below !== undefined ? `${b.below})` : b.max !== undefined ? `${b.max}]` : null;
  if (lo && hi) return `a number in ${lo}, ${hi}`;
  if (b.above !== undefined) return `a number > ${b.above}`;
  if (b.min !== undefined) return `a number ≥ ${b.min}`;
  if (b.below !== undefined) return `a number < ${b.below}`;
  if (b.max !== undefined) return `a number ≤ ${b.max}`;
  return 'a number';
}

/** A finite real number within optional bounds. */
export function number<const O extends Init<number> & NumberBounds>(o: O): OptionSpec<number, PresentOf<O>> {
  return spec<number, PresentOf<O>>(o, {
    type: 'string',
    multiple: false,
    valueName: 'X',
    expected: numberExpected(o),
    numeric: true,
    convert(text) {
      if (!DECIMAL.test(text)) return INVALID;
      const n = Number(text);
      if (!Number.isFinite(n)) return INVALID;
      if (o.min !== undefined && n < o.min) return INVALID;
      if (o.max !== undefined && n > o.max) return INVALID;
      if (o.above !== undefined && n <= o.above) return INVALID;
      if (o.below !== undefined && n >= o.below) return INVALID;
      return n;
    },
  });
}

/** A number > 0. */
export function positive<const O extends Init<number> & { max?: number }>(o: O) {
  return number({ ...o, above: 0 });
}

/** A number in [0, 1]. */
export function fraction<const O extends Init<number>>(o: O) {
  return number({ value: 'F', ...o, min: 0, max: 1 });
}

const DURATION = /^(\d+)(ms|s|m|h|d|w)$/;
const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};

/** Parses a duration such as `500ms`, `90s`, `30m`, `12h`, `7d`, `2w` into ms; null if malformed or 0. */
export function parseDuration(text: string): number | null {
  const m = DURATION.exec(text.trim());
  if (!m) return null;
  const ms = Number(m[1]) * UNIT_MS[m[2]!]!;
  return ms > 0 && Number.isSafeInteger(ms) ? ms : null;
}

/** A duration in ms as the grammar writes it, in its largest exact unit: 30000 → `30s`. */
export function formatDuration(ms: number): string {
  for (const unit of ['w', 'd', 'h', 'm', 's'] as const)
    if (ms >= UNIT_MS[unit]! && ms % UNIT_MS[unit]! === 0) return `${ms / UNIT_MS[unit]!}${unit}`;
  return `${ms}ms`;
}

/** A duration (`500ms`, `30s`, `5m`, `2h`, `7d`, `2w`), in ms, at least `min` ms. */
export function duration<const O extends Init<number> & { min?: number }>(
  o: O,
): OptionSpec<number, PresentOf<O>> {
  const min = o.min ?? 1;
  return spec<number, PresentOf<O>>(
    {
      ...o,
      ...(o.default !== undefined && o.defaultText === undefined
        ? { defaultText: formatDuration(o.default) }
        : {}),
    },
    {
      type: 'string',
      multiple: false,
      valueName: 'DUR',
      expected: `a duration such as 30s, 5m, 2h or 7d${min > 1 ? ` of at least ${formatDuration(min)}` : ''}`,
      numeric: true,
      convert(text) {
        const ms = parseDuration(text);
        return ms !== null && ms >= min ? ms : INVALID;
      },
    },
  );
}

/**
 * A TCP port, 0-65535 (0: any free one). With `bare`, the flag may stand alone (`--ui`) and takes the
 * next token as its port only when that is a number (`--ui 8080`).
 */
export function port<const O extends Init<number> & { bare?: number }>(
  o: O,
): OptionSpec<number, PresentOf<O>> {
  return spec<number, PresentOf<O>>(o, {
    type: 'string',
    multiple: false,
    valueName: 'PORT',
    expected: 'a port number from 0 to 65535',
    numeric: true,
    ...(o.bare !== undefined ? { bare: o.bare, looksLikeValue: /^\d+$/ } : {}),
    convert(text) {
      if (!/^\d+$/.test(text)) return INVALID;
      const n = Number(text);
      return n <= 65535 ? n : INVALID;
    },
  });
}

/** One of a fixed set of words. */
export function oneOf<const V extends readonly string[], const O extends Init<V[number]>>(
  words: V,
  o: O,
): OptionSpec<V[number], PresentOf<O>> {
  return spec<V[number], PresentOf<O>>(o, {
    type: 'string',
    multiple: false,
    valueName: words.join('|'),
    choices: words,
    expected: `one of ${words.join(', ')}`,
    numeric: false,
    convert: (text) => (words.includes(text) ? text : INVALID),
  });
}

/** Any non-blank text: a name, a path, an address. */
export function string<const O extends Init<string>>(o: O): OptionSpec<string, PresentOf<O>> {
  return spec<string, PresentOf<O>>(o, {
    type: 'string',
    multiple: false,
    valueName: 'VALUE',
    expected: 'a non-empty value',
    numeric: false,
    convert: (text) => (text.trim() === '' ? INVALID : text),
  });
}

/** A repeatable non-blank text: every occurrence, in order. */
export function list<const O extends Init<string[]>>(o: O): OptionSpec<string[], PresentOf<O>> {
  return spec<string[], PresentOf<O>>(o, {
    type: 'string',
    multiple: true,
    valueName: 'VALUE',
    expected: 'a non-empty value',
    numeric: false,
    convert: (text) => (text.trim() === '' ? INVALID : text),
  });
}

/** A flag without a value. */
export function flag<const O extends Omit<Init<boolean>, 'value' | 'required'>>(
  o: O,
): OptionSpec<boolean, PresentOf<O>> {
  return spec<boolean, PresentOf<O>>(o, {
    type: 'boolean',
    multiple: false,
    expected: 'no value',
    numeric: false,
    convert: () => true,
  });
}

/** The option also takes the word `off`, whose value is null. */
export function orOff<T, P extends boolean>(inner: OptionSpec<T, P>): OptionSpec<T | null, P> {
  return {
    ...inner,
    expected: `${inner.expected}, or off`,
    convert: (text) => (text === 'off' ? null : inner.convert(text)),
  } as OptionSpec<T | null, P>;
}

/** How an option is typed on the command line: `-k` for a one-letter option, `--max-tokens` otherwise. */
export function flagOf(name: string): string {
  return name.length === 1 ? `-${name}` : `--${name}`;
}

/** The node:util parseArgs options of a table. */
export function parseArgsConfig(table: OptionTable): NonNullable<ParseArgsConfig['options']> {
  const out: NonNullable<ParseArgsConfig['options']> = {};
  for (const [name, s] of Object.entries(table))
    out[name] = {
      type: s.type,
      ...(s.multiple ? { multiple: true } : {}),
      ...(s.short ? { short: s.short } : {}),
    };
  return out;
}

/**
 * Options that may stand alone (`--ui`) as `--ui=`, and `--ui 8080` as `--ui=8080` (parseArgs has no
 * optional values); `--ui=8080` stays; everything after `--` is left alone.
 */
export function expandBareOptions(argv: readonly string[], table: OptionTable): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      out.push(...argv.slice(i));
      break;
    }
    const name = arg.startsWith('--') ? arg.slice(2) : null;
    const s = name !== null ? table[name] : undefined;
    if (s?.bare !== undefined && s.looksLikeValue) {
      const next = argv[i + 1];
      if (next !== undefined && s.looksLikeValue.test(next)) {
        out.push(`${arg}=${next}`);
        i++;
      } else out.push(`${arg}=`);
    } else out.push(arg);
  }
  return out;
}

/** A usage error: its message, a blank line and the command's usage; exit code 2. */
export function usageError(message: string, usage: string): CliError {
  return new CliError(`${message}\n\n${usage}`, 2);
}

/** One value converted, or a usage error naming the flag, the value and what was expected. */
function convertOne(name: string, s: OptionSpec, text: string, usage: string): unknown {
  if (s.bare !== undefined && text === '') return s.bare;
  const v = s.convert(text);
  if (v === INVALID) throw usageError(`${flagOf(name)} must be ${s.expected}, got "${text}"`, usage);
  return v;
}

/**
 * Parses `argv` by `table` (strict: an unknown flag or a missing value is a usage error), converts and
 * checks every value, applies defaults and refuses a missing required option. Every error is a
 * CliError with exit code 2 whose message names the flag as typed and ends with `usage`.
 */
export function parseCommandLine<T extends OptionTable>(
  argv: readonly string[],
  table: T,
  usage: string,
  allowPositionals = false,
): { values: ValuesOf<T>; positionals: string[] } {
  let parsed: { values: Record<string, unknown>; positionals: string[] };
  try {
    parsed = parseArgs({
      args: expandBareOptions(argv, table),
      options: parseArgsConfig(table),
      allowPositionals,
      strict: true,
    });
  } catch (err) {
    throw usageError((err as Error).message, usage);
  }
  const values: Record<string, unknown> = {};
  for (const [name, s] of Object.entries(table)) {
    const raw = parsed.values[name];
    if (raw === undefined) {
      if (s.required)
        throw usageError(`${flagOf(name)}${s.valueName ? ` ${s.valueName}` : ''} is required`, usage);
      if (s.default !== undefined) values[name] = s.default;
    } else if (s.type === 'boolean') values[name] = raw;
    else if (s.multiple) values[name] = (raw as string[]).map((t) => convertOne(name, s, t, usage));
    else values[name] = convertOne(name, s, raw as string, usage);
  }
  return { values: values as ValuesOf<T>, positionals: parsed.positionals };
}

/** A titled group of options in a usage text (`Options:`, `Node options (...):`). */
export interface OptionGroup<T extends OptionTable = OptionTable> {
  /** The group's heading line. */
  readonly title: string;
  /** Its options, in the order they are shown. */
  readonly options: T;
}

/** A group of options, declared once and reusable by several commands. */
export function group<const T extends OptionTable>(title: string, options: T): OptionGroup<T> {
  return { title, options };
}

/** How an option is shown in the left column: `-k N`, `--ui [PORT]`, `--tasks FILE`, `--json`. */
export function optionLabel(name: string, s: OptionSpec): string {
  const flagText = s.short && s.short !== name ? `-${s.short}, ${flagOf(name)}` : flagOf(name);
  if (s.type === 'boolean' || !s.valueName) return flagText;
  return s.bare !== undefined ? `${flagText} [${s.valueName}]` : `${flagText} ${s.valueName}`;
}

function defaultText(s: OptionSpec): string | null {
  if (s.defaultText !== undefined) return s.defaultText;
  if (s.default === undefined || s.type === 'boolean') return null;
  return Array.isArray(s.default) ? s.default.join(',') : String(s.default);
}

/** The width a usage text is wrapped to. */
const WIDTH = 104;

/** `text` wrapped to `width` columns, each line after the first indented by `indent` spaces. */
export function wrap(text: string, indent: number, width = WIDTH): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line && indent + line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  lines.push(line);
  return lines.join(`\n${' '.repeat(indent)}`);
}

/** The line `vtnode <cmd> --help` ends every options section with (main answers it before parsing). */
export const HELP_ROW = { label: '-h, --help', doc: 'this text' };

/** The options sections of a usage text: per group its title and aligned `label  doc (default X)` rows. */
export function optionsHelp(groups: readonly OptionGroup[]): string {
  const rows = groups.map((g) => ({
    title: g.title,
    rows: Object.entries(g.options).map(([name, s]) => {
      const d = defaultText(s);
      const words = s.choices && s.valueName !== s.choices.join('|') ? `${s.choices.join(' | ')}: ` : '';
      const doc = `${words}${d === null || /\(default/.test(s.doc) ? s.doc : `${s.doc} (default ${d})`}`;
      return { label: optionLabel(name, s), doc };
    }),
  }));
  rows[rows.length - 1]?.rows.push(HELP_ROW);
  const column = Math.max(...rows.flatMap((g) => g.rows.map((r) => r.label.length))) + 4;
  return rows
    .map((g) =>
      [g.title, ...g.rows.map((r) => `  ${r.label.padEnd(column - 2)}${wrap(r.doc, column)}`)].join('\n'),
    )
    .join('\n\n');
}

/** Merges a tuple of groups' tables into one table type. */
type UnionToIntersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void
  ? I
  : never;
type Merged<G extends readonly OptionGroup[]> =
  UnionToIntersection<G[number]['options']> extends infer T
    ? T extends OptionTable
      ? { [K in keyof T]: T[K] }
      : never
    : never;

/** A command's declared command line: its usage text and its parser, from one declaration. */
export interface CommandLine<T extends OptionTable = OptionTable> {
  /** The full usage text: the prose, the generated options sections, the epilogue. */
  readonly usage: string;
  /** Every option the command parses. */
  readonly table: T;
  /** The sections the options are shown in. */
  readonly groups: readonly OptionGroup[];
  /** Parses the arguments after the command's name (usage errors are CliErrors, exit 2). */
  parse(argv: readonly string[]): { values: ValuesOf<T>; positionals: string[] };
}

/**
 * Declares a command line: `prose` (the hand-written usage line and what the command does), then
 * the options groups (the first usually `Options:`), then an optional `epilogue`. With `positionals`,
 * bare arguments are allowed (the command checks them).
 */
export function commandLine<const G extends readonly OptionGroup[]>(init: {
  /** The usage line and the description, hand-written. */
  prose: string;
  /** The options, in sections. */
  groups: G;
  /** Text after the options, hand-written. */
  epilogue?: string;
  /** Bare arguments are allowed. */
  positionals?: boolean;
}): CommandLine<Merged<G>> {
  const table: OptionTable = {};
  for (const g of init.groups)
    for (const [name, s] of Object.entries(g.options)) {
      if (name in table) throw new Error(`option ${flagOf(name)} is declared twice`);
      table[name] = s;
    }
  const usage = `${init.prose.trimEnd()}\n\n${optionsHelp(init.groups)}${init.epilogue ? `\n\n${init.epilogue}` : ''}`;
  return {
    usage,
    table: table as Merged<G>,
    groups: init.groups,
    parse: (argv) => parseCommandLine(argv, table as Merged<G>, usage, init.positionals ?? false),
  };
}

/** `--data-dir`: which node a command is about (declared once for every command that has a node; light: no import). */
export const DATA_DIR = string({
  doc: "the node's state",
  value: 'DIR',
  defaultText: '$VTNODE_HOME or ~/.vtnode',
});
