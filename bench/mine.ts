/**
 * Mining throughput on a generated repository of N modules (default 2,000).
 *
 *   npx node bench/mine.ts [--modules 2000] [--runs 3]
 *
 * Each module has two sources and one vitest test file; every tenth module's test also imports the
 * next module's source (so groups form), and every module imports one shared helper (which the miner
 * skips). The baseline, measured in the same run on the same files, is reading and sha256-hashing
 * every file of the repository once: the least any miner must do.
 */
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { listWorkspaceFiles } from '../node/tasks/files.ts';
import { mine } from '../node/tasks/mine.ts';

const { values } = parseArgs({
  options: { modules: { type: 'string', default: '2000' }, runs: { type: 'string', default: '3' } },
});
const modules = Number(values.modules);
const runs = Number(values.runs);

const pad = (i: number) => String(i).padStart(4, '0');

function moduleFiles(i: number, n: number): Record<string, string> {
  const m = `m${pad(i)}`;
  const next = `m${pad((i + 1) % n)}`;
  const crossTest = i % 10 === 0;
  return {
    [`src/${m}/model.ts`]: `/** Records of module ${m}. */
export interface Item${i} {
  readonly id: number;
  readonly name: string;
  readonly weight: number;
}

export class Store${i} {
  readonly #items = new Map<number, Item${i}>();

  put(item: Item${i}): this {
    if (this.#items.has(item.id)) throw new Error(\`item \${item.id} exists in ${m}\`);
    this.#items.set(item.id, item);
    return this;
  }

  get(id: number): Item${i} | undefined {
    return this.#items.get(id);
  }

  total(): number {
    let sum = 0;
    for (const item of this.#items.values()) sum += item.weight * ${(i % 7) + 1};
    return sum;
  }
}
`,
    [`src/${m}/ops.ts`]: `import { label } from '../shared/fmt.ts';
import { type Item${i}, Store${i} } from './model.ts';

/** Builds a store of ${m} items from names. */
export function build${i}(names: string[]): Store${i} {
  const store = new Store${i}();
  names.forEach((name, id) => store.put({ id, name, weight: name.length + ${i % 13} }));
  return store;
}

/** The heaviest item's label, or null for an empty list. */
export function heaviest${i}(items: Item${i}[]): string | null {
  let best: Item${i} | null = null;
  for (const item of items) if (!best || item.weight > best.weight) best = item;
  return best ? label('${m}', best.name) : null;
}
`,
    [`src/${m}/ops.test.ts`]: `import { describe, expect, it } from 'vitest';
import { Store${i} } from './model.ts';
import { build${i}, heaviest${i} } from './ops.ts';
${crossTest ? `import { Store${(i + 1) % n} } from '../${next}/model.ts';\n` : ''}
describe('${m}', () => {
  it('builds and totals', () => {
    const s = build${i}(['a', 'bb']);
    expect(s).toBeInstanceOf(Store${i});
    expect(s.total()).toBeGreaterThan(0);
  });

  it('finds the heaviest item', () => {
    expect(heaviest${i}([])).toBeNull();
    expect(heaviest${i}([{ id: 1, name: 'x', weight: 2 }, { id: 2, name: 'y', weight: 5 }])).toBe('${m}:y');
  });
${crossTest ? `\n  it('works with ${next}', () => {\n    expect(new Store${(i + 1) % n}().total()).toBe(0);\n  });\n` : ''}});
`,
  };
}

async function generate(dir: string, n: number): Promise<number> {
  const files: Record<string, string> = {
    'package.json': JSON.stringify({
      name: 'generated',
      private: true,
      type: 'module',
      devDependencies: { vitest: '4.1.12', typescript: '5.9.3' },
    }),
    'tsconfig.json': JSON.stringify({
      compilerOptions: {
        strict: true,
        noEmit: true,
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        allowImportingTsExtensions: true,
      },
      include: ['src'],
    }),
    'src/shared/fmt.ts':
      "export function label(scope: string, name: string): string {\n  return scope + ':' + name;\n}\n",
  };
  for (let i = 0; i < n; i++) Object.assign(files, moduleFiles(i, n));
  for (const [path, text] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), text);
  }
  return Object.keys(files).length;
}

/** Wall and CPU (user + system, whole process) milliseconds of `fn`. */
async function measure<T>(fn: () => Promise<T>): Promise<{ wall: number; cpu: number; value: T }> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const value = await fn();
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { wall, cpu: (cpu.user + cpu.system) / 1000, value };
}

async function baseline(root: string): Promise<void> {
  const files = await listWorkspaceFiles(root);
  const h = createHash('sha256');
  for (const f of files) h.update(await readFile(join(root, f)));
  h.digest('hex');
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const dir = await mkdtemp(join(tmpdir(), 'vtnode-bench-mine-'));
try {
  const fileCount = await generate(dir, modules);
  const base = { wall: [] as number[], cpu: [] as number[] };
  const mined = { wall: [] as number[], cpu: [] as number[] };
  let tasks = 0;
  let summary = '';
  for (let r = 0; r < runs; r++) {
    const b = await measure(() => baseline(dir));
    const m = await measure(() => mine({ root: dir }));
    base.wall.push(b.wall);
    base.cpu.push(b.cpu);
    mined.wall.push(m.wall);
    mined.cpu.push(m.cpu);
    const s = m.value.summary;
    tasks = s.tasks;
    console.log(
      `run ${r + 1}: baseline ${b.wall.toFixed(0)} ms (cpu ${b.cpu.toFixed(0)}), mine ${m.wall.toFixed(0)} ms (cpu ${m.cpu.toFixed(0)}); phases ${JSON.stringify(s.timings)}`,
    );
    summary = `${s.tasks} tasks (file ${s.byKind.file}, tests ${s.byKind.tests}; train ${s.bySplit.train}, eval ${s.bySplit.eval}), ${s.groups.length} groups, ${s.skipped.length} skipped, leakage ${s.leakage}`;
  }
  const bw = median(base.wall);
  const mw = median(mined.wall);
  const bc = median(base.cpu);
  const mc = median(mined.cpu);
  console.log(`generated repository: ${modules} modules, ${fileCount} files (${dir})`);
  console.log(summary);
  console.log(
    `baseline (list + read + sha256 every file): median ${bw.toFixed(0)} ms wall, ${bc.toFixed(0)} ms cpu`,
  );
  console.log(
    `mine: median ${mw.toFixed(0)} ms wall, ${mc.toFixed(0)} ms cpu -> ${((tasks / mw) * 1000).toFixed(0)} tasks/s (wall), ${((tasks / mc) * 1000).toFixed(0)} tasks/cpu-s`,
  );
  console.log(
    `ratio mine / baseline: ${(mw / bw).toFixed(1)}x wall, ${(mc / bc).toFixed(1)}x cpu (${runs} runs, medians)`,
  );
} finally {
  await rm(dir, { recursive: true, force: true });
}
