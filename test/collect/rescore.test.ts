import { cp, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatasetStore } from '../../node/collector/store.ts';
import { vtnode } from '../helpers/cli.ts';
import { signedDigest, testSigner } from '../helpers/digests.ts';
import { sampleBody } from '../helpers/samples.ts';
import { makeTask, NODE_WS } from '../sandbox/fixtures.ts';
import { tempDir } from './helpers.ts';

let tmp: Awaited<ReturnType<typeof tempDir>>;
let ds: string;
let newWs: string;
const SUB = '\n/** Difference of two numbers. */\nexport function sub(a, b) {\n  return a - b;\n}\n';

beforeAll(async () => {
  tmp = await tempDir('vtnode-rescore-test-');
  const task = await makeTask({
    id: 'node-basic/math',
    workspace: NODE_WS,
    target: 'src/math.js',
    runner: 'node:test',
    testFiles: ['test/math.test.js'],
  });
  const reference = await readFile(join(NODE_WS, 'src/math.js'), 'utf8');
  // The platform moved on: math.js gained sub(), and its tests use it.
  newWs = join(tmp.dir, 'ws-new');
  await cp(NODE_WS, newWs, { recursive: true });
  await writeFile(join(newWs, 'src/math.js'), reference + SUB);
  const tests = await readFile(join(newWs, 'test/math.test.js'), 'utf8');
  await writeFile(
    join(newWs, 'test/math.test.js'),
    `${tests.replace("import { add, gcd, range } from '../src/math.js';", "import { add, gcd, range, sub } from '../src/math.js';")}\ntest('sub subtracts', () => {\n  assert.equal(sub(5, 3), 2);\n});\n`,
  );
  ds = join(tmp.dir, 'ds');
  const store = openDatasetStore(ds);
  store.putTasks([task]);
  const old = sampleBody(task.id, 'qwen', 0, { candidate: reference });
  const current = sampleBody(task.id, 'qwen', 1, { candidate: reference + SUB });
  const worker = await testSigner();
  for (const [seq, b] of [old, current].entries()) {
    const d = signedDigest(worker, seq + 1, b);
    store.addDigest(d);
    store.putBody(d, b);
  }
  store.setMeta('minReward', '1');
  store.close();
}, 30_000);

afterAll(async () => {
  await tmp.cleanup();
});

describe('vtnode rescore', () => {
  it('lists per task the verified rows that no longer pass against a new workspace; they leave the next export', async () => {
    const before = await vtnode([
      'export',
      '--from',
      ds,
      '--format',
      'hf',
      '--out',
      join(tmp.dir, 'before'),
      '--json',
    ]);
    expect(JSON.parse(before.stdout).counts.rows).toBe(2);

    const r = await vtnode(['rescore', '--from', ds, '--workspace', newWs, '--json'], { timeoutMs: 120_000 });
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(result).toMatchObject({ rescored: 2, stillPassing: 1 });
    expect(Object.keys(result.broken)).toEqual(['node-basic/math']);
    expect(result.broken['node-basic/math']).toHaveLength(1);
    expect(result.broken['node-basic/math'][0].reward).toBe(0);

    const after = await vtnode([
      'export',
      '--from',
      ds,
      '--format',
      'hf',
      '--out',
      join(tmp.dir, 'after'),
      '--json',
    ]);
    const manifest = JSON.parse(after.stdout);
    expect(manifest.counts.rows).toBe(1);
    expect(manifest.counts.excluded['rescore-failed']).toBe(1);
    const row = JSON.parse((await readFile(join(tmp.dir, 'after', 'data/train.jsonl'), 'utf8')).trim());
    expect(row.completion).toContain('export function sub');

    // Against the original workspace both pass again: the later rescore replaces the earlier one.
    const back = await vtnode(['rescore', '--from', ds, '--workspace', NODE_WS, '--json'], {
      timeoutMs: 120_000,
    });
    expect(back.code, back.stderr).toBe(0);
    expect(JSON.parse(back.stdout)).toMatchObject({ rescored: 2, stillPassing: 2, broken: {} });
  }, 240_000);
});
