// Seeded frame mutations for protocol fuzzing: given a valid message of a protocol, produces hostile
// frames (raw bytes, wrong lengths, wrong types, hostile values in valid shapes). Deterministic per
// seed, so a failing case is replayed by its seed and index: each case draws from its own generator
// (seeded by seed and index), so case i is made without making cases 0..i-1.
import { encode } from 'it-length-prefixed';
import { type Rng, rng, seedOf } from '../../node/model-server/random.ts';

/** One fuzz case: the bytes to write on a fresh stream, and what they are. */
export interface FuzzCase {
  kind: string;
  bytes: Uint8Array;
}

const text = new TextEncoder();
const frame = (payload: Uint8Array): Uint8Array => encode.single(payload).subarray();
/** Stands for an array nested DEEP_DEPTH deep: spliced in as text, since JSON.stringify of it would overflow the stack. */
const DEEP = '@@fuzz-deep@@';
const DEEP_DEPTH = 5000;
const json = (value: unknown): Uint8Array =>
  frame(
    text.encode(
      JSON.stringify(value).replaceAll(
        JSON.stringify(DEEP),
        `${'['.repeat(DEEP_DEPTH)}0${']'.repeat(DEEP_DEPTH)}`,
      ),
    ),
  );

/** Values that break careless code: extremes, wrong types, huge and deep structures, pollution keys. */
const HOSTILE: (() => unknown)[] = [
  () => -1,
  () => 0,
  () => 1e308,
  () => -1e308,
  () => Number.MAX_SAFE_INTEGER + 2,
  () => 0.5,
  () => '',
  () => 'x'.repeat(200_000),
  () => '\u0000\uffff\ud800',
  () => '../../../../etc/passwd',
  () => null,
  () => true,
  () => [],
  () => ({}),
  () => Array.from({ length: 10_000 }, (_, i) => i),
  () => DEEP,
  () => JSON.parse('{"__proto__": {"polluted": true}, "constructor": {"prototype": {"polluted": true}}}'),
];

const pick = <T>(r: Rng, xs: readonly T[]): T => xs[Math.floor(r.next() * xs.length)]!;

/** Every path (array of keys) to a value inside `v`. */
function paths(v: unknown, prefix: (string | number)[] = [], out: (string | number)[][] = []) {
  if (prefix.length > 0) out.push(prefix);
  if (v && typeof v === 'object' && prefix.length < 6)
    for (const [k, child] of Object.entries(v))
      paths(child, [...prefix, Array.isArray(v) ? Number(k) : k], out);
  return out;
}

function replaced(value: unknown, path: (string | number)[], next: unknown): unknown {
  const copy = structuredClone(value) as Record<string | number, unknown>;
  let at = copy;
  for (const k of path.slice(0, -1)) at = at[k] as Record<string | number, unknown>;
  at[path.at(-1)!] = next;
  return copy;
}

/** Kinds of case, in the order case index i takes them (i modulo their count). */
export const FUZZ_KINDS = [
  'random bytes',
  'random payload',
  'oversized length',
  'truncated frame',
  'not UTF-8',
  'wrong top-level type',
  'hostile value',
  'missing field',
  'extra fields',
  'many frames',
] as const;

/** Case `index` of the hostile frames derived from `valid`, deterministic in (`seed`, `index`). */
export function fuzzCase(valid: unknown, seed: number, index: number): FuzzCase {
  const r = rng(seedOf('fuzz', seed, index));
  const all = paths(valid);
  const kind = FUZZ_KINDS[index % FUZZ_KINDS.length]!;
  const make: Record<(typeof FUZZ_KINDS)[number], () => Uint8Array> = {
    'random bytes': () => Uint8Array.from({ length: 1 + Math.floor(r.next() * 2048) }, () => r.next() * 256),
    'random payload': () =>
      frame(Uint8Array.from({ length: Math.floor(r.next() * 512) }, () => r.next() * 256)),
    'oversized length': () => Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2, 3),
    'truncated frame': () => {
      const f = json(valid);
      return f.subarray(0, 1 + Math.floor(r.next() * (f.length - 1)));
    },
    'not UTF-8': () => frame(Uint8Array.of(0x7b, 0xc3, 0x28, 0x7d)),
    'wrong top-level type': () => json(pick(r, [null, [], 'x', 1, true, [valid]])),
    'hostile value': () => json(replaced(valid, pick(r, all), pick(r, HOSTILE)())),
    'missing field': () => json(replaced(valid, pick(r, all), undefined)),
    'extra fields': () =>
      json({ ...(valid as object), extra: pick(r, HOSTILE)(), __proto__: { admin: true } }),
    'many frames': () => Buffer.concat(Array.from({ length: 200 }, () => json(valid))),
  };
  return { kind, bytes: make[kind]() };
}

/** `count` hostile frames derived from `valid` (cases 0..count-1 of fuzzCase). */
export function fuzzCases(valid: unknown, count: number, seed: number): FuzzCase[] {
  return Array.from({ length: count }, (_, i) => fuzzCase(valid, seed, i));
}

/** Gossip payload `index` (no length prefix: a gossip message is one payload). */
export function fuzzPayload(valid: unknown, seed: number, index: number): FuzzCase {
  const c = fuzzCase(valid, seed, index);
  // Drop the length prefix of framed cases; raw cases stay raw.
  const bytes = c.kind === 'random bytes' || c.kind === 'oversized length' ? c.bytes : unprefixed(c.bytes);
  return { kind: c.kind, bytes };
}

/** Gossip payloads 0..count-1 (see fuzzPayload). */
export function fuzzPayloads(valid: unknown, count: number, seed: number): FuzzCase[] {
  return Array.from({ length: count }, (_, i) => fuzzPayload(valid, seed, i));
}

function unprefixed(bytes: Uint8Array): Uint8Array {
  let i = 0;
  while (i < bytes.length && bytes[i]! & 0x80) i++;
  return bytes.subarray(Math.min(bytes.length, i + 1));
}
