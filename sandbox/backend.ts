import { createBwrapConfinement } from './bwrap.ts';
import { BackendUnavailableError, type Confinement } from './confinement.ts';
import { createSeatbeltConfinement } from './seatbelt.ts';
import { createUnconfined } from './unconfined.ts';

export interface BackendOptions {
  /** Run without confinement (trusted input only). */
  unconfined?: boolean;
  /** Size of the host-wide uid range (the most concurrent runs on the host). */
  maxConcurrent?: number;
  /** First uid of that range when running as root (default 61000). */
  uidBase?: number;
}

/** The platform's confinement backend: bubblewrap on Linux, Seatbelt on macOS, or unconfined when asked. */
export async function createConfinement(options: BackendOptions = {}): Promise<Confinement> {
  if (options.unconfined) return createUnconfined();
  if (process.platform === 'linux')
    return await createBwrapConfinement({
      ...(options.maxConcurrent !== undefined ? { maxConcurrent: options.maxConcurrent } : {}),
      ...(options.uidBase !== undefined ? { uidBase: options.uidBase } : {}),
    });
  if (process.platform === 'darwin')
    return await createSeatbeltConfinement(options.uidBase !== undefined ? { uidBase: options.uidBase } : {});
  throw new BackendUnavailableError(
    `no sandbox backend for ${process.platform}: use --unconfined for trusted input`,
  );
}
