import { readFile } from 'node:fs/promises';

/** Reads a deny-terms file: one term per line; blank lines and lines starting with `#` are ignored. */
export async function readDenyTerms(path: string): Promise<string[]> {
  const text = await readFile(path, 'utf8');
  return text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
}

/** Index of the first term `text` contains (case-insensitive), or null. */
export function findDeniedTerm(text: string, terms: readonly string[]): number | null {
  if (terms.length === 0) return null;
  const lower = text.toLowerCase();
  const i = terms.findIndex((t) => lower.includes(t.toLowerCase()));
  return i === -1 ? null : i;
}
