import type { Command } from './command.ts';

/**
 * One row of the command table: what `vtnode help` shows without loading the command, and how to load it.
 * Each loader is a static `import()` of a literal path, so a bundler splits every command into its own
 * chunk and `vtnode --help` (or `vtnode status`) never loads another command's imports (libp2p, openai).
 */
export interface CommandEntry {
  /** Name typed after `vtnode` (the command module's `command.name`). */
  name: string;
  /** One line for `vtnode help` (the command module's `command.summary`). */
  summary: string;
  /** Imports the command's module. */
  load(): Promise<{ command: Command }>;
}

/** Every command, in the order `vtnode help` lists them. */
export const COMMANDS: readonly CommandEntry[] = [
  {
    name: 'calibrate',
    summary: 'keep only the tasks whose reference scores 1.0 in the sandbox',
    load: () => import('./commands/calibrate.ts'),
  },
  {
    name: 'collect',
    summary: 'run this node as a collector: digests in, verified dataset out',
    load: () => import('./commands/collect.ts'),
  },
  {
    name: 'demo',
    summary: 'the whole pipeline on this machine: mine, calibrate, a local fleet, a campaign, a dataset',
    load: () => import('./commands/demo.ts'),
  },
  {
    name: 'doctor',
    summary: 'check this machine and node: sandbox, model servers, workspaces, ports, disk, clock',
    load: () => import('./commands/doctor.ts'),
  },
  {
    name: 'export',
    summary: 'write training data (mlx, hf, repair) from a dataset',
    load: () => import('./commands/export.ts'),
  },
  {
    name: 'init',
    summary: 'create a fleet and print a join token',
    load: () => import('./commands/init.ts'),
  },
  {
    name: 'join',
    summary: 'join a fleet with a token and run this node',
    load: () => import('./commands/join.ts'),
  },
  { name: 'leave', summary: 'stop the running node gracefully', load: () => import('./commands/leave.ts') },
  {
    name: 'members',
    summary: 'list the fleet members: roles, certificate expiry, last seen, revoked',
    load: () => import('./commands/members.ts'),
  },
  {
    name: 'mine',
    summary: 'mine coding tasks from a repository’s unit tests into tasks.jsonl',
    load: () => import('./commands/mine.ts'),
  },
  {
    name: 'model-server',
    summary: 'run an emulated OpenAI-compatible model server (dry runs, drills, tests)',
    load: () => import('./commands/model-server.ts'),
  },
  {
    name: 'report',
    summary: 'pass@1, pass@k and generation statistics per model',
    load: () => import('./commands/report.ts'),
  },
  {
    name: 'rescore',
    summary: 're-score verified samples against a new workspace',
    load: () => import('./commands/rescore.ts'),
  },
  {
    name: 'revoke',
    summary: 'revoke a member or an invitation (on the fleet-key holder)',
    load: () => import('./commands/revoke.ts'),
  },
  {
    name: 'rotate-key',
    summary: 're-key the fleet without losing its members (on the fleet-key holder)',
    load: () => import('./commands/rotate-key.ts'),
  },
  {
    name: 'run',
    summary: 'run a campaign: generate and score k samples per task on the fleet',
    load: () => import('./commands/run.ts'),
  },
  {
    name: 'score',
    summary: 'score one candidate for one task in the sandbox',
    load: () => import('./commands/score.ts'),
  },
  {
    name: 'service',
    summary: 'install this node as a launchd/systemd service (starts at boot)',
    load: () => import('./commands/service.ts'),
  },
  { name: 'start', summary: 'run this node (after init or join)', load: () => import('./commands/start.ts') },
  { name: 'status', summary: 'show every node of the fleet', load: () => import('./commands/status.ts') },
  {
    name: 'token',
    summary: 'print a fresh join token for this fleet (on the fleet-key holder)',
    load: () => import('./commands/token.ts'),
  },
];

/** The table row named `name`, or undefined. */
export function findCommand(name: string): CommandEntry | undefined {
  return COMMANDS.find((c) => c.name === name);
}

/** The text of `vtnode help`, from the table alone (no command is loaded). */
export function helpText(): string {
  const rows = COMMANDS.map((c) => `  ${c.name.padEnd(14)}${c.summary}`);
  return `vtnode: verified training data from a fleet of Macs\n\nUsage: vtnode <command> [options]\n\nCommands:\n${rows.join('\n')}\n\nRun \`vtnode <command> --help\` for a command's options.\n`;
}
