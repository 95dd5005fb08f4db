import { connectControl, NoDaemonError } from '../../node/control/client.ts';
import { loadMembershipState, type MemberRow } from '../../node/membership/state.ts';
import { CliError, type Command } from '../command.ts';
import { dataDirFrom } from '../node-options.ts';
import { commandLine, DATA_DIR, flag, group } from '../options.ts';

const line = commandLine({
  prose: `Usage: vtnode members [--json] [--data-dir DIR]

Lists the fleet's members this node knows of: peer id, roles, certificate expiry, when last heard
from, whether revoked. Asks the running daemon (which also says who is connected); without one,
reads the data dir. --json prints { fleet, self, gen, admin, revocations, members: [...] }.`,
  groups: [
    group('Options:', {
      json: flag({ doc: 'print { fleet, self, gen, admin, revocations, members: [...] }' }),
      'data-dir': DATA_DIR,
    }),
  ],
});

export interface MembersReport {
  fleet: string;
  self: string;
  /** Current key generation. */
  gen: number;
  /** True when this node holds the fleet key. */
  admin: boolean;
  /** Entries in the revocation list (its version). */
  revocations: number;
  members: (MemberRow & { connected: boolean })[];
}

function ago(ms: number): string {
  const s = Math.round(ms / 1000);
  return s < 120
    ? `${s}s`
    : s < 7200
      ? `${Math.round(s / 60)}m`
      : s < 172_800
        ? `${Math.round(s / 3600)}h`
        : `${Math.round(s / 86_400)}d`;
}

export function renderMembers(report: MembersReport, now = Date.now()): string {
  const header = ['PEER', 'ROLES', 'EXPIRES', 'LAST SEEN', 'STATUS'];
  const rows = report.members.map((m) => [
    `${m.peerId}${m.self ? '*' : ''}`,
    m.roles.join(',') || '-',
    m.expires === null ? '-' : m.expires > now ? `in ${ago(m.expires - now)}` : `${ago(now - m.expires)} ago`,
    m.self ? 'now' : m.lastSeen === null ? 'never' : `${ago(now - m.lastSeen)} ago`,
    `${m.revoked ? 'REVOKED' : m.standing}${m.connected ? ', connected' : ''}`,
  ]);
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  const lines = all.map((r) =>
    r
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd(),
  );
  return (
    `fleet "${report.fleet}": ${report.members.length} known, key generation ${report.gen}, ` +
    `${report.revocations} revocation(s)${report.admin ? '; this node holds the fleet key' : ''} (* = this node)\n` +
    `${lines.join('\n')}\n`
  );
}

export const command: Command = {
  name: 'members',
  summary: 'list the fleet members: roles, certificate expiry, last seen, revoked',
  usage: line.usage,
  line,
  async run(argv) {
    const { values } = line.parse(argv);
    const dataDir = dataDirFrom(values);
    let report: MembersReport;
    try {
      report = await (await connectControl(dataDir)).call<MembersReport>('GET', '/members');
    } catch (err) {
      if (!(err instanceof NoDaemonError)) throw err;
      const fleet = await dataDir.readFleet();
      if (!fleet) throw new CliError(`${dataDir.root} is not in a fleet`);
      const { peerId } = await dataDir.identity();
      const state = await loadMembershipState({ dataDir, peerId });
      report = {
        fleet: fleet.fleet,
        self: peerId,
        gen: state.chain().current,
        admin: state.authority() !== null,
        revocations: state.revocations().length,
        members: state.members().map((m) => ({ ...m, connected: false })),
      };
    }
    process.stdout.write(values.json ? `${JSON.stringify(report, null, 2)}\n` : renderMembers(report));
    return 0;
  },
};
