import { createHash } from 'node:crypto';

/**
 * Canonical JSON: object keys sorted by code point, no insignificant whitespace, `undefined`
 * members omitted (as JSON.stringify does). Two values that are equal as data give the same text,
 * so their fingerprints match whatever order their keys were built in.
 */
export function canonicalJson(value: unknown): string {
  return serialise(value, '$');
}

function serialise(value: unknown, path: string): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value))
        throw new TypeError(`canonicalJson: ${path} is ${value}, not a finite number`);
      return JSON.stringify(value);
    case 'object': {
      if (Array.isArray(value))
        return `[${value.map((v, i) => serialise(v ?? null, `${path}[${i}]`)).join(',')}]`;
      const entries = Object.entries(value as Record<string, unknown>)
        .filter(([, v]) => v !== undefined)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${serialise(v, `${path}.${k}`)}`).join(',')}}`;
    }
    default:
      throw new TypeError(`canonicalJson: ${path} has type ${typeof value}, which JSON cannot carry`);
  }
}

/** Hex sha256 of a string or bytes. */
export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Fingerprint of a value: `sha256:` + hex sha256 of its canonical JSON. */
export function fingerprint(value: unknown): string {
  return `sha256:${sha256Hex(canonicalJson(value))}`;
}
