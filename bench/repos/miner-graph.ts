/**
 * What the miner's own import graph (node/tasks: parse, resolve, graph, analyse) reaches when it is
 * handed the bench's test files, whatever the runner: for a repository the miner refuses today (jest,
 * mocha), this shows how much of it the graph would still lose once the runner is supported.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { analyse } from '../../node/tasks/analyse.ts';
import { isCodeFile, listWorkspaceFiles } from '../../node/tasks/files.ts';
import { buildGraph } from '../../node/tasks/graph.ts';
import { isParseFailure, type ParsedFile, parseFile } from '../../node/tasks/parse.ts';
import { readProject } from '../../node/tasks/project.ts';
import { createResolver } from '../../node/tasks/resolve.ts';
import type { TestSelection } from '../../node/tasks/runner-common.ts';
import { type Reach, roleOf } from './reach.ts';

/** The miner graph's reach, compared with the bench's. */
export interface MinerGraphReach {
  /** Sources the miner's graph has some test exercising. */
  reachedSources: number;
  /** Of the bench's reached sources, how many the miner's graph reaches too. */
  agreedSources: number;
  /** Tests the miner's graph has exercising some source. */
  reachingTests: number;
}

/** Runs the miner's graph analysis over `root` with the bench's test files as the runner's tests. */
export async function minerGraphReach(
  root: string,
  reach: Reach,
  signal?: AbortSignal,
): Promise<MinerGraphReach> {
  const project = readProject(root, await listWorkspaceFiles(root));
  const parsed = new Map<string, ParsedFile>();
  for (const path of project.files.filter(isCodeFile)) {
    signal?.throwIfAborted();
    const result = parseFile(path, await readFile(join(root, path), 'utf8'));
    if (!isParseFailure(result)) parsed.set(path, result);
  }
  // Any runner: the bench decides which files are tests, the miner everything else.
  const selection: TestSelection = {
    isTestFile: (f: ParsedFile) => roleOf(f.path, f.text) === 'test',
    source: 'the bench',
    unsupported: null,
  };
  const analysis = analyse(project, parsed, selection, buildGraph(parsed, createResolver(project)));
  const reached = [...analysis.testsOf.keys()];
  return {
    reachedSources: reached.length,
    agreedSources: reached.filter((s) => reach.testsOf.has(s)).length,
    reachingTests: analysis.tests.filter((t) => analysis.exercised(t).length > 0).length,
  };
}
