#!/usr/bin/env node
// Entry point. vtnode runs its TypeScript sources directly (Node's built-in type stripping),
// which needs Node >= 22.18. Inside the repository, `npx vtnode` and npm scripts put the
// pinned Node 22 (devDependency `node`) first on the PATH.
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(
    `vtnode needs Node.js >= 22.18 (this is ${process.version}). Run it as \`npx vtnode\` inside the repository, ` +
      'which uses the pinned Node 22, or install Node 22.\n',
  );
  process.exit(1);
}
await import('../cli/main.ts');
