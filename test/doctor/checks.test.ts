import { describe, expect, it } from 'vitest';
import {
  type Check,
  checkClock,
  checkDetectedServers,
  checkDisk,
  checkIdentity,
  checkModelServer,
  checkNodeVersion,
  checkPort,
  checkReach,
  checkSandbox,
  checkWorkspace,
  doctorExitCode,
  renderChecks,
  type SandboxFacts,
  tcpPorts,
  type WorkspaceFacts,
} from '../../node/doctor/checks.ts';
import type { ProbedServer } from '../../node/models/probe.ts';

const MiB = 2 ** 20;
const GiB = 2 ** 30;

describe('node version', () => {
  it('22.18 and later pass; older fail with a fix', () => {
    expect(checkNodeVersion('v22.18.0').status).toBe('ok');
    expect(checkNodeVersion('v24.1.0').status).toBe('ok');
    const old = checkNodeVersion('v22.17.1');
    expect(old).toMatchObject({ status: 'fail', detail: 'Node.js v22.17.1 is older than 22.18' });
    expect(old.fix).toMatch(/install Node.js 22.18/);
    expect(checkNodeVersion('v20.19.0').status).toBe('fail');
  });
});

describe('identity', () => {
  it('needs both identity.key and fleet.json', () => {
    expect(checkIdentity({ dataDir: '/d', identity: true, fleet: 'lab' })).toMatchObject({ status: 'ok' });
    const none = checkIdentity({ dataDir: '/d', identity: false, fleet: null });
    expect(none).toMatchObject({ status: 'fail', detail: '/d holds no node' });
    expect(none.fix).toContain('vtnode init --fleet NAME --data-dir /d');
    expect(checkIdentity({ dataDir: '/d', identity: true, fleet: null }).detail).toContain(
      'without fleet.json',
    );
    expect(checkIdentity({ dataDir: '/d', identity: false, fleet: 'lab' }).status).toBe('fail');
  });
});

describe('sandbox', () => {
  const passed: SandboxFacts = {
    platform: 'linux',
    unconfined: false,
    backend: 'bwrap',
    unavailable: null,
    selfTest: { ok: true, checks: [{ name: 'network', ok: true, detail: 'refused' }] },
  };
  it('passes with a passed self-test', () => {
    expect(checkSandbox(passed)).toMatchObject({
      status: 'ok',
      detail: 'bwrap, self-test passed (1 canaries refused)',
    });
  });
  it('fails without a backend, saying what to install', () => {
    const c = checkSandbox({ ...passed, backend: null, selfTest: null, unavailable: 'bwrap not found' });
    expect(c).toMatchObject({ status: 'fail', detail: 'bwrap not found' });
    expect(c.fix).toContain('apt-get install bubblewrap');
    expect(checkSandbox({ ...passed, platform: 'darwin', backend: null, unavailable: 'x' }).fix).toContain(
      'sandbox-exec',
    );
  });
  it('fails when a canary got through, naming it', () => {
    const c = checkSandbox({
      ...passed,
      selfTest: {
        ok: false,
        checks: [
          { name: 'network', ok: true, detail: 'refused' },
          { name: 'write outside', ok: false, detail: 'wrote /tmp/x' },
        ],
      },
    });
    expect(c.status).toBe('fail');
    expect(c.detail).toBe('the bwrap sandbox failed its self-test: write outside: wrote /tmp/x');
    expect(c.fix).toMatch(/user namespaces/);
  });
  it('an unconfined node is a warning, whatever the backend', () => {
    expect(checkSandbox({ ...passed, unconfined: true })).toMatchObject({ status: 'warn' });
    expect(checkSandbox({ ...passed, unconfined: true }).fix).toContain('"unconfined": false');
    expect(checkSandbox({ ...passed, unconfined: true, backend: null, unavailable: 'none' }).status).toBe(
      'warn',
    );
  });
});

const server = (models: ProbedServer['models']): ProbedServer => ({
  url: 'http://127.0.0.1:8080',
  kind: 'llama-server',
  behaviour: 'llama-server',
  version: 'b4000',
  concurrency: 4,
  models,
});
const model = (id: string, loaded: boolean) => ({
  id,
  server: 'llama-server' as const,
  context: 8192,
  concurrency: 4,
  loaded,
  memoryBytes: null,
});

describe('model servers', () => {
  it('lists the models, marking the loaded ones', () => {
    const c = checkModelServer({
      url: 'http://127.0.0.1:8080',
      server: server([model('qwen', true), model('llama', false)]),
      error: null,
    });
    expect(c).toEqual({
      name: 'model server http://127.0.0.1:8080',
      status: 'ok',
      detail: 'llama-server b4000, concurrency 4: qwen (loaded), llama',
      fix: null,
    });
  });
  it('an unreachable server fails, one with no model warns', () => {
    const down = checkModelServer({ url: 'http://h:1', server: null, error: 'ECONNREFUSED' });
    expect(down).toMatchObject({ status: 'fail', detail: 'unreachable: ECONNREFUSED' });
    expect(down.fix).toContain('start the server');
    expect(checkModelServer({ url: 'u', server: server([]), error: null })).toMatchObject({
      status: 'warn',
      fix: 'load or pull a model on the server',
    });
  });
  it('auto-detection: none found is a warning naming the ports', () => {
    const none = checkDetectedServers([], [11434, 8080]);
    expect(none.status).toBe('warn');
    expect(none.detail).toContain('127.0.0.1 ports 11434, 8080');
    expect(checkDetectedServers([server([model('qwen', true)])], [8080])).toMatchObject({
      status: 'ok',
      detail: 'detected http://127.0.0.1:8080 (llama-server: qwen)',
    });
  });
});

describe('workspaces', () => {
  const ready: WorkspaceFacts = {
    dir: '/src/app',
    exists: true,
    runner: 'vitest',
    runnerError: null,
    readiness: { ok: true, problems: [], fixes: [] },
    typescript: { version: '5.9.3', source: 'workspace' },
  };
  it('passes when the runner, dependencies and typescript resolve', () => {
    expect(checkWorkspace(ready)).toMatchObject({
      status: 'ok',
      detail: 'vitest and its dependencies resolve; typescript 5.9.3',
    });
    expect(checkWorkspace({ ...ready, typescript: { version: '5.9.3', source: 'vtnode' } }).detail).toContain(
      "vtnode's own",
    );
  });
  it('fails on a missing folder, unready dependencies (with the commands) or no typescript', () => {
    expect(checkWorkspace({ ...ready, exists: false })).toMatchObject({
      status: 'fail',
      detail: 'no such folder',
    });
    const unbuilt = checkWorkspace({
      ...ready,
      readiness: {
        ok: false,
        problems: [
          'vitest is not installed',
          'workspace package @a/core is not built (no dist/index.js in packages/core)',
        ],
        fixes: [
          { command: 'npm ci', cwd: '/src/app' },
          { command: 'npm run build', cwd: '/src/app/packages/core' },
        ],
      },
    });
    expect(unbuilt.status).toBe('fail');
    expect(unbuilt.detail).toContain('is not built');
    expect(unbuilt.fix).toBe('`npm ci` in /src/app, then `npm run build` in /src/app/packages/core');
    expect(
      checkWorkspace({ ...ready, typescript: { error: 'typescript is installed neither…' } }),
    ).toMatchObject({
      status: 'fail',
    });
  });
  it('warns when no runner is detected', () => {
    const c = checkWorkspace({ ...ready, runner: null, runnerError: 'no test runner found' });
    expect(c.status).toBe('warn');
    expect(c.fix).toContain('vtnode mine');
  });
});

describe('ports', () => {
  const base = {
    addr: '/ip4/0.0.0.0/tcp/7461',
    port: 7461,
    free: true,
    heldByDaemon: false,
    fallback: false,
  };
  it('free or held by this node passes', () => {
    expect(checkPort(base).status).toBe('ok');
    expect(checkPort({ ...base, free: false, heldByDaemon: true })).toMatchObject({
      status: 'ok',
      detail: "held by this node's running daemon (/ip4/0.0.0.0/tcp/7461)",
    });
  });
  it('taken by another process: a fixed port fails, the default warns (the node takes another)', () => {
    const taken = checkPort({ ...base, free: false });
    expect(taken.status).toBe('fail');
    expect(taken.fix).toContain('lsof -i :7461');
    expect(checkPort({ ...base, free: false, fallback: true }).status).toBe('warn');
  });
  it('reads TCP ports from multiaddrs, leaving out port 0 and others', () => {
    expect(
      tcpPorts([
        '/ip4/0.0.0.0/tcp/7461',
        '/ip6/::/tcp/7462/ws',
        '/ip4/0.0.0.0/tcp/0',
        '/ip4/1.2.3.4/udp/9/quic',
        'x',
      ]),
    ).toEqual([
      { addr: '/ip4/0.0.0.0/tcp/7461', host: '0.0.0.0', port: 7461 },
      { addr: '/ip6/::/tcp/7462/ws', host: '::', port: 7462 },
    ]);
    expect(tcpPorts(['/dns4/example.com/tcp/7461'])).toEqual([]);
  });
});

describe('disk', () => {
  it('below the reserve fails, below 1 GiB warns, else passes', () => {
    const d = { dir: '/d', minFreeBytes: 32 * MiB };
    expect(checkDisk({ ...d, freeBytes: 10 * MiB })).toMatchObject({ status: 'fail' });
    expect(checkDisk({ ...d, freeBytes: 10 * MiB }).detail).toContain('below the 32 MiB');
    expect(checkDisk({ ...d, freeBytes: 500 * MiB })).toMatchObject({
      status: 'warn',
      detail: '500 MiB free on the disk of /d',
    });
    expect(checkDisk({ ...d, freeBytes: 20 * GiB })).toMatchObject({
      status: 'ok',
      detail: '20.0 GiB free on the disk of /d',
    });
  });
});

describe('clock', () => {
  const peer = (skew: number, host: string | null = 'studio-2') => ({
    peerId: '12D3KooWabcdefgh',
    host,
    sentAt: 1_000_000 - skew,
    receivedAt: 1_000_000,
  });
  const max = 5 * 60_000;
  it('skipped without a daemon, or without peers, saying why', () => {
    expect(checkClock({ daemon: false, peers: [], maxSkewMs: max })).toMatchObject({ status: 'skipped' });
    expect(checkClock({ daemon: false, peers: [], maxSkewMs: max }).detail).toContain('no daemon runs');
    expect(checkClock({ daemon: true, peers: [], maxSkewMs: max })).toMatchObject({
      status: 'skipped',
      detail: 'no other node is in view: nothing to compare with',
    });
  });
  it('the worst peer decides: ok, warn above 30 s, fail beyond the membership tolerance', () => {
    expect(checkClock({ daemon: true, peers: [peer(120), peer(-400)], maxSkewMs: max })).toMatchObject({
      status: 'ok',
      detail: 'largest difference 0.4 s (studio-2 is ahead of this machine), over 2 nodes',
    });
    const warn = checkClock({ daemon: true, peers: [peer(45_000, null)], maxSkewMs: max });
    expect(warn.status).toBe('warn');
    expect(warn.detail).toBe('largest difference 45.0 s (abcdefgh is behind this machine), over 1 node');
    const fail = checkClock({ daemon: true, peers: [peer(1000), peer(-6 * 60_000)], maxSkewMs: max });
    expect(fail.status).toBe('fail');
    expect(fail.detail).toContain('beyond the 300.0 s membership tolerates');
    expect(fail.fix).toContain('NTP');
  });
});

describe('report', () => {
  const checks: Check[] = [
    { name: 'node', status: 'ok', detail: 'Node.js v22.18.0', fix: null },
    { name: 'port 7461', status: 'fail', detail: 'taken', fix: 'stop it' },
    { name: 'clock', status: 'skipped', detail: 'no daemon', fix: null },
  ];
  it('exit 1 only when a check failed', () => {
    expect(doctorExitCode(checks)).toBe(1);
    expect(doctorExitCode([checks[0]!, checks[2]!, { ...checks[1]!, status: 'warn' }])).toBe(0);
  });
  it('one line per check, the fix under what failed', () => {
    expect(renderChecks(checks)).toBe(
      'ok    node: Node.js v22.18.0\nFAIL  port 7461: taken\n      fix: stop it\nskip  clock: no daemon\n\n1 failed, 0 warnings\n',
    );
    expect(renderChecks([checks[0]!])).toContain('all checks passed');
  });
});

describe('sandbox reach (root: runs read as the pool uid)', () => {
  const facts = { skipped: null, uid: 61000, stageTools: true };
  const open = { path: '/srv/ws', blocked: null };
  const under = {
    path: '/root/vt/workspaces',
    blocked: { path: '/root/vt/workspaces', at: 'parent' as const, folder: '/root', isDirectory: true },
  };
  it('reaches directly, or staged through a closed folder (ok either way, saying which)', () => {
    expect(checkReach({ ...facts, paths: [open] })).toMatchObject({
      status: 'ok',
      detail: "the sandbox's uid 61000 reaches 1 path(s) directly",
    });
    const staged = checkReach({ ...facts, paths: [open, under] });
    expect(staged.status).toBe('ok');
    expect(staged.detail).toMatch(/^\/root\/vt\/workspaces \(under \/root\): .* private mount namespace/);
  });
  it('fails a closed folder without the tools to stage it, and a path closed itself, each with a fix', () => {
    expect(checkReach({ ...facts, stageTools: false, paths: [under] })).toMatchObject({
      status: 'fail',
      fix: expect.stringMatching(/install util-linux/),
    });
    const shut = { path: '/srv/shut', blocked: { path: '/srv/shut', at: 'self' as const } };
    expect(checkReach({ ...facts, paths: [under, shut] })).toMatchObject({
      status: 'fail',
      detail: "the sandbox's uid 61000 cannot read /srv/shut: every run there fails",
      fix: '`chmod o+rX /srv/shut`',
    });
  });
  it('is skipped where runs keep the caller uid', () => {
    expect(checkReach({ ...facts, skipped: "not root: runs keep the caller's uid", paths: [] }).status).toBe(
      'skipped',
    );
  });
});
