'use strict';
// The workspace's own mocha configuration minus what selects, reports or stops tests, for vtnode's
// judge: `mocha --config <this file> --no-package ... <test files>`.
//
// Why a config module: mocha CONCATENATES the `spec` of .mocharc / package.json "mocha" with the files
// given on the command line, so passing the judged files alone would also run every spec of the
// config. This module loads the configuration exactly as mocha would (mocha's own loadRc and
// loadPkgRc, searching from the working directory), merges the two the way mocha does (the rc file
// first, arrays concatenated), and drops the options the judge owns. Everything else — require
// (ts-node/register, tsx, @babel/register), node-option, extension, ui, timeout, retries, file, grep —
// is the workspace's.
const { existsSync, readFileSync, realpathSync } = require('node:fs');
const { dirname, join } = require('node:path');

/** Options the judge decides (canonical mocha names): test selection, reporting, stopping early. */
const DROPPED = new Set([
  '_',
  'spec',
  'reporter',
  'reporter-option',
  'parallel',
  'jobs',
  'watch',
  'watch-files',
  'watch-ignore',
  'bail',
  'dry-run',
  'pass-on-failing-test-suite',
  'allow-uncaught',
  'fail-zero',
  'list-interfaces',
  'list-reporters',
  'config',
  'package',
]);

const ALIASES = {
  R: 'reporter',
  O: 'reporter-option',
  'reporter-options': 'reporter-option',
  p: 'parallel',
  j: 'jobs',
  w: 'watch',
  b: 'bail',
};

/** Mocha's option name for a config key (`reporterOptions`, `O` and `reporter-option` are one option). */
function canonical(key) {
  const dashed = key.length > 1 ? key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`) : key;
  return ALIASES[dashed] || ALIASES[key] || dashed;
}

/** The installed mocha running this process (its bin or lib/cli/cli.js is argv[1]). */
function mochaRoot() {
  let dir = dirname(realpathSync(process.argv[1]));
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && JSON.parse(readFileSync(pkg, 'utf8')).name === 'mocha') return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error(`vtnode mocharc: ${process.argv[1]} is not inside a mocha package`);
    dir = up;
  }
}

function mochaOptionsModule(root) {
  for (const name of ['options.cjs', 'options.js']) {
    const file = join(root, 'lib', 'cli', name);
    if (existsSync(file)) return require(file);
  }
  throw new Error(`vtnode mocharc: no lib/cli/options in ${root}`);
}

/** rc over package.json, arrays concatenated (mocha's own precedence). */
function merge(rc, pkg) {
  const out = {};
  for (const source of [pkg, rc]) {
    for (const [key, value] of Object.entries(source || {})) {
      const name = canonical(key);
      if (DROPPED.has(name)) continue;
      const prior = out[name];
      out[name] =
        prior !== undefined && (Array.isArray(prior) || Array.isArray(value))
          ? [].concat(value, prior)
          : value;
    }
  }
  return out;
}

const { loadRc, loadPkgRc } = mochaOptionsModule(mochaRoot());
module.exports = merge(loadRc({}), loadPkgRc({}));
