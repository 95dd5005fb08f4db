// The README is what a new user reads first: its checkable statements are checked against the
// repository (issue 12, build 7: it pointed to a DESIGN.md not in the repository, showed a 7-character
// short id, and its command table left commands out).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { shortPeerId } from '../../node/status.ts';
import { REPO } from '../helpers/cli.ts';

const README = readFileSync(join(REPO, 'README.md'), 'utf8');

describe('README', () => {
  it('names only files that are in the repository (links and `*.md` mentions)', () => {
    const links = [...README.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)].map((m) => m[1]!);
    const mentions = [...README.matchAll(/`([\w./-]+\.md)`/g)].map((m) => m[1]!);
    const targets = [...new Set([...links, ...mentions])].filter((t) => !/^[a-z]+:/.test(t));
    expect(targets.length).toBeGreaterThan(5);
    expect(targets.filter((t) => !existsSync(join(REPO, t)))).toEqual([]);
  });

  it('shows short ids as long as `vtnode status` makes them', () => {
    const shown = [...README.matchAll(/"shortId": "([^"]+)"/g)].map((m) => m[1]!);
    expect(shown.length).toBeGreaterThan(0);
    const made = shortPeerId('12D3KooWGzFvRkqXbN4cY1tW7m8pQ2sL5vH9dJ3eA6uBxT0fZrKQ');
    for (const id of shown) expect(id.length).toBe(made.length);
  });

  it('lists every command in its command table, and only commands that exist', () => {
    const table = [...README.matchAll(/^\| `vtnode ([a-z-]+)/gm)].map((m) => m[1]!);
    const commands = readdirSync(join(REPO, 'cli', 'commands'))
      .filter((f) => f.endsWith('.ts'))
      .map((f) => f.slice(0, -3));
    expect([...new Set(table)].sort()).toEqual(commands.sort());
  });

  it('does not say that `init` listens (only a running node does)', () => {
    expect(README).not.toMatch(/`vtnode init` listens/);
  });

  it('names the tarball `npm pack` writes for this version, and the Node the bundle needs', () => {
    const { version } = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string };
    const named = [...README.matchAll(/vtnode-([\d.]+)\.tgz/g)].map((m) => m[1]);
    expect(named.length).toBeGreaterThan(0);
    expect(new Set(named)).toEqual(new Set([version]));
    const bin = readFileSync(join(REPO, 'bin', 'vtnode.js'), 'utf8');
    const need = /fromSources \? \[22, 18\] : \[(\d+), (\d+)\]/.exec(bin);
    expect(README).toContain(`Node.js >= ${need![1]}.${need![2]}`);
  });
});
