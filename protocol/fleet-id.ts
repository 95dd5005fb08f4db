import { z } from 'zod';

/** Fleet ids: lower-case names, used in topic names. */
export const FleetId = z
  .string()
  .regex(
    /^[a-z0-9][a-z0-9-]{0,62}$/,
    'a fleet name is 1-63 characters of a-z, 0-9 and -, starting with a letter or digit',
  );

/** The fleet's pre-shared key: 32 bytes as 64 lower-case hex digits. */
export const Psk = z.string().regex(/^[0-9a-f]{64}$/, 'expected 64 hex digits');
