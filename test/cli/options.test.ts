// The one option parser (issue 12, build 8): every kind's good values, bad values and boundaries,
// error texts naming the flag as typed, and the usage text generated from the declaration.
import { describe, expect, it } from 'vitest';
import { CliError } from '../../cli/command.ts';
import {
  commandLine,
  count,
  duration,
  flag,
  formatDuration,
  fraction,
  group,
  INVALID,
  int,
  list,
  number,
  type OptionSpec,
  oneOf,
  orOff,
  parseDuration,
  port,
  positive,
  string,
  wrap,
} from '../../cli/options.ts';

/** The CliError `fn` throws (the test fails when it throws nothing or something else). */
function refusal(fn: () => unknown): CliError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(CliError);
    return err as CliError;
  }
  throw new Error('expected a refusal');
}

/** Checks a spec's converter: each good text gives its value; each bad text is INVALID. */
function converts(s: OptionSpec, good: [string, unknown][], bad: string[]): void {
  for (const [text, value] of good) expect(s.convert(text), text).toEqual(value);
  for (const text of bad) expect(s.convert(text), text).toBe(INVALID);
}

describe('each kind converts good values and refuses bad ones, at its boundaries', () => {
  it('int: whole numbers only, bounds inclusive', () => {
    converts(
      int({ doc: 'd', min: 1, max: 256 }),
      [
        ['1', 1],
        ['256', 256],
        ['8', 8],
        ['+8', 8],
        ['008', 8],
      ],
      ['0', '257', '-1', '1.5', '1e2', '0x10', '', ' ', ' 8', '8 ', 'abc', 'NaN', 'Infinity', '9'.repeat(20)],
    );
    converts(
      int({ doc: 'd' }),
      [
        ['-5', -5],
        ['0', 0],
      ],
      ['x', '2.0'],
    );
  });

  it('count: whole numbers ≥ 0', () => {
    converts(
      count({ doc: 'd' }),
      [
        ['0', 0],
        ['60000', 60000],
      ],
      ['-1', '-0.5', 'lots'],
    );
    converts(count({ doc: 'd', max: 3 }), [['3', 3]], ['4']);
  });

  it('number: finite decimals, inclusive and exclusive bounds', () => {
    converts(
      number({ doc: 'd', min: 0, max: 2 }),
      [
        ['0', 0],
        ['2', 2],
        ['0.8', 0.8],
        ['.5', 0.5],
        ['1e-1', 0.1],
      ],
      ['-0.1', '2.01', '', 'x', 'Infinity', '1,5', '0x1', '1e400'],
    );
    converts(number({ doc: 'd', above: 0, below: 1 }), [['0.5', 0.5]], ['0', '1', '-1']);
    converts(positive({ doc: 'd' }), [['1e-9', 1e-9]], ['0', '-1']);
    converts(
      fraction({ doc: 'd' }),
      [
        ['0', 0],
        ['1', 1],
        ['0.05', 0.05],
      ],
      ['1.0001', '-0', 'x'].filter((t) => t !== '-0'),
    );
  });

  it('duration: 500ms, 30s, 5m, 2h, 7d, 2w; positive whole amounts; at least min', () => {
    converts(
      duration({ doc: 'd' }),
      [
        ['500ms', 500],
        ['30s', 30_000],
        ['5m', 300_000],
        ['2h', 7_200_000],
        ['7d', 604_800_000],
        ['2w', 1_209_600_000],
      ],
      ['', '7', 'd', '-1d', '1.5h', '0s', '0ms', '7 days', '5M', '1y', `${'9'.repeat(20)}d`],
    );
    converts(duration({ doc: 'd', min: 1000 }), [['1s', 1000]], ['999ms', '500ms']);
  });

  it('parseDuration is the grammar (null when malformed), formatDuration its inverse', () => {
    expect(parseDuration('90s')).toBe(90_000);
    expect(parseDuration(' 12h ')).toBe(43_200_000);
    for (const bad of ['', '7', 'd', '-1d', '1.5h', '0s', '7 days'])
      expect(parseDuration(bad), bad).toBeNull();
    for (const ms of [1, 500, 1000, 30_000, 90_000, 300_000, 7_200_000, 86_400_000, 604_800_000, 1500])
      expect(parseDuration(formatDuration(ms)), String(ms)).toBe(ms);
    expect(formatDuration(30_000)).toBe('30s');
    expect(formatDuration(604_800_000)).toBe('1w');
    expect(formatDuration(1500)).toBe('1500ms');
  });

  it('port: 0-65535', () => {
    converts(
      port({ doc: 'd' }),
      [
        ['0', 0],
        ['65535', 65535],
        ['8080', 8080],
      ],
      ['65536', '-1', '1.5', '', 'http', '+80'],
    );
  });

  it('oneOf: exactly one of its words', () => {
    converts(
      oneOf(['train', 'eval'], { doc: 'd' }),
      [
        ['train', 'train'],
        ['eval', 'eval'],
      ],
      ['Train', 'all', '', 'train,eval', ' train'],
    );
  });

  it('string and list: any non-blank text', () => {
    converts(string({ doc: 'd' }), [['a b', 'a b']], ['', ' ', '\t']);
    converts(list({ doc: 'd' }), [['/ip4/1.2.3.4/tcp/1', '/ip4/1.2.3.4/tcp/1']], ['']);
  });

  it('orOff: the word off is null, the rest as the inner kind', () => {
    converts(
      orOff(number({ doc: 'd', above: 0 })),
      [
        ['off', null],
        ['6', 6],
      ],
      ['0', 'Off', 'none'],
    );
  });
});

const line = commandLine({
  prose: 'Usage: t [options]\n\nDoes t.',
  groups: [
    group('Options:', {
      tasks: string({ doc: 'tasks file', value: 'FILE', required: true }),
      k: int({ doc: 'samples', short: 'k', min: 1, max: 256, default: 8 }),
      'max-tokens': int({ doc: 'cap', min: 1 }),
      frac: fraction({ doc: 'share', default: 0.1 }),
      wait: duration({ doc: 'how long', default: 30_000 }),
      load: orOff(number({ doc: 'load', value: 'L', above: 0 })),
      split: oneOf(['train', 'eval', 'all'], { doc: 'split', value: 'S', default: 'train' }),
      model: list({ doc: 'model, repeatable', value: 'ID' }),
      json: flag({ doc: 'JSON out' }),
    }),
    group('Web options:', { ui: port({ doc: 'web view', bare: 0 }) }),
  ],
  positionals: true,
});

describe('parsing by a table', () => {
  it('gives typed values: converted, defaults applied, absent options absent', () => {
    const { values, positionals } = line.parse(['--tasks', 't.jsonl', 'extra']);
    expect(values).toEqual({ tasks: 't.jsonl', k: 8, frac: 0.1, wait: 30_000, split: 'train' });
    expect(positionals).toEqual(['extra']);
    // The types follow the declaration: defaulted and required values are never undefined.
    const k: number = values.k;
    const tasks: string = values.tasks;
    const split: 'train' | 'eval' | 'all' = values.split;
    const maxTokens: number | undefined = values['max-tokens'];
    const load: number | null | undefined = values.load;
    expect([k, tasks, split, maxTokens, load]).toEqual([8, 't.jsonl', 'train', undefined, undefined]);
  });

  it('converts every kind given, in every spelling parseArgs accepts', () => {
    const { values } = line.parse([
      '--tasks=t',
      '-k16',
      '--max-tokens',
      '100',
      '--frac',
      '1',
      '--wait',
      '500ms',
      '--load',
      'off',
      '--split',
      'all',
      '--model',
      'a',
      '--model=b',
      '--json',
      '--ui',
    ]);
    expect(values).toEqual({
      tasks: 't',
      k: 16,
      'max-tokens': 100,
      frac: 1,
      wait: 500,
      load: null,
      split: 'all',
      model: ['a', 'b'],
      json: true,
      ui: 0,
    });
  });

  it('a bad value names the flag as typed and the value, says what was expected; exit 2 and the usage', () => {
    const cases: [string[], string][] = [
      [['-k', 'abc'], '-k must be a whole number from 1 to 256, got "abc"'],
      [['-k0'], '-k must be a whole number from 1 to 256, got "0"'],
      [['--k', '257'], '-k must be a whole number from 1 to 256, got "257"'],
      [['--max-tokens', '0'], '--max-tokens must be a whole number ≥ 1, got "0"'],
      [['--frac', '1.5'], '--frac must be a number in [0, 1], got "1.5"'],
      [['--wait', 'soon'], '--wait must be a duration such as 30s, 5m, 2h or 7d, got "soon"'],
      [['--load=-2'], '--load must be a number > 0, or off, got "-2"'],
      [['--load', '0'], '--load must be a number > 0, or off, got "0"'],
      [['--split', 'test'], '--split must be one of train, eval, all, got "test"'],
      [['--model', ''], '--model must be a non-empty value, got ""'],
      [['--ui=99999'], '--ui must be a port number from 0 to 65535, got "99999"'],
    ];
    for (const [argv, message] of cases) {
      const err = refusal(() => line.parse(['--tasks', 't', ...argv]));
      expect({ argv, exitCode: err.exitCode }).toEqual({ argv, exitCode: 2 });
      expect(err.message, argv.join(' ')).toBe(`${message}\n\n${line.usage}`);
    }
  });

  it('refuses a missing required option, an unknown flag, a missing value and a value for a flag', () => {
    expect(refusal(() => line.parse([])).message).toBe(`--tasks FILE is required\n\n${line.usage}`);
    for (const argv of [
      ['--tasks', 't', '--bogus'],
      ['--tasks', 't', '-x'],
      ['--tasks', 't', '-k'],
      ['--tasks', 't', '--json=yes'],
    ]) {
      const err = refusal(() => line.parse(argv));
      expect(err.exitCode, argv.join(' ')).toBe(2);
      expect(err.message, argv.join(' ')).toMatch(/^(Unknown option|Option) '-/);
      expect(err.message.endsWith(`\n\n${line.usage}`)).toBe(true);
    }
  });

  it('refuses positionals unless the command takes them', () => {
    const strict = commandLine({
      prose: 'Usage: s',
      groups: [group('Options:', { json: flag({ doc: 'j' }) })],
    });
    expect(strict.parse(['--json']).values).toEqual({ json: true });
    expect(refusal(() => strict.parse(['extra'])).message).toMatch(/^Unexpected argument 'extra'/);
  });

  it('keeps every value of a repeatable option, checking each', () => {
    expect(line.parse(['--tasks', 't', '--model', 'a', '--model', 'a', '--model', 'c']).values.model).toEqual(
      ['a', 'a', 'c'],
    );
    expect(refusal(() => line.parse(['--tasks', 't', '--model', 'a', '--model', ' '])).message).toMatch(
      /^--model must be a non-empty value, got " "/,
    );
  });

  it('a bare option takes the next token only when it is a value of its kind', () => {
    const ui = (argv: string[]) => line.parse(['--tasks', 't', ...argv]);
    expect(ui(['--ui']).values.ui).toBe(0);
    expect(ui(['--ui', '8080']).values.ui).toBe(8080);
    expect(ui(['--ui=8080']).values.ui).toBe(8080);
    expect(ui(['--ui', 'vt1token'])).toMatchObject({ values: { ui: 0 }, positionals: ['vt1token'] });
    expect(ui(['--ui', '--json']).values).toMatchObject({ ui: 0, json: true });
    expect(ui(['--', '--ui', '8080'])).toMatchObject({ positionals: ['--ui', '8080'] });
    expect(ui(['--ui', '8080']).positionals).toEqual([]);
  });

  it('refuses a table that declares an option twice (two groups sharing a name)', () => {
    expect(() =>
      commandLine({
        prose: 'Usage: d',
        groups: [group('A:', { json: flag({ doc: 'a' }) }), group('B:', { json: flag({ doc: 'b' }) })],
      }),
    ).toThrow(/--json is declared twice/);
  });
});

describe('the usage text, generated from the declaration', () => {
  it('is the prose, then each group with aligned rows, defaults shown, and -h, --help last', () => {
    expect(line.usage).toBe(
      [
        'Usage: t [options]',
        '',
        'Does t.',
        '',
        'Options:',
        '  --tasks FILE    tasks file',
        '  -k N            samples (default 8)',
        '  --max-tokens N  cap',
        '  --frac F        share (default 0.1)',
        '  --wait DUR      how long (default 30s)',
        '  --load L        load',
        '  --split S       train | eval | all: split (default train)',
        '  --model ID      model, repeatable',
        '  --json          JSON out',
        '',
        'Web options:',
        '  --ui [PORT]     web view',
        '  -h, --help      this text',
      ].join('\n'),
    );
  });

  it('shows a short alias and a hand-written default, and keeps a default the doc already states', () => {
    const l = commandLine({
      prose: 'Usage: s',
      groups: [
        group('Options:', {
          'data-dir': string({ doc: 'state', value: 'DIR', defaultText: '$VTNODE_HOME' }),
          verbose: flag({ doc: 'more', short: 'V' }),
          every: duration({ doc: 'how often (default 5s)' }),
        }),
      ],
      epilogue: 'The end.',
    });
    expect(l.usage).toBe(
      [
        'Usage: s',
        '',
        'Options:',
        '  --data-dir DIR  state (default $VTNODE_HOME)',
        '  -V, --verbose   more',
        '  --every DUR     how often (default 5s)',
        '  -h, --help      this text',
        '',
        'The end.',
      ].join('\n'),
    );
  });

  it('wraps long docs under their column', () => {
    const text = wrap(`${'word '.repeat(40)}end`, 10, 40);
    const lines = text.split('\n');
    expect(lines.length).toBeGreaterThan(1);
    for (const l of lines.slice(1)) expect(l.startsWith(' '.repeat(10))).toBe(true);
    for (const l of lines.slice(1)) expect(l.length).toBeLessThanOrEqual(40);
    expect(lines[0]!.length + 10).toBeLessThanOrEqual(40);
    expect(text.split(/\s+/).filter(Boolean).join(' ')).toBe(`${'word '.repeat(40)}end`);
  });
});
