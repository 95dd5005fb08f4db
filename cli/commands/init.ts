import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { type FleetFile, newPsk } from '../../node/data-dir.ts';
import {
  DEFAULT_CERT_TTL_MS,
  foundFleet,
  loadAuthority,
  selfCertificate,
} from '../../node/membership/authority.ts';
import { membershipFiles } from '../../node/membership/files.ts';
import { DEFAULT_PORT } from '../../node/net.ts';
import { issueToken } from '../../node/tokens.ts';
import { verifyKeyChain } from '../../protocol/membership.ts';
import { FleetId } from '../../protocol/token.ts';
import { CliError, type Command } from '../command.ts';
import { dataDirFrom, mergeConfig, NODE_OPTIONS } from '../node-options.ts';
import { commandLine, duration, flag, group, string } from '../options.ts';
import { EXPIRES, ROLES, rolesOption } from './token.ts';

const line = commandLine({
  prose: `Usage: vtnode init --fleet NAME [--expires 7d] [--roles LIST] [--cert-ttl 30d] [node options]

Creates a fleet: a data dir with this node's identity, the fleet's pre-shared key and the fleet's
signing key (fleet-key.json: keep it private, back it up), and prints a join token for other
machines (\`vtnode join <token>\`). Then run \`vtnode start\` to bring this node up. This node admits
joiners, renews their certificates, revokes members and rotates keys (docs/security.md).`,
  groups: [
    group('Options:', {
      fleet: string({ doc: 'fleet name (a-z, 0-9, -)', value: 'NAME', required: true }),
      expires: EXPIRES,
      roles: ROLES,
      'cert-ttl': duration({
        doc: 'lifetime of membership certificates, renewed when a third is left',
        min: 10_000,
        default: DEFAULT_CERT_TTL_MS,
      }),
      json: flag({ doc: 'print { fleet, peerId, dataDir, token, bootstrap, expires, invitation } as JSON' }),
    }),
    NODE_OPTIONS,
  ],
});

/**
 * Runs `create` in data dir `root`; when it throws, removes every entry it added (the whole dir when
 * it did not exist before), then rethrows. Entries that were there before are left alone.
 */
export async function atomically<T>(root: string, create: () => Promise<T>): Promise<T> {
  const before = await readdir(root).then(
    (names) => new Set(names),
    (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return null;
      throw err;
    },
  );
  try {
    return await create();
  } catch (err) {
    if (before === null) await rm(root, { recursive: true, force: true }).catch(() => {});
    else
      for (const name of await readdir(root).catch(() => [] as string[]))
        if (!before.has(name)) await rm(join(root, name), { recursive: true, force: true }).catch(() => {});
    throw err;
  }
}

export const command: Command = {
  name: 'init',
  summary: 'create a fleet and print a join token',
  usage: line.usage,
  line,
  async run(argv) {
    const { values } = line.parse(argv);
    const fleetId = FleetId.safeParse(values.fleet);
    if (!fleetId.success)
      throw new CliError(`--fleet ${values.fleet}: ${fleetId.error.issues[0]?.message}`, 2);
    const ttl = values.expires;
    const roles = rolesOption(values.roles);
    const certTtlMs = values['cert-ttl'];

    const dataDir = dataDirFrom(values);
    const existing = await dataDir.readFleet();
    if (existing) {
      throw new CliError(
        `${dataDir.root} already belongs to fleet "${existing.fleet}"; use \`vtnode token\` for a new token, or another --data-dir`,
      );
    }
    // Every option is checked before anything is written.
    const config = mergeConfig(await dataDir.readConfig(), values);
    // The node that creates the fleet is the first bootstrap peer: its port must not move.
    if (config.listen.length === 0) config.listen = [`/ip4/0.0.0.0/tcp/${DEFAULT_PORT}`];
    const now = Date.now();
    // All or nothing: a failure removes what this init wrote (a stray identity.key, a half fleet).
    const { peerId, fleet } = await atomically(dataDir.root, async () => {
      await dataDir.ensure();
      const { peerId } = await dataDir.identity();
      const keys = await foundFleet(dataDir, fleetId.data, { certTtlMs, now });
      const fleet: FleetFile = {
        fleet: fleetId.data,
        psk: newPsk(),
        bootstrap: [],
        since: now,
        keys,
        invitation: null,
        rekeyedAt: 0,
      };
      await dataDir.writeConfig(config);
      const authority = (await loadAuthority(dataDir))!;
      const chain = await verifyKeyChain(keys, fleet.fleet);
      await membershipFiles(dataDir).writeCertificate(await selfCertificate(authority, chain, peerId, now));
      // Last: fleet.json is what makes the data dir a fleet member.
      await dataDir.writeFleet(fleet);
      return { peerId, fleet };
    });
    let issued: Awaited<ReturnType<typeof issueToken>>;
    try {
      issued = await issueToken({ dataDir, fleet, config, peerId, ttlMs: ttl, roles });
    } catch (err) {
      // The fleet exists now; only the token waits for an address to put in it.
      throw new CliError(
        `created fleet "${fleet.fleet}" in ${dataDir.root}, but no join token yet: ${(err as Error).message}. ` +
          `Start it (\`vtnode start --data-dir ${dataDir.root}\`), then run \`vtnode token --data-dir ${dataDir.root}\`.`,
      );
    }
    if (values.json) {
      process.stdout.write(
        `${JSON.stringify({ fleet: fleet.fleet, peerId, dataDir: dataDir.root, ...issued })}\n`,
      );
    } else {
      process.stderr.write(
        `Created fleet "${fleet.fleet}" in ${dataDir.root} (this node: ${peerId}).\n` +
          `Join token (valid until ${new Date(issued.expires).toISOString()}), for \`vtnode join <token>\` on other machines:\n`,
      );
      process.stdout.write(`${issued.token}\n`);
      process.stderr.write('Now start this node: vtnode start\n');
    }
    return 0;
  },
};
