'use strict';
// Preloaded (`--require`) into the runner's main process only: the process that writes the report and
// runs no test code. The host hands it the report pipe at fd VTNODE_REPORT_FD (4), inherited like any
// fd, so every process it starts would inherit it too. This module re-opens the pipe with O_CLOEXEC at
// the same number before anything else runs: the test processes the runner starts never hold it, and
// the main itself is non-dumpable (it runs an exec-only node), so none can reach it through /proc. The
// variable is removed from the environment, so no child acts on it. Plain CommonJS: it runs under the
// workspace's own Node.

const fs = require('node:fs');

const FD_DIR = process.platform === 'linux' ? '/proc/self/fd/' : '/dev/fd/';

/** Opens the pipe at `fd` again (Node opens every file O_CLOEXEC) and puts the copy at `fd` itself. */
function closeOnExec(fd) {
  if (!fs.fstatSync(fd).isFIFO()) throw new Error(`vtnode: the report fd ${fd} is not a pipe`);
  const held = fs.openSync(FD_DIR + fd, 'w');
  fs.closeSync(fd);
  // The lowest free number comes first: holes below `fd` are filled until the copy lands on `fd`.
  const fillers = [];
  for (;;) {
    const again = fs.openSync(FD_DIR + held, 'w');
    if (again === fd) break;
    fillers.push(again);
    if (again > fd) throw new Error(`vtnode: the report fd ${fd} could not be re-opened in place`);
  }
  for (const f of [...fillers, held]) fs.closeSync(f);
}

/**
 * node:test opens its reporter destination with `flush: true` and fsyncs it when it closes: a pipe
 * refuses fsync (EINVAL) and the unhandled error would end the main with exit code 1 after its report.
 * An fsync of a pipe has nothing to flush, so in this process it succeeds.
 */
function fsyncPipes() {
  const isPipe = (fd) => {
    try {
      return fs.fstatSync(fd).isFIFO();
    } catch {
      return false;
    }
  };
  const { fsync, fsyncSync } = fs;
  fs.fsync = function fsyncOrPipe(fd, callback) {
    fsync(fd, (err) => callback(err?.code === 'EINVAL' && isPipe(fd) ? null : err));
  };
  fs.fsyncSync = function fsyncSyncOrPipe(fd) {
    try {
      fsyncSync(fd);
    } catch (err) {
      if (!(err?.code === 'EINVAL' && isPipe(fd))) throw err;
    }
  };
}

const wanted = process.env.VTNODE_REPORT_FD;
delete process.env.VTNODE_REPORT_FD;
if (wanted !== undefined) {
  closeOnExec(Number(wanted));
  fsyncPipes();
}
