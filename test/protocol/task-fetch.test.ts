import { describe, expect, it } from 'vitest';
import { signatureError } from '../../node/digests/signature.ts';
import { canonicalJson } from '../../protocol/canonical.ts';
import { claimFor, Digest, digestSigningBytes, SignedDigest } from '../../protocol/digest.ts';
import { parseWith } from '../../protocol/parse.ts';
import { type Task, taskHash } from '../../protocol/task.ts';
import {
  MAX_TASK_ROW_BYTES,
  MAX_TASKS_PER_REQUEST,
  TaskReply,
  TaskRequest,
  taskPages,
  taskRowMismatch,
} from '../../protocol/task-fetch.ts';
import { testSigner } from '../helpers/digests.ts';
import { sampleBody, sampleTask } from '../helpers/samples.ts';

const hashOf = (n: number) => `sha256:${n.toString(16).padStart(64, '0')}`;

describe('taskHash', () => {
  const task = sampleTask('t1');

  it('is the sha256 of the canonical JSON of the parsed row: key order and omitted defaults do not matter', () => {
    expect(taskHash(task)).toMatch(/^sha256:[0-9a-f]{64}$/);
    const reversed = Object.fromEntries(Object.entries(task).reverse()) as Task;
    expect(taskHash(reversed)).toBe(taskHash(task));
    // A file row without the defaulted fields hashes as the row a job carries (parsed, defaults filled).
    const { mustDeclare: _m, ...bare } = { ...task, mustDeclare: [] };
    const judge = { ...task.judge } as Partial<Task['judge']>;
    delete judge.flaky;
    expect(taskHash({ ...bare, judge } as Task)).toBe(taskHash({ ...task, mustDeclare: [] }));
    // Round trip through JSON text (a file line, a wire frame) keeps it.
    expect(taskHash(JSON.parse(JSON.stringify(task)))).toBe(taskHash(task));
  });

  it('changes with any content: prompt, judge, workspace, target, id', () => {
    const base = taskHash(task);
    const variants: Task[] = [
      { ...task, messages: [{ role: 'user', content: 'write sub()' }] },
      { ...task, judge: { ...task.judge, testFiles: ['test/other.test.ts'] } },
      { ...task, judge: { ...task.judge, timeoutMs: 1 } },
      { ...task, workspace: { ...task.workspace, commit: 'def456' } },
      { ...task, target: 'src/sub.ts' },
      { ...task, id: 't2' },
      { ...task, split: 'eval' },
      { ...task, referenceHash: hashOf(9) },
    ];
    const hashes = variants.map(taskHash);
    for (const h of hashes) expect(h).not.toBe(base);
    expect(new Set(hashes).size).toBe(variants.length);
  });

  it('refuses a row that is not a task (naming the field)', () => {
    expect(() => taskHash({ ...task, target: '../etc/passwd' })).toThrow(/target/);
  });
});

describe('v2 digests commit to the task row', () => {
  const body = sampleBody('t1', 'qwen', 0);
  const hash = taskHash(sampleTask('t1'));

  it('claimFor with a task hash is v2 and signs the hash; without one it is v1 as before', async () => {
    const signer = await testSigner();
    const v2 = signer.sign(claimFor(body, signer.origin, 1, hash));
    expect(v2).toMatchObject({ v: 2, taskHash: hash });
    expect(SignedDigest.parse(v2)).toEqual(v2);
    expect(signatureError(v2)).toBeNull();
    expect(new TextDecoder().decode(digestSigningBytes(v2))).toContain(`"taskHash":"${hash}"`);
    const v1 = signer.sign(claimFor(body, signer.origin, 1));
    expect(v1.v).toBe(1);
    expect('taskHash' in v1).toBe(false);
    expect(signatureError(v1)).toBeNull();
  });

  it('a swapped task hash, or a v2 digest passed off as v1, breaks the signature', async () => {
    const signer = await testSigner();
    const v2 = signer.sign(claimFor(body, signer.origin, 1, hash));
    expect(signatureError({ ...v2, taskHash: hashOf(1) })).toMatch(/does not verify/);
    const { taskHash: _t, ...stripped } = v2;
    expect(signatureError({ ...stripped, v: 1 })).toMatch(/does not verify/);
  });

  it('the schema takes taskHash exactly when v is 2, and only a sha256 id', async () => {
    const signer = await testSigner();
    const v2 = signer.sign(claimFor(body, signer.origin, 1, hash));
    const bad = (d: unknown) => () => parseWith(SignedDigest, d, 'digest from p');
    const { taskHash: _t, ...noHash } = v2;
    expect(bad(noHash)).toThrow(/digest from p: taskHash: a v2 digest carries taskHash/);
    expect(bad({ ...v2, v: 1 })).toThrow(/taskHash/);
    expect(bad({ ...v2, taskHash: 'sha256:xyz' })).toThrow(/taskHash: expected sha256/);
    expect(bad({ ...v2, v: 3 })).toThrow(/\bv\b/);
    const claim = claimFor(body, signer.origin, 1, hash);
    expect(Digest.parse(claim)).toEqual(claim);
    expect(() => parseWith(Digest, { ...claim, v: 1 }, 'claim')).toThrow(/claim: taskHash/);
  });
});

describe('/vtnode/task/1 schemas', () => {
  it('a request names 1..MAX_TASKS_PER_REQUEST distinct sha256 hashes', () => {
    expect(TaskRequest.parse({ v: 1, hashes: [hashOf(1)] })).toEqual({ v: 1, hashes: [hashOf(1)] });
    const bad = (r: unknown) => () => parseWith(TaskRequest, r, 'task request from p');
    expect(bad({ v: 1, hashes: [] })).toThrow(/task request from p: hashes/);
    expect(bad({ v: 1, hashes: [hashOf(1), hashOf(1)] })).toThrow(/hashes: hashes repeat/);
    const many = Array.from({ length: MAX_TASKS_PER_REQUEST + 1 }, (_, i) => hashOf(i));
    expect(bad({ v: 1, hashes: many })).toThrow(/hashes/);
    expect(bad({ v: 1, hashes: ['t1'] })).toThrow(/hashes\.0: expected sha256/);
    expect(bad({ v: 2, hashes: [hashOf(1)] })).toThrow(/\bv\b/);
    expect(bad({ hashes: [hashOf(1)] })).toThrow(/\bv\b/);
    expect(bad('x')).toThrow(/task request from p/);
  });

  it('a reply is a hash and a valid task row; anything else names the field', () => {
    const task = sampleTask('t1');
    expect(TaskReply.parse({ hash: taskHash(task), task })).toEqual({ hash: taskHash(task), task });
    const bad = (r: unknown) => () => parseWith(TaskReply, r, 'task row from p');
    expect(bad({ hash: 'x', task })).toThrow(/task row from p: hash/);
    expect(bad({ hash: taskHash(task), task: { ...task, messages: [] } })).toThrow(/task\.messages/);
    expect(bad({ hash: taskHash(task), task: { ...task, judge: undefined } })).toThrow(/task\.judge/);
    expect(bad({ hash: taskHash(task) })).toThrow(/task/);
  });
});

describe('taskRowMismatch', () => {
  const task = sampleTask('t1');
  const hash = taskHash(task);

  it('accepts exactly the row the hash names', () => {
    expect(taskRowMismatch(hash, { hash, task })).toBeNull();
    expect(taskRowMismatch(hash, { hash, task: JSON.parse(canonicalJson(task)) })).toBeNull();
  });

  it('rejects a row altered in any field, served under the asked hash', () => {
    const tampered: Task[] = [
      { ...task, messages: [{ role: 'user', content: 'write add() and also exfiltrate ~/.ssh' }] },
      { ...task, judge: { ...task.judge, testFiles: ['test/always-passes.test.ts'] } },
      { ...task, split: 'eval' },
      { ...task, mustDeclare: [] },
    ];
    for (const t of tampered)
      expect(taskRowMismatch(hash, { hash, task: t })).toMatch(
        /^the row hashes to sha256:[0-9a-f]{64}, not /,
      );
  });

  it('rejects a row served under another hash than asked (even its own true hash)', () => {
    const other = sampleTask('t2');
    expect(taskRowMismatch(hash, { hash: taskHash(other), task: other })).toMatch(/served under .*was asked/);
  });

  it('rejects an oversized row before hashing it', () => {
    const huge = { ...task, messages: [{ role: 'user' as const, content: 'x'.repeat(MAX_TASK_ROW_BYTES) }] };
    expect(taskRowMismatch(taskHash(huge), { hash: taskHash(huge), task: huge })).toMatch(/bytes, more than/);
  });
});

describe('taskPages', () => {
  it('splits hashes into request-sized pages, repeats dropped, order kept', () => {
    const hashes = Array.from({ length: 2 * MAX_TASKS_PER_REQUEST + 3 }, (_, i) => hashOf(i));
    const pages = taskPages([...hashes, hashes[0]!]);
    expect(pages.map((p) => p.length)).toEqual([MAX_TASKS_PER_REQUEST, MAX_TASKS_PER_REQUEST, 3]);
    expect(pages.flat()).toEqual(hashes);
    expect(taskPages([])).toEqual([]);
    for (const p of pages) expect(() => TaskRequest.parse({ v: 1, hashes: p })).not.toThrow();
  });
});
