import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { signatureError } from '../../node/digests/signature.ts';
import { openDatabase } from '../../node/sqlite.ts';
import { openSampleLog } from '../../node/worker/sample-log.ts';
import { SignedDigest } from '../../protocol/digest.ts';
import { ParseError } from '../../protocol/parse.ts';
import { contentHash } from '../../protocol/sample.ts';
import { REPO } from '../helpers/cli.ts';
import { seededSigner } from '../helpers/digests.ts';
import { sampleBody } from '../helpers/samples.ts';

/** The origin of these logs: a fixed key (helpers/sample-log-writer.ts signs with the same one). */
const SIGNER = await seededSigner(1);
const ORIGIN = SIGNER.origin;
let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vt-samplelog-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('sample log', () => {
  it('appends with gapless per-origin seqs and reads back by id and as digests', () => {
    const sampleLog = openSampleLog({ path: join(dir, 'samples.db'), origin: ORIGIN, signer: SIGNER });
    const bodies = [0, 1, 2, 3].map((i) => sampleBody('t1', 'qwen', i, { reward: i === 2 ? 0.5 : 1 }));
    const rows = bodies.map((b) => sampleLog.append(b));
    expect(rows.map((r) => r.seq)).toEqual([1, 2, 3, 4]);
    expect(rows.every((r) => r.created && r.origin === ORIGIN)).toBe(true);

    expect(sampleLog.get(bodies[2]!.sampleId)?.body).toEqual(bodies[2]);
    expect(sampleLog.get('sha256:nope')).toBeUndefined();
    const many = sampleLog.getMany([bodies[3]!.sampleId, 'sha256:unknown', bodies[0]!.sampleId]);
    expect(many.map((r) => r.seq)).toEqual([4, 1]);

    const digests = sampleLog.digestsSince(1, 2);
    expect(digests.map((d) => d.seq)).toEqual([2, 3]);
    for (const d of digests) {
      expect(SignedDigest.parse(d)).toEqual(d);
      expect(signatureError(d)).toBeNull();
    }
    expect(sampleLog.bySeq([4, 9, 1]).map((r) => r.body.sampleId)).toEqual([
      bodies[3]!.sampleId,
      bodies[0]!.sampleId,
    ]);
    expect(digests[1]).toMatchObject({
      sampleId: bodies[2]!.sampleId,
      reward: 0.5,
      origin: ORIGIN,
      taskId: 't1',
    });
    expect(sampleLog.digestsSince(4, 10)).toEqual([]);
    expect(() => sampleLog.digestsSince(-1, 10)).toThrow(RangeError);
    expect(() => sampleLog.digestsSince(0, 0)).toThrow(RangeError);
    expect(sampleLog.counts()).toEqual({ samples: 4, verified: 3, highWater: 4 });
    sampleLog.close();
  });

  it('is idempotent on sample id: a repeat returns the existing row and takes no seq', () => {
    const sampleLog = openSampleLog({ path: join(dir, 'samples.db'), origin: ORIGIN, signer: SIGNER });
    const first = sampleLog.append(sampleBody('t1', 'qwen', 0));
    sampleLog.append(sampleBody('t1', 'qwen', 1));
    // Same id, another candidate (a re-run with the same seed on a non-deterministic server): first write wins.
    const again = sampleLog.append(sampleBody('t1', 'qwen', 0, { candidate: 'other\n', reward: 0 }));
    expect(again.created).toBe(false);
    expect(again.seq).toBe(first.seq);
    expect(again.body).toEqual(first.body);
    expect(sampleLog.append(sampleBody('t1', 'qwen', 2)).seq).toBe(3);
    expect(sampleLog.counts().samples).toBe(3);
    sampleLog.close();
  });

  it('rejects bad bodies with the field named and writes nothing', () => {
    const sampleLog = openSampleLog({ path: join(dir, 'samples.db'), origin: ORIGIN, signer: SIGNER });
    const good = sampleBody('t1', 'qwen', 0);
    expect(() => sampleLog.append({ ...good, score: { ...good.score, reward: 1.5 } })).toThrow(
      /score.reward/,
    );
    expect(() => sampleLog.append({ ...good, contentHash: contentHash('different') })).toThrow(
      /contentHash: is sha256:.*the candidate hashes to/,
    );
    expect(() => sampleLog.append({ ...good, sampleId: 'x' } as never)).toThrow(ParseError);
    expect(sampleLog.counts()).toEqual({ samples: 0, verified: 0, highWater: 0 });
    sampleLog.close();
  });

  it('survives close and reopen, continues the seq, and refuses another origin', () => {
    const path = join(dir, 'samples.db');
    let sampleLog = openSampleLog({ path, origin: ORIGIN, signer: SIGNER });
    for (let i = 0; i < 5; i++) sampleLog.append(sampleBody('t1', 'qwen', i));
    sampleLog.close();
    sampleLog = openSampleLog({ path, origin: ORIGIN, signer: SIGNER });
    expect(sampleLog.counts().highWater).toBe(5);
    expect(sampleLog.append(sampleBody('t1', 'qwen', 4)).created).toBe(false);
    expect(sampleLog.append(sampleBody('t2', 'qwen', 0)).seq).toBe(6);
    sampleLog.close();
    expect(() => openSampleLog({ path, origin: '12D3KooWsomeoneelse' })).toThrow(
      new RegExp(`belongs to peer ${ORIGIN}`),
    );
  });

  it('signs the digests of a log written before digests were signed, and opens read-only without a signer', () => {
    const path = join(dir, 'samples.db');
    const old = openDatabase(path);
    old.exec(`CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
      CREATE TABLE samples (seq INTEGER PRIMARY KEY, sample_id TEXT NOT NULL UNIQUE, task_id TEXT NOT NULL,
        model TEXT NOT NULL, split TEXT NOT NULL, reward REAL NOT NULL, content_hash TEXT NOT NULL,
        eval_fingerprint TEXT NOT NULL, body TEXT NOT NULL) STRICT;`);
    old.prepare('INSERT INTO meta (key, value) VALUES (?, ?)').run('origin', ORIGIN);
    const body = sampleBody('t1', 'qwen', 0);
    old
      .prepare('INSERT INTO samples VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?)')
      .run(
        body.sampleId,
        't1',
        'qwen',
        'train',
        1,
        body.contentHash,
        body.score.evalFingerprint,
        JSON.stringify(body),
      );
    old.close();
    const readOnly = openSampleLog({ path, origin: ORIGIN });
    expect(() => readOnly.append(sampleBody('t1', 'qwen', 1))).toThrow(/read-only/);
    readOnly.close();
    const sampleLog = openSampleLog({ path, origin: ORIGIN, signer: SIGNER });
    const [d] = sampleLog.digestsSince(0, 10);
    expect(d).toMatchObject({ seq: 1, sampleId: body.sampleId });
    expect(signatureError(d!)).toBeNull();
    expect(sampleLog.append(sampleBody('t1', 'qwen', 1)).seq).toBe(2);
    sampleLog.close();
    expect(() => openSampleLog({ path, origin: 'someone-else', signer: SIGNER })).toThrow(/signer's key/);
  });

  it('names the row when a stored body is corrupt', () => {
    const path = join(dir, 'samples.db');
    const sampleLog = openSampleLog({ path, origin: ORIGIN, signer: SIGNER });
    const body = sampleBody('t1', 'qwen', 0);
    sampleLog.append(body);
    const db = openDatabase(path);
    db.prepare('UPDATE samples SET body = \'{"v":1\' WHERE seq = 1').run();
    db.close();
    expect(() => sampleLog.get(body.sampleId)).toThrow(/samples\.db: sample seq 1: .*not JSON/);
    sampleLog.close();
  });

  it('silences only the SQLite ExperimentalWarning', async () => {
    const script = `
      import { openDatabase } from ${JSON.stringify(join(REPO, 'node/sqlite.ts'))};
      openDatabase(':memory:').close();
      process.emitWarning('something else is experimental', 'ExperimentalWarning');
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    await new Promise((resolve) => child.on('exit', resolve));
    expect(stderr).toMatch(/ExperimentalWarning: something else is experimental/);
    expect(stderr).not.toMatch(/SQLite/);
  });

  it('keeps every acknowledged append across SIGKILL, with no seq gap', async () => {
    const path = join(dir, 'samples.db');
    const child = spawn(process.execPath, [join(REPO, 'test/helpers/sample-log-writer.ts'), path, ORIGIN], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const acked: { seq: number; id: string }[] = [];
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      child.on('exit', (_code, signal) => resolve(signal)),
    );
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`writer too slow: ${acked.length} acks\n${stderr}`)),
        20_000,
      );
      let buf = '';
      child.stdout.on('data', (d) => {
        buf += d;
        const lines = buf.split('\n');
        buf = lines.pop()!;
        for (const line of lines) {
          const [, seq, id] = line.split(' ');
          acked.push({ seq: Number(seq), id: id! });
        }
        if (acked.length >= 300) {
          clearTimeout(timer);
          child.kill('SIGKILL');
          resolve();
        }
      });
    });
    expect(await exited).toBe('SIGKILL');
    expect(stderr).not.toMatch(/ExperimentalWarning/);

    const sampleLog = openSampleLog({ path, origin: ORIGIN, signer: SIGNER });
    const { samples, highWater } = sampleLog.counts();
    expect(highWater).toBe(samples); // seqs 1..n without gaps
    expect(highWater).toBeGreaterThanOrEqual(acked.at(-1)!.seq);
    for (const { seq, id } of acked) expect(sampleLog.get(id)?.seq).toBe(seq);
    expect(sampleLog.digestsSince(0, 100_000).map((d) => d.seq)).toEqual(
      Array.from({ length: samples }, (_, i) => i + 1),
    );
    sampleLog.close();
  });
});
