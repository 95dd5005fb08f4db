// The type-check service: a long-lived process that holds one project's parsed program and answers
// "what would `tsc --noEmit -p <tsconfig>` say if these files had this text?" per JSON line.
//
//   node service.mjs --root <workspace> [--typescript <typescript.js>] -- --noEmit -p tsconfig.json
//
// stdout, one JSON object per line: first {type:'ready', typescript, files, ...} or {type:'fatal', error},
// then one {type:'answer', id, status, diagnostics, diagnosticCount, api, cpuMs, scope, checkedFiles}
// per request line {id, overlay: {relPath: text}, target?: relPath}. Nothing else is ever written to
// stdout (console output goes to stderr). Exits when stdin closes.
//
// Plain JavaScript on purpose: it runs from vtnode's own folder, which is under node_modules when vtnode
// is installed as a package, and Node refuses to strip types there (ERR_UNSUPPORTED_NODE_MODULES_TYPE_
// STRIPPING); it also runs under the workspace's TypeScript, not vtnode's, so it cannot import vtnode's
// .ts modules. Its inputs are checked by hand in service/request.mjs and service/args.mjs.
import { createRequire } from 'node:module';
import { relative } from 'node:path';
import { createInterface } from 'node:readline';
import { resolveTypescript } from './resolve-typescript.mjs';
import { parseServiceArgs } from './service/args.mjs';
import { checkOverlay } from './service/check.mjs';
import { loadProject } from './service/project.mjs';
import { parseRequest } from './service/request.mjs';

// Anything a library prints must not corrupt the protocol on stdout.
console.log = console.error;
console.info = console.error;
// The client went away (it closed our stdout): nothing is left to answer.
process.stdout.on('error', () => process.exit(0));

/** @param {object} message */
function send(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

/** CPU time of this process so far, milliseconds (user + system). */
function cpuMs() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** @param {unknown} err */
function messageOf(err) {
  return err instanceof Error
    ? `${err.name === 'ServiceInputError' ? '' : `${err.name}: `}${err.message}`
    : String(err);
}

/** @param {import('./service/project.mjs').Project} project @param {string} line */
function answer(project, line) {
  const started = cpuMs();
  let id = null;
  try {
    const raw = JSON.parse(line);
    if (raw && typeof raw === 'object' && (typeof raw.id === 'string' || typeof raw.id === 'number'))
      id = raw.id;
    const request = parseRequest(project.root, raw);
    const result = checkOverlay(project, request);
    send({ type: 'answer', id: request.id, ...result, cpuMs: Math.round(cpuMs() - started) });
  } catch (err) {
    // Bad input or a crash inside TypeScript: an error, never a verdict about the candidate.
    send({
      type: 'answer',
      id,
      status: 'error',
      error: messageOf(err),
      cpuMs: Math.round(cpuMs() - started),
    });
  }
}

function main() {
  let project;
  try {
    const args = parseServiceArgs(process.argv.slice(2));
    const modulePath = args.typescript ?? resolveTypescript(args.root).modulePath;
    const ts = createRequire(import.meta.url)(modulePath);
    project = loadProject(ts, args);
    send({
      type: 'ready',
      typescript: ts.version,
      typescriptPath: modulePath,
      tsconfig: relative(args.root, project.configPath),
      files: project.program.getSourceFiles().length,
      importGraph: project.index.importers !== null,
      cpuMs: Math.round(cpuMs()),
    });
  } catch (err) {
    send({ type: 'fatal', error: messageOf(err) });
    process.exitCode = 2;
    return;
  }
  const lines = createInterface({ input: process.stdin, crlfDelay: Number.POSITIVE_INFINITY });
  lines.on('line', (line) => {
    if (line.trim() !== '') answer(project, line);
  });
}

main();
