/** Most nodes one tree may hold. */
export const MAX_NODES: number;
export interface EncodeOptions {
  /** A ref node for an object the target handed out earlier, or undefined. */
  ref?: (obj: object) => unknown;
  /** Called for every object met, with its path of segments. */
  seen?: (obj: object, path: string[]) => void;
  /** The module and export of a class other modules export, or undefined. */
  klass?: (ctor: unknown) => { m: string; x: string } | undefined;
  /** The size cap (default MAX_NODES). */
  maxNodes?: number;
}
/** Encodes a value as a codec tree (JSON-safe). */
export function encode(value: unknown, options?: EncodeOptions): unknown;
/** Why a tree cannot be rebuilt into a value, or null. */
export function unbuildable(tree: unknown): string | null;
/** Rebuilds a value from a tree; `resolve` gives the live object a ref node names. */
export function decode(
  tree: unknown,
  resolve: (ref: { $: 'ref'; c?: number; m?: string; x?: string; p: string[] }) => unknown,
): unknown;
/** The live value at a path of segments inside a value. */
export function at(value: unknown, path: string[]): unknown;
