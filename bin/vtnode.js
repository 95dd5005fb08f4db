#!/usr/bin/env -S node --max-semi-space-size=1
// Entry point. In the repository (cli/main.ts beside this folder) vtnode runs its TypeScript sources
// directly (Node's type stripping, Node >= 22.18; `npx vtnode` and npm scripts put the pinned Node 22,
// devDependency `node`, first on the PATH). Installed from the package, it runs the bundle in dist/
// (`npm run build`), which needs Node >= 22.13 (node:sqlite without a flag).
//
// The flag on the first line: a node (`vtnode start`) is a long-lived, mostly idle process; young-
// generation semi-spaces of 1 MiB instead of up to 16 MiB keep its resident memory low (docs/
// benchmarks.md) at the cost of more, shorter scavenges. V8 reads it only at start-up, so it is on the
// command line (a service unit that runs `node bin/vtnode.js start` should pass it too).
import { existsSync } from 'node:fs';

const sources = new URL('../cli/main.ts', import.meta.url);
const fromSources = existsSync(sources);
const [major, minor] = process.versions.node.split('.').map(Number);
const need = fromSources ? [22, 18] : [22, 13];
if (major < need[0] || (major === need[0] && minor < need[1])) {
  process.stderr.write(
    `vtnode needs Node.js >= ${need.join('.')} (this is ${process.version}). ` +
      (fromSources
        ? 'Run it as `npx vtnode` inside the repository, which uses the pinned Node 22, or install Node 22.\n'
        : 'Install Node.js 22 or later.\n'),
  );
  process.exit(1);
}
// The bundle ships its source maps (dist/*.js.map): NODE_OPTIONS=--enable-source-maps shows stack
// traces in the TypeScript sources. They are not loaded by default: parsing them costs tens of MiB.
await import(fromSources ? sources.href : '../dist/vtnode.js');
