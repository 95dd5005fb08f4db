import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Check } from '../../node/doctor/checks.ts';
import { createEmulator, type Emulator } from '../../node/model-server/emulator.ts';
import { eventually, freePort, REPO, Sandbox, vtnode } from '../helpers/cli.ts';
import { initFleet, joinNode, startNode } from '../helpers/fleet.ts';
import { notYet } from '../helpers/poll.ts';

const LEDGER = join(REPO, 'examples', 'ledger');
const box = new Sandbox();
let emulator: Emulator;
const held: Server[] = [];

beforeAll(async () => {
  emulator = await createEmulator({ emulate: 'llama-server', models: ['doctor-coder'] });
});
afterAll(async () => {
  for (const s of held) s.close();
  await emulator.close();
  await box.cleanup();
});

async function doctor(
  dataDir: string,
  json = true,
): Promise<{ code: number | null; out: string; checks: Check[] }> {
  const r = await vtnode(['doctor', '--data-dir', dataDir, ...(json ? ['--json'] : [])], {
    timeoutMs: 60_000,
  });
  return {
    code: r.code,
    out: r.stdout,
    checks: json ? (JSON.parse(r.stdout) as { checks: Check[] }).checks : [],
  };
}

const named = (checks: Check[], name: string) => {
  const c = checks.find((x) => x.name === name);
  if (!c) throw new Error(`no check "${name}" in ${checks.map((x) => x.name).join(', ')}`);
  return c;
};

describe('vtnode doctor on a real data dir', () => {
  it('passes what works, fails what does not and says how to fix it (exit 1)', async () => {
    const dead = `http://127.0.0.1:${await freePort()}`;
    const { dataDir } = await initFleet(box, 'doctor', [
      '--model-server',
      emulator.url,
      '--model-server',
      dead,
      '--workspace',
      LEDGER,
    ]);
    const r = await doctor(dataDir);
    expect(r.code).toBe(1);
    expect(named(r.checks, 'identity')).toMatchObject({ status: 'ok' });
    expect(named(r.checks, `model server ${emulator.url}`)).toMatchObject({ status: 'ok' });
    expect(named(r.checks, `model server ${emulator.url}`).detail).toMatch(
      /^vtnode-emulator .*: doctor-coder/,
    );
    const down = named(r.checks, `model server ${dead}`);
    expect(down.status).toBe('fail');
    expect(down.detail).toMatch(/^unreachable: /);
    expect(down.fix).toContain('start the server');
    expect(named(r.checks, `workspace ${LEDGER}`)).toMatchObject({ status: 'ok' });
    expect(named(r.checks, `workspace ${LEDGER}`).detail).toMatch(
      /^vitest and its dependencies resolve; typescript /,
    );
    expect(named(r.checks, 'sandbox').status).toMatch(/^(ok|fail)$/);
    expect(named(r.checks, 'disk').status).toBe('ok');
    expect(named(r.checks, 'daemon').status).toBe('warn');
    expect(named(r.checks, 'clock')).toMatchObject({ status: 'skipped' });

    // The same without --json: a line per check, the fix under the failure.
    const text = await doctor(dataDir, false);
    expect(text.code).toBe(1);
    expect(text.out).toMatch(
      new RegExp(`FAIL  model server ${dead}: unreachable: .*\\n      fix: start the server`),
    );
    expect(text.out).toMatch(new RegExp(`ok    model server ${emulator.url}: `));
  });

  it('a data dir without a node, or with a corrupt fleet.json, fails the identity check with its fix', async () => {
    const empty = join(await box.tempDir(), 'none');
    const none = await doctor(empty);
    expect(none.code).toBe(1);
    expect(named(none.checks, 'identity')).toMatchObject({
      status: 'fail',
      detail: `${empty} holds no node`,
    });
    expect(named(none.checks, 'identity').fix).toContain('vtnode init --fleet NAME');
    const { dataDir } = await initFleet(box, 'doctor-corrupt', ['--model-server', emulator.url]);
    await writeFile(join(dataDir, 'fleet.json'), '{"fleet": 3');
    const corrupt = await doctor(dataDir);
    expect(corrupt.code).toBe(1);
    expect(named(corrupt.checks, 'identity').detail).toContain(join(dataDir, 'fleet.json'));
    expect(named(corrupt.checks, 'identity').fix).toContain('restore');
  });

  it('a listen port taken by another process fails, with the fix', async () => {
    const { dataDir } = await initFleet(box, 'doctor-port', ['--model-server', emulator.url]);
    const status = await doctor(dataDir);
    const port = status.checks.find((c) => c.name.startsWith('port '))!;
    expect(port.status).toBe('ok');
    const n = Number(port.name.slice('port '.length));
    const server = createServer();
    held.push(server);
    await new Promise<void>((resolve) => server.listen(n, '127.0.0.1', resolve));
    const r = await doctor(dataDir);
    expect(r.code).toBe(1);
    expect(named(r.checks, `port ${n}`)).toMatchObject({ status: 'fail' });
    expect(named(r.checks, `port ${n}`).fix).toContain(`lsof -i :${n}`);
  });

  it('with the daemon running: its port is its own, the clock is compared with a peer', async () => {
    const boot = await initFleet(box, 'doctor-live', ['--model-server', emulator.url]);
    const first = startNode(box, boot.dataDir);
    await first.proc.waitFor(/is in fleet/, 30_000);
    const second = await joinNode(box, boot.token, ['--model-server', emulator.url]);
    await second.proc.waitFor(/is in fleet/, 30_000);
    // Wait for the peer's advert to reach the first node (doctor reads it from the daemon's status).
    const r = await eventually(
      async () => {
        const d = await doctor(boot.dataDir);
        return named(d.checks, 'clock').status !== 'skipped' ? d : notYet(named(d.checks, 'clock'));
      },
      30_000,
      "the peer's advert at the first node (doctor's clock check)",
    );
    expect(named(r.checks, 'daemon')).toMatchObject({ status: 'ok' });
    expect(named(r.checks, 'daemon').detail).toMatch(/^running \(pid \d+\), 2 nodes in view$/);
    const port = r.checks.find((c) => c.name.startsWith('port '))!;
    expect(port).toMatchObject({ status: 'ok' });
    expect(port.detail).toMatch(/^held by this node's running daemon/);
    const clock = named(r.checks, 'clock');
    expect(clock.status).toBe('ok');
    expect(clock.detail).toMatch(/^largest difference \d+\.\d s .* over 1 node$/);
    // Two daemons' start-ups (30 s each at most) and the wait for an advert (30 s): beyond the default 30 s.
  }, 120_000);
});
