/**
 * Regular-expression mutations (the level-1 mutations of Stryker's weapon-regex that JavaScript
 * supports): anchor removal, predefined-class and character-class negation, quantifier removal and
 * lookaround negation. A small hand-written scanner instead of a regex parser dependency: the
 * mutations only need token boundaries (escapes, classes, groups, quantifiers), not a full AST.
 */

/** One token of a pattern: its kind and [start, end) in the body. */
interface Token {
  kind: 'escape' | 'class' | 'group-open' | 'anchor' | 'quantifier' | 'char';
  start: number;
  end: number;
}

const PREDEFINED: Record<string, string> = { d: 'D', D: 'd', w: 'W', W: 'w', s: 'S', S: 's' };

/** Splits a pattern body into tokens; character classes are one token each. */
function tokenize(body: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < body.length) {
    const c = body[i]!;
    const start = i;
    if (c === '\\') {
      out.push({ kind: 'escape', start, end: Math.min(i + 2, body.length) });
      i += 2;
    } else if (c === '[') {
      i++;
      if (body[i] === '^') i++;
      while (i < body.length && body[i] !== ']') i += body[i] === '\\' ? 2 : 1;
      out.push({ kind: 'class', start, end: Math.min(i + 1, body.length) });
      i++;
    } else if (c === '(') {
      const m = /^\((\?(?:<=|<!|=|!|:|<[A-Za-z_$][\w$]*>))?/.exec(body.slice(i))!;
      out.push({ kind: 'group-open', start, end: i + m[0].length });
      i += m[0].length;
    } else if (c === '^' || c === '$') {
      out.push({ kind: 'anchor', start, end: i + 1 });
      i++;
    } else if (c === '*' || c === '+' || c === '?' || c === '{') {
      const m = c === '{' ? /^\{\d+(?:,\d*)?\}/.exec(body.slice(i))?.[0] : c;
      if (m === undefined) {
        out.push({ kind: 'char', start, end: i + 1 });
        i++;
        continue;
      }
      let end = i + m.length;
      if (body[end] === '?') end++; // lazy
      out.push({ kind: 'quantifier', start, end });
      i = end;
    } else {
      out.push({ kind: 'char', start, end: i + 1 });
      i++;
    }
  }
  return out;
}

/** The body with [start, end) replaced. */
const splice = (body: string, start: number, end: number, text: string) =>
  `${body.slice(0, start)}${text}${body.slice(end)}`;

function mutateToken(body: string, t: Token): string[] {
  const text = body.slice(t.start, t.end);
  switch (t.kind) {
    case 'anchor':
    case 'quantifier':
      return [splice(body, t.start, t.end, '')];
    case 'escape': {
      const swap = PREDEFINED[text[1] ?? ''];
      return swap ? [splice(body, t.start, t.end, `\\${swap}`)] : [];
    }
    case 'class': {
      const negated = text.startsWith('[^');
      const out = [splice(body, t.start, t.end, negated ? `[${text.slice(2)}` : `[^${text.slice(1)}`)];
      // Predefined classes inside a class: `[\d.]` → `[\D.]`.
      for (let i = 1; i < text.length - 1; i++) {
        if (text[i] !== '\\') continue;
        const swap = PREDEFINED[text[i + 1] ?? ''];
        if (swap) out.push(splice(body, t.start + i, t.start + i + 2, `\\${swap}`));
        i++;
      }
      return out;
    }
    case 'group-open': {
      const flip: Record<string, string> = { '(?=': '(?!', '(?!': '(?=', '(?<=': '(?<!', '(?<!': '(?<=' };
      const to = flip[text];
      return to ? [splice(body, t.start, t.end, to)] : [];
    }
    default:
      return [];
  }
}

function compiles(body: string, flags: string): boolean {
  try {
    new RegExp(body, flags);
    return true;
  } catch {
    return false;
  }
}

/**
 * The mutated literals of a regular-expression literal (`/…/flags`), each a valid regular expression
 * that differs from the original; in token order, without duplicates.
 */
export function regexMutations(literal: string): string[] {
  const last = literal.lastIndexOf('/');
  if (!literal.startsWith('/') || last <= 0) return [];
  const body = literal.slice(1, last);
  const flags = literal.slice(last + 1);
  const out = new Set<string>();
  // An empty body would read as a `//` comment.
  for (const t of tokenize(body))
    for (const m of mutateToken(body, t))
      if (m !== body && compiles(m, flags)) out.add(`/${m === '' ? '(?:)' : m}/${flags}`);
  return [...out];
}
