import { randomBytes } from 'node:crypto';
import { chmod, mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { sha256Hex } from '../protocol/canonical.ts';
import type { Confinement, SelfTestResult } from './confinement.ts';
import { DEFAULT_LIMITS } from './limits.ts';

/** The canary program: tries each forbidden thing and prints what happened as one JSON line. */
const CANARY = `
const fs = require('node:fs');
const net = require('node:net');
const crypto = require('node:crypto');
const p = JSON.parse(process.env.VTNODE_CANARY);
const hash = (t) => crypto.createHash('sha256').update(t).digest('hex');
const out = { ran: true };
function attempt(name, fn) { try { fn(); out[name] = 'succeeded'; } catch (e) { out[name] = 'refused: ' + (e.code || e.message); } }
for (const [i, f] of p.secrets.entries()) attempt('read-secret-' + i, () => { if (hash(fs.readFileSync(f, 'utf8')) !== p.secretHash) throw new Error('different content'); });
for (const [i, f] of p.writes.entries()) attempt('write-outside-' + i, () => fs.writeFileSync(f, 'canary'));
attempt('write-box', () => fs.writeFileSync(p.boxFile, 'ok'));
attempt('env-secret', () => { if (!Object.values(process.env).some((v) => hash(v) === p.secretHash)) throw new Error('absent'); });
attempt('proc1-environ', () => { if (!fs.readFileSync('/proc/1/environ', 'utf8').split('\\0').some((kv) => hash(kv.slice(kv.indexOf('=') + 1)) === p.secretHash)) throw new Error('absent'); });
const s = net.connect(p.port, '127.0.0.1');
let reported = false;
const done = (r) => { if (reported) return; reported = true; out.network = r; s.destroy(); process.stdout.write(JSON.stringify(out) + '\\n'); process.exitCode = 0; clearTimeout(timer); };
s.on('connect', () => done('succeeded'));
s.on('error', (e) => done('refused: ' + e.code));
const timer = setTimeout(() => done('refused: no answer'), 1000);
`;

/**
 * Startup self-test of a backend: a network connect to a listener on the host's loopback, writes
 * outside the box (the workspace, the box's parent, the home folder) and reads of planted secrets (in
 * the home folder and next to the box) must all fail, and the canary must prove it ran (it can write
 * its own box). The scorer refuses to run when this fails.
 */
export async function runSelfTest(confinement: Confinement, signal?: AbortSignal): Promise<SelfTestResult> {
  const secret = `vtnode-canary-${randomBytes(12).toString('hex')}`;
  const root = await mkdtemp(join(tmpdir(), 'vtnode-selftest-'));
  const box = join(root, 'box');
  const workspace = join(root, 'workspace');
  const homeSecret = join(homedir(), `.vtnode-canary-${randomBytes(6).toString('hex')}`);
  const envKey = 'VTNODE_SELFTEST_SECRET';
  const prevEnv = process.env[envKey];
  const server = createServer((sock) => {
    connections++;
    sock.destroy();
  });
  let connections = 0;
  try {
    await mkdir(box);
    await mkdir(workspace);
    await chmod(root, 0o755);
    await chmod(workspace, 0o755);
    await writeFile(join(root, 'secret.txt'), secret, { mode: 0o644 });
    await writeFile(homeSecret, secret, { mode: 0o644 });
    process.env[envKey] = secret;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    const writes = [join(workspace, 'planted'), join(root, 'planted'), `${homeSecret}-written`];
    const params = {
      secretHash: sha256Hex(secret),
      secrets: [homeSecret, join(root, 'secret.txt')],
      writes,
      boxFile: join(box, 'written'),
      port,
    };
    await writeFile(join(box, 'canary.cjs'), CANARY);
    const result = await confinement.run({
      argv: [process.execPath, join(box, 'canary.cjs')],
      cwd: box,
      box,
      readOnlyPaths: [workspace, dirname(process.execPath)],
      env: { PATH: '/usr/bin:/bin', VTNODE_CANARY: JSON.stringify(params), HOME: box, TMPDIR: box },
      limits: { ...DEFAULT_LIMITS, wallMs: 15_000 },
      ...(signal ? { signal } : {}),
    });
    const checks: SelfTestResult['checks'] = [];
    let report: Record<string, string> = {};
    try {
      report = JSON.parse(result.stdout.trim().split('\n').pop() ?? '{}') as Record<string, string>;
    } catch {
      // checked below
    }
    checks.push({
      name: 'canary ran',
      ok: report['ran'] === (true as unknown as string) && report['write-box'] === 'succeeded',
      detail: report['ran']
        ? `write in box: ${report['write-box']}`
        : `no report (exit ${result.exitCode}, ${result.stderr.slice(0, 300)})`,
    });
    for (const [key, value] of Object.entries(report)) {
      // Writes are judged on the host below: a write into the sandbox's private /tmp is no escape.
      if (key === 'ran' || key === 'write-box' || key.startsWith('write-outside')) continue;
      checks.push({ name: key, ok: value.startsWith('refused'), detail: value });
    }
    for (const w of writes) {
      const exists = await stat(w).then(
        () => true,
        () => false,
      );
      checks.push({ name: `no file at ${w}`, ok: !exists, detail: exists ? 'file was written' : 'absent' });
    }
    checks.push({
      name: 'listener saw no connection',
      ok: connections === 0,
      detail: `${connections} connection(s)`,
    });
    checks.push({ name: 'no survivors', ok: result.survivors === 0, detail: `${result.survivors}` });
    return { ok: checks.length > 0 && checks.every((c) => c.ok), checks };
  } finally {
    server.close();
    if (prevEnv === undefined) delete process.env[envKey];
    else process.env[envKey] = prevEnv;
    await rm(homeSecret, { force: true });
    await rm(`${homeSecret}-written`, { force: true });
    await rm(root, { recursive: true, force: true });
  }
}
