import { doctorExitCode, renderChecks } from '../../node/doctor/checks.ts';
import { type Command, parseOptions } from '../command.ts';

const usage = `Usage: vtnode doctor [--data-dir DIR] [--json]

Checks what a node needs, with the options saved in its data dir: the Node.js version, the node's
identity, whether its daemon runs, the sandbox and its self-test, each model server (reachable, its
models, loaded or not), each workspace (its test runner, dependencies and type-checker resolve, its
packages are built), the listen ports (free, or held by this node's daemon), free disk in the data dir,
and the clock against the fleet's adverts (when the daemon runs). Every check that does not pass says
how to fix it. Exits 1 when a check fails.

Options:
  --data-dir DIR   the node (default $VTNODE_HOME or ~/.vtnode)
  --json           print { ok, checks: [{ name, status: ok|warn|fail|skipped, detail, fix }] }`;

export const command: Command = {
  name: 'doctor',
  summary: 'check this machine and node: sandbox, model servers, workspaces, ports, disk, clock',
  usage,
  async run(argv) {
    const { values } = parseOptions(
      argv,
      { 'data-dir': { type: 'string' }, json: { type: 'boolean' } },
      usage,
    );
    const { resolveDataDir } = await import('../../node/data-dir.ts');
    const { runDoctor } = await import('../../node/doctor/doctor.ts');
    const abort = new AbortController();
    const onSignal = () => abort.abort();
    process.once('SIGINT', onSignal);
    try {
      const checks = await runDoctor({ dataDir: resolveDataDir(values['data-dir']), signal: abort.signal });
      const code = doctorExitCode(checks);
      process.stdout.write(
        values.json ? `${JSON.stringify({ ok: code === 0, checks }, null, 2)}\n` : renderChecks(checks),
      );
      return code;
    } finally {
      process.removeListener('SIGINT', onSignal);
    }
  },
};
