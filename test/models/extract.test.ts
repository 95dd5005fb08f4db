import { describe, expect, it } from 'vitest';
import { extractCodeBlock } from '../../protocol/extract.ts';

describe('extractCodeBlock', () => {
  it('returns the one fenced block with its language', () => {
    const r = extractCodeBlock('Here:\n\n```ts\nexport const a = 1;\n```\nDone.');
    expect(r).toEqual({ ok: true, code: 'export const a = 1;\n', lang: 'ts' });
  });

  it('accepts tilde fences and blocks without a language', () => {
    expect(extractCodeBlock('~~~\nx\n~~~')).toEqual({ ok: true, code: 'x\n', lang: null });
  });

  it('keeps inner fences of a longer outer fence', () => {
    const r = extractCodeBlock('````md\n```ts\nx\n```\n````');
    expect(r).toEqual({ ok: true, code: '```ts\nx\n```\n', lang: 'md' });
  });

  it('flags an answer without a block', () => {
    expect(extractCodeBlock('I cannot do that.')).toEqual({ ok: false, flag: 'no-code-block', blocks: 0 });
  });

  it('flags several blocks', () => {
    expect(extractCodeBlock('```ts\na\n```\ntext\n```ts\nb\n```\n')).toEqual({
      ok: false,
      flag: 'several-code-blocks',
      blocks: 2,
    });
  });

  it('flags a block left open (a truncated answer)', () => {
    expect(extractCodeBlock('```ts\nexport function f() {\n  return 1;')).toEqual({
      ok: false,
      flag: 'unclosed-code-block',
      blocks: 1,
    });
  });

  it('does not close a backtick fence with tildes or a shorter fence', () => {
    expect(extractCodeBlock('````\na\n```\n~~~~\n').ok).toBe(false);
  });

  it('handles CRLF line ends', () => {
    expect(extractCodeBlock('```js\r\nlet a;\r\n```\r\n')).toEqual({
      ok: true,
      code: 'let a;\n',
      lang: 'js',
    });
  });
});
