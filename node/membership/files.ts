import { readFile, rm } from 'node:fs/promises';
import { privateKeyFromProtobuf, privateKeyToProtobuf } from '@libp2p/crypto/keys';
import type { PrivateKey } from '@libp2p/interface';
import { z } from 'zod';
import { Certificate, Rekey, Revocation } from '../../protocol/membership.ts';
import { parseJsonWith } from '../../protocol/parse.ts';
import { type DataDir, writePrivate } from '../data-dir.ts';

/** The fleet signing key(s) of a node that holds them (`fleet-key.json`, mode 0600). */
export const FleetKeyFile = z.object({
  /** Private keys by generation (the current one, and the next one while a rotation is pending). */
  keys: z
    .array(
      z.object({
        /** Key generation. */
        gen: z.number().int().min(1),
        /** Ed25519 private key, libp2p protobuf encoding, base64. */
        privateKey: z.string().min(1),
      }),
    )
    .min(1),
  /** Lifetime of the certificates this node issues, ms. */
  certTtlMs: z.number().int().min(1000),
});
export type FleetKeyFile = z.infer<typeof FleetKeyFile>;

/** This node's revocation list (`revocations.json`): every revocation it has verified. */
export const RevocationsFile = z.object({ entries: z.array(Revocation) });

/** Certificates seen per member (`members.json`), for `vtnode members` and to check origins after a restart. */
export const MembersFile = z.object({
  members: z.record(
    z.string(),
    z.object({
      /** The member's newest certificate seen. */
      cert: Certificate,
      /** When it was last heard from (hello or advert), ms since epoch; null if never directly. */
      lastSeen: z.number().int().nullable(),
    }),
  ),
});
export type MembersFile = z.infer<typeof MembersFile>;

/** A re-key order received and not yet applied (`rekey.json`), with this node's next certificate. */
export const PendingRekeyFile = z.object({
  /** The verified order. */
  rekey: Rekey,
  /** This node's certificate under the new key generation, when the signing key changes. */
  cert: Certificate.nullable(),
});
export type PendingRekeyFile = z.infer<typeof PendingRekeyFile>;

export const FILES = {
  fleetKey: 'fleet-key.json',
  certificate: 'certificate.json',
  revocations: 'revocations.json',
  members: 'members.json',
  rekey: 'rekey.json',
} as const;

async function readOptional<S extends z.ZodType>(
  dataDir: DataDir,
  name: string,
  schema: S,
): Promise<z.output<S> | null> {
  const path = dataDir.path(name);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  return parseJsonWith(schema, text, path);
}

async function write(dataDir: DataDir, name: string, value: unknown): Promise<void> {
  await dataDir.ensure();
  await writePrivate(dataDir.path(name), `${JSON.stringify(value, null, 2)}\n`);
}

/** The membership files of one data dir, each parsed with its schema (errors name the file and field). */
export function membershipFiles(dataDir: DataDir) {
  return {
    readFleetKey: () => readOptional(dataDir, FILES.fleetKey, FleetKeyFile),
    writeFleetKey: (file: FleetKeyFile) => write(dataDir, FILES.fleetKey, file),
    readCertificate: () => readOptional(dataDir, FILES.certificate, Certificate),
    writeCertificate: (cert: Certificate) => write(dataDir, FILES.certificate, cert),
    async readRevocations(): Promise<Revocation[]> {
      return (await readOptional(dataDir, FILES.revocations, RevocationsFile))?.entries ?? [];
    },
    writeRevocations: (entries: Revocation[]) => write(dataDir, FILES.revocations, { entries }),
    async readMembers(): Promise<MembersFile['members']> {
      return (await readOptional(dataDir, FILES.members, MembersFile))?.members ?? {};
    },
    writeMembers: (members: MembersFile['members']) => write(dataDir, FILES.members, { members }),
    readRekey: () => readOptional(dataDir, FILES.rekey, PendingRekeyFile),
    writeRekey: (pending: PendingRekeyFile) => write(dataDir, FILES.rekey, pending),
    removeRekey: () => rm(dataDir.path(FILES.rekey), { force: true }),
  };
}
export type MembershipFiles = ReturnType<typeof membershipFiles>;

export function encodePrivateKey(key: PrivateKey): string {
  return Buffer.from(privateKeyToProtobuf(key)).toString('base64');
}

/** The private key of generation `gen` from a fleet-key file; throws naming the file. */
export function fleetPrivateKey(file: FleetKeyFile, gen: number, path: string): PrivateKey {
  const entry = file.keys.find((k) => k.gen === gen);
  if (!entry) throw new Error(`${path}: holds no fleet key of generation ${gen}`);
  try {
    return privateKeyFromProtobuf(Buffer.from(entry.privateKey, 'base64'));
  } catch (err) {
    throw new Error(
      `${path}: keys[gen ${gen}].privateKey is not a libp2p private key (${(err as Error).message})`,
    );
  }
}
