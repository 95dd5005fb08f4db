// The control client against live, busy and dead daemons (defect: any fetch error was "no daemon",
// and `vtnode run` quit while its campaign went on), and followStatus's retry policy.
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { followStatus } from '../../cli/commands/run.ts';
import {
  type ControlClient,
  connectControl,
  DaemonBusyError,
  NoDaemonError,
} from '../../node/control/client.ts';
import { DataDir, writePrivate } from '../../node/data-dir.ts';
import type { CampaignStatus } from '../../node/submitter/service.ts';

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0)) await f();
});

async function dataDirWith(port: number, pid: number): Promise<DataDir> {
  const root = await mkdtemp(join(tmpdir(), 'vt-control-'));
  cleanup.push(() => rm(root, { recursive: true, force: true }));
  const dir = new DataDir(root);
  await dir.ensure();
  await writePrivate(dir.path('control.json'), JSON.stringify({ port, token: 'x'.repeat(32), pid }));
  return dir;
}

/** A TCP server that treats every connection as a starved daemon would: `how` it. */
async function misbehaving(how: 'reset' | 'close'): Promise<number> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    if (how === 'reset') socket.resetAndDestroy();
    else socket.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanup.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => server.close(() => r(null)));
  });
  return (server.address() as { port: number }).port;
}

/** A pid that is certainly not running: a child that has exited. */
function deadPid(): number {
  return spawnSync(process.execPath, ['-e', '0']).pid!;
}

describe('connectControl', () => {
  it.each(['reset', 'close'] as const)(
    'a live daemon whose connection is %s is busy, not gone',
    async (how) => {
      const dir = await dataDirWith(await misbehaving(how), process.pid);
      const control = await connectControl(dir);
      const err = await control.call('GET', '/status').catch((e: Error) => e);
      expect(err).toBeInstanceOf(DaemonBusyError);
      expect((err as Error).message).toMatch(/is running but did not answer/);
    },
  );

  it('a refused connection while the daemon process lives is busy (a daemon between restarts)', async () => {
    const port = await misbehaving('close');
    const dir = await dataDirWith(port, process.pid);
    const control = await connectControl(dir);
    await new Promise<void>((r) => cleanup.shift()!().then(r)); // nothing listens any more
    await expect(control.call('GET', '/status')).rejects.toBeInstanceOf(DaemonBusyError);
  });

  it('a control file of a dead process, or none, is no daemon', async () => {
    const dir = await dataDirWith(await misbehaving('reset'), deadPid());
    await expect(connectControl(dir)).rejects.toBeInstanceOf(NoDaemonError);
    const empty = new DataDir(await mkdtemp(join(tmpdir(), 'vt-control-')));
    cleanup.push(() => rm(empty.root, { recursive: true, force: true }));
    await expect(connectControl(empty)).rejects.toBeInstanceOf(NoDaemonError);
  });

  it("the caller's abort is passed through as it is", async () => {
    const dir = await dataDirWith(await misbehaving('reset'), process.pid);
    const control = await connectControl(dir);
    const err = await control.call('GET', '/status', undefined, AbortSignal.abort()).catch((e: Error) => e);
    expect(err).not.toBeInstanceOf(DaemonBusyError);
    expect((err as Error).name).toBe('AbortError');
  });
});

describe('followStatus', () => {
  const running = { name: 'c', status: 'running' } as CampaignStatus;
  const done = { name: 'c', status: 'done' } as CampaignStatus;
  const busy = () => new DaemonBusyError('/d', new Error('socket hang up'));
  /** A client whose streams throw `errors` in turn, then stream `statuses` (the last ends the follow). */
  const scripted = (errors: Error[], statuses: CampaignStatus[] = [running, done]) => {
    const client = {
      calls: 0,
      async call<T>(): Promise<T> {
        throw new Error('not called');
      },
      async *stream<T>(): AsyncGenerator<T> {
        const err = errors[client.calls++];
        if (err) throw err;
        for (const st of statuses) yield st as T;
      },
    };
    return client satisfies ControlClient;
  };
  const all = async (it: AsyncIterable<CampaignStatus>) => {
    const out: CampaignStatus[] = [];
    for await (const st of it) out.push(st);
    return out;
  };

  it('yields the statuses the daemon streams, and stops after one that is not running', async () => {
    const client = scripted([], [running, running, done, running]);
    expect(await all(followStatus(client, 'c'))).toEqual([running, running, done]);
    expect(client.calls).toBe(1);
  });

  it('follows again when the daemon ends the stream while the campaign runs', async () => {
    let calls = 0;
    const client = {
      async call<T>(): Promise<T> {
        throw new Error('not called');
      },
      async *stream<T>(): AsyncGenerator<T> {
        calls += 1;
        yield (calls < 3 ? running : done) as T;
      },
    } satisfies ControlClient;
    expect(await all(followStatus(client, 'c', { firstDelayMs: 1 }))).toEqual([running, running, done]);
    expect(calls).toBe(3);
  });

  it('asks a busy daemon again until it answers', async () => {
    const client = scripted([busy(), busy(), busy(), busy(), busy(), busy()]);
    const retries: string[] = [];
    const got = await all(
      followStatus(client, 'c', { firstDelayMs: 1, onRetry: (e) => retries.push(e.message) }),
    );
    expect(got).toEqual([running, done]);
    expect(client.calls).toBe(7);
    expect(retries).toHaveLength(6);
  });

  it('gives up on a busy daemon only after its budget, at once on a dead one', async () => {
    await expect(
      all(followStatus(scripted([busy(), busy()]), 'c', { busyBudgetMs: 0 })),
    ).rejects.toBeInstanceOf(DaemonBusyError);
    const dead = scripted([new NoDaemonError('/d')]);
    await expect(all(followStatus(dead, 'c', { firstDelayMs: 1 }))).rejects.toBeInstanceOf(NoDaemonError);
    expect(dead.calls).toBe(1);
  });

  it('retries another error five times', async () => {
    const failing = scripted(Array.from({ length: 9 }, () => new Error('daemon: HTTP 500')));
    await expect(all(followStatus(failing, 'c', { firstDelayMs: 1 }))).rejects.toThrow(/HTTP 500/);
    expect(failing.calls).toBe(5);
  });
});
