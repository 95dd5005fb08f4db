import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CollectorStatus } from '../../node/collector/node.ts';

/** The snapshot a collector writes to `collector.json` in its data dir, or null before the first one. */
export async function collectorStatus(dataDir: string): Promise<CollectorStatus | null> {
  try {
    return JSON.parse(await readFile(join(dataDir, 'collector.json'), 'utf8')) as CollectorStatus;
  } catch {
    return null;
  }
}
