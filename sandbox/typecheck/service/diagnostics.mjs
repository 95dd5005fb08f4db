// Diagnostics as tsc reports them: one flat list, deduplicated and sorted the way
// `sortAndDeduplicateDiagnostics` does, with positions converted to 1-based line and column.
import { relative } from 'node:path';

/** Longest message kept per diagnostic (a huge type printed in a message is cut). */
const MESSAGE_CHARS = 2000;

/**
 * @typedef {object} FormattedDiagnostic
 * @property {string | null} file path relative to the workspace root (as tsc prints it from there); null for a global diagnostic
 * @property {number | null} line 1-based
 * @property {number | null} col 1-based
 * @property {number} code the TSxxxx number
 * @property {'error' | 'warning' | 'suggestion' | 'message'} category
 * @property {string} message the flattened message chain
 */

/**
 * @param {import('typescript')} ts
 * @param {import('typescript').DiagnosticCategory} category
 * @returns {FormattedDiagnostic['category']}
 */
function categoryName(ts, category) {
  if (category === ts.DiagnosticCategory.Error) return 'error';
  if (category === ts.DiagnosticCategory.Warning) return 'warning';
  if (category === ts.DiagnosticCategory.Suggestion) return 'suggestion';
  return 'message';
}

/**
 * Deduplicates (same file, start, length, code and message: tsc's identity) and sorts by file, start,
 * length, code; then formats.
 * @param {import('typescript')} ts
 * @param {readonly import('typescript').Diagnostic[]} diagnostics
 * @param {string} root
 * @returns {FormattedDiagnostic[]}
 */
export function formatDiagnostics(ts, diagnostics, root) {
  const unique = new Map();
  for (const d of diagnostics) {
    const message = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    const key = [d.file?.fileName ?? '', d.start ?? -1, d.length ?? -1, d.code, message].join('\0');
    if (!unique.has(key)) unique.set(key, { d, message });
  }
  const sorted = [...unique.values()].sort(
    (a, b) =>
      compare(a.d.file?.fileName ?? '', b.d.file?.fileName ?? '') ||
      (a.d.start ?? -1) - (b.d.start ?? -1) ||
      (a.d.length ?? -1) - (b.d.length ?? -1) ||
      a.d.code - b.d.code ||
      compare(a.message, b.message),
  );
  return sorted.map(({ d, message }) => {
    const at = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : null;
    return {
      file: d.file ? relative(root, d.file.fileName) : null,
      line: at ? at.line + 1 : null,
      col: at ? at.character + 1 : null,
      code: d.code,
      category: categoryName(ts, d.category),
      message: message.length > MESSAGE_CHARS ? `${message.slice(0, MESSAGE_CHARS)}…` : message,
    };
  });
}

/** @param {string} a @param {string} b */
function compare(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}
