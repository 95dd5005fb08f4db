import { describe, expect, it } from 'vitest';
import { addedPatterns, LINTS, TAMPER } from '../../sandbox/lints.ts';

const names = (xs: { name: string }[]) => xs.map((x) => x.name);

describe('lints relative to the original', () => {
  it('counts only what the candidate adds', () => {
    const original = 'export const f = (x: any) => x; // eslint-disable-line\n';
    expect(addedPatterns(LINTS, original, original)).toEqual([]);
    const candidate = `${original}export const g = (y: any) => y as any;\n// @ts-ignore\nconsole.log(1);\n`;
    expect(addedPatterns(LINTS, original, candidate)).toEqual([
      { name: 'any', added: 2 },
      { name: 'ts-ignore', added: 1 },
      { name: 'console.log', added: 1 },
    ]);
  });

  it('flags stub bodies and lint-disable comments', () => {
    const added = addedPatterns(
      LINTS,
      '',
      "export function f(): void {}\nthrow new Error('not implemented');\n// biome-ignore lint: x\n",
    );
    expect(names(added)).toEqual(['lint-disable', 'stub']);
    expect(added.find((a) => a.name === 'stub')?.added).toBe(2);
  });
});

describe('tamper patterns', () => {
  it.each([
    ['process exit/kill/abort', 'process.exit(0)'],
    ['process exit/kill/abort', 'process . kill(1)'],
    ['computed access on process or globals', "globalThis['process']"],
    ['process stdio', 'process.stdout.write("# pass 9")'],
    ['process ids or argv', 'process.ppid'],
    ['process exit hooks', "process.on('exit', f)"],
    ['console reassigned', 'console.log = () => 1'],
    ['console reassigned', 'Object.assign(console, {})'],
    ['child_process', "import { spawn } from 'node:child_process'"],
    ['worker_threads', "import 'node:worker_threads'"],
    ['vm', "import vm from 'node:vm'"],
    ['eval', 'eval("1")'],
    ['eval', 'new Function("return 1")'],
    ['dynamic import or require', "await import('fs')"],
    ['globals or timers patched', 'globalThis.setTimeout = f'],
    ['globals or timers patched', 'Date.now = () => 0'],
    ['test runner internals or reporter output', 'globalThis.__vitest_worker__'],
    ['test runner internals or reporter output', '--outputFile'],
    ['/proc access', "readFileSync('/proc/1/cmdline')"],
  ])('%s: %s', (name, code) => {
    expect(names(addedPatterns(TAMPER, '', code))).toContain(name);
  });

  it('ignores patterns the original already had', () => {
    const original = "import { spawn } from 'node:child_process';\nprocess.exit(1);\n";
    expect(addedPatterns(TAMPER, original, `${original}// more\n`)).toEqual([]);
    expect(addedPatterns(TAMPER, original, `${original}process.exit(2);\n`)).toEqual([
      { name: 'process exit/kill/abort', added: 1 },
    ]);
  });

  it('leaves ordinary code alone', () => {
    const code = `export function add(a: number, b: number): number {\n  return a + b;\n}\nconst t = setTimeout(() => add(1, 2), 10);\nclearTimeout(t);\nif (a === b) {}\n`;
    expect(addedPatterns(TAMPER, '', code)).toEqual([]);
  });
});
