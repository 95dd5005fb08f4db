import { afterAll, describe, expect, it } from 'vitest';
import { MineError, mine } from '../../node/tasks/mine.ts';
import {
  cleanupTemp,
  copyTree,
  gitCommitAll,
  makeRepo,
  nodeTestFixture,
  tsconfig,
  vitestPackage,
} from './helpers.ts';

afterAll(cleanupTemp);

const testFile = (imports: string, body = 'expect(1).toBe(1);') =>
  `import { describe, expect, it } from 'vitest';\n${imports}\n\ndescribe('x', () => {\n  it('works', () => {\n    ${body}\n  });\n});\n`;

describe('node:test repository', () => {
  it('mines a JavaScript repository that tests with node:test', async () => {
    const root = await copyTree(nodeTestFixture);
    await gitCommitAll(root);
    const { tasks, summary } = await mine({ root, installCheck: false });
    expect(summary.runner).toBe('node:test');
    expect(summary.runnerEvidence).toContain('node --test');
    expect(tasks.map((t) => `${t.kind}:${t.target}`)).toEqual([
      'file:lib/rpn.js',
      'file:lib/stack.js',
      'tests:test/rpn.test.js',
      'tests:test/stack.test.js',
    ]);
    const stack = tasks.find((t) => t.target === 'lib/stack.js')!;
    // rpn.test.js exercises stack.js only indirectly (through rpn.js): it is not part of stack.js's judge.
    expect(stack.judge).toMatchObject({
      runner: 'node:test',
      testFiles: ['test/stack.test.js'],
      typecheck: null,
    });
    expect(stack.mustDeclare).toEqual(['Stack']);
    expect(stack.messages[0]!.content).toContain('JavaScript');
    // Files directly in lib/ are modules of their own; rpn.js imports stack.js, but rpn's tests do not
    // import stack.js, so they are separate groups and rpn.js's text stays out of stack.js's prompt.
    expect(stack.module).toBe('stack');
    expect(stack.group).not.toBe(tasks.find((t) => t.target === 'lib/rpn.js')!.group);
    expect(stack.messages[1]!.content).not.toContain('### lib/rpn.js');
    const rpnTests = tasks.find((t) => t.target === 'test/rpn.test.js')!;
    expect(rpnTests.messages[0]!.content).toContain("from 'node:test'");
    // The test helper is shown to the tests task but never mined itself.
    expect(rpnTests.messages[1]!.content).toContain('### test/helpers.js (test helper the original imports)');
    // stack.js is another group's source: only its exports are named, never its text.
    expect(rpnTests.messages[1]!.content).toContain('imports (not shown):\n- lib/stack.js: Stack');
    expect(rpnTests.messages[1]!.content).not.toContain('pop from an empty stack');
    expect(summary.withoutTypecheck).toBe(4);
    expect(summary.files).toMatchObject({ sources: 2, tests: 2, support: 1 });
  });
});

describe('layouts and resolution', () => {
  it('resolves workspace packages of a monorepo and tsconfig paths', async () => {
    const root = await makeRepo(
      {
        'package.json': JSON.stringify({
          name: 'mono',
          private: true,
          workspaces: ['packages/*'],
          devDependencies: { vitest: '4.1.12', typescript: '5.9.3' },
        }),
        'packages/core/package.json': JSON.stringify({
          name: '@acme/core',
          exports: { '.': './dist/index.js' },
        }),
        'packages/core/src/index.ts': "export { add } from './math.ts';\n",
        'packages/core/src/math.ts':
          'export function add(a: number, b: number): number {\n  return a + b;\n}\n',
        'packages/core/src/math.test.ts': testFile(
          "import { add } from './math.ts';",
          'expect(add(1, 2)).toBe(3);',
        ),
        'packages/app/package.json': JSON.stringify({ name: '@acme/app' }),
        'packages/app/tsconfig.json': JSON.stringify({
          compilerOptions: {
            strict: true,
            noEmit: true,
            allowImportingTsExtensions: true,
            paths: { '~/*': ['./src/*'] },
          },
          include: ['src'],
        }),
        'packages/app/src/total.ts':
          "import { add } from '@acme/core';\nexport const total = (xs: number[]) => xs.reduce(add, 0);\n",
        'packages/app/src/total.test.ts': testFile(
          "import { add } from '@acme/core';\nimport { total } from '~/total.ts';",
          'expect(total([1, 2])).toBe(add(1, 2));',
        ),
        // A separate project inside the tree: never mined with this root.
        'examples/demo/package.json': '{"name":"demo"}',
        'examples/demo/x.test.ts': testFile(''),
      },
      { git: true },
    );
    const { tasks, summary } = await mine({ root, installCheck: false });
    expect(tasks.map((t) => `${t.kind}:${t.target}:${t.module}`)).toEqual([
      'file:packages/app/src/total.ts:@acme/app',
      'file:packages/core/src/math.ts:@acme/core',
      'tests:packages/app/src/total.test.ts:@acme/app',
      'tests:packages/core/src/math.test.ts:@acme/core',
    ]);
    // @acme/core resolves (dist/index.js -> src/index.ts -> math.ts): app's test joins the two packages.
    const math = tasks.find((t) => t.target === 'packages/core/src/math.ts')!;
    expect(math.judge.testFiles).toEqual([
      'packages/app/src/total.test.ts',
      'packages/core/src/math.test.ts',
    ]);
    expect(math.mustDeclare).toEqual(['add']);
    expect(new Set(tasks.map((t) => t.group))).toEqual(new Set(['@acme/app+1']));
    // The member's own tsconfig covers its files; core has none and the root has none.
    expect(tasks.find((t) => t.target === 'packages/app/src/total.ts')!.judge.typecheck).toEqual([
      'tsc',
      '--noEmit',
      '-p',
      'packages/app/tsconfig.json',
    ]);
    expect(math.judge.typecheck).toBeNull();
    expect(summary.skipped).toContainEqual({
      path: 'examples/demo/',
      reason: expect.stringContaining('separate package'),
    });
  });

  it('pairs several test files with one source and reads type tests', async () => {
    const root = await makeRepo({
      'package.json': vitestPackage,
      'tsconfig.json': tsconfig,
      // Code a mutant can change (a file of constants has none: its tests tasks are skipped).
      'src/a/x.ts': 'export const x = 2 > 1 ? 1 : 0;\nexport type X = number;\n',
      'tests/a/x.test.ts': testFile("import { x } from '../../src/a/x.ts';", 'expect(x).toBe(1);'),
      'tests/a/x.more.test.ts': testFile("import { x } from '../../src/a/x.ts';", 'expect(x + 1).toBe(2);'),
      'src/a/x.test-d.ts':
        "import { expectTypeOf, test } from 'vitest';\nimport type { X } from './x.ts';\ntest('t', () => { expectTypeOf<X>().toBeNumber(); });\n",
      'src/b/only-types.ts': 'export type Y = string;\nexport const y = "y";\n',
      'src/b/only-types.test-d.ts':
        "import { expectTypeOf, test } from 'vitest';\nimport type { Y } from './only-types.ts';\ntest('t', () => { expectTypeOf<Y>().toBeString(); });\n",
    });
    const { tasks, summary } = await mine({ root, installCheck: false });
    const x = tasks.find((t) => t.target === 'src/a/x.ts')!;
    expect(x.judge.testFiles).toEqual(['tests/a/x.more.test.ts', 'tests/a/x.test.ts']);
    expect(x.judge.typeTests).toEqual(['src/a/x.test-d.ts']);
    expect(x.mustDeclare).toEqual(['X', 'x']);
    expect(x.judge.typecheck).toEqual(['tsc', '--noEmit', '-p', 'tsconfig.json']);
    expect(summary.skipped).toContainEqual({
      path: 'src/b/only-types.ts',
      reason: 'only type tests (*.test-d.ts) exercise it: no executable test',
    });
    expect(tasks.filter((t) => t.kind === 'tests').map((t) => t.target)).toEqual([
      'tests/a/x.more.test.ts',
      'tests/a/x.test.ts',
    ]);
    // Not a git tree: recorded as unclean, minedAt "uncommitted".
    expect(x.minedAt).toBe('uncommitted');
    expect(x.workspace).toMatchObject({ commit: null, clean: false });
  });
});

describe('split and leakage', () => {
  const repo = () => ({
    'package.json': vitestPackage,
    'src/a/a.ts': 'export function a(): string {\n  return "a";\n}\n',
    'src/a/a.test.ts': testFile("import { a } from './a.ts';", "expect(a()).toBe('a');"),
    // b's test imports a's source: a and b become one group.
    'src/b/b.ts': 'export function b(): string {\n  return "b";\n}\n',
    'src/b/b.test.ts': testFile(
      "import { a } from '../a/a.ts';\nimport { b } from './b.ts';",
      "expect(b() + a()).toBe('ba');",
    ),
    'src/c/c.ts': 'export function c(): string {\n  return "c";\n}\n',
    'src/c/c.test.ts': testFile("import { c } from './c.ts';", "expect(c()).toBe('c');"),
  });

  it('joins a module into a group through a test that imports another module’s source', async () => {
    const root = await makeRepo(repo());
    const { tasks, summary } = await mine({ root, installCheck: false, evalModules: ['a'] });
    const splitOf = (m: string) => [...new Set(tasks.filter((t) => t.module === m).map((t) => t.split))];
    expect(splitOf('a')).toEqual(['eval']);
    expect(splitOf('b')).toEqual(['eval']);
    expect(splitOf('c')).toEqual(['train']);
    expect(summary.groups.map((g) => [g.id, g.modules, g.split])).toEqual([
      ['a+1', ['a', 'b'], 'eval'],
      ['c', ['c'], 'train'],
    ]);
    expect(summary.groups[0]!.reason).toBe('--eval-modules a');
    expect(summary.leakage).toBe(0);
  });

  it('splits by a stable group hash against the eval fraction', async () => {
    const root = await makeRepo(repo());
    const all = await mine({ root, installCheck: false, evalFraction: 1 });
    expect(all.summary.bySplit).toEqual({ train: 0, eval: all.summary.tasks });
    const none = await mine({ root, installCheck: false, evalFraction: 0 });
    expect(none.summary.bySplit).toEqual({ train: none.summary.tasks, eval: 0 });
    const half = await mine({ root, installCheck: false, evalFraction: 0.5 });
    const again = await mine({ root, installCheck: false, evalFraction: 0.5 });
    expect(half.tasks.map((t) => t.split)).toEqual(again.tasks.map((t) => t.split));
    for (const g of half.summary.groups)
      expect(
        new Set(half.tasks.filter((t) => t.group === g.id).map((t) => t.split)).size,
      ).toBeLessThanOrEqual(1);
  });

  it('reports leakage when an eval target’s text appears in a train prompt', async () => {
    // Two modules carry a byte-identical helper: holding one out leaks it through the other's prompts.
    const files: Record<string, string> = {
      ...repo(),
      'src/a/shared-copy.ts': 'export const PI_ISH = 3.14159;\nexport const TAU_ISH = 6.28318;\n',
      'src/c/shared-copy.ts': 'export const PI_ISH = 3.14159;\nexport const TAU_ISH = 6.28318;\n',
      'src/a/copy.test.ts': testFile(
        "import { PI_ISH } from './shared-copy.ts';",
        'expect(PI_ISH).toBeGreaterThan(3);',
      ),
    };
    const root = await makeRepo(files);
    const { summary } = await mine({ root, installCheck: false, evalModules: ['a'] });
    expect(summary.leakage).toBe(1);
    expect(summary.leaks).toContainEqual({
      evalTask: expect.stringContaining('file:src/a/shared-copy.ts'),
      evalTarget: 'src/a/shared-copy.ts',
      trainTask: expect.stringContaining('file:src/c/c.ts'),
    });
  });
});

describe('bad input', () => {
  it('refuses a root with no tests', async () => {
    const root = await makeRepo({ 'package.json': vitestPackage, 'src/a.ts': 'export const a = 1;\n' });
    await expect(mine({ root, installCheck: false })).rejects.toThrow(MineError);
    await expect(mine({ root, installCheck: false })).rejects.toThrow(
      /no test files under .*Only modules with tests can be mined/,
    );
  });

  it('refuses a repository without a test runner, and names an unsupported one', async () => {
    const files = {
      'package.json': JSON.stringify({ name: 'x', private: true }),
      'src/a.ts': 'export const a = 1;\n',
      'src/a.test.ts': "import { a } from './a.ts';\nif (a !== 1) throw new Error('a');\n",
    };
    await expect(mine({ root: await makeRepo(files), installCheck: false })).rejects.toThrow(
      /no test runner found: expected vitest/,
    );
    const ava = {
      ...files,
      'package.json': JSON.stringify({ name: 'x', devDependencies: { ava: '6.0.0' } }),
    };
    await expect(mine({ root: await makeRepo(ava), installCheck: false })).rejects.toThrow(
      /test runner ava \(ava is a dependency\) is not supported yet; supported: vitest, jest, mocha, node:test/,
    );
    await expect(mine({ root: '/nonexistent/vtnode-root' })).rejects.toThrow(/is not a directory/);
  });

  it('skips an unparsable file with the reason and mines the rest', async () => {
    const root = await makeRepo({
      'package.json': vitestPackage,
      'src/ok.ts': 'export const ok = true;\n',
      'src/ok.test.ts': testFile("import { ok } from './ok.ts';", 'expect(ok).toBe(true);'),
      'src/broken.ts': 'export function broken( {\n  return 1;\n',
      'src/broken.test.ts': testFile("import { broken } from './broken.ts';", 'expect(broken()).toBe(1);'),
    });
    const { tasks, summary } = await mine({ root, installCheck: false });
    expect(summary.skipped).toContainEqual({
      path: 'src/broken.ts',
      reason: expect.stringMatching(/^unparsable: syntax error at \d+:\d+: ':' expected/),
    });
    expect(summary.skipped).toContainEqual({
      path: 'src/broken.test.ts',
      reason: 'imports no source file of the workspace',
    });
    expect(tasks.map((t) => `${t.kind}:${t.target}`)).toEqual(['file:src/ok.ts', 'tests:src/ok.test.ts']);
  });

  it('refuses files that contain a denied term, and says which', async () => {
    const root = await makeRepo({
      'package.json': vitestPackage,
      'src/a/public.ts': 'export const hello = () => "hi";\n',
      'src/a/public.test.ts': testFile("import { hello } from './public.ts';", "expect(hello()).toBe('hi');"),
      'src/a/secret.ts': '// Project NIGHTJAR internal pricing\nexport const margin = 0.42;\n',
      'src/a/secret.test.ts': testFile("import { margin } from './secret.ts';", 'expect(margin).toBe(0.42);'),
    });
    const { tasks, summary } = await mine({ root, installCheck: false, denyTerms: ['nightjar'] });
    expect(summary.skipped).toEqual([
      { path: 'src/a/secret.ts', reason: 'contains a denied term (#1 of --deny-terms)' },
      { path: 'src/a/secret.test.ts', reason: 'imports no source file of the workspace' },
    ]);
    for (const t of tasks) expect(JSON.stringify(t.messages)).not.toMatch(/NIGHTJAR|margin/);
    expect(tasks.map((t) => t.target)).toEqual(['src/a/public.ts', 'src/a/public.test.ts']);
  });

  it('rejects bad options', async () => {
    const root = await makeRepo(repoMin());
    await expect(mine({ root, installCheck: false, evalFraction: 1.5 })).rejects.toThrow(
      /eval fraction must be in \[0, 1\]/,
    );
    await expect(mine({ root, installCheck: false, maxContext: -1 })).rejects.toThrow(/max context/);
  });
});

function repoMin(): Record<string, string> {
  return {
    'package.json': vitestPackage,
    'src/a.ts': 'export const a = 1;\n',
    'src/a.test.ts': testFile("import { a } from './a.ts';", 'expect(a).toBe(1);'),
  };
}

describe('install check: self-imports', () => {
  const files = (paths: boolean) => ({
    'package.json': JSON.stringify({
      name: 'selfpkg',
      type: 'module',
      exports: { '.': './dist/index.js' },
      scripts: { test: 'node --test' },
    }),
    'tsconfig.json': JSON.stringify({
      compilerOptions: {
        module: 'nodenext',
        allowJs: true,
        ...(paths ? { paths: { selfpkg: ['./src/index.js'] } } : {}),
      },
    }),
    'src/index.js': 'export function add(a, b) {\n  return a + b;\n}\n',
    'test/add.test.js':
      "import assert from 'node:assert/strict';\nimport { it } from 'node:test';\nimport { add } from 'selfpkg';\n\nit('adds', () => assert.equal(add(1, 2), 3));\n",
  });

  it('refuses a self-import of an unbuilt package, and accepts one the tsconfig paths map to sources', async () => {
    await expect(mine({ root: await makeRepo(files(false)) })).rejects.toThrow(
      /workspace package selfpkg is not built \(no \.\/dist\/index\.js in \.\)/,
    );
    const { tasks } = await mine({ root: await makeRepo(files(true)) });
    expect(tasks.map((t) => `${t.kind}:${t.target}`)).toContain('file:src/index.js');
  });
});

describe('nested package.json files', () => {
  it('keeps a folder whose package.json only sets the module type (luxon: src/package.json)', async () => {
    const root = await makeRepo({
      'package.json': JSON.stringify({ name: 'lux', scripts: { test: 'node --test' } }),
      'src/package.json': JSON.stringify({ type: 'module' }),
      'src/add.js': 'export function add(a, b) {\n  return a + b;\n}\n',
      'tools/package.json': JSON.stringify({ name: 'tools', private: true }),
      'tools/x.js': 'export const x = 1;\n',
      'test/add.test.js':
        "import assert from 'node:assert/strict';\nimport { it } from 'node:test';\nimport { add } from '../src/add.js';\n\nit('adds', () => assert.equal(add(1, 2), 3));\n",
    });
    const { tasks, summary } = await mine({ root, installCheck: false });
    expect(tasks.map((t) => `${t.kind}:${t.target}`)).toContain('file:src/add.js');
    expect(summary.skipped).toContainEqual({
      path: 'tools/',
      reason: expect.stringContaining('separate package'),
    });
  });
});
