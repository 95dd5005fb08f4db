// Shared by the type-check service tests and bench/typecheck.ts: the ground truth (a fresh `tsc` in a
// box, as the scorer ran it before the service) and the comparison keys of both.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createBox } from '../../sandbox/box.ts';
import type { TypecheckResult } from '../../sandbox/typecheck/client.ts';
import { tscStyle } from '../../sandbox/typecheck/protocol.ts';
import { resolveTypescript } from '../../sandbox/typecheck/resolve-typescript.mjs';

const execFileAsync = promisify(execFile);

/** What a fresh tsc said: its verdict and its diagnostics as comparison keys. */
export interface FreshTsc {
  status: 'passed' | 'failed';
  /** Each diagnostic's first line as tsc prints it (`file(line,col): error TS1234: message`), sorted. */
  keys: string[];
  output: string;
}

/**
 * The first line of each diagnostic in `tsc --pretty false` output (continuation lines of a message
 * chain start with spaces), with the folder tsc ran in written as `<root>` (messages can name paths).
 */
export function tscOutputKeys(output: string, root: string): string[] {
  return output
    .split('\n')
    .filter((line) => /^(?:.+?\(\d+,\d+\): )?(?:error|warning|message) TS\d+: /.test(line))
    .map((line) => line.replaceAll(root, '<root>'))
    .sort();
}

/** The service's diagnostics as the same keys. */
export function serviceKeys(result: TypecheckResult, root: string): string[] {
  return result.diagnostics.map((d) => tscStyle(d).split('\n')[0]!.replaceAll(root, '<root>')).sort();
}

/**
 * Runs the workspace's own `tsc <tscArgs> --pretty false` in a fresh box holding the overlay, as the
 * scorer's type-check did before the service (unconfined: confinement does not change diagnostics).
 */
export async function freshTsc(
  workspace: string,
  overlay: Record<string, string>,
  tscArgs: string[],
): Promise<FreshTsc> {
  const tsc = join(resolveTypescript(workspace).packageDir, 'bin', 'tsc');
  const box = await createBox({ workspace, overlay });
  try {
    const r = await execFileAsync(process.execPath, [tsc, ...tscArgs, '--pretty', 'false'], {
      cwd: box.dir,
      maxBuffer: 64 * 1024 * 1024,
    }).then(
      (ok) => ({ code: 0, stdout: ok.stdout }),
      (err: { code?: number; stdout?: string }) => ({ code: err.code ?? -1, stdout: err.stdout ?? '' }),
    );
    if (r.code !== 0 && r.code !== 1 && r.code !== 2)
      throw new Error(`tsc exited with ${r.code}: ${r.stdout}`);
    return {
      status: r.code === 0 ? 'passed' : 'failed',
      keys: tscOutputKeys(r.stdout, box.dir),
      output: r.stdout,
    };
  } finally {
    await box.dispose();
  }
}

/** `text` with `from` replaced by `to`; throws when `from` is not in it (so an edit cannot silently miss). */
export function edit(text: string, from: string | RegExp, to: string): string {
  const out = text.replace(from, to);
  if (out === text) throw new Error(`edit: ${String(from)} not found`);
  return out;
}

/** Reads a workspace file. */
export function original(workspace: string, rel: string): Promise<string> {
  return readFile(join(workspace, rel), 'utf8');
}
