import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DATASET_DB, type DatasetStore, openDatasetStore } from './store.ts';

/** Opens a dataset dir that must already exist (export, report, rescore); null when it does not. */
export function openExistingDataset(dir: string): DatasetStore | null {
  const root = resolve(dir);
  if (!existsSync(join(root, DATASET_DB))) return null;
  return openDatasetStore(root);
}
