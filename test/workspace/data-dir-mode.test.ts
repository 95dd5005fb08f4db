import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DataDir } from '../../node/data-dir.ts';
import { tempDir } from '../collect/helpers.ts';

const mode = async (p: string) => (await stat(p)).mode & 0o777;

describe('DataDir.allowTraversal', () => {
  it('makes the data dir 0711, and later writes (which ensure() the dir) keep it so', async () => {
    const { dir, cleanup } = await tempDir('vtnode-dd-');
    try {
      const dd = new DataDir(join(dir, 'node'));
      await dd.ensure();
      expect(await mode(dd.root)).toBe(0o700);
      await dd.allowTraversal();
      expect(await mode(dd.root)).toBe(0o711);
      // What a joiner does after start (a certificate, the config): ensure() used to reset it to 0700.
      await dd.writeConfig(await dd.readConfig());
      expect(await mode(dd.root)).toBe(0o711);
      expect(await mode(dd.path('config.json'))).toBe(0o600);
    } finally {
      await cleanup();
    }
  });
});
