/**
 * Extraction of the candidate from a model's answer. A well-formed answer holds exactly one fenced
 * code block; anything else is flagged, and the scorer turns a flag into reward 0. Pure.
 */

/** Why an answer yielded no candidate. */
export type ExtractFlag = 'no-code-block' | 'several-code-blocks' | 'unclosed-code-block';

export type ExtractResult =
  | { ok: true; code: string; lang: string | null }
  | { ok: false; flag: ExtractFlag; blocks: number };

const OPEN = /^ {0,3}(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*$/;

/**
 * Finds the fenced code blocks of a CommonMark-style answer (``` or ~~~ fences, a closing fence of the
 * same character at least as long as the opening one) and returns the one block's content, or a flag
 * when there is none, more than one, or a fence left open (a truncated answer).
 */
export function extractCodeBlock(answer: string): ExtractResult {
  const lines = answer.split(/\r?\n/);
  const blocks: { code: string; lang: string | null }[] = [];
  let open: { fence: string; lang: string | null; body: string[] } | null = null;
  for (const line of lines) {
    if (open === null) {
      const m = OPEN.exec(line);
      if (m) open = { fence: m[1]!, lang: m[2] ? m[2] : null, body: [] };
      continue;
    }
    if (isClosingFence(line, open.fence)) {
      blocks.push({ code: open.body.join('\n'), lang: open.lang });
      open = null;
    } else {
      open.body.push(line);
    }
  }
  if (open !== null) return { ok: false, flag: 'unclosed-code-block', blocks: blocks.length + 1 };
  if (blocks.length === 0) return { ok: false, flag: 'no-code-block', blocks: 0 };
  if (blocks.length > 1) return { ok: false, flag: 'several-code-blocks', blocks: blocks.length };
  const block = blocks[0]!;
  return { ok: true, code: block.code.endsWith('\n') ? block.code : `${block.code}\n`, lang: block.lang };
}

function isClosingFence(line: string, fence: string): boolean {
  const m = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(line);
  return m !== null && m[1]![0] === fence[0] && m[1]!.length >= fence.length;
}
