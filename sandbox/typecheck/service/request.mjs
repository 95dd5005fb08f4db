// Requests as read from stdin, checked by hand (plain JS: no zod here); every error names the field.
import { statSync } from 'node:fs';
import { isAbsolute, relative, resolve } from 'node:path';
import { ServiceInputError } from './args.mjs';

/** Files an overlay may replace: sources TypeScript checks (never package.json, tsconfig or JSON). */
const SOURCE_EXTENSION = /\.(?:[cm]?tsx?|[cm]?jsx?)$/;
/** Largest overlay accepted, characters over all files. */
export const MAX_OVERLAY_CHARS = 8 * 1024 * 1024;

/**
 * @typedef {object} CheckRequest
 * @property {string | number} id echoed in the answer
 * @property {Map<string, string>} overlay absolute file name → text
 * @property {string | null} target workspace-relative file whose exported API is returned
 */

/**
 * A workspace-relative path of an existing source file, resolved under the root.
 * @param {string} root
 * @param {unknown} rel
 * @param {string} field
 * @param {boolean} mustExist
 */
function sourcePath(root, rel, field, mustExist) {
  if (typeof rel !== 'string' || rel.length === 0)
    throw new ServiceInputError(`${field}: must be a non-empty string`);
  if (isAbsolute(rel) || rel.includes('\\') || rel.includes('\0'))
    throw new ServiceInputError(`${field}: must be a relative POSIX path`);
  const full = resolve(root, rel);
  const back = relative(root, full);
  if (back === '' || back.startsWith('..')) throw new ServiceInputError(`${field}: leaves the workspace`);
  if (!SOURCE_EXTENSION.test(full))
    throw new ServiceInputError(`${field}: not a TypeScript or JavaScript source file`);
  if (mustExist && !statSync(full, { throwIfNoEntry: false })?.isFile())
    throw new ServiceInputError(
      `${field}: no such file in the workspace (an overlay only replaces existing files)`,
    );
  return full;
}

/**
 * @param {string} root
 * @param {unknown} raw a parsed JSON line
 * @returns {CheckRequest}
 */
export function parseRequest(root, raw) {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new ServiceInputError('request: must be a JSON object');
  const r = /** @type {Record<string, unknown>} */ (raw);
  for (const key of Object.keys(r))
    if (!['id', 'overlay', 'target'].includes(key))
      throw new ServiceInputError(`request.${key}: unknown field`);
  const { id } = r;
  if (!((typeof id === 'string' && id.length > 0 && id.length <= 200) || Number.isSafeInteger(id)))
    throw new ServiceInputError('request.id: must be a non-empty string (≤ 200 characters) or an integer');
  if (typeof r['overlay'] !== 'object' || r['overlay'] === null || Array.isArray(r['overlay']))
    throw new ServiceInputError('request.overlay: must be an object of workspace-relative path → text');
  /** @type {Map<string, string>} */
  const overlay = new Map();
  let chars = 0;
  for (const [rel, text] of Object.entries(r['overlay'])) {
    const field = `request.overlay[${JSON.stringify(rel)}]`;
    if (typeof text !== 'string') throw new ServiceInputError(`${field}: the text must be a string`);
    chars += text.length;
    if (chars > MAX_OVERLAY_CHARS)
      throw new ServiceInputError(`request.overlay: more than ${MAX_OVERLAY_CHARS} characters`);
    overlay.set(sourcePath(root, rel, field, true), text);
  }
  const target = r['target'] === undefined || r['target'] === null ? null : r['target'];
  if (target !== null) sourcePath(root, target, 'request.target', false);
  return { id: /** @type {string | number} */ (id), overlay, target: /** @type {string | null} */ (target) };
}
