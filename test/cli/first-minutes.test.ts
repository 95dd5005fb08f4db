// What a new user tripped over in the first minutes (issue 12, build 7): usage errors, a failed
// `init`, and `calibrate` against a workspace that cannot score the tasks. Real `vtnode` processes.
import { existsSync, readdirSync } from 'node:fs';
import { cp, mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mine } from '../../node/tasks/mine.ts';
import type { Task } from '../../protocol/task.ts';
import { LEDGER } from '../helpers/campaign.ts';
import { freePort, Sandbox, vtnode } from '../helpers/cli.ts';

const box = new Sandbox();
afterAll(() => box.cleanup());

describe('usage errors', () => {
  it('bare `vtnode` is a usage error: help on stderr, nothing on stdout, exit 2; asked-for help is stdout, exit 0', async () => {
    const bare = await vtnode([]);
    expect({ code: bare.code, stdout: bare.stdout }).toEqual({ code: 2, stdout: '' });
    expect(bare.stderr).toMatch(/^vtnode: .*\n\nUsage: vtnode <command> \[options\]/);
    for (const asked of ['help', '--help', '-h']) {
      const r = await vtnode([asked]);
      expect({ asked, code: r.code, stderr: r.stderr }).toEqual({ asked, code: 0, stderr: '' });
      expect(r.stdout).toBe(bare.stderr);
    }
  }, 60_000);

  it('a bad number names the flag as it is typed: `-k`, not `--k`', async () => {
    const cases: [string[], RegExp][] = [
      [
        ['run', '--tasks', 't.jsonl', '--model', 'm', '-k', 'abc'],
        /^vtnode: -k must be a whole number from 1 to 256, got "abc"\n/,
      ],
      [
        ['run', '--tasks', 't.jsonl', '--model', 'm', '-k', ''],
        /^vtnode: -k must be a whole number from 1 to 256, got ""\n/,
      ],
      [
        ['run', '--tasks', 't.jsonl', '--model', 'm', '-k', '2', '--seed', '1.5'],
        /^vtnode: --seed must be a whole number ≥ 0, got "1.5"\n/,
      ],
      [['report', '--from', 'nowhere', '-k1.5'], /^vtnode: -k must be a whole number ≥ 1, got "1.5"\n/],
      [['report', '--from', 'nowhere', '-k', '0'], /^vtnode: -k must be a whole number ≥ 1, got "0"\n/],
      [['demo', '-k', 'x'], /^vtnode: -k must be a whole number ≥ 0, got "x"\n/],
    ];
    for (const [args, message] of cases) {
      const r = await vtnode(args);
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.stderr, args.join(' ')).toMatch(message);
    }
  }, 60_000);
});

describe('a failed `vtnode init` leaves nothing behind', () => {
  it('a bad option is refused before anything is written: no data dir, no identity.key', async () => {
    const dataDir = join(await box.tempDir('vt-init-'), 'node');
    const r = await vtnode(['init', '--fleet', 'f', '--data-dir', dataDir, '--listen', 'not-a-multiaddr']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--listen not-a-multiaddr: not a multiaddr/);
    expect(existsSync(dataDir)).toBe(false);
    for (const bad of [
      ['--model-server', 'nope'],
      ['--max-jobs', '0'],
      ['--advert-interval', 'soon'],
    ]) {
      const again = await vtnode(['init', '--fleet', 'f', '--data-dir', dataDir, ...bad]);
      expect({ bad, code: again.code }).toEqual({ bad, code: 2 });
      expect(existsSync(dataDir), bad.join(' ')).toBe(false);
    }
  }, 60_000);

  it('a write that fails midway removes what this init wrote and keeps what was there', async () => {
    const dataDir = await box.tempDir('vt-init-');
    // fleet-key.json cannot be written: a folder of that name is in the way.
    await mkdir(join(dataDir, 'fleet-key.json', 'in-the-way'), { recursive: true });
    await writeFile(join(dataDir, 'notes.txt'), 'mine\n');
    const r = await vtnode(['init', '--fleet', 'f', '--data-dir', dataDir]);
    expect(r.code).not.toBe(0);
    expect(readdirSync(dataDir).sort()).toEqual(['fleet-key.json', 'notes.txt']);
    // Once the obstacle is gone, init succeeds in the same dir.
    await rm(join(dataDir, 'fleet-key.json'), { recursive: true });
    const ok = await vtnode([
      'init',
      '--fleet',
      'f',
      '--data-dir',
      dataDir,
      '--listen',
      `/ip4/127.0.0.1/tcp/${await freePort()}`,
    ]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(readdirSync(dataDir)).toEqual(
      expect.arrayContaining(['identity.key', 'fleet.json', 'fleet-key.json']),
    );
  }, 60_000);
});

describe('calibrate against a workspace that cannot score the tasks', () => {
  let dir: string;
  let tasksFile: string;
  let task: Task;
  beforeAll(async () => {
    dir = await box.tempDir('vt-cal-');
    const { tasks } = await mine({ root: LEDGER, kinds: ['file'] });
    task = tasks.find((t) => t.target === 'src/money/currency.ts')!;
    tasksFile = join(dir, 'tasks.jsonl');
    await writeFile(tasksFile, `${JSON.stringify(task)}\n`);
  }, 60_000);

  /** A checkout of the ledger with its dependencies installed (linked), `src` as given. */
  async function checkout(name: string, withSrc: boolean): Promise<string> {
    const ws = join(dir, name);
    await mkdir(ws);
    for (const f of ['package.json', 'tsconfig.json', 'vitest.config.ts'])
      await cp(join(LEDGER, f), join(ws, f));
    if (withSrc) await cp(join(LEDGER, 'src'), join(ws, 'src'), { recursive: true });
    await symlink(join(LEDGER, 'node_modules'), join(ws, 'node_modules'));
    return ws;
  }

  it("another checkout (installed, without the tasks' files) is refused: exit 1, nothing written", async () => {
    const ws = await checkout('foreign', false);
    const out = join(dir, 'kept-foreign.jsonl');
    const r = await vtnode(['calibrate', '--tasks', tasksFile, '--out', out, '--workspace', ws, '--json']);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout).error).toMatch(
      new RegExp(
        `workspace ${ws} has no src/money/currency.ts: is it the checkout the tasks were mined from\\?`,
      ),
    );
    expect(existsSync(out)).toBe(false);
  }, 60_000);

  it('a workspace where no reference scores 1.0 is refused: exit 1, the reasons, nothing written', async () => {
    const ws = await checkout('broken', true);
    const target = join(ws, task.target);
    // The checkout's code does not pass its own tests (a half-finished edit, a stale build).
    await writeFile(target, (await readFile(target, 'utf8')).replace('JPY: 0', 'JPY: 2'));
    const out = join(dir, 'kept-broken.jsonl');
    const r = await vtnode(['calibrate', '--tasks', tasksFile, '--out', out, '--workspace', ws], {
      timeoutMs: 300_000,
    });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/dropped file:src\/money\/currency\.ts@\w+: reference scored 0/);
    expect(r.stderr).toMatch(/no reference of the 1 task\(s\) scored 1\.0 in .*broken .*Nothing written/);
    expect(existsSync(out)).toBe(false);
  }, 300_000);
});

describe('a workspace that cannot run its tests is never advertised', () => {
  /** The ledger without its dependencies installed. */
  async function uninstalled(): Promise<string> {
    const ws = join(await box.tempDir('vt-uninstalled-'), 'ledger');
    await mkdir(ws);
    for (const f of ['package.json', 'tsconfig.json', 'vitest.config.ts'])
      await cp(join(LEDGER, f), join(ws, f));
    await cp(join(LEDGER, 'src'), join(ws, 'src'), { recursive: true });
    return ws;
  }

  it('`run` starting its own node refuses a saved workspace it would advertise, naming the fix', async () => {
    const ws = await uninstalled();
    const dataDir = join(await box.tempDir('vt-run-'), 'node');
    const init = await vtnode([
      'init',
      '--fleet',
      'f',
      '--data-dir',
      dataDir,
      '--listen',
      `/ip4/127.0.0.1/tcp/${await freePort()}`,
      '--workspace',
      ws,
      '--model-server',
      'http://127.0.0.1:9',
    ]);
    expect(init.code, init.stderr).toBe(0);
    const tasksFile = join(dataDir, '..', 'tasks.jsonl');
    await writeFile(tasksFile, '');
    const r = await vtnode(['run', '--data-dir', dataDir, '--tasks', tasksFile, '--model', 'm', '-k', '1'], {
      timeoutMs: 60_000,
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/ledger cannot run its tests: .*Run `npm (ci|install)` in /);
    expect(r.stderr).not.toMatch(/starting this node/);
  }, 90_000);

  it('`collect` with audits refuses it before the node starts', async () => {
    const ws = await uninstalled();
    const dataDir = join(await box.tempDir('vt-collect-'), 'node');
    const init = await vtnode([
      'init',
      '--fleet',
      'f',
      '--data-dir',
      dataDir,
      '--listen',
      `/ip4/127.0.0.1/tcp/${await freePort()}`,
    ]);
    expect(init.code, init.stderr).toBe(0);
    const out = join(dataDir, '..', 'dataset');
    const r = await vtnode(['collect', '--data-dir', dataDir, '--out', out, '--workspace', ws], {
      timeoutMs: 60_000,
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/ledger cannot run its tests: .*Run `npm (ci|install)` in /);
    expect(r.stderr).not.toMatch(/is collecting/);
    expect(existsSync(out)).toBe(false);
  }, 90_000);
});
