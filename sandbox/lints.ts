import ts from 'typescript';

/** A named source pattern counted in a file's text: by a regular expression, or by a counting function. */
export type SourcePattern = { name: string; re: RegExp } | { name: string; count: (text: string) => number };

/**
 * `any` as TypeScript reads it: every `any` type node (annotations, type aliases, type arguments,
 * `<any>x`, `as any`, `any[]`, generic defaults and constraints) and JSDoc `{any}` / `{*}`. Comments,
 * strings and identifiers named `any` do not count. `any` reached without the keyword
 * (`ReturnType<typeof JSON.parse>`) is the exported-API comparison's business (sandbox/typecheck/api.ts).
 */
export function countAny(text: string): number {
  const sf = ts.createSourceFile('candidate.ts', text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  let n = 0;
  const visit = (node: ts.Node): void => {
    if (node.kind === ts.SyntaxKind.AnyKeyword || node.kind === ts.SyntaxKind.JSDocAllType) n++;
    for (const doc of (node as { jsDoc?: ts.JSDoc[] }).jsDoc ?? []) visit(doc);
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return n;
}

/** Convention lints: each one the candidate adds over the original multiplies the reward down. */
export const LINTS: SourcePattern[] = [
  { name: 'any', count: countAny },
  { name: 'ts-ignore', re: /@ts-(?:ignore|nocheck|expect-error)\b/g },
  { name: 'lint-disable', re: /\b(?:eslint-disable|biome-ignore|tslint:disable|oxlint-disable)/g },
  { name: 'console.log', re: /\bconsole\s*\.\s*(?:log|debug|info|trace|warn|error|dir|table)\s*\(/g },
  {
    name: 'stub',
    re: /throw\s+new\s+Error\(\s*['"`](?:not\s+implemented|unimplemented|todo)|\bTODO\b|\bFIXME\b|\)\s*(?::\s*[\w<>[\]|. ]+)?\s*(?:=>\s*)?\{\s*\}/gi,
  },
];

function count(text: string, p: SourcePattern): number {
  if ('count' in p) return p.count(text);
  const { re } = p;
  return text.match(new RegExp(re.source, re.flags.includes('g') ? re.flags : `${re.flags}g`))?.length ?? 0;
}

/** Occurrences of each pattern the candidate has beyond the original (only positive counts). */
export function addedPatterns(
  patterns: SourcePattern[],
  original: string,
  candidate: string,
): { name: string; added: number }[] {
  const out: { name: string; added: number }[] = [];
  for (const p of patterns) {
    const added = count(candidate, p) - count(original, p);
    if (added > 0) out.push({ name: p.name, added });
  }
  return out;
}
