// The service's own command line: `service.mjs --root DIR [--typescript MODULE] -- <tsc arguments>`.
import { statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

/** Input the service refuses: the message names the input and the field. */
export class ServiceInputError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'ServiceInputError';
  }
}

/**
 * @typedef {object} ServiceArgs
 * @property {string} root absolute workspace root: overlay paths and reported file names are relative to it
 * @property {string | null} typescript absolute path of the TypeScript module to load (null: resolve it)
 * @property {string[]} tscArgs the arguments `tsc` would get (`--noEmit -p tsconfig.json`)
 */

/**
 * @param {string[]} argv process.argv.slice(2)
 * @returns {ServiceArgs}
 */
export function parseServiceArgs(argv) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: { root: { type: 'string' }, typescript: { type: 'string' } },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw new ServiceInputError(`service arguments: ${/** @type {Error} */ (err).message}`);
  }
  const { root, typescript } = parsed.values;
  if (root === undefined || !isAbsolute(root))
    throw new ServiceInputError('service arguments: --root must be an absolute path');
  if (!statSync(root, { throwIfNoEntry: false })?.isDirectory())
    throw new ServiceInputError(`service arguments: --root ${root} is not a directory`);
  if (typescript !== undefined && !isAbsolute(typescript))
    throw new ServiceInputError('service arguments: --typescript must be an absolute path');
  return { root, typescript: typescript ?? null, tscArgs: parsed.positionals };
}

/**
 * What `tsc <args>` would type-check, as `tsc` itself reads its command line: the tsconfig and the
 * options that override it. Only the `tsc --noEmit [-p X] [options]` shape is served; anything else
 * (`--build`, `--watch`, files on the command line, emitting) is refused so the caller runs tsc itself.
 * @param {typeof import('typescript')} ts
 * @param {string[]} args
 * @param {string} root the folder tsc would run in
 * @returns {{ configPath: string, options: import('typescript').CompilerOptions }}
 */
export function tscCommandLine(ts, args, root) {
  if (args[0] === '-b' || args[0] === '--build')
    throw new ServiceInputError('tsc arguments: --build is not supported');
  const cl = ts.parseCommandLine(args);
  if (cl.errors.length > 0)
    throw new ServiceInputError(
      `tsc arguments: ${cl.errors.map((d) => ts.flattenDiagnosticMessageText(d.messageText, ' ')).join('; ')}`,
    );
  if (cl.fileNames.length > 0)
    throw new ServiceInputError(
      `tsc arguments: files on the command line (${cl.fileNames.join(' ')}) are not supported`,
    );
  for (const flag of [
    'watch',
    'build',
    'init',
    'showConfig',
    'listFilesOnly',
    'version',
    'help',
    'all',
    'generateTrace',
  ])
    if (cl.options[flag]) throw new ServiceInputError(`tsc arguments: --${flag} is not supported`);
  if (cl.options.noEmit !== true)
    throw new ServiceInputError(
      'tsc arguments: only `tsc --noEmit` is served (without it tsc would emit files)',
    );
  let configPath;
  if (typeof cl.options.project === 'string') {
    const p = resolve(root, cl.options.project);
    configPath = ts.sys.directoryExists(p) ? join(p, 'tsconfig.json') : p;
    if (!ts.sys.fileExists(configPath))
      throw new ServiceInputError(`tsc arguments: --project ${configPath} does not exist`);
  } else {
    configPath = ts.findConfigFile(root, ts.sys.fileExists);
    if (!configPath)
      throw new ServiceInputError(`tsc arguments: no --project and no tsconfig.json in ${root} or above`);
  }
  return { configPath, options: cl.options };
}
