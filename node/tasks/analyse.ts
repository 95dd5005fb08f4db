import { posix } from 'node:path';
import type { ImportGraph } from './graph.ts';
import { moduleOf, pairedSource } from './modules.ts';
import { getOrInsert } from './multimap.ts';
import type { ParsedFile } from './parse.ts';
import type { ProjectInfo } from './project.ts';
import { inTestDir, looksLikeTest, type TestSelection, TYPE_TEST_NAME } from './runners.ts';

/** What a file is to the miner. */
export type FileKind = 'source' | 'test' | 'typeTest' | 'support';

/** Tool configuration (vitest.config.ts, jest.config.js, .mocharc.js, .eslintrc.cjs, ...): never a source to mine. */
const TOOL_CONFIG = /(^|\/)([^/]+\.(config|workspace)|\.[^/]+rc)\.[cm]?[jt]sx?$/;

/** Which files are sources and tests, which tests exercise which sources, and the modules. */
export interface Analysis {
  kindOf: ReadonlyMap<string, FileKind>;
  /** Sorted paths per kind. */
  sources: string[];
  tests: string[];
  typeTests: string[];
  support: string[];
  /** Sources a test (or type test) exercises, sorted. */
  exercised(test: string): string[];
  /** Test files exercising each source, sorted. */
  testsOf: ReadonlyMap<string, string[]>;
  /** Type tests exercising each source, sorted. */
  typeTestsOf: ReadonlyMap<string, string[]>;
  /** Module of every source and test file. */
  moduleOfFile: ReadonlyMap<string, string>;
  /** Sources of each module, sorted. */
  moduleFiles: ReadonlyMap<string, string[]>;
  /** Modules that have non-barrel sources. */
  sourceModules: ReadonlySet<string>;
  /** Shared helpers: source -> number of other modules importing it at runtime. */
  shared: ReadonlyMap<string, number>;
  /** [test module, source module] for every source a test exercises: what groups are joined by. */
  links: [string, string][];
}

/** Classifies files, follows tests to the sources they exercise, and assigns modules. */
export function analyse(
  project: ProjectInfo,
  parsed: ReadonlyMap<string, ParsedFile>,
  selection: TestSelection,
  graph: ImportGraph,
): Analysis {
  const kindOf = new Map<string, FileKind>();
  for (const f of parsed.values()) {
    kindOf.set(
      f.path,
      TYPE_TEST_NAME.test(f.path)
        ? 'typeTest'
        : TOOL_CONFIG.test(f.path)
          ? 'support'
          : selection.isTestFile(f)
            ? 'test'
            : inTestDir(f.path) || looksLikeTest(f.path)
              ? 'support'
              : 'source',
    );
  }
  const ofKind = (k: FileKind) => [...parsed.keys()].filter((p) => kindOf.get(p) === k).sort();
  const sources = ofKind('source');
  const tests = ofKind('test');
  const typeTests = ofKind('typeTest');

  // Sources each test file exercises: what it imports (through barrels, by name, and through test helpers).
  const exercisedCache = new Map<string, string[]>();
  const exercised = (test: string): string[] => {
    const cached = exercisedCache.get(test);
    if (cached) return cached;
    const includeTypes = kindOf.get(test) === 'typeTest';
    const out = new Set<string>();
    const seen = new Set([test]);
    const visit = (file: string) => {
      for (const edge of graph.out(file)) {
        if (edge.ref.typeOnly && !includeTypes) continue;
        const k = kindOf.get(edge.to);
        if (k === 'support' && !seen.has(edge.to)) {
          seen.add(edge.to);
          visit(edge.to);
        } else if (k === 'source') {
          // Barrels only pass names through: the files they resolve to are what the test exercises.
          for (const f of graph.touched(edge.to, edge.ref.names))
            if (kindOf.get(f) === 'source' && !parsed.get(f)!.barrel) out.add(f);
        }
      }
    };
    visit(test);
    const list = [...out].sort();
    exercisedCache.set(test, list);
    return list;
  };
  const testsOf = new Map<string, string[]>();
  const typeTestsOf = new Map<string, string[]>();
  for (const [list, into] of [
    [tests, testsOf],
    [typeTests, typeTestsOf],
  ] as const) {
    for (const t of list)
      for (const s of exercised(t)) {
        const l = getOrInsert(into, s, () => []);
        l.push(t);
      }
  }

  // Modules: of sources by path; of tests by the source they pair with.
  const moduleOfFile = new Map<string, string>();
  for (const s of sources) moduleOfFile.set(s, moduleOf(project, s));
  for (const t of [...tests, ...typeTests]) {
    const ex = exercised(t);
    const paired = pairedSource(t, ex);
    let mod: string;
    // A folder-level test belongs to the folder it sits in (or mirrors, tests/a <-> src/a).
    const dir = posix.dirname(t);
    const tail = (p: string) => posix.dirname(p).split('/').slice(1).join('/');
    const local =
      ex.find((s) => posix.dirname(s) === dir) ?? ex.find((s) => tail(s) === tail(t) && tail(t) !== '');
    if (paired) mod = moduleOfFile.get(paired)!;
    else if (local) mod = moduleOfFile.get(local)!;
    else {
      const counts = new Map<string, number>();
      for (const s of ex) counts.set(moduleOfFile.get(s)!, (counts.get(moduleOfFile.get(s)!) ?? 0) + 1);
      const best = [...counts.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))[0];
      mod = best ? best[0] : moduleOf(project, t);
    }
    moduleOfFile.set(t, mod);
  }
  const moduleFiles = new Map<string, string[]>();
  for (const s of sources) {
    const m = moduleOfFile.get(s)!;
    const l = getOrInsert(moduleFiles, m, () => []);
    l.push(s);
  }

  // Shared helpers: sources that most other modules import at runtime.
  const sourceModules = new Set(
    sources.filter((s) => !parsed.get(s)!.barrel).map((s) => moduleOfFile.get(s)!),
  );
  const shared = new Map<string, number>();
  for (const s of sources) {
    const importers = new Set<string>();
    for (const e of graph.into(s))
      if (kindOf.get(e.from) === 'source' && !e.ref.typeOnly && !e.ref.reexports)
        importers.add(moduleOfFile.get(e.from)!);
    importers.delete(moduleOfFile.get(s)!);
    if (importers.size >= 3 && importers.size * 2 > sourceModules.size - 1) shared.set(s, importers.size);
  }

  const links: [string, string][] = [];
  for (const t of [...tests, ...typeTests])
    for (const s of exercised(t)) links.push([moduleOfFile.get(t)!, moduleOfFile.get(s)!]);
  return {
    kindOf,
    sources,
    tests,
    typeTests,
    support: ofKind('support'),
    exercised,
    testsOf,
    typeTestsOf,
    moduleOfFile,
    moduleFiles,
    sourceModules,
    shared,
    links,
  };
}
