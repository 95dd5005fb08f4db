import { freemem, hostname, totalmem } from 'node:os';

/** Memory of this machine, bytes. */
export function memory(): { total: number; free: number } {
  return { total: totalmem(), free: freemem() };
}

export function hostName(): string {
  return hostname();
}
