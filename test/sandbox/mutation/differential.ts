// Differential check of the schemata: for every mutant, the instrumented module with that mutant
// active must behave like the source with the mutation applied by hand, and with none active like
// the original. Each variant is imported in a real child node process (driver.ts).
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { enumerateMutants, type Mutant } from '../../../sandbox/mutation/mutants.ts';
import { instrument } from '../../../sandbox/mutation/schemata.ts';

const run = promisify(execFile);
const DRIVER = fileURLToPath(new URL('./driver.ts', import.meta.url));

export type Outcome = { value: unknown } | { throws: string; hit: boolean };
export type Results = Record<string, Outcome> | { importError: string };

export interface DifferentialOptions {
  /** The module under test. */
  source: string;
  /** Its extension (`.ts`, `.mjs`, `.cjs`, ...). */
  ext: string;
  /** An ES module exporting `cases: [name, (mod) => unknown][]`. */
  probe: string;
  /** Low, so mutants that loop forever end quickly (on both sides). */
  hitLimit?: number;
}

export interface Differential {
  mutants: Mutant[];
  original: Results;
  /** Instrumented, no mutant active. */
  none: Results;
  /** Per mutant id: the instrumented module loaded fresh with it active, the one instance shared by all, the hand-made mutant. */
  perMutant: Map<string, { fresh: Results; shared: Results; direct: Results }>;
}

/** The source with one mutant applied as text (what the schemata must reproduce at run time). */
export function applyMutant(source: string, m: Mutant): string {
  return `${source.slice(0, m.start)}${m.replacement}${source.slice(m.end)}`;
}

export async function differential(options: DifferentialOptions): Promise<Differential> {
  const dir = await mkdtemp(join(tmpdir(), 'vtnode-mutation-diff-'));
  try {
    const file = `target${options.ext}`;
    const mutants = enumerateMutants(options.source, file);
    const stateKey = '__vtnode_mutation_diff';
    const inst = instrument(options.source, file, mutants, { stateKey });
    const files: Record<string, string> = {
      [`original${options.ext}`]: options.source,
      [`shared${options.ext}`]: inst.text,
      'probe.mjs': options.probe,
    };
    const variants = [
      { name: 'original', path: join(dir, `original${options.ext}`), active: null as string | null },
      { name: 'none', path: join(dir, `none${options.ext}`), active: null as string | null },
      // The shared instance loads with no mutant active, as a module loaded once by a shared registry.
      { name: 'shared:none', path: join(dir, `shared${options.ext}`), active: null as string | null },
    ];
    files[`none${options.ext}`] = inst.text;
    mutants.forEach((m, i) => {
      const token = inst.tokens[m.id]!;
      files[`fresh-${i}${options.ext}`] = inst.text;
      // The hand-made mutant gets counters only, so a mutant that loops forever hits the limit too.
      files[`direct-${i}${options.ext}`] = instrument(applyMutant(options.source, m), file, [], {
        stateKey,
      }).text;
      variants.push(
        { name: `fresh:${m.id}`, path: join(dir, `fresh-${i}${options.ext}`), active: token },
        { name: `shared:${m.id}`, path: join(dir, `shared${options.ext}`), active: token },
        { name: `direct:${m.id}`, path: join(dir, `direct-${i}${options.ext}`), active: 'direct' },
      );
    });
    for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
    await writeFile(
      join(dir, 'spec.json'),
      JSON.stringify({
        stateKey,
        hitLimit: options.hitLimit ?? 20_000,
        probe: join(dir, 'probe.mjs'),
        variants,
      }),
    );
    const { stdout } = await run(process.execPath, [DRIVER, join(dir, 'spec.json')], {
      timeout: 60_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    const out = JSON.parse(stdout) as Record<string, Results>;
    const perMutant = new Map(
      mutants.map((m) => [
        m.id,
        { fresh: out[`fresh:${m.id}`]!, shared: out[`shared:${m.id}`]!, direct: out[`direct:${m.id}`]! },
      ]),
    );
    return { mutants, original: out['original']!, none: out['none']!, perMutant };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
