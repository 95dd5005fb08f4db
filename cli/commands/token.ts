import { multiaddr } from '@multiformats/multiaddr';
import { DEFAULT_TOKEN_TTL_MS, issueToken } from '../../node/tokens.ts';
import { DEFAULT_ROLES, type InvitableRole, InvitableRole as RoleSchema } from '../../protocol/membership.ts';
import { CliError, type Command } from '../command.ts';
import { dataDirFrom } from '../node-options.ts';
import { commandLine, DATA_DIR, duration, flag, group, list, string } from '../options.ts';

/** How long a join token's invitation is good for: declared once for `init` and `token`. */
export const EXPIRES = duration({
  doc: 'invitation lifetime, e.g. 30m, 12h, 7d',
  default: DEFAULT_TOKEN_TTL_MS,
});

/** The roles a join token grants: declared once for `init` and `token`. */
export const ROLES = string({
  doc: 'roles granted, comma-separated: worker, submitter, collector (default all three)',
  value: 'LIST',
});

const line = commandLine({
  prose: `Usage: vtnode token [--expires 7d] [--roles LIST] [--announce MULTIADDR]... [--data-dir DIR] [--json]

Prints a fresh join token for this node's fleet. Only a node holding the fleet key (the one that ran
\`vtnode init\`) can: the token carries an invitation signed by that key, with an expiry and the roles
it grants, which a joiner exchanges for a membership certificate. The token also carries this node's
addresses (or --announce ones) and those of other live members, and the fleet's pre-shared key.`,
  groups: [
    group('Options:', {
      expires: EXPIRES,
      roles: ROLES,
      announce: list({
        doc: "address to put in the token instead of this node's, repeatable",
        value: 'MULTIADDR',
      }),
      'data-dir': DATA_DIR,
      json: flag({ doc: 'print { fleet, peerId, token, bootstrap, expires, invitation } as JSON' }),
    }),
  ],
});

/** Parses --roles: a comma-separated subset of the roles an invitation can grant. */
export function rolesOption(value: string | undefined): InvitableRole[] {
  if (value === undefined) return DEFAULT_ROLES;
  const roles = [...new Set(value.split(',').map((r) => r.trim()))];
  for (const r of roles) {
    if (!RoleSchema.safeParse(r).success)
      throw new CliError(`--roles ${value}: "${r}" is not one of ${RoleSchema.options.join(', ')}`, 2);
  }
  if (roles.length === 0) throw new CliError('--roles: name at least one role', 2);
  return roles as InvitableRole[];
}

export const command: Command = {
  name: 'token',
  summary: 'print a fresh join token for this fleet (on the fleet-key holder)',
  usage: line.usage,
  line,
  async run(argv) {
    const { values } = line.parse(argv);
    const ttl = values.expires;
    const roles = rolesOption(values.roles);
    const dataDir = dataDirFrom(values);
    const fleet = await dataDir.readFleet();
    if (!fleet)
      throw new CliError(`${dataDir.root} is not in a fleet: run \`vtnode init\` or \`vtnode join\` first`);
    const config = await dataDir.readConfig();
    if (values.announce) {
      for (const a of values.announce) {
        try {
          multiaddr(a);
        } catch {
          throw new CliError(`--announce ${a}: not a multiaddr`, 2);
        }
      }
      config.announce = values.announce;
    }
    const { peerId } = await dataDir.identity();
    let issued: Awaited<ReturnType<typeof issueToken>>;
    try {
      issued = await issueToken({ dataDir, fleet, config, peerId, ttlMs: ttl, roles });
    } catch (err) {
      throw new CliError((err as Error).message);
    }
    if (values.json) process.stdout.write(`${JSON.stringify({ fleet: fleet.fleet, peerId, ...issued })}\n`);
    else process.stdout.write(`${issued.token}\n`);
    return 0;
  },
};
