// Type-check benchmark: CPU per candidate of a fresh confined `tsc --noEmit -p` (what the scorer ran per
// candidate) vs the type-check service (warm), both confined by bwrap, measured in the same run.
// Each candidate is the target's reference plus a comment (a new candidate every time, verdict passed).
//
//   npx node bench/typecheck.ts [--rounds N] [--uid-base U] [--self DIR] [--case NAME=DIR:TARGET[:TSC ARGS]]...
//
// Default cases: examples/ledger (a leaf module and a module with many importers) and vtnode's own
// repository (a mid-size package: ~900 files, ~29k lines of TypeScript, libp2p's declarations; --self
// points at a clean checkout of it, with node_modules, when this one is being edited).
// --case adds e.g. a local checkout of a public library (its node_modules installed).
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { createConfinement } from '../sandbox/backend.ts';
import { createBox } from '../sandbox/box.ts';
import type { Confinement, SpawnedProcess } from '../sandbox/confinement.ts';
import { DEFAULT_LIMITS, limitsFor } from '../sandbox/limits.ts';
import { createTypecheckService } from '../sandbox/typecheck/client.ts';
import { resolveTypescript } from '../sandbox/typecheck/resolve-typescript.mjs';
import { REPO_ROOT } from '../test/sandbox/fixtures.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    'uid-base': { type: 'string' },
    case: { type: 'string', multiple: true, default: [] },
    self: { type: 'string', default: REPO_ROOT },
  },
});
const rounds = Number(values.rounds);
/** vtnode's own repository as a case: a clean checkout (one being edited would not type-check). */
const SELF = values.self;

interface Case {
  name: string;
  dir: string;
  target: string;
  tscArgs: string[];
}

const PROJECT = ['--noEmit', '-p', 'tsconfig.json'];
const LEDGER = join(REPO_ROOT, 'examples', 'ledger');
const cases: Case[] = [
  { name: 'ledger, leaf (fx/convert.ts)', dir: LEDGER, target: 'src/fx/convert.ts', tscArgs: PROJECT },
  {
    name: 'ledger, 19 importers (money/amount.ts)',
    dir: LEDGER,
    target: 'src/money/amount.ts',
    tscArgs: PROJECT,
  },
  { name: 'vtnode, leaf (sandbox/reward.ts)', dir: SELF, target: 'sandbox/reward.ts', tscArgs: PROJECT },
  {
    name: 'vtnode, many importers (protocol/canonical.ts)',
    dir: SELF,
    target: 'protocol/canonical.ts',
    tscArgs: PROJECT,
  },
  ...values.case.map((spec): Case => {
    const m = /^([^=]+)=([^:]+):([^:]+)(?::(.+))?$/.exec(spec);
    if (!m) throw new Error(`--case ${spec}: expected NAME=DIR:TARGET[:TSC ARGS]`);
    return { name: m[1]!, dir: m[2]!, target: m[3]!, tscArgs: m[4] ? m[4].split(' ') : PROJECT };
  }),
];

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** `times` output of sh (children's user and system time, e.g. `0m2.350s 0m0.410s`) in milliseconds. */
function childrenCpuMs(stderr: string): number {
  const lines = stderr.trim().split('\n');
  const m = /(\d+)m([\d.]+)s\s+(\d+)m([\d.]+)s\s*$/.exec(lines.at(-1) ?? '');
  if (!m) throw new Error(`no times line in: ${stderr.slice(-300)}`);
  return (Number(m[1]) * 60 + Number(m[2]) + Number(m[3]) * 60 + Number(m[4])) * 1000;
}

/**
 * One fresh confined tsc, as the scorer ran it: a fresh box with the candidate, `tsc <args>` in bwrap.
 * CPU is exact: the shell that runs tsc reports its children's time (`times`) once tsc has exited.
 */
async function freshTsc(confinement: Confinement, c: Case, text: string) {
  const box = await createBox({ workspace: c.dir, overlay: { [c.target]: text } });
  try {
    const tsc = join(resolveTypescript(c.dir).packageDir, 'bin', 'tsc');
    const started = performance.now();
    const r = await confinement.run({
      argv: [
        '/bin/sh',
        '-c',
        '"$@"; code=$?; times >&2; exit $code',
        'sh',
        process.execPath,
        tsc,
        ...c.tscArgs,
      ],
      cwd: box.dir,
      box: box.dir,
      readOnlyPaths: [...box.linked, join(process.execPath, '..', '..'), resolveTypescript(c.dir).packageDir],
      env: { PATH: '/usr/bin:/bin', HOME: join(box.dir, '.home'), TMPDIR: join(box.dir, '.tmp') },
      limits: limitsFor(600_000, DEFAULT_LIMITS),
    });
    const wallMs = performance.now() - started;
    if (r.exitCode !== 0) throw new Error(`fresh tsc failed on ${c.name}: ${r.stdout.slice(0, 2000)}`);
    return { cpuMs: childrenCpuMs(r.stderr), wallMs };
  } finally {
    await box.dispose();
  }
}

async function bench(confinement: Confinement, c: Case) {
  const reference = await readFile(join(c.dir, c.target), 'utf8');
  const spawned: SpawnedProcess[] = [];
  const recording: Confinement = {
    ...confinement,
    spawn: async (spec) => {
      const p = await confinement.spawn(spec);
      spawned.push(p);
      return p;
    },
  };
  const service = createTypecheckService({ confinement: recording, workspaceDir: c.dir, tscArgs: c.tscArgs });
  const started = performance.now();
  const first = await service.check({}, { target: c.target });
  if (first.status !== 'passed')
    throw new Error(`${c.name}: the reference does not pass: ${first.error ?? ''}`);
  const start = { wallMs: performance.now() - started, cpuMs: (await spawned[0]!.usage()).cpuMs };
  const fresh = { cpu: [] as number[], wall: [] as number[] };
  const same = { cpu: [] as number[], wall: [] as number[] };
  const reshaped = { cpu: [] as number[], wall: [] as number[] };
  const serviceCheck = async (text: string, into: { cpu: number[]; wall: number[] }) => {
    const t0 = performance.now();
    const r = await service.check({ [c.target]: text }, { target: c.target });
    if (r.status !== 'passed') throw new Error(`${c.name}: the service said ${r.status}: ${r.error ?? ''}`);
    into.wall.push(performance.now() - t0);
    into.cpu.push(r.cpuMs);
  };
  // Fresh and service candidates alternate so that load from elsewhere hits both alike.
  for (let i = 0; i < rounds; i++) {
    const text = `${reference}\n// candidate ${i}\n`;
    const f = await freshTsc(confinement, c, text);
    fresh.cpu.push(f.cpuMs);
    fresh.wall.push(f.wallMs);
    // The same declaration shape (checked alone), and a new export (every importer is checked again).
    await serviceCheck(text, same);
    await serviceCheck(`${reference}\nexport const vtnodeBench${i} = ${i};\n`, reshaped);
  }
  await service.close();
  return { start, fresh, same, reshaped, typescript: first.typescript };
}

const confinement = await createConfinement(
  values['uid-base'] !== undefined ? { uidBase: Number(values['uid-base']) } : {},
);
const rows: string[] = [];
const seconds = (ms: number, digits = 2) => (ms / 1000).toFixed(digits);
for (const c of cases) {
  const r = await bench(confinement, c);
  const freshCpu = median(r.fresh.cpu);
  const service = (m: { cpu: number[]; wall: number[] }) =>
    `${seconds(median(m.cpu), 3)} | ${seconds(median(m.wall), 3)} | 1/${(freshCpu / median(m.cpu)).toFixed(0)}`;
  rows.push(
    `| ${c.name} | ${r.typescript} | ${seconds(freshCpu)} | ${seconds(median(r.fresh.wall))} | ${service(r.same)} | ${service(r.reshaped)} | ${seconds(r.start.cpuMs, 1)} / ${seconds(r.start.wallMs, 1)} |`,
  );
  process.stdout.write(`${rows.at(-1)}\n`);
}
const load = execFileSync('cat', ['/proc/loadavg']).toString().split(' ').slice(0, 3).join(' ');
process.stdout.write(
  `\n| case | TypeScript | fresh tsc CPU s | fresh tsc wall s | service CPU s, same shape | wall s | CPU ratio | service CPU s, new export | wall s | CPU ratio | service start CPU / wall s |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n${rows.join('\n')}\n\n` +
    `medians of ${rounds} candidates per case, both confined (${confinement.name}); node ${process.version}; load ${load}; ` +
    `cases: ${cases.map((c) => relative(REPO_ROOT, c.dir) || '.').join(', ')}\n`,
);
