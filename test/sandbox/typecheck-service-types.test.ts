// The type-check service is plain JavaScript with JSDoc types: tsc checks them (checkJs).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { REPO_ROOT } from './fixtures.ts';

it('type-checks the service modules', async () => {
  const tsc = join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  const config = join(REPO_ROOT, 'sandbox', 'typecheck', 'tsconfig.service.json');
  const r = await promisify(execFile)(process.execPath, [tsc, '-p', config]).then(
    () => '',
    (err: { stdout?: string }) => err.stdout ?? String(err),
  );
  expect(r).toBe('');
}, 60_000);
