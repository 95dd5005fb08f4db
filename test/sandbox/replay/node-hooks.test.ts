// The node mode's module hooks in a real node process (no sandbox): a TypeScript file whose text the
// host stripped beforehand is loaded from the plan (the box never starts the stripper for it), any
// other is stripped in place, and the run says which TypeScript files it loaded.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { sha256Hex } from '../../../protocol/canonical.ts';
import { REPO_ROOT } from '../fixtures.ts';

const run = promisify(execFile);
const RUNTIME = join(REPO_ROOT, 'sandbox', 'replay', 'runtime');
let box: string;

beforeEach(async () => {
  box = await mkdtemp(join(tmpdir(), 'vtnode-node-hooks-'));
  await mkdir(join(box, '.vtnode-replay'));
  for (const f of ['node-hooks.mjs', 'node-main.mjs', 'replay.mjs', 'codec.mjs', 'determinism.mjs'])
    await writeFile(join(box, '.vtnode-replay', f), await readFile(join(RUNTIME, f)));
  await mkdir(join(box, 'src'));
});
afterEach(async () => {
  await rm(box, { recursive: true, force: true });
});

it('takes a pre-stripped text by its hash, strips the others itself, and lists both as loaded', async () => {
  const a = 'import { b } from "./b.ts";\nexport const a: number = 1 + b;\n';
  const b = 'export const b: number = 10;\n';
  await writeFile(join(box, 'src', 'a.ts'), a);
  await writeFile(join(box, 'src', 'b.ts'), b);
  // The plan's text for a.ts differs from what stripping gives (2, not 1): only the plan can say 12.
  const stripped = { [sha256Hex(a)]: 'import { b } from "./b.ts";\nexport const a = 2 + b;\n' };
  await writeFile(
    join(box, '.vtnode-replay', 'node-plan.json'),
    JSON.stringify({ aliases: [], files: [], stripped }),
  );
  const probe = join(box, '.vtnode-replay', 'probe.mjs');
  await writeFile(
    probe,
    `const { a } = await import(${JSON.stringify(join(box, 'src', 'a.ts'))});\n` +
      "const { loadedTypeScript } = await import('./node-hooks.mjs');\n" +
      'console.log(JSON.stringify({ a, loaded: loadedTypeScript() }));\n',
  );
  const { stdout } = await run(process.execPath, [
    '--no-warnings',
    '--experimental-transform-types',
    '--import',
    join(box, '.vtnode-replay', 'node-hooks.mjs'),
    probe,
  ]);
  expect(JSON.parse(stdout)).toEqual({ a: 12, loaded: ['src/a.ts', 'src/b.ts'] });
});

it('the main module writes the loaded list when the replay ends', async () => {
  await writeFile(join(box, '.vtnode-replay', 'node-plan.json'), JSON.stringify({ aliases: [], files: [] }));
  await run(process.execPath, [
    '--no-warnings',
    '--experimental-transform-types',
    '--import',
    join(box, '.vtnode-replay', 'node-hooks.mjs'),
    join(box, '.vtnode-replay', 'node-main.mjs'),
  ]);
  expect(JSON.parse(await readFile(join(box, '.vtnode-replay', 'loaded.json'), 'utf8'))).toEqual([]);
});
