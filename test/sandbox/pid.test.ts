// The one pid-alive check (issue 28: it was written six times, and `vtnode leave` took EPERM for dead).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { pidAlive } from '../../sandbox/pid.ts';

describe('pidAlive', () => {
  it('is true for a live process, also one of another user (EPERM when not root), false once it is gone', async () => {
    expect(pidAlive(process.pid)).toBe(true);
    // pid 1 is init: root may signal it, anyone else gets EPERM; either way it is alive.
    expect(pidAlive(1)).toBe(true);
    const child = spawn('/bin/true');
    const pid = child.pid!;
    await once(child, 'exit');
    expect(pidAlive(pid)).toBe(false);
  });
});
