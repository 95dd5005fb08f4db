import ts from 'typescript';
import {
  admitted,
  foldString,
  loadAt,
  loaderAliases,
  type ModuleLoad,
  moduleKey,
  stringConstants,
  stripParens,
} from './tamper-modules.ts';

/**
 * Static tamper rules: ways for a candidate to reach the judge instead of doing the work. Each rule counts
 * occurrences in a file's syntax tree (not its text, so comments and strings do not count and spacing,
 * aliases, computed names and reflective calls do); a candidate that has more of a rule than the original
 * file scores a hard 0. Relative counts leave the house style alone: an original that writes
 * `Object.defineProperty(globalThis, …)` may keep doing so.
 */
export type Role = 'source' | 'tests';

/** One rule's occurrences in a file. */
export interface RuleHits {
  rule: string;
  /** Short excerpts of the offending code, in source order. */
  hits: string[];
  /**
   * Keyed rules (what a file reaches: a module, a process member, a loader): the key of each hit. A
   * candidate adds a keyed hit only when the original has none with its key, however many it has.
   */
  keys?: string[];
}

/** A rule the candidate triggers more often than the original. */
export interface AddedTamper {
  name: string;
  added: number;
  /** Excerpts of the candidate's occurrences. */
  examples: string[];
}

/** Globals whose properties a verdict depends on: writing them is tampering. */
const BUILTINS = new Set([
  'Object',
  'Function',
  'Array',
  'Reflect',
  'JSON',
  'Math',
  'Promise',
  'Map',
  'Set',
  'WeakMap',
  'WeakSet',
  'String',
  'Number',
  'Boolean',
  'Symbol',
  'BigInt',
  'RegExp',
  'Date',
  'Error',
  'TypeError',
  'RangeError',
  'AggregateError',
  'Proxy',
  'Iterator',
  'ArrayBuffer',
  'DataView',
  'Buffer',
  'console',
  'process',
  'performance',
  'setTimeout',
  'setInterval',
  'setImmediate',
  'clearTimeout',
  'clearInterval',
  'queueMicrotask',
  'structuredClone',
  'eval',
]);
const GLOBAL_OBJECTS = new Set(['globalThis', 'global', 'self', 'window']);
/** Names a runner's per-test context goes by, and the keys of it that decide a verdict. */
const TASK_ROOTS = new Set(['ctx', 'context', 'task', 'test', 't', 'suite']);
const TASK_KEYS = new Set([
  'fails',
  'mode',
  'result',
  'state',
  'skip',
  'todo',
  'only',
  'retry',
  'repeats',
  'timeout',
  'concurrent',
  'pending',
  'errors',
]);
/** Test-runner and assertion modules: a source module has no business importing them. */
const RUNNER_MODULE =
  /^(?:vitest|vitest\/.*|@vitest\/.*|jest|@jest\/.*|jest-.*|expect|mocha|chai|chai\/.*|node:test|tinyspy|sinon|@sinonjs\/.*|ava|tap|uvu.*|bun:test|node:assert.*|assert.*|power-assert)$/;
/** Test-runner globals a source module could reach without importing them. */
const RUNNER_GLOBALS = new Set([
  'expect',
  'vi',
  'vitest',
  'jest',
  'describe',
  'it',
  'test',
  'suite',
  'beforeEach',
  'afterEach',
  'beforeAll',
  'afterAll',
  'before',
  'after',
  'chai',
  'onTestFailed',
  'onTestFinished',
  'assert',
  'should',
]);
/** Builtin modules that reach processes, threads, the module loader or the engine. */
const ENGINE_MODULES =
  /^(?:node:)?(?:child_process|worker_threads|cluster|vm|module|inspector|inspector\/promises|v8|repl|trace_events|wasi|diagnostics_channel)$/;
const REFLECTIVE_WRITE = new Map([
  [
    'Object',
    new Set([
      'defineProperty',
      'defineProperties',
      'setPrototypeOf',
      'assign',
      '__defineGetter__',
      '__defineSetter__',
    ]),
  ],
  ['Reflect', new Set(['set', 'defineProperty', 'deleteProperty', 'setPrototypeOf'])],
]);
const PROCESS_CHANNELS =
  /^(?:exit|reallyExit|abort|kill|exitCode|stdout|stderr|stdin|_rawDebug|binding|_linkedBinding|dlopen|send|channel|disconnect|argv|execArgv|pid|ppid|execPath|chdir|emit|on|once|addListener|prependListener|prependOnceListener|removeAllListeners|setUncaughtExceptionCaptureCallback|_getActiveHandles|_getActiveRequests|report|mainModule|getBuiltinModule)$/;
/**
 * The process members a candidate may reach whatever the original reaches: configuration and clock
 * reads. Everything else on the process object (its channels above, `binding`, `getBuiltinModule`,
 * `mainModule`, `_events`, `stdin`, …) is a keyed rule relative to the original.
 */
const PROCESS_SAFE = new Set([
  'env',
  'platform',
  'arch',
  'version',
  'versions',
  'release',
  'config',
  'features',
  'hrtime',
  'nextTick',
  'cwd',
  'uptime',
  'memoryUsage',
  'cpuUsage',
  'resourceUsage',
  'emitWarning',
]);
/**
 * Names of the module loader's and the process's internals: no honest source reaches them, so they count
 * wherever they appear (a member, a computed key, a destructured key, a string), on whatever object.
 */
const LOADER_NAMES =
  /^(?:getBuiltinModule|createRequire|mainModule|_load|_resolveFilename|_extensions|_nodeModulePaths|_findPath|_initPaths|_preloadModules|_compile|_linkedBinding|dlopen|reallyExit|_rawDebug|setUncaughtExceptionCaptureCallback|_getActiveHandles|_getActiveRequests|_kill|_debugProcess|_debugEnd|_startProfilerIdleNotifier|_tickCallback)$/;
/** Globals that reach the network (the inspector listens on loopback). */
const NETWORK_GLOBALS = new Set(['fetch', 'WebSocket', 'EventSource', 'XMLHttpRequest']);

/** Rule names. */
export const RULES = {
  modules: 'module outside the allow-list (pure builtins and what the original loads)',
  loader: 'module loader or process internals reached (require as a value, createRequire, getBuiltinModule)',
  processMembers: 'process member outside the allow-list',
  processEscape: 'process object passed around (outside member reads)',
  network: 'network reached (fetch, WebSocket)',
} as const;
const KEYED: ReadonlySet<string> = new Set([
  RULES.modules,
  RULES.loader,
  RULES.processMembers,
  RULES.processEscape,
  RULES.network,
]);

/** Text tells of the runner's and vtnode's internals (also inside strings). */
const INTERNALS =
  /__vitest|__VITEST|\$\$jest|jest-matchers|matchers-object|@vitest\/runner|vitest\/(?:suite|runner|internal)|node:test\/reporters|test-reporter|\boutputFile\b|\.vtnode\b|__vtnode|vtnode[-:]sentinel|vtnode-report|integrity\.mjs|\/proc\/|\/dev\/fd\/|\/dev\/std(?:out|err)/g;

interface Scope {
  /** Every name declared anywhere in the file (a coarse scope: shadowing a builtin anywhere counts). */
  declared: Set<string>;
  /** Local names bound to a builtin or global object (`const O = Object`, `const { is } = Object`). */
  aliases: Map<string, string>;
  /** Names imported from relative modules (the code under test, for a test file). */
  relativeImports: Set<string>;
  /** Names bound to the process object itself (`const p = process`, `import p from 'node:process'`). */
  processNames: Set<string>;
  /** String constants (`const m = 'node:' + 'vm'`), to fold specifiers. */
  consts: Map<string, string | null>;
  /** Names bound to a module loader (`const r = createRequire(…)`). */
  loaders: Set<string>;
}

/** Does this expression denote the process object (`process`, an alias, `globalThis.process`)? */
function isProcess(e: ts.Expression, scope: Scope): boolean {
  const x = stripParens(e);
  if (ts.isIdentifier(x))
    return scope.processNames.has(x.text) || (x.text === 'process' && !scope.declared.has('process'));
  if (!ts.isPropertyAccessExpression(x) && !ts.isElementAccessExpression(x)) return false;
  const key = ts.isPropertyAccessExpression(x)
    ? x.name.text
    : ts.isStringLiteralLike(stripParens(x.argumentExpression))
      ? (stripParens(x.argumentExpression) as ts.StringLiteralLike).text
      : null;
  const obj = stripParens(x.expression);
  return (
    key === 'process' &&
    ts.isIdentifier(obj) &&
    GLOBAL_OBJECTS.has(scope.aliases.get(obj.text) ?? obj.text) &&
    !scope.declared.has(obj.text)
  );
}

/** `require('node:process')`, `require('process')`. */
function isProcessRequire(e: ts.Expression): boolean {
  const x = stripParens(e);
  return (
    ts.isCallExpression(x) &&
    ts.isIdentifier(x.expression) &&
    x.expression.text === 'require' &&
    x.arguments.length === 1 &&
    ts.isStringLiteralLike(x.arguments[0]!) &&
    /^(?:node:)?process$/.test(x.arguments[0].text)
  );
}

/** Names a declaration binds to the process object itself. */
function processBindings(node: ts.Node, scope: Scope): string[] {
  if (ts.isImportDeclaration(node) && ts.isStringLiteralLike(node.moduleSpecifier)) {
    if (!/^(?:node:)?process$/.test(node.moduleSpecifier.text) || !node.importClause) return [];
    const c = node.importClause;
    const b = c.namedBindings;
    const out = c.name ? [c.name.text] : [];
    if (b && ts.isNamespaceImport(b)) out.push(b.name.text);
    if (b && ts.isNamedImports(b))
      for (const e of b.elements) if ((e.propertyName ?? e.name).text === 'default') out.push(e.name.text);
    return out;
  }
  if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.initializer)
    return isProcess(node.initializer, scope) || isProcessRequire(node.initializer) ? [node.name.text] : [];
  if (
    ts.isBinaryExpression(node) &&
    node.operatorToken.kind === ts.SyntaxKind.EqualsToken &&
    ts.isIdentifier(node.left) &&
    isProcess(node.right, scope)
  )
    return [node.left.text];
  return [];
}

/** Every name bound to the process object, through chains of aliases (`const a = process; const b = a`). */
function collectProcessNames(sf: ts.SourceFile, scope: Scope): void {
  for (let size = -1; size !== scope.processNames.size; ) {
    size = scope.processNames.size;
    const visit = (node: ts.Node): void => {
      for (const n of processBindings(node, scope)) scope.processNames.add(n);
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
}

function scriptKind(fileName: string): ts.ScriptKind {
  if (/\.[cm]?tsx?$/.test(fileName)) return fileName.endsWith('x') ? ts.ScriptKind.TSX : ts.ScriptKind.TS;
  return fileName.endsWith('x') ? ts.ScriptKind.JSX : ts.ScriptKind.JS;
}

function collectScope(sf: ts.SourceFile): Scope {
  const declared = new Set<string>();
  const aliases = new Map<string, string>();
  const relativeImports = new Set<string>();
  const bindName = (n: ts.BindingName) => {
    if (ts.isIdentifier(n)) declared.add(n.text);
    else for (const e of n.elements) if (!ts.isOmittedExpression(e)) bindName(e.name);
  };
  const visit = (node: ts.Node): void => {
    if ((ts.isVariableDeclaration(node) || ts.isParameter(node) || ts.isBindingElement(node)) && node.name)
      bindName(node.name);
    if (
      (ts.isFunctionDeclaration(node) || ts.isClassDeclaration(node) || ts.isFunctionExpression(node)) &&
      node.name
    )
      declared.add(node.name.text);
    if (ts.isImportDeclaration(node) && ts.isStringLiteralLike(node.moduleSpecifier)) {
      const names = importedNames(node);
      for (const n of names) declared.add(n);
      if (node.moduleSpecifier.text.startsWith('.')) for (const n of names) relativeImports.add(n);
      // `import proc from 'node:process'` is `process` under another name.
      if (/^(?:node:)?process$/.test(node.moduleSpecifier.text))
        for (const n of names) aliases.set(n, 'process');
    }
    if (ts.isImportEqualsDeclaration(node)) declared.add(node.name.text);
    if (ts.isVariableDeclaration(node) && node.initializer && isPlainChain(node.initializer)) {
      const root = rootName(node.initializer);
      if (root && (BUILTINS.has(root) || GLOBAL_OBJECTS.has(root))) {
        if (ts.isIdentifier(node.name)) aliases.set(node.name.text, root);
        else if (ts.isObjectBindingPattern(node.name))
          for (const e of node.name.elements) if (ts.isIdentifier(e.name)) aliases.set(e.name.text, root);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  for (const a of aliases.keys()) declared.delete(a);
  const scope: Scope = {
    declared,
    aliases,
    relativeImports,
    processNames: new Set(),
    consts: stringConstants(sf),
    loaders: loaderAliases(sf),
  };
  collectProcessNames(sf, scope);
  return scope;
}

function importedNames(node: ts.ImportDeclaration): string[] {
  const c = node.importClause;
  if (!c) return [];
  const out = c.name ? [c.name.text] : [];
  const b = c.namedBindings;
  if (b && ts.isNamespaceImport(b)) out.push(b.name.text);
  else if (b) for (const e of b.elements) out.push(e.name.text);
  return out;
}

/** `a`, `a.b`, `a['b']`: a name or a member chain without calls (what an alias can be bound to). */
function isPlainChain(e: ts.Expression): boolean {
  let x = stripParens(e);
  while (
    ts.isPropertyAccessExpression(x) ||
    (ts.isElementAccessExpression(x) && isLiteralKey(x.argumentExpression))
  )
    x = stripParens(x.expression);
  return ts.isIdentifier(x);
}

/** The identifier a member chain starts from (`Object` for `Object.prototype.x`), or null. */
function rootName(e: ts.Expression): string | null {
  let x = stripParens(e);
  while (ts.isPropertyAccessExpression(x) || ts.isElementAccessExpression(x) || ts.isCallExpression(x))
    x = stripParens(x.expression);
  return ts.isIdentifier(x) ? x.text : null;
}

/** Member names along a chain (`a.b['c'].d` → b, c, d); computed non-literal names become '[]'. */
function chainNames(e: ts.Expression): string[] {
  const out: string[] = [];
  let x = stripParens(e);
  while (ts.isPropertyAccessExpression(x) || ts.isElementAccessExpression(x) || ts.isCallExpression(x)) {
    if (ts.isPropertyAccessExpression(x)) out.unshift(x.name.text);
    else if (ts.isElementAccessExpression(x)) {
      const a = stripParens(x.argumentExpression);
      out.unshift(ts.isStringLiteralLike(a) || ts.isNumericLiteral(a) ? a.text : '[]');
    } else out.unshift('()');
    x = stripParens(x.expression);
  }
  return out;
}

/** Does this expression denote a builtin, a global object, or a prototype reached through one? */
function builtinTarget(e: ts.Expression, scope: Scope): string | null {
  const root = rootName(e);
  const names = chainNames(e);
  if (root === null) {
    // `(0, Object.getPrototypeOf)(x)`, `[].constructor.prototype`: reached without a name.
    return names.some((n) => n === 'prototype' || n === '__proto__' || n === 'constructor')
      ? 'prototype'
      : null;
  }
  const resolved = scope.aliases.get(root) ?? (scope.declared.has(root) ? null : root);
  if (resolved && (BUILTINS.has(resolved) || GLOBAL_OBJECTS.has(resolved))) return resolved;
  if (names.includes('__proto__') || names.includes('getPrototypeOf')) return 'prototype';
  if (names.includes('constructor') && names.includes('prototype')) return 'prototype';
  return null;
}

function excerpt(sf: ts.SourceFile, node: ts.Node): string {
  const t = node.getText(sf).replace(/\s+/g, ' ');
  return t.length > 80 ? `${t.slice(0, 77)}...` : t;
}

function isLiteralKey(e: ts.Expression): boolean {
  const x = stripParens(e);
  return ts.isStringLiteralLike(x) || ts.isNumericLiteral(x);
}

interface Walk {
  sf: ts.SourceFile;
  scope: Scope;
  role: Role;
  /** Records one occurrence of a rule; `key` for keyed rules (what is reached). */
  hit(rule: string, node: ts.Node, key?: string): void;
}

function checkModule(w: Walk, node: ts.Node): void {
  const load = loadAt(node, w.scope.consts, w.scope.loaders, !w.scope.declared.has('require'));
  if (load === null) return;
  const spec = load.folded ?? load.literal;
  if (/^(?:node:)?process$/.test(spec) && ts.isImportDeclaration(node)) {
    const b = node.importClause?.namedBindings;
    if (b && ts.isNamedImports(b))
      for (const e of b.elements) checkProcessMember(w, (e.propertyName ?? e.name).text, e);
  }
  if (load.literal === '[]') w.hit('computed import or require', node);
  if (spec === '[]') return;
  checkAllowed(w, load, spec);
  if (ENGINE_MODULES.test(spec)) w.hit('process, thread, loader or engine module', node);
  else if (w.role === 'source' && RUNNER_MODULE.test(spec))
    w.hit('test framework imported by a source module', node);
  else if (w.role === 'tests' && /^(?:node:)?fs(?:\/promises)?$/.test(spec))
    w.hit('file system imported by a test file', node);
}

/**
 * The allow-list of loads: pure builtins, workspace modules, a test file's runner, and (in addedTamper)
 * whatever the original loads. A static import of `node:process` is the process global under another
 * name (its members go through the process rules); any other load of it is not.
 */
function checkAllowed(w: Walk, load: ModuleLoad, spec: string): void {
  const key = moduleKey(spec, w.role);
  const staticProcess = key === 'node:process' && ts.isImportDeclaration(load.node);
  if (!staticProcess && !admitted(key, spec, w.role, (name) => RUNNER_MODULE.test(name)))
    w.hit(RULES.modules, load.node, key);
}

/** A member of the process object read or destructured: the channels, then the allow-list. */
function checkProcessMember(w: Walk, key: string, node: ts.Node): void {
  if (key === 'default') return;
  if (PROCESS_CHANNELS.test(key)) w.hit('process channels (exit, signals, stdio, ipc, argv)', node);
  if (!PROCESS_SAFE.has(key)) w.hit(RULES.processMembers, node, key);
}

function checkWrite(w: Walk, target: ts.Expression, node: ts.Node): void {
  const t = stripParens(target);
  if (ts.isIdentifier(t) && BUILTINS.has(t.text) && !w.scope.declared.has(t.text)) {
    w.hit('write to a builtin, a global or a prototype', node);
    return;
  }
  if (!ts.isPropertyAccessExpression(t) && !ts.isElementAccessExpression(t)) return;
  const builtin = builtinTarget(t.expression, w.scope);
  const names = chainNames(t);
  const root = rootName(t);
  if (builtin) w.hit('write to a builtin, a global or a prototype', node);
  else if (
    names.includes('task') ||
    (root !== null && TASK_ROOTS.has(root) && TASK_KEYS.has(names.at(-1) ?? ''))
  )
    w.hit("write to the runner's per-test state", node);
}

/** `ctx.task`, `task.result`, `t.mode`: the runner's per-test state. */
function isTaskState(e: ts.Expression): boolean {
  const names = chainNames(e);
  const root = rootName(e);
  return (
    names.includes('task') || (root !== null && TASK_ROOTS.has(root) && TASK_KEYS.has(names.at(-1) ?? root))
  );
}

/** The builtin family and method a call goes to: `Object.defineProperty(...)`, or an alias of it. */
function reflectiveCall(w: Walk, callee: ts.Expression): [string, string] | null {
  if (ts.isIdentifier(callee)) {
    const family = w.scope.aliases.get(callee.text);
    return family ? [family, callee.text] : null;
  }
  const names = chainNames(callee);
  const root = rootName(callee);
  const family = root ? (w.scope.aliases.get(root) ?? (w.scope.declared.has(root) ? null : root)) : null;
  return family && names.length === 1 ? [family, names[0]!] : null;
}

function isFunctionConstructor(w: Walk, callee: ts.Expression, args: number): boolean {
  if (ts.isIdentifier(callee)) return callee.text === 'Function' && !w.scope.declared.has('Function');
  // `(() => {}).constructor('code')`, `Object.getPrototypeOf(async () => {}).constructor(...)`.
  return args > 0 && chainNames(callee).at(-1) === 'constructor';
}

function checkCall(w: Walk, node: ts.CallExpression): void {
  const callee = stripParens(node.expression);
  const names = chainNames(callee);
  const last = names.at(-1) ?? (ts.isIdentifier(callee) ? callee.text : '');
  const root = rootName(callee);
  const resolved = root ? (w.scope.aliases.get(root) ?? (w.scope.declared.has(root) ? null : root)) : null;
  const direct = ts.isIdentifier(callee) ? resolved : null;
  if ((last === 'eval' && names.length > 0) || direct === 'eval' || direct === 'Function')
    w.hit('eval or Function', node);
  else if (isFunctionConstructor(w, callee, node.arguments.length)) w.hit('eval or Function', node);
  const fd = node.arguments[0] ? stripParens(node.arguments[0]) : null;
  if (
    /^(?:write|writeSync|writev|writevSync)$/.test(last) &&
    fd &&
    ts.isNumericLiteral(fd) &&
    (fd.text === '1' || fd.text === '2')
  )
    w.hit('process channels (exit, signals, stdio, ipc, argv)', node);
  if (
    /^set(?:Timeout|Interval|Immediate)$/.test(last) &&
    node.arguments[0] &&
    ts.isStringLiteralLike(stripParens(node.arguments[0]))
  )
    w.hit('eval or Function', node);
  const call = reflectiveCall(w, callee);
  const first = node.arguments[0];
  if (call && first && REFLECTIVE_WRITE.get(call[0])?.has(call[1]) && isTaskState(first))
    w.hit("write to the runner's per-test state", node);
  if (call && first && builtinTarget(first, w.scope)) {
    if (REFLECTIVE_WRITE.get(call[0])?.has(call[1]))
      w.hit('write to a builtin, a global or a prototype', node);
    if (call[0] === 'Reflect' && /^(?:get|apply|construct|ownKeys|getOwnPropertyDescriptor)$/.test(call[1]))
      w.hit('computed access to a builtin or a global', node);
  }
  if (call && call[0] === 'Symbol' && call[1] === 'for') w.hit('global symbol registry', node);
  if (w.role === 'tests') checkTestCall(w, node, root, last);
}

/** Calls a test file makes to pass without testing: extending matchers, reading the code under test. */
function checkTestCall(w: Walk, node: ts.CallExpression, root: string | null, last: string): void {
  if (
    (root === 'expect' && /^(?:extend|addEqualityTesters|addSnapshotSerializer)$/.test(last)) ||
    (root === 'chai' && last === 'use')
  )
    w.hit('matchers extended by a test file', node);
  if (/^(?:readFileSync|readFile|createReadStream|openSync)$/.test(last))
    w.hit('file system imported by a test file', node);
  const callee = stripParens(node.expression);
  const target = ts.isPropertyAccessExpression(callee) ? stripParens(callee.expression) : null;
  const onImport = target !== null && ts.isIdentifier(target) && w.scope.relativeImports.has(target.text);
  const names = chainNames(callee);
  if ((last === 'toString' && onImport) || (names.includes('toString') && names.includes('prototype')))
    w.hit('function source read by a test file', node);
}

function checkAccess(w: Walk, node: ts.PropertyAccessExpression | ts.ElementAccessExpression): void {
  const obj = stripParens(node.expression);
  const root = ts.isIdentifier(obj) ? obj.text : null;
  const resolved = root ? (w.scope.aliases.get(root) ?? (w.scope.declared.has(root) ? null : root)) : null;
  if (
    ts.isElementAccessExpression(node) &&
    !isLiteralKey(node.argumentExpression) &&
    builtinTarget(obj, w.scope)
  )
    w.hit('computed access to a builtin or a global', node);
  // A key folded from constants (`const k = 'getBuilt' + 'inModule'`) is read as written.
  const key = ts.isPropertyAccessExpression(node)
    ? node.name.text
    : isLiteralKey(node.argumentExpression)
      ? (stripParens(node.argumentExpression) as ts.StringLiteralLike).text
      : foldString(node.argumentExpression, w.scope.consts);
  if (key === null) return;
  if (
    !ts.isPropertyAccessExpression(node) &&
    !isLiteralKey(node.argumentExpression) &&
    LOADER_NAMES.test(key)
  )
    w.hit(RULES.loader, node, key);
  if (isProcess(obj, w.scope)) checkProcessMember(w, key, node);
  else if (resolved === 'process' && PROCESS_CHANNELS.test(key))
    w.hit('process channels (exit, signals, stdio, ipc, argv)', node);
  if (w.role === 'source' && resolved && GLOBAL_OBJECTS.has(resolved) && RUNNER_GLOBALS.has(key))
    w.hit('test framework global used by a source module', node);
  if (resolved && GLOBAL_OBJECTS.has(resolved) && key === 'process')
    w.hit('process channels (exit, signals, stdio, ipc, argv)', node);
  if (resolved && GLOBAL_OBJECTS.has(resolved) && /^(?:require|module)$/.test(key))
    w.hit(RULES.loader, node, key);
  if (resolved && GLOBAL_OBJECTS.has(resolved) && NETWORK_GLOBALS.has(key)) w.hit(RULES.network, node, key);
  if (isFreeName(w, obj, 'require')) w.hit(RULES.loader, node, `require.${key}`);
  if (isFreeName(w, obj, 'module') && key !== 'exports') w.hit(RULES.loader, node, `module.${key}`);
}

function isFreeName(w: Walk, e: ts.Expression, name: string): boolean {
  return ts.isIdentifier(e) && e.text === name && !w.scope.declared.has(name);
}

/** A name of the loader's or the process's internals, wherever it is written (member, key, string). */
function checkInternalName(w: Walk, node: ts.Node): void {
  let name: string | null = null;
  if (ts.isPropertyAccessExpression(node)) name = node.name.text;
  else if (ts.isStringLiteralLike(node)) name = node.text;
  else if (ts.isBindingElement(node))
    name =
      node.propertyName && (ts.isIdentifier(node.propertyName) || ts.isStringLiteralLike(node.propertyName))
        ? node.propertyName.text
        : ts.isIdentifier(node.name)
          ? node.name.text
          : null;
  else if (ts.isIdentifier(node) && isValueReference(node) && !w.scope.declared.has(node.text))
    name = node.text;
  if (name !== null && LOADER_NAMES.test(name)) w.hit(RULES.loader, node, name);
}

/** `const { exit, getBuiltinModule: g } = process`: each destructured key is a member read. */
function checkProcessDestructuring(w: Walk, node: ts.VariableDeclaration | ts.ParameterDeclaration): void {
  if (!node.initializer || !ts.isObjectBindingPattern(node.name) || !isProcess(node.initializer, w.scope))
    return;
  for (const el of node.name.elements) {
    const k = el.propertyName ?? el.name;
    if (ts.isIdentifier(k) || ts.isStringLiteralLike(k)) checkProcessMember(w, k.text, el);
    else w.hit('computed access to a builtin or a global', el);
  }
}

/** Is this identifier an expression (not a member name, a declared name, a key or a type)? */
function isValueReference(node: ts.Identifier): boolean {
  const p = node.parent;
  if (ts.isPropertyAccessExpression(p) && p.name === node) return false;
  if (
    (ts.isPropertyAssignment(p) ||
      ts.isMethodDeclaration(p) ||
      ts.isPropertySignature(p) ||
      ts.isPropertyDeclaration(p) ||
      ts.isGetAccessorDeclaration(p) ||
      ts.isSetAccessorDeclaration(p) ||
      ts.isMethodSignature(p) ||
      ts.isEnumMember(p) ||
      ts.isVariableDeclaration(p) ||
      ts.isParameter(p) ||
      ts.isFunctionDeclaration(p) ||
      ts.isFunctionExpression(p) ||
      ts.isClassDeclaration(p) ||
      ts.isClassExpression(p) ||
      ts.isInterfaceDeclaration(p) ||
      ts.isTypeAliasDeclaration(p) ||
      ts.isEnumDeclaration(p) ||
      ts.isModuleDeclaration(p)) &&
    p.name === node
  )
    return false;
  if (ts.isLabeledStatement(p) || ts.isBreakOrContinueStatement(p)) return false;
  if (ts.isBindingElement(p) && (p.name === node || p.propertyName === node)) return false;
  if (ts.isImportSpecifier(p) || ts.isExportSpecifier(p) || ts.isImportClause(p) || ts.isNamespaceImport(p))
    return false;
  if (ts.isImportEqualsDeclaration(p) || ts.isNamespaceExport(p)) return false;
  if (ts.isTypeReferenceNode(p) || ts.isQualifiedName(p) || ts.isTypeQueryNode(p)) return false;
  if (
    ts.isExpressionWithTypeArguments(p) &&
    ts.isHeritageClause(p.parent) &&
    p.parent.token === ts.SyntaxKind.ImplementsKeyword
  )
    return false;
  if (ts.isMetaProperty(p)) return false;
  return true;
}

/** The outermost of the parentheses and type assertions around an expression. */
function outermost(node: ts.Expression): ts.Expression {
  let x = node;
  while (
    ts.isParenthesizedExpression(x.parent) ||
    ts.isAsExpression(x.parent) ||
    ts.isNonNullExpression(x.parent) ||
    ts.isSatisfiesExpression(x.parent) ||
    ts.isTypeAssertionExpression(x.parent)
  )
    x = x.parent;
  return x;
}

/** Where reading the process object is only a test of its presence or a member read. */
function isInspectedOnly(node: ts.Expression): boolean {
  const p = node.parent;
  if ((ts.isPropertyAccessExpression(p) || ts.isElementAccessExpression(p)) && p.expression === node)
    return true;
  if (ts.isTypeOfExpression(p)) return true;
  if (ts.isPrefixUnaryExpression(p) && p.operator === ts.SyntaxKind.ExclamationToken) return true;
  if (ts.isBinaryExpression(p)) {
    const op = p.operatorToken.kind;
    if (
      op === ts.SyntaxKind.EqualsEqualsEqualsToken ||
      op === ts.SyntaxKind.ExclamationEqualsEqualsToken ||
      op === ts.SyntaxKind.EqualsEqualsToken ||
      op === ts.SyntaxKind.ExclamationEqualsToken
    )
      return true;
    if (
      p.left === node &&
      (op === ts.SyntaxKind.AmpersandAmpersandToken ||
        op === ts.SyntaxKind.BarBarToken ||
        op === ts.SyntaxKind.QuestionQuestionToken)
    )
      return true;
  }
  if (ts.isIfStatement(p) && p.expression === node) return true;
  if (ts.isConditionalExpression(p) && p.condition === node) return true;
  return false;
}

/**
 * The process object (or an alias of it) used as a value: handed to a function, stored in an object,
 * returned. Its members are then reached where the rules cannot see (`once(process, 'message')`).
 */
function checkProcessEscape(w: Walk, node: ts.Identifier): void {
  if (!isValueReference(node) || !isProcess(node, w.scope)) return;
  const e = outermost(node);
  if (isInspectedOnly(e)) return;
  const p = e.parent;
  // `const p = process` binds an alias the rules follow; `const { env } = process` reads members.
  if (ts.isVariableDeclaration(p) && p.initializer === e) return;
  if (
    ts.isBinaryExpression(p) &&
    p.right === e &&
    p.operatorToken.kind === ts.SyntaxKind.EqualsToken &&
    ts.isIdentifier(p.left)
  )
    return;
  // `vi.spyOn(process, 'exit')` (tests of a CLI): a read of the member it names.
  if (ts.isCallExpression(p) && p.arguments[0] === e && calleeLast(p.expression) === 'spyOn') {
    const member = p.arguments[1] ? foldString(p.arguments[1], w.scope.consts) : null;
    if (member !== null) {
      if (!PROCESS_SAFE.has(member)) w.hit(RULES.processMembers, p, member);
      return;
    }
  }
  w.hit(RULES.processEscape, node, 'process');
}

function calleeLast(callee: ts.Expression): string | null {
  const x = stripParens(callee);
  return ts.isPropertyAccessExpression(x) ? x.name.text : ts.isIdentifier(x) ? x.text : null;
}

/** A free `require` that is not called with a specifier: the loader itself taken as a value. */
function checkLoaderValue(w: Walk, node: ts.Identifier): void {
  if (!/^(?:require|module)$/.test(node.text) || w.scope.declared.has(node.text)) return;
  if (!isValueReference(node) || ts.isTypeOfExpression(node.parent)) return;
  const p = node.parent;
  if (ts.isCallExpression(p) && p.expression === node) return;
  // Members are keyed in checkAccess (`require.cache`, `module.exports` is the module's own).
  if ((ts.isPropertyAccessExpression(p) || ts.isElementAccessExpression(p)) && p.expression === node) return;
  w.hit(RULES.loader, node, node.text);
}

/** `fetch(…)`, `new WebSocket(…)`: the network, as a global. */
function checkNetwork(w: Walk, node: ts.Identifier): void {
  if (!NETWORK_GLOBALS.has(node.text) || w.scope.declared.has(node.text) || !isValueReference(node)) return;
  w.hit(RULES.network, node, node.text);
}

function checkIdentifier(w: Walk, node: ts.Identifier): void {
  if (w.role !== 'source' || !RUNNER_GLOBALS.has(node.text) || w.scope.declared.has(node.text)) return;
  const p = node.parent;
  // A property name (`x.expect`, `{ it: 1 }`) or a declaration name is not a reference to the global.
  if (ts.isPropertyAccessExpression(p) && p.name === node) return;
  if (
    (ts.isPropertyAssignment(p) || ts.isMethodDeclaration(p) || ts.isPropertySignature(p)) &&
    p.name === node
  )
    return;
  if (ts.isTypeReferenceNode(p) || ts.isQualifiedName(p)) return;
  w.hit('test framework global used by a source module', node);
}

function visitNode(w: Walk, node: ts.Node): void {
  checkModule(w, node);
  if (
    ts.isBinaryExpression(node) &&
    node.operatorToken.kind >= ts.SyntaxKind.FirstAssignment &&
    node.operatorToken.kind <= ts.SyntaxKind.LastAssignment
  )
    checkWrite(w, node.left, node);
  else if (
    (ts.isPrefixUnaryExpression(node) || ts.isPostfixUnaryExpression(node)) &&
    (node.operator === ts.SyntaxKind.PlusPlusToken || node.operator === ts.SyntaxKind.MinusMinusToken)
  )
    checkWrite(w, node.operand, node);
  else if (ts.isDeleteExpression(node)) checkWrite(w, node.expression, node);
  if (ts.isCallExpression(node)) checkCall(w, node);
  if (ts.isNewExpression(node)) {
    const callee = stripParens(node.expression);
    if (ts.isIdentifier(callee) && callee.text === 'Function' && !w.scope.declared.has('Function'))
      w.hit('eval or Function', node);
  }
  if (ts.isPropertyAccessExpression(node) || ts.isElementAccessExpression(node)) checkAccess(w, node);
  if (ts.isIdentifier(node)) {
    checkIdentifier(w, node);
    checkProcessEscape(w, node);
    checkLoaderValue(w, node);
    checkNetwork(w, node);
  }
  if (ts.isVariableDeclaration(node) || ts.isParameter(node)) checkProcessDestructuring(w, node);
  if (
    ts.isPropertyAccessExpression(node) ||
    ts.isStringLiteralLike(node) ||
    ts.isBindingElement(node) ||
    ts.isIdentifier(node)
  )
    checkInternalName(w, node);
  ts.forEachChild(node, (c) => visitNode(w, c));
}

/** Every rule's occurrences in one file (keyed rules with the key of each occurrence). */
export function tamperHits(text: string, fileName: string, role: Role): RuleHits[] {
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, scriptKind(fileName));
  const byRule = new Map<string, RuleHits>();
  const w: Walk = {
    sf,
    scope: collectScope(sf),
    role,
    hit(rule, node, key) {
      const r = byRule.get(rule) ?? { rule, hits: [], ...(KEYED.has(rule) ? { keys: [] } : {}) };
      r.hits.push(excerpt(sf, node));
      r.keys?.push(key ?? '');
      byRule.set(rule, r);
    },
  };
  visitNode(w, sf);
  const tells = text.match(INTERNALS) ?? [];
  if (tells.length > 0)
    byRule.set("the runner's or vtnode's internals named", {
      rule: "the runner's or vtnode's internals named",
      hits: tells,
    });
  return [...byRule.values()];
}

/**
 * Rules the candidate triggers more often than the original (a hard 0 each). A keyed rule counts the
 * candidate's occurrences whose key the original does not have: a candidate may load what the original
 * loads and reach what it reaches, as often as it likes, and nothing else.
 */
export function addedTamper(
  original: string,
  candidate: string,
  fileName: string,
  role: Role,
): AddedTamper[] {
  const before = new Map(tamperHits(original, fileName, role).map((r) => [r.rule, r]));
  const out: AddedTamper[] = [];
  for (const r of tamperHits(candidate, fileName, role)) {
    const was = before.get(r.rule);
    if (r.keys) {
      const known = new Set(was?.keys ?? []);
      const fresh = r.hits.filter((_, i) => !known.has(r.keys![i]!));
      if (fresh.length > 0) out.push({ name: r.rule, added: fresh.length, examples: fresh.slice(0, 3) });
      continue;
    }
    const added = r.hits.length - (was?.hits.length ?? 0);
    if (added > 0) out.push({ name: r.rule, added, examples: r.hits.slice(0, 3) });
  }
  return out;
}
