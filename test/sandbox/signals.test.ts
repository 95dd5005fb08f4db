// The runner's main process out of the test processes' reach (issue 24, classes 3 and 4): a candidate
// that opens the main's inspector (SIGUSR1, process._debugProcess) and patches the code writing the
// report, or that replaces the report while the main is stopped (SIGSTOP), or reaches the main through
// /proc/<pid>. Each attack is built at run time (the static rules never see it), starts from an
// implementation that is wrong on every case, and must score 0; the probes below must stay contained.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workspaceIdentity } from '../../node/workspace/content-id.ts';
import type { Task } from '../../protocol/task.ts';
import { createCheckedScorer, type ScoreResult, type Scorer } from '../../sandbox/scorer.ts';
import { makeTask, NODE_WS, prepareFixtures, runtime, VITEST_WS, WRONG_STRINGS } from './fixtures.ts';

/** A jest-format JSON report (vitest's) with every failed case but the sentinel turned into a pass. */
const FORGE = `const forge = (text) => {
  const r = JSON.parse(text);
  for (const f of r.testResults ?? []) {
    for (const a of f.assertionResults ?? [])
      if (a.status === 'failed' && !String(a.title).includes('vt' + 'node:sentinel')) { a.status = 'passed'; a.failureMessages = []; }
  }
  r.numPassedTests += r.numFailedTests - 1; r.numFailedTests = 1;
  return JSON.stringify(r);
};`;

/** Run in the main process through its inspector: every report it writes is forged on its way out. */
const PATCH_MAIN = `(() => { ${FORGE}
  const fs = process.getBuiltinModule('fs');
  const patch = (o, k) => { const w = o[k]; o[k] = function (f, data, ...rest) {
    if (typeof data === 'string' && data.includes('"testResults"')) data = forge(data);
    return w.call(this, f, data, ...rest); }; };
  patch(fs.promises, 'writeFile'); patch(fs, 'writeFileSync'); patch(fs, 'writeFile');
  return 'patched'; })()`;

/** Opens the main's inspector with `wake` (code using `pid`), then drives it over its WebSocket. */
const driveInspector = (wake: string) =>
  runtime(`const pid = process.ppid;
${wake}
let list = null;
for (let i = 0; i < 100 && !list; i++) {
  list = await fetch('http://127.0.0.1:9229/json/list').then((r) => r.json(), () => null);
  if (!list) await new Promise((r) => setTimeout(r, 50));
}
if (list && list[0]) {
  const ws = new WebSocket(list[0].webSocketDebuggerUrl);
  await new Promise((resolve) => {
    ws.onopen = () => ws.send(JSON.stringify({ id: 1, method: 'Runtime.evaluate', params: { expression: ${JSON.stringify(PATCH_MAIN)} } }));
    ws.onmessage = () => { ws.close(); resolve(); };
    ws.onerror = () => resolve();
  });
}`);

/**
 * A detached helper that waits for the main's report (found with `find`, code setting `path` or
 * leaving it null, given `pid` and `cwd`), stops the main, replaces the report and lets it go on.
 */
const raceHelper = (find: string) =>
  runtime(`const helper = ${JSON.stringify(`const fs = require('fs');
const pid = Number(process.argv[1]); const cwd = process.argv[2];
${FORGE}
const tick = () => {
  let path = null;
  try { ${find} } catch {}
  let text = null;
  if (path) { try { text = fs.readFileSync(path, 'utf8'); JSON.parse(text); } catch { text = null; } }
  if (text === null) return setImmediate(tick);
  process.kill(pid, 'SIGSTOP');
  try { fs.writeFileSync(path, forge(text)); } finally { process.kill(pid, 'SIGCONT'); }
  process.exit(0);
};
setTimeout(() => process.exit(0), 20000);
tick();`)};
const cp = process.getBuiltinModule('child_process');
cp.spawn(process.execPath, ['-e', helper, String(process.ppid), process.cwd()], { detached: true, stdio: 'ignore' }).unref();`);

/** Report files in the box's .vtnode folder, named the way the judge names them. */
const IN_BOX = `for (const f of fs.readdirSync(cwd + '/.vt' + 'node')) if (/^report-.*\\.json$/.test(f)) path = cwd + '/.vt' + 'node/' + f;`;
/** The same folder reached through the main's /proc entry. */
const VIA_PROC_CWD = `const d = '/pr' + 'oc/' + pid + '/cwd/.vt' + 'node'; for (const f of fs.readdirSync(d)) if (/^report-.*\\.json$/.test(f)) path = d + '/' + f;`;
/** The same folder reached through the main's root, by its absolute path. */
const VIA_PROC_ROOT = `const d = '/pr' + 'oc/' + pid + '/root' + cwd + '/.vt' + 'node'; for (const f of fs.readdirSync(d)) if (/^report-.*\\.json$/.test(f)) path = d + '/' + f;`;

let scorer: Scorer;
let strings: Task;
let math: Task;

afterAll(async () => scorer?.close());

beforeAll(async () => {
  await prepareFixtures();
  scorer = await createCheckedScorer({ workspaceId: async (d) => (await workspaceIdentity(d)).id });
  strings = await makeTask({
    id: 'signals/strings',
    workspace: VITEST_WS,
    target: 'src/strings.ts',
    runner: 'vitest',
    testFiles: ['test/strings.test.ts'],
    timeoutMs: 15_000,
  });
  math = await makeTask({
    id: 'signals/math',
    workspace: NODE_WS,
    target: 'src/math.js',
    runner: 'node:test',
    testFiles: ['test/math.test.js'],
    timeoutMs: 15_000,
  });
}, 120_000);

async function score(task: Task, candidate: string): Promise<ScoreResult> {
  return await scorer.score({ task, workspaceDir: task.workspace.root!, candidate });
}

/** An honest node:test candidate whose `add` breaks when `leaked` is set (5 of 6 tests then pass). */
const HONEST_MATH = `
export function add(a, b) {
  return a + b + (leaked ? 1 : 0);
}
export function gcd(a, b) {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}
export function range(from, to) {
  const out = [];
  for (let i = from; i < to; i++) out.push(i);
  return out;
}
`;

/** A candidate that runs `attack` (code that sets `leaked` when it got through) as it loads, in a test process. */
const probe = (attack: string) =>
  `import fs from 'node:fs';\nimport cp from 'node:child_process';\nlet leaked = false;\nconst main = process.ppid;\ntry {\n${attack}\n} catch {}\n${HONEST_MATH}`;

/** The probe's attack did not get through: every test passed. */
function contained(r: ScoreResult): void {
  expect(r.status, r.error ?? '').toBe('scored');
  expect(r.failed, JSON.stringify(r.tests.filter((t) => t.status === 'failed'))).toBe(0);
  expect(r.passed, `${r.reasons.join('; ')}\n${r.diagnostics}`).toBe(6);
}

/** The attack earned nothing: scored (never an infrastructure error), reward 0. */
function zero(r: ScoreResult): void {
  expect(r.status, r.error ?? '').toBe('scored');
  expect(r.reward, `${r.reasons.join('\n')}\n${r.diagnostics ?? ''}`).toBe(0);
  // The runtime caught it: the static rules never saw the attack (it is built at run time).
  expect(r.reasons.join('\n')).not.toMatch(/tamper pattern added/);
}

describe('controls', () => {
  it('the reference keeps 1.0 and the wrong implementation alone scores 0', async () => {
    expect((await score(strings, await readFile(join(VITEST_WS, 'src/strings.ts'), 'utf8'))).reward).toBe(1);
    expect((await score(math, await readFile(join(NODE_WS, 'src/math.js'), 'utf8'))).reward).toBe(1);
    zero(await score(strings, WRONG_STRINGS));
  }, 90_000);
});

describe("class 3: the main process's inspector", () => {
  it.each([
    ['SIGUSR1 sent to the main', "process.kill(pid, 'SIGUSR1');"],
    ['process._debugProcess(main)', 'process._debugProcess(pid);'],
    [
      'SIGUSR1 from a detached grandchild, the main found by its command line',
      "const cp = process.getBuiltinModule('child_process'); cp.spawn(process.execPath, ['-e', \"const fs = require('fs'); const P = '/pr' + 'oc/'; for (const p of fs.readdirSync(P)) { try { if (fs.readFileSync(P + p + '/cmdline', 'utf8').includes('vitest.mjs')) process.kill(Number(p), 'SIGUSR1'); } catch {} }\"], { detached: true, stdio: 'ignore' }).unref();",
    ],
  ])(
    '%s, then its report patched through the inspector',
    async (_name, wake) => {
      zero(await score(strings, `${driveInspector(wake)}${WRONG_STRINGS}`));
    },
    90_000,
  );
});

describe("class 4: the main's report replaced while the main is stopped", () => {
  it.each([
    ['found in the box', IN_BOX],
    ['found through /proc/<main>/cwd', VIA_PROC_CWD],
    ['found through /proc/<main>/root', VIA_PROC_ROOT],
  ])(
    'the report %s',
    async (_name, find) => {
      zero(await score(strings, `${raceHelper(find)}${WRONG_STRINGS}`));
    },
    90_000,
  );
});

describe('probes from a node:test test process (the main is its parent)', () => {
  it.each([
    [
      'an in-process inspector session',
      "const i = await import('node:inspector'); const s = new i.Session(); s.connect(); leaked = true;",
    ],
    [
      'inspector.open()',
      "const i = await import('node:inspector'); i.open(0); leaked = typeof i.url() === 'string';",
    ],
    [
      'inspector/promises',
      "const i = await import('node:inspector/promises'); const s = new i.Session(); s.connect(); leaked = true;",
    ],
    ["process.binding('inspector')", "leaked = typeof process.binding('inspector').open === 'function';"],
    [
      'a child node started with --inspect',
      "const out = cp.spawnSync(process.execPath, ['--inspect=0', '-e', 'process.stdout.write(String(require(`inspector`).url()))']); leaked = String(out.stdout).startsWith('ws:');",
    ],
    [
      'a child node given --inspect in NODE_OPTIONS',
      "const env = { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --inspect=0` }; const out = cp.spawnSync(process.execPath, ['-e', 'process.stdout.write(String(require(`inspector`).url()))'], { env }); leaked = String(out.stdout).startsWith('ws:');",
    ],
    ["the main's environment read through /proc", 'fs.readFileSync(`/proc/${main}/environ`); leaked = true;'],
    ["the main's open files listed through /proc", 'leaked = fs.readdirSync(`/proc/${main}/fd`).length > 0;'],
    [
      "the main's memory opened through /proc",
      "fs.closeSync(fs.openSync(`/proc/${main}/mem`, 'r')); leaked = true;",
    ],
    [
      "the main's box reached through /proc/<main>/cwd",
      'leaked = fs.readdirSync(`/proc/${main}/cwd`).length > 0;',
    ],
  ])(
    '%s',
    async (_name, attack) => {
      contained(await score(math, probe(attack)));
    },
    90_000,
  );
});
