// What each CLI path loads, for real: the CLI runs with a module hook that records every module URL
// it resolves, on the sources (bin/vtnode.js) and on the bundle (dist/vtnode.js, mapped back to the
// sources each chunk holds through esbuild's metafile). `--help`, `<cmd> --help`, `status`, `token`,
// `leave` and `run` against a running daemon must not load libp2p's network stack nor the openai SDK;
// an idle node started from the bundle must not load TypeScript (tens of MiB) either.
import { execFile, spawn } from 'node:child_process';
import { readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMMANDS } from '../../cli/command-table.ts';
import { BIN, eventually, freePort, REPO, Sandbox } from '../helpers/cli.ts';

const run = promisify(execFile);
const box = new Sandbox();
afterAll(() => box.cleanup());

/** libp2p's network stack and the model client: what a short command must never load. */
const HEAVY =
  /node_modules\/(libp2p|@libp2p\/(tcp|mdns|identify|pnet)|@chainsafe\/libp2p-(gossipsub|noise|yamux)|openai)\/|^node\/daemon\.ts$/;

const HOOK = `
import { registerHooks } from 'node:module';
import { appendFileSync } from 'node:fs';
const seen = new Set();
registerHooks({ resolve(specifier, context, next) { const r = next(specifier, context); seen.add(r.url); return r; } });
process.on('exit', () => appendFileSync(process.env.VTNODE_TEST_LOADED, [...seen].join('\\n') + '\\n'));
`;

let dir: string;
let hook: string;
let dataDir: string;
let bundle: string;
/** Output file (relative to the build root) → the source paths it holds. */
let chunkInputs: Map<string, string[]>;
let tasksFile: string;
let counter = 0;

/** Source paths (relative to the repository) of the module URLs a run loaded. */
function sourcesOf(urls: string[], root: string): string[] {
  const out = new Set<string>();
  for (const url of urls) {
    if (!url.startsWith('file:')) continue;
    const path = fileURLToPath(url);
    const rel = path.startsWith(`${root}/`) ? path.slice(root.length + 1) : path;
    const inputs = chunkInputs.get(rel);
    if (inputs) for (const i of inputs) out.add(i);
    else out.add(rel.replace(/^.*?(node_modules\/)/, '$1'));
  }
  return [...out];
}

/** Runs the CLI (`entry`) with the hook; resolves to what it loaded and its output. */
async function loadedBy(entry: string, args: string[]) {
  const file = join(dir, `loaded-${++counter}.txt`);
  await writeFile(file, '');
  const r = await run(process.execPath, ['--import', hook, entry, ...args], {
    env: { ...process.env, VTNODE_TEST_LOADED: file },
    timeout: 60_000,
  }).then(
    (ok) => ({ code: 0, ...ok }),
    (err: { code: number; stdout: string; stderr: string }) => err,
  );
  const urls = (await readFile(file, 'utf8')).split('\n').filter(Boolean);
  const root = entry === BIN ? REPO : dir;
  return { ...r, loaded: sourcesOf(urls, root) };
}

beforeAll(async () => {
  dir = await box.tempDir('vt-lazy-');
  hook = join(dir, 'hook.mjs');
  await writeFile(hook, HOOK);
  // The bundle, laid out as the package is (its runtime files beside dist/).
  const meta = join(dir, 'meta.json');
  await run(process.execPath, [join(REPO, 'scripts', 'build.ts'), '--out-root', dir, '--metafile', meta], {
    timeout: 120_000,
  });
  for (const f of ['bin', 'sandbox', 'examples', 'node_modules', 'package.json'])
    await symlink(join(REPO, f), join(dir, f));
  bundle = join(dir, 'dist', 'vtnode.js');
  const outputs = (
    JSON.parse(await readFile(meta, 'utf8')) as { outputs: Record<string, { inputs: object }> }
  ).outputs;
  chunkInputs = new Map(
    Object.entries(outputs).map(([out, o]) => [
      out.slice(out.indexOf('dist/')),
      Object.keys(o.inputs).map((i) => i.replace(/^.*?(node_modules\/)/, '$1')),
    ]),
  );
  // A node running in the background, and a task for `run` to submit to it.
  dataDir = join(dir, 'node');
  await run(
    process.execPath,
    [
      BIN,
      'init',
      '--fleet',
      'lazy',
      '--data-dir',
      dataDir,
      '--listen',
      `/ip4/127.0.0.1/tcp/${await freePort()}`,
    ],
    {
      timeout: 60_000,
    },
  );
  const daemon = box.spawn(['start', '--data-dir', dataDir]);
  await daemon.waitFor(/is in fleet "lazy"/, 60_000);
  tasksFile = join(dir, 'tasks.jsonl');
  await run(process.execPath, [BIN, 'mine', '--root', join(REPO, 'examples', 'ledger'), '--out', tasksFile], {
    timeout: 60_000,
  });
}, 240_000);

const NODE_STARTERS = ['run', 'start', 'join', 'collect', 'demo'];

for (const variant of ['sources', 'bundle'] as const) {
  describe(`on the ${variant}, short commands never load libp2p or openai`, () => {
    const entry = () => (variant === 'sources' ? BIN : bundle);

    it('--help loads no command at all', async () => {
      const r = await loadedBy(entry(), ['--help']);
      expect(r.stdout).toContain('Commands:');
      expect(r.loaded.filter((s) => s.startsWith('cli/commands/'))).toEqual([]);
      expect(r.loaded.filter((s) => HEAVY.test(s))).toEqual([]);
    });

    it('an unknown command names the one meant, and loads no command', async () => {
      const r = await loadedBy(entry(), ['colect']);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^vtnode: unknown command "colect" \(did you mean "collect"\?\)/);
      expect(r.loaded.filter((s) => s.startsWith('cli/commands/'))).toEqual([]);
    });

    // The bundle (what an installed vtnode runs): every command. The sources (about 1 s of CPU each for
    // type stripping): the commands that start a node, where a static import would pull libp2p in;
    // the others' modules are the bundle's, checked above.
    const commands = variant === 'bundle' ? COMMANDS : COMMANDS.filter((c) => NODE_STARTERS.includes(c.name));
    it(variant === 'bundle'
      ? '<cmd> --help, for every command'
      : '<cmd> --help, for the commands that start a node', async () => {
      for (const c of commands) {
        const r = await loadedBy(entry(), [c.name, '--help']);
        expect(r.stdout, c.name).toMatch(/Usage: vtnode/);
        expect(r.loaded, c.name).toContain(`cli/commands/${c.name}.ts`); // the hook saw the command
        expect(
          r.loaded.filter((s) => HEAVY.test(s)),
          c.name,
        ).toEqual([]);
      }
    }, 120_000);

    it('status, token and run against the running daemon', async () => {
      const status = await loadedBy(entry(), ['status', '--data-dir', dataDir]);
      expect(status.stdout).toMatch(/fleet "lazy": 1 node/);
      const token = await loadedBy(entry(), ['token', '--data-dir', dataDir]);
      expect(token.stdout).toMatch(/^vt2\./);
      // The daemon refuses the campaign (no model server in the fleet): `run` asked the daemon.
      const campaign = await loadedBy(entry(), [
        'run',
        '--data-dir',
        dataDir,
        '--tasks',
        tasksFile,
        '--model',
        'm',
        '-k',
        '1',
      ]);
      expect(campaign.stderr).toMatch(/no node of the fleet serves model "m"/);
      expect(campaign.stderr).not.toMatch(/starting this node/);
      for (const r of [status, token, campaign]) {
        expect(r.loaded).toContain('node/control/client.ts');
        expect(r.loaded.filter((s) => HEAVY.test(s))).toEqual([]);
      }
    }, 120_000);
  });
}

describe('leave, and an idle node from the bundle', () => {
  it('`leave` stops the node without loading libp2p', async () => {
    const r = await loadedBy(BIN, ['leave', '--data-dir', dataDir]);
    expect(r.stdout + r.stderr).toMatch(/left the fleet/);
    expect(r.loaded).toContain('cli/commands/leave.ts');
    expect(r.loaded.filter((s) => HEAVY.test(s))).toEqual([]);
  });

  it('an idle node started from the bundle holds neither TypeScript nor the openai SDK', async () => {
    const loaded = join(dir, 'daemon-loaded.txt');
    await writeFile(loaded, '');
    const child = spawn(process.execPath, ['--import', hook, bundle, 'start', '--data-dir', dataDir], {
      env: { ...process.env, VTNODE_TEST_LOADED: loaded },
      stdio: 'ignore',
    });
    const exited = new Promise((r) => child.once('exit', r));
    try {
      // Settled: the sandbox self-test has finished (it is what scoring code runs at start).
      await eventually(
        async () => {
          const { stdout } = await run(process.execPath, [BIN, 'status', '--data-dir', dataDir, '--json']);
          const self = (JSON.parse(stdout) as { nodes: { self?: boolean; sandbox?: { detail?: string } }[] })
            .nodes[0];
          return self?.sandbox && self.sandbox.detail !== 'self-test running';
        },
        60_000,
        'the node to finish its sandbox self-test',
      );
      await run(process.execPath, [BIN, 'leave', '--data-dir', dataDir]);
      await exited;
    } finally {
      child.kill('SIGKILL');
    }
    const urls = (await readFile(loaded, 'utf8')).split('\n').filter(Boolean);
    const sources = sourcesOf(urls, dir);
    expect(sources).toContain('node/daemon.ts'); // the hook saw the node
    expect(sources.filter((s) => /node_modules\/(typescript|openai)\//.test(s))).toEqual([]);
  }, 120_000);
});
