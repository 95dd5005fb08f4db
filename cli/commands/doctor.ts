import { doctorExitCode, renderChecks } from '../../node/doctor/checks.ts';
import type { Command } from '../command.ts';
import { commandLine, DATA_DIR, flag, group } from '../options.ts';

const line = commandLine({
  prose: `Usage: vtnode doctor [--data-dir DIR] [--json]

Checks what a node needs, with the options saved in its data dir: the Node.js version, the node's
identity, whether its daemon runs, the sandbox and its self-test, each model server (reachable, its
models, loaded or not), each workspace (its test runner, dependencies and type-checker resolve, its
packages are built), the listen ports (free, or held by this node's daemon), free disk in the data dir,
and the clock against the fleet's adverts (when the daemon runs). Every check that does not pass says
how to fix it. Exits 1 when a check fails.`,
  groups: [
    group('Options:', {
      'data-dir': DATA_DIR,
      json: flag({ doc: 'print { ok, checks: [{ name, status: ok|warn|fail|skipped, detail, fix }] }' }),
    }),
  ],
});

export const command: Command = {
  name: 'doctor',
  summary: 'check this machine and node: sandbox, model servers, workspaces, ports, disk, clock',
  usage: line.usage,
  line,
  async run(argv) {
    const { values } = line.parse(argv);
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
