import type { OriginTrust } from '../../node/collector/trust.ts';
import { connectControl, NoDaemonError } from '../../node/control/client.ts';
import type { FleetStatus, NodeStatus } from '../../node/status.ts';
import { CliError, type Command } from '../command.ts';
import { dataDirFrom } from '../node-options.ts';
import { commandLine, DATA_DIR, flag, group } from '../options.ts';

const line = commandLine({
  prose: `Usage: vtnode status [--json] [--data-dir DIR]

One row per node of the fleet, this node included: short peer id, host, addresses, models (with
server kind), memory free/total, load, warm prompt caches, sandbox, seconds since its last advert.
--json prints { fleet, self, nodes: [...] } (the shape is documented in the README).`,
  groups: [
    group('Options:', {
      json: flag({ doc: 'print { fleet, self, nodes: [...] } (the shape is documented in the README)' }),
      'data-dir': DATA_DIR,
    }),
  ],
});

const GiB = 1024 ** 3;

function cell(node: NodeStatus): string[] {
  const models = node.models.map((m) => `${m.id} (${m.server})`).join(', ') || '-';
  return [
    `${node.shortId}${node.self ? '*' : ''}`,
    node.host ?? '(private)',
    node.addrs[0] ?? '-',
    models,
    `${(node.memory.free / GiB).toFixed(1)}/${(node.memory.total / GiB).toFixed(1)} GiB`,
    `${node.load.running}+${node.load.queued}/${node.load.capacity}${node.paused ? ' paused' : ''}`,
    String(node.warm),
    `${node.workspaces.length}${node.fetching?.length ? ` +${node.fetching.length} fetching` : ''}`,
    `${node.sandbox.backend}${node.sandbox.ok ? '' : ' (not ok)'}`,
    `${(node.lastSeenMs / 1000).toFixed(1)}s`,
  ];
}

export function renderStatus(status: FleetStatus): string {
  const header = [
    'NODE',
    'HOST',
    'ADDRESS',
    'MODELS',
    'MEMORY free/total',
    'LOAD',
    'WARM',
    'WORKSPACES',
    'SANDBOX',
    'SEEN',
  ];
  const rows = [header, ...status.nodes.map(cell)];
  const widths = header.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const lines = rows.map((r) =>
    r
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd(),
  );
  let out = `fleet "${status.fleet}": ${status.nodes.length} node${status.nodes.length === 1 ? '' : 's'} (* = this node)\n${lines.join('\n')}\n`;
  if (status.storage) out += `\nthis node takes no jobs: ${status.storage}\n`;
  if (status.guest?.paused)
    out += `\nthis node takes no new jobs: ${status.guest.paused} (running jobs finish)\n`;
  if (status.collector) {
    const c = status.collector;
    out += `\ncollector: dataset ${c.dataset} (content ${c.contentDigest.slice(0, 19)}…)\n`;
    if (c.storage) out += `  not fetching: ${c.storage}\n`;
    for (const t of c.trust) {
      out += `  trust ${t.origin.slice(-8)}  ${t.trust.toFixed(3)}${suspicion(t)}  (${t.samples} samples)\n`;
    }
  }
  return out;
}

export const command: Command = {
  name: 'status',
  summary: 'show every node of the fleet',
  usage: line.usage,
  line,
  async run(argv) {
    const { values } = line.parse(argv);
    const dataDir = dataDirFrom(values);
    let status: FleetStatus;
    try {
      const control = await connectControl(dataDir);
      status = await control.call<FleetStatus>('GET', '/status');
    } catch (err) {
      if (err instanceof NoDaemonError) throw new CliError(err.message);
      throw err;
    }
    process.stdout.write(values.json ? `${JSON.stringify(status, null, 2)}\n` : renderStatus(status));
    return 0;
  },
};

/** Why an origin is suspect, as `status` says it: only a failed audit quarantines samples. */
export function suspicion(t: OriginTrust): string {
  if (!t.suspect) return '';
  const why = [
    t.auditFailures > 0 ? `${t.auditFailures} failed audit${t.auditFailures === 1 ? '' : 's'}` : '',
    t.rejectedBodies > 0 ? `${t.rejectedBodies} rejected bod${t.rejectedBodies === 1 ? 'y' : 'ies'}` : '',
    t.conflicts > 0 ? `${t.conflicts} conflict${t.conflicts === 1 ? '' : 's'}` : '',
  ].filter(Boolean);
  const then =
    t.auditFailures > 0 ? 'its unaudited samples are quarantined' : 'every sample of it is audited';
  return `  SUSPECT (${why.join(', ')}): ${then}`;
}
