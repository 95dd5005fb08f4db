import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { type ProcSample, sampleTree, TreeCpu } from '../../bench/demo/tree-cpu.ts';

const p = (pid: number, ppid: number, cpuTicks: number): ProcSample => ({ pid, ppid, cpuTicks });

describe('TreeCpu', () => {
  it('sums the root and its descendants, not the rest of the host', () => {
    const t = new TreeCpu(10);
    t.observe([p(1, 0, 5000), p(10, 1, 100), p(11, 10, 50), p(12, 11, 20), p(13, 1, 900)]);
    expect(t.seconds()).toBe(1.7);
  });

  it('keeps the last CPU of a process that exited (it only grows while it lives)', () => {
    const t = new TreeCpu(10);
    t.observe([p(10, 1, 100), p(11, 10, 50)]);
    t.observe([p(10, 1, 120), p(11, 10, 80)]);
    t.observe([p(10, 1, 130)]);
    expect(t.seconds()).toBe(2.1);
  });

  it('keeps counting an orphan reparented to init', () => {
    const t = new TreeCpu(10);
    t.observe([p(10, 1, 100), p(11, 10, 50), p(12, 11, 10)]);
    t.observe([p(10, 1, 100), p(12, 1, 40)]);
    expect(t.seconds()).toBe(1.9);
  });

  it('does not count a stranger that reuses the pid of a member, and keeps the member’s time', () => {
    const t = new TreeCpu(10);
    t.observe([p(10, 1, 100), p(11, 10, 50)]);
    t.observe([p(10, 1, 100), p(11, 1, 3)]);
    t.observe([p(10, 1, 100), p(11, 1, 700)]);
    expect(t.seconds()).toBe(1.5);
  });

  it('counts both a member and the later member on its recycled pid', () => {
    const t = new TreeCpu(10);
    t.observe([p(10, 1, 100), p(11, 10, 50)]);
    t.observe([p(10, 1, 100), p(11, 10, 7)]);
    expect(t.seconds()).toBe(1.57);
  });

  it('survives a parent cycle in a torn snapshot', () => {
    const t = new TreeCpu(10);
    t.observe([p(10, 1, 100), p(20, 21, 5), p(21, 20, 5)]);
    expect(t.seconds()).toBe(1);
  });
});

describe('sampleTree', () => {
  it('measures a real busy grandchild', { timeout: 20_000 }, async () => {
    // sh → node spinning until it has used 0.6 s of CPU (not of wall time: the machine may be loaded).
    const spin = 'while(process.cpuUsage().user+process.cpuUsage().system<6e5);';
    const child = spawn('sh', ['-c', `"${process.execPath}" -e "${spin}"`]);
    const stop = new AbortController();
    const { tree, done } = sampleTree({ root: child.pid!, intervalMs: 20, signal: stop.signal });
    await new Promise((r) => child.on('exit', r));
    stop.abort();
    await done;
    expect(tree.seconds()).toBeGreaterThan(0.5);
    expect(tree.seconds()).toBeLessThan(5);
  });
});
