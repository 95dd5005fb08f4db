// A full disk under the stores: the guard's decisions (pure), then real writes on a small tmpfs
// filled to the last byte (root only: mounting needs it).
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createCollector } from '../../node/collector/collector.ts';
import { BODIES_DIR, openDatasetStore } from '../../node/collector/store.ts';
import { newPsk } from '../../node/data-dir.ts';
import { digestSigner } from '../../node/digests/signature.ts';
import { logger } from '../../node/logger.ts';
import {
  createDiskGuard,
  type DiskEvent,
  type DiskLimits,
  type DiskState,
  nextDiskState,
  wantsProbeWrite,
} from '../../node/storage/disk-guard.ts';
import { classifyStorageError, StorageError } from '../../node/storage/errors.ts';
import { openSampleLog } from '../../node/worker/sample-log.ts';
import { connect, serveLog, testHost } from '../collect/helpers.ts';
import { seededSigner, signedDigest } from '../helpers/digests.ts';
import { sampleBody } from '../helpers/samples.ts';
import { canMount, fillDisk, freeDisk, mountTmpfs, unmount } from '../helpers/storage.ts';

const MiB = 2 ** 20;
const limits: DiskLimits = { minFreeBytes: 2 * MiB, resumeFreeBytes: 4 * MiB };

describe('nextDiskState', () => {
  const ok: DiskState = { full: false };
  const full: DiskState = { full: true, since: 1, reason: 'earlier' };
  const probe = (freeBytes: number, writable: boolean | null): DiskEvent => ({
    type: 'probe',
    freeBytes,
    writable,
    now: 5,
  });
  const failed: DiskEvent = {
    type: 'write-failed',
    path: '/d/samples.db',
    message: 'database or disk is full',
    now: 5,
  };

  it('a failed write makes a usable disk full, naming the file; a full one stays as it was', () => {
    expect(nextDiskState(ok, failed, limits)).toEqual({
      full: true,
      since: 5,
      reason: 'writing /d/samples.db failed: database or disk is full',
    });
    expect(nextDiskState(full, failed, limits)).toBe(full);
  });

  it('free space below the reserve makes a usable disk full before any write fails', () => {
    expect(nextDiskState(ok, probe(2 * MiB, null), limits)).toBe(ok);
    expect(nextDiskState(ok, probe(100 * MiB, null), limits)).toBe(ok);
    const low = nextDiskState(ok, probe(2 * MiB - 1, null), limits);
    expect(low).toMatchObject({ full: true, since: 5 });
    expect((low as { reason: string }).reason).toBe(
      '2.0 MiB free, below the 2.0 MiB a node keeps in reserve',
    );
    expect(nextDiskState(ok, probe(0, null), limits)).toMatchObject({ full: true });
  });

  it('a full disk is usable again only with the resume margin free and a probe write that succeeded', () => {
    expect(nextDiskState(full, probe(4 * MiB, true), limits)).toEqual(ok);
    expect(nextDiskState(full, probe(400 * MiB, true), limits)).toEqual(ok);
    // Between the two thresholds: still full (no flapping on a nearly full disk).
    expect(nextDiskState(full, probe(3 * MiB, true), limits)).toBe(full);
    expect(nextDiskState(full, probe(4 * MiB - 1, true), limits)).toBe(full);
    // Space reported, but the write failed (a quota, a read-only remount): still full.
    expect(nextDiskState(full, probe(100 * MiB, false), limits)).toBe(full);
    expect(nextDiskState(full, probe(100 * MiB, null), limits)).toBe(full);
  });

  it('a probe write is tried only on a full disk with the resume margin free', () => {
    expect(wantsProbeWrite(ok, 100 * MiB, limits)).toBe(false);
    expect(wantsProbeWrite(full, 4 * MiB - 1, limits)).toBe(false);
    expect(wantsProbeWrite(full, 4 * MiB, limits)).toBe(true);
  });
});

const silent = logger('vtnode:test:disk');

describe.skipIf(!canMount)(
  'on a real full disk (a 16 MiB tmpfs; skipped unless this process may mount one: root, not denied by a container)',
  () => {
    let mnt = '';
    beforeEach(async () => {
      mnt = await mkdtemp(join(tmpdir(), 'vt-full-'));
      await mountTmpfs(mnt, 16 * MiB);
    });
    afterEach(async () => {
      await unmount(mnt);
      await rm(mnt, { recursive: true, force: true });
    });

    it('the guard: low space turns it full (once), freed space with a probe write turns it usable again', async () => {
      const changes: DiskState[] = [];
      const guard = createDiskGuard({
        dir: mnt,
        limits,
        intervalMs: 60_000,
        log: silent,
        consequence: 'test',
        onChange: (s) => changes.push(s),
      });
      try {
        expect((await guard.check()).full).toBe(false);
        const filler = await fillDisk(mnt);
        expect(await guard.check()).toMatchObject({
          full: true,
          reason: expect.stringMatching(/MiB free, below/),
        });
        await guard.check();
        expect(changes).toHaveLength(1);
        await freeDisk(filler);
        expect(await guard.check()).toEqual({ full: false });
        expect(changes.map((c) => c.full)).toEqual([true, false]);
        // The probe file is gone.
        expect(await readdir(mnt)).toEqual([]);
        // A failed write of another kind is not a full disk.
        expect(guard.failed(Object.assign(new Error('EACCES'), { code: 'EACCES' }), '/x')).toBe(false);
        expect(guard.state().full).toBe(false);
      } finally {
        guard.stop();
      }
    });

    it('the sample log: SQLITE_FULL fails the append only, nothing logged is lost, appends resume when space frees', async () => {
      const path = join(mnt, 'samples.db');
      const signer = await seededSigner(6);
      const log = openSampleLog({ path, origin: signer.origin, signer });
      const guard = createDiskGuard({
        dir: mnt,
        limits,
        intervalMs: 60_000,
        log: silent,
        consequence: 'test',
      });
      try {
        const logged: { seq: number; id: string }[] = [];
        for (let i = 0; i < 20; i++) {
          const r = log.append(sampleBody('t', 'qwen', i));
          logged.push({ seq: r.seq, id: r.body.sampleId });
        }
        const filler = await fillDisk(mnt);
        let failure: unknown = null;
        for (let i = 20; i < 2000 && !failure; i++) {
          try {
            const r = log.append(sampleBody('t', 'qwen', i, { candidate: `// ${i}\n${'z'.repeat(4000)}\n` }));
            logged.push({ seq: r.seq, id: r.body.sampleId });
          } catch (err) {
            failure = err;
          }
        }
        expect(failure, 'an append on a full disk succeeded 2000 times').not.toBeNull();
        expect(classifyStorageError(failure)).toBe('full');
        expect(guard.failed(failure, path)).toBe(true);
        expect(guard.state()).toMatchObject({ full: true, reason: expect.stringContaining(path) });
        // Reads still work, and every row logged before is there.
        for (const { seq, id } of logged) expect(log.get(id)?.seq).toBe(seq);

        await freeDisk(filler);
        expect((await guard.check()).full).toBe(false);
        const next = log.append(sampleBody('t', 'qwen', 5000));
        expect(next.seq).toBe(logged.length + 1);
        log.close();
        const reopened = openSampleLog({ path, origin: signer.origin, signer });
        expect(reopened.counts()).toMatchObject({ samples: logged.length + 1, highWater: logged.length + 1 });
        expect(reopened.lostSince(0, 10)).toEqual([]);
        reopened.close();
      } finally {
        guard.stop();
        log.close();
      }
    });

    it('the dataset: digests and bodies fail with a storage fault naming the file, no partial body left, nothing lost', async () => {
      const [w, late] = await Promise.all([seededSigner(7), seededSigner(8)]);
      const store = openDatasetStore(join(mnt, 'ds'));
      try {
        const digests = [];
        for (let i = 0; i < 10; i++) {
          const body = sampleBody('t', 'qwen', i);
          const d = signedDigest(w, i + 1, body);
          store.addDigest(d);
          store.putBody(d, body);
          digests.push(d);
        }
        const filler = await fillDisk(mnt);
        let bodyError: unknown = null;
        let digestError: unknown = null;
        for (let i = 10; i < 5000 && !(bodyError && digestError); i++) {
          const body = sampleBody('t', 'qwen', i, { candidate: `// ${i}\n${'q'.repeat(8000)}\n` });
          const d = signedDigest(w, i + 1, body);
          try {
            store.addDigest(d);
          } catch (err) {
            digestError ??= err;
            continue;
          }
          try {
            store.putBody(d, body);
          } catch (err) {
            bodyError ??= err;
          }
        }
        expect(classifyStorageError(bodyError ?? digestError)).toBe('full');
        if (bodyError) {
          expect(bodyError).toBeInstanceOf(StorageError);
          expect((bodyError as StorageError).path).toContain(join(mnt, 'ds', BODIES_DIR));
          expect((await readdir(join(mnt, 'ds', BODIES_DIR))).filter((f) => f.endsWith('.tmp'))).toEqual([]);
        }
        for (const d of digests) expect(store.sample(d.origin, d.seq)?.bodyState).toBe('ok');
        await freeDisk(filler);
        const body = sampleBody('t', 'qwen', 9999);
        const d = signedDigest(late, 9999, body);
        expect(store.addDigest(d)).toBe('new');
        store.putBody(d, body);
        expect(store.sample(late.origin, 9999)?.bodyState).toBe('ok');
      } finally {
        store.close();
      }
    });

    it('a collector on a full disk stops fetching and says why; freed, one catch-up gets everything it missed', async () => {
      const psk = newPsk();
      const key = await generateKeyPair('Ed25519');
      const [wHost, cHost] = await Promise.all([testHost(psk, key), testHost(psk)]);
      const workDir = await mkdtemp(join(tmpdir(), 'vt-full-worker-'));
      const log = openSampleLog({
        path: join(workDir, 'samples.db'),
        origin: wHost.peerId.toString(),
        signer: digestSigner(key),
      });
      const store = openDatasetStore(join(mnt, 'ds'));
      const guard = createDiskGuard({
        dir: mnt,
        limits,
        intervalMs: 60_000,
        log: silent,
        consequence: 'test',
      });
      const storage = {
        blocked: () => (guard.state().full ? 'full' : null),
        failed: (err: unknown, p: string) => guard.failed(err, p),
      };
      const collector = createCollector({
        host: cHost,
        peers: () => [wHost.peerId.toString()],
        store,
        catchUpIntervalMs: 0,
        storage,
      });
      try {
        await serveLog(wHost, log);
        await connect(cHost, wHost);
        const append = (from: number, to: number) => {
          for (let i = from; i < to; i++)
            log.append(sampleBody(`t${i % 7}`, 'qwen', i, { candidate: `// ${i}\n${'b'.repeat(3000)}\n` }));
        };
        append(0, 30);
        await collector.catchUp();
        expect(store.counts()).toMatchObject({ digests: 30, bodies: 30 });

        const filler = await fillDisk(mnt);
        expect((await guard.check()).full).toBe(true);
        append(30, 200);
        // Blocked: nothing is asked of the worker, nothing written, no error thrown.
        await collector.catchUp();
        collector.onDigest(log.digestsSince(30, 1)[0]!);
        await collector.idle();
        expect(store.counts()).toMatchObject({ digests: 30, bodies: 30 });

        await freeDisk(filler);
        expect((await guard.check()).full).toBe(false);
        await collector.catchUp();
        expect(store.counts()).toMatchObject({ digests: 200, bodies: 200, pending: 0 });
        expect(store.highWater(wHost.peerId.toString())).toBe(200);
      } finally {
        guard.stop();
        await collector.stop();
        await Promise.all([wHost.stop(), cHost.stop()]);
        store.close();
        log.close();
        await rm(workDir, { recursive: true, force: true });
      }
    }, 60_000);

    it('a collector whose writes fail mid-fetch (no warning in advance) stops, keeps what it had, and resumes', async () => {
      const psk = newPsk();
      const key = await generateKeyPair('Ed25519');
      const [wHost, cHost] = await Promise.all([testHost(psk, key), testHost(psk)]);
      const workDir = await mkdtemp(join(tmpdir(), 'vt-full-worker-'));
      const log = openSampleLog({
        path: join(workDir, 'samples.db'),
        origin: wHost.peerId.toString(),
        signer: digestSigner(key),
      });
      const store = openDatasetStore(join(mnt, 'ds'));
      // No reserve: only failed writes turn it full (the reactive path).
      const guard = createDiskGuard({
        dir: mnt,
        limits: { minFreeBytes: 0, resumeFreeBytes: 4 * MiB },
        intervalMs: 60_000,
        log: silent,
        consequence: 'test',
      });
      const collector = createCollector({
        host: cHost,
        peers: () => [wHost.peerId.toString()],
        store,
        catchUpIntervalMs: 0,
        storage: {
          blocked: () => (guard.state().full ? 'full' : null),
          failed: (e, p) => guard.failed(e, p),
        },
      });
      try {
        await serveLog(wHost, log);
        await connect(cHost, wHost);
        const append = (from: number, to: number) => {
          for (let i = from; i < to; i++)
            log.append(sampleBody(`t${i % 7}`, 'qwen', i, { candidate: `// ${i}\n${'c'.repeat(3000)}\n` }));
        };
        append(0, 50);
        await collector.catchUp();
        expect(store.counts()).toMatchObject({ digests: 50, bodies: 50 });
        append(50, 200);
        // Full to the last byte, and the guard not told: the collector's own writes find out.
        const filler = await fillDisk(mnt);
        await collector.catchUp();
        expect(guard.state()).toMatchObject({
          full: true,
          reason: expect.stringMatching(/dataset\.db failed|bodies/),
        });
        expect(store.counts().bodies).toBeGreaterThanOrEqual(50);
        for (let i = 0; i < 50; i++)
          expect(store.sample(wHost.peerId.toString(), i + 1)?.bodyState).toBe('ok');
        await freeDisk(filler);
        expect((await guard.check()).full).toBe(false);
        await collector.catchUp();
        expect(store.counts()).toMatchObject({ digests: 200, bodies: 200, pending: 0 });
      } finally {
        guard.stop();
        await collector.stop();
        await Promise.all([wHost.stop(), cHost.stop()]);
        store.close();
        log.close();
        await rm(workDir, { recursive: true, force: true });
      }
    }, 60_000);
  },
);
