import type { Dirent } from 'node:fs';
import { lstat, readdir, readFile, realpath, stat } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { findInstallRoot } from './install-root.ts';

/*
 * How a box is laid out. A box must resolve every module exactly as the real checkout does, show the
 * candidate wherever the workspace's own code is reached (relative imports, self-imports, workspace
 * links in node_modules), and never show the reference. Copying node_modules would be slow, and binding
 * the install root would expose the reference, so the box mirrors the install root instead:
 *
 *   <box root>/                      mirrors the install root (the monorepo root; the workspace itself
 *     package.json, tsconfig…        when it is not a member): its regular files, copied (configs that
 *     node_modules/                  members extend); a folder of links per node_modules on the way
 *     packages/x/                    <- the box's workspace copy (Box.dir), cloned copy-on-write
 *       node_modules/                a folder of links: the workspace's own entries, then every
 *                                    ancestor's, nearest first (what Node finds walking up)
 *       packages/y/node_modules/     nested node_modules: a folder of links each
 *
 * A link to a dependency points at its real path, which the sandbox binds read-only. A link whose real
 * path is inside the workspace (a workspace member, the package itself) points into the box's copy.
 * A link to another package outside the workspace (a sibling member when a member is mined) is bound
 * read-only, unless it contains the workspace (never bound: that would expose the reference).
 * This file is pure apart from scanWorkspace(); box.ts executes the plan.
 */

/** One entry of a node_modules folder, as found on disk. */
export interface ModuleEntry {
  /** Name inside the folder: `vitest`, `@scope/pkg`, `.bin/tsc`. */
  name: string;
  /** Real path the entry leads to (symlinks followed); null when it dangles. */
  real: string | null;
  /** True when the entry is a symlink (false: a real folder or file, i.e. an installed copy). */
  link: boolean;
}

/** A node_modules folder: on the resolution path of the workspace, or nested inside it. */
export interface ModulesDir {
  /** Path of the folder relative to the install root (`node_modules`, `packages/x/node_modules`). */
  path: string;
  /** Real path of the folder: bound read-only. */
  real: string;
  entries: ModuleEntry[];
  /** Entry names of a pnpm store (`.pnpm`) inside it, when there is one. */
  store: string[];
}

/** What a box layout is planned from: read from disk by scanWorkspace(). */
export interface WorkspaceScan {
  /** Real path of the workspace. */
  workspace: string;
  /** Real path of the install root: the workspace, or the monorepo root it is a member of. */
  installRoot: string;
  /** Install-root-relative regular files of the install root and of the folders down to the workspace. */
  ancestorFiles: string[];
  /** Workspace-relative folder -> entry names, for the folders on the way to nested node_modules ('' = root). */
  listings: Record<string, string[]>;
  /** node_modules folders from the workspace up to the install root, nearest first. */
  chain: ModulesDir[];
  /** node_modules folders inside the workspace below its root (members of a monorepo root). */
  nested: ModulesDir[];
  /** Names of the packages inside the workspace (its own and its members'). */
  ownPackages: string[];
}

/** A symlink to create: box-root-relative path -> absolute target. */
export interface PlannedLink {
  path: string;
  target: string;
}

/** What box.ts does to build a box, in order: folders, clones, copies, links. */
export interface BoxPlan {
  /** Box-root-relative path of the workspace copy ('' when the workspace is the install root). */
  workspaceDir: string;
  /** Box-root-relative folders to create, parents first. */
  dirs: string[];
  /** Copy-on-write clones: absolute source -> box-root-relative destination folder. */
  clones: { from: string; into: string }[];
  /** Links to create (node_modules entries). */
  links: PlannedLink[];
  /** Absolute real paths the sandbox must bind read-only (besides the box). */
  readOnly: string[];
  /** Entries left out, with the reason (a dangling link, a link to a folder holding the workspace). */
  dropped: { path: string; reason: string }[];
}

/** The workspace's node_modules cannot be shown without exposing the reference: no box is made. */
export class BoxLayoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BoxLayoutError';
  }
}

/** Cache folders tools write inside node_modules: each box gets its own (empty) instead of a link. */
const BOX_CACHES = new Set(['.vite', '.vite-temp', '.cache']);
/** Never copied into a box: VCS data holds every version of the reference. */
const SKIPPED = new Set(['.git']);
/** Hidden files of ancestor folders that configure tools (others may hold credentials: .npmrc, .env). */
const ANCESTOR_DOTFILES = /^\.(babelrc|swcrc|mocharc|browserslistrc)/;
/** Ancestor files larger than this are not configs (lockfiles of big monorepos): not copied. */
const MAX_ANCESTOR_FILE = 1024 * 1024;

const posixRel = (from: string, to: string) => relative(from, to).split(sep).join('/');
const within = (parent: string, p: string) => p === parent || p.startsWith(`${parent}/`);
const joinRel = (...parts: string[]) => parts.filter((p) => p !== '').join('/');

/**
 * The layout of a box whose root is `boxRoot`: pure, so it can be tested and reasoned about alone.
 * Throws BoxLayoutError when node_modules holds an installed copy of one of the workspace's own
 * packages (npm `install-links`, pnpm `injected`, yarn `file:`): that copy is the reference.
 */
export function boxLayout(scan: WorkspaceScan, boxRoot: string): BoxPlan {
  const W = scan.workspace;
  const workspaceDir = posixRel(scan.installRoot, W);
  const modules = [...scan.chain, ...scan.nested];
  refuseCopiesOfOwnPackages(scan, modules);
  const plan: BoxPlan = { workspaceDir, dirs: [], clones: [], links: [], readOnly: [], dropped: [] };
  const dirs = new Set<string>();
  const mkdir = (p: string) => {
    const parts = p.split('/');
    for (let i = 1; i <= parts.length; i++) {
      const d = parts.slice(0, i).join('/');
      if (d !== '' && !dirs.has(d)) {
        dirs.add(d);
        plan.dirs.push(d);
      }
    }
  };

  // The install root's files and those of the folders down to the workspace (a member's tsconfig
  // extends ../../tsconfig.base.json); the folders themselves are made for them.
  for (const f of scan.ancestorFiles) {
    mkdir(dirname(f) === '.' ? '' : dirname(f));
    plan.clones.push({ from: join(scan.installRoot, f), into: dirname(f) === '.' ? '' : dirname(f) });
  }
  if (workspaceDir !== '') mkdir(workspaceDir);
  cloneWorkspace(scan, workspaceDir, plan, mkdir);

  const target = (entry: ModuleEntry, at: string): string | null => {
    if (entry.real === null) {
      plan.dropped.push({ path: at, reason: 'dangling link' });
      return null;
    }
    const real = entry.real;
    if (modules.some((m) => within(m.real, real))) return real;
    if (within(W, real)) return join(boxRoot, workspaceDir, posixRel(W, real));
    if (within(real, W)) {
      plan.dropped.push({ path: at, reason: `links to ${real}, which contains the workspace` });
      return null;
    }
    if (!plan.readOnly.includes(real)) plan.readOnly.push(real);
    return real;
  };
  const linkFolder = (folder: string, entries: ModuleEntry[]) => {
    mkdir(folder);
    const taken = new Set<string>();
    for (const e of entries) {
      if (BOX_CACHES.has(e.name) || taken.has(e.name)) continue;
      taken.add(e.name);
      const at = joinRel(folder, e.name);
      const t = target(e, at);
      if (t === null) continue;
      if (e.name.includes('/')) mkdir(dirname(at));
      plan.links.push({ path: at, target: t });
    }
  };

  for (const m of modules) if (!plan.readOnly.includes(m.real)) plan.readOnly.push(m.real);
  // The workspace's own node_modules: its entries, then every ancestor's, nearest first.
  linkFolder(
    joinRel(workspaceDir, 'node_modules'),
    scan.chain.flatMap((m) => m.entries),
  );
  // Each ancestor's own folder, for configs and files outside the workspace that resolve from there.
  for (const m of scan.chain)
    if (m.path !== joinRel(workspaceDir, 'node_modules')) linkFolder(m.path, m.entries);
  for (const m of scan.nested) linkFolder(m.path, m.entries);
  assertNothingExposesWorkspace(plan.readOnly, W, modules);
  return plan;
}

/** Clones the workspace's entries, descending only into folders that hold nested node_modules. */
function cloneWorkspace(
  scan: WorkspaceScan,
  workspaceDir: string,
  plan: BoxPlan,
  mkdir: (p: string) => void,
) {
  const carved = scan.nested.map((m) => posixRel(scan.workspace, join(scan.installRoot, m.path)));
  const visit = (dir: string) => {
    for (const name of scan.listings[dir] ?? []) {
      const rel = joinRel(dir, name);
      if (SKIPPED.has(name) || (dir === '' && name === 'node_modules') || carved.includes(rel)) continue;
      if (carved.some((c) => c.startsWith(`${rel}/`))) {
        mkdir(joinRel(workspaceDir, rel));
        visit(rel);
      } else plan.clones.push({ from: join(scan.workspace, rel), into: joinRel(workspaceDir, dir) });
    }
  };
  visit('');
}

function refuseCopiesOfOwnPackages(scan: WorkspaceScan, modules: ModulesDir[]) {
  const own = new Set(scan.ownPackages);
  for (const m of modules) {
    for (const e of m.entries) {
      const intoWorkspace =
        e.real !== null && within(scan.workspace, e.real) && !modules.some((n) => within(n.real, e.real!));
      if (!own.has(e.name) || e.real === null || intoWorkspace) continue;
      throw new BoxLayoutError(
        `${join(scan.installRoot, m.path, e.name)} is an installed copy of the workspace's own package ${e.name} (not a link to it): it holds the reference, so no box can hide it. Link workspace packages instead (npm: install-links=false; pnpm: no injected dependencies; yarn: workspace: or link: instead of file:)`,
      );
    }
    for (const name of m.store) {
      const copied = [...own].find((p) => name.startsWith(`${p.replace('/', '+')}@file+`));
      if (copied)
        throw new BoxLayoutError(
          `${join(m.real, '.pnpm', name)} is an injected copy of the workspace's own package ${copied}: it holds the reference, so no box can hide it (remove dependenciesMeta.injected)`,
        );
    }
  }
}

/** The security invariant, checked on every plan: no read-only bind contains the workspace. */
function assertNothingExposesWorkspace(readOnly: string[], W: string, modules: ModulesDir[]) {
  for (const p of readOnly) {
    if (within(p, W))
      throw new BoxLayoutError(`refusing to bind ${p} read-only: it contains the workspace (the reference)`);
    if (within(W, p) && !modules.some((m) => within(m.real, p)))
      throw new BoxLayoutError(`refusing to bind ${p} read-only: it is inside the workspace`);
  }
}

async function listModules(root: string, folder: string): Promise<ModulesDir | null> {
  const abs = join(root, folder);
  const real = await realpath(abs).catch(() => null);
  if (real === null || !(await stat(real)).isDirectory()) return null;
  const entries: ModuleEntry[] = [];
  const add = async (name: string) => {
    const st = await lstat(join(real, name)).catch(() => null);
    if (!st) return;
    entries.push({
      name,
      real: await realpath(join(real, name)).catch(() => null),
      link: st.isSymbolicLink(),
    });
  };
  for (const d of await readdir(real, { withFileTypes: true })) {
    // Scopes and .bin are folders of entries: each entry is linked on its own, so they can be merged.
    if ((d.name.startsWith('@') || d.name === '.bin') && d.isDirectory())
      for (const inner of await readdir(join(real, d.name))) await add(`${d.name}/${inner}`);
    else await add(d.name);
  }
  const store = await readdir(join(real, '.pnpm')).catch(() => [] as string[]);
  return { path: folder, real, entries, store };
}

async function packageName(dir: string): Promise<string | null> {
  try {
    const json = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')) as { name?: unknown };
    return typeof json.name === 'string' ? json.name : null;
  } catch {
    return null;
  }
}

/**
 * Reads what boxLayout needs from disk: the install root, node_modules on the resolution path and
 * inside the workspace (with their entries' real paths), the folders on the way to nested ones, the
 * ancestors' config files, and the workspace's own package names. Follows no link out of the workspace
 * while walking it.
 */
export async function scanWorkspace(workspacePath: string): Promise<WorkspaceScan> {
  const workspace = await realpath(workspacePath);
  const installRoot = findInstallRoot(workspace);
  const chain: ModulesDir[] = [];
  for (let d = workspace; within(installRoot, d); d = dirname(d)) {
    const m = await listModules(installRoot, joinRel(posixRel(installRoot, d), 'node_modules'));
    if (m) chain.push(m);
    if (d === installRoot) break;
  }
  const listings: Record<string, string[]> = {};
  const nestedPaths: string[] = [];
  const ownPackages: string[] = [];
  const walk = async (rel: string, entries: Dirent[]) => {
    for (const d of entries) {
      if (d.name === 'package.json' && d.isFile()) {
        const name = await packageName(join(workspace, rel));
        if (name) ownPackages.push(name);
      }
      if (!d.isDirectory() || SKIPPED.has(d.name)) continue;
      const child = joinRel(rel, d.name);
      if (d.name === 'node_modules') {
        if (rel !== '') nestedPaths.push(child);
        continue;
      }
      await walk(child, await readdir(join(workspace, child), { withFileTypes: true }));
    }
  };
  const top = await readdir(workspace, { withFileTypes: true });
  listings[''] = top.map((d) => d.name);
  await walk('', top);
  const nested: ModulesDir[] = [];
  for (const p of nestedPaths) {
    const m = await listModules(installRoot, joinRel(posixRel(installRoot, workspace), p));
    if (m) nested.push(m);
    // The folders on the way to it are descended into rather than cloned whole.
    const parts = p.split('/');
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      listings[dir] ??= await readdir(join(workspace, dir));
    }
  }
  const ancestorFiles: string[] = [];
  for (let d = dirname(workspace); within(installRoot, d) && d !== workspace; d = dirname(d)) {
    for (const e of await readdir(d, { withFileTypes: true })) {
      if (!e.isFile() || (e.name.startsWith('.') && !ANCESTOR_DOTFILES.test(e.name))) continue;
      if ((await stat(join(d, e.name))).size > MAX_ANCESTOR_FILE) continue;
      ancestorFiles.push(joinRel(posixRel(installRoot, d), e.name));
    }
    if (d === installRoot) break;
  }
  return { workspace, installRoot, ancestorFiles, listings, chain, nested, ownPackages };
}
