import type { ChatMessage } from '../../protocol/task.ts';

/** A file offered as context, with why it is there. */
export interface ContextFile {
  path: string;
  text: string;
  /** Shown after the path, e.g. "imports the target". */
  role: string;
}

/** The context that fit the budget, and the files it cut. */
export interface PackedContext {
  shown: ContextFile[];
  cut: ContextFile[];
  /** Characters of file text shown. */
  chars: number;
}

/** The declarations of one other file of the module. */
export interface DeclaredSymbols {
  path: string;
  names: string[];
}

/** Language of a path, for house rules and code fences. */
export function languageOf(path: string): { name: string; fence: string } {
  if (/\.tsx$/.test(path)) return { name: 'TypeScript (TSX)', fence: 'tsx' };
  if (/\.[cm]?ts$/.test(path)) return { name: 'TypeScript', fence: 'ts' };
  if (/\.jsx$/.test(path)) return { name: 'JavaScript (JSX)', fence: 'jsx' };
  return { name: 'JavaScript', fence: 'js' };
}

/** A fenced code block whose fence is longer than any backtick run inside `text`. */
export function fenced(text: string, lang: string): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  const fence = '`'.repeat(longest + 1);
  return `${fence}${lang}\n${text.endsWith('\n') ? text : `${text}\n`}${fence}`;
}

/**
 * Packs files in the given order while their text fits in `budget` characters; a file that does not fit
 * is cut and later (smaller) files may still fit.
 */
export function packContext(files: readonly ContextFile[], budget: number): PackedContext {
  const shown: ContextFile[] = [];
  const cut: ContextFile[] = [];
  let chars = 0;
  for (const f of files) {
    if (chars + f.text.length <= budget) {
      shown.push(f);
      chars += f.text.length;
    } else cut.push(f);
  }
  return { shown, cut, chars };
}

/** The module system a file is written in: ES modules unless it only uses require/module.exports. */
export function moduleSystemOf(path: string, text: string): 'ES modules' | 'CommonJS' {
  if (/\.c[jt]s$/.test(path)) return 'CommonJS';
  if (/^\s*(import|export)\b/m.test(text)) return 'ES modules';
  return /\brequire\s*\(|\bmodule\.exports\b|\bexports\.\w+\s*=/.test(text) ? 'CommonJS' : 'ES modules';
}

function houseRules(
  language: string,
  moduleSystem: string,
  fence: string,
  what: string,
  extra: string[],
): string {
  return [
    `You write ${what} of a ${language} repository.`,
    'Rules:',
    `- Language: ${language}, ${moduleSystem}. Follow the repository's conventions, including how its files import each other (keep the import paths and extensions the other files use).`,
    '- Write the WHOLE file: every import, declaration and export it needs. No diff, no fragment, no placeholder, no "rest unchanged".',
    ...extra.map((e) => `- ${e}`),
    `- Answer with exactly one fenced code block (\`\`\`${fence}) holding the complete file, and nothing after it.`,
  ].join('\n');
}

function contextSection(packed: PackedContext): string[] {
  const out: string[] = [];
  for (const f of packed.shown) {
    out.push(`### ${f.path} (${f.role})`, fenced(f.text, languageOf(f.path).fence), '');
  }
  if (packed.cut.length > 0)
    out.push(`Not shown (context budget): ${packed.cut.map((f) => f.path).join(', ')}.`, '');
  return out;
}

/** Inputs of a `file` task prompt. */
export interface FilePromptInput {
  target: string;
  /** `ES modules` or `CommonJS` (see moduleSystemOf). */
  moduleSystem: string;
  module: string;
  /** Names other files import from the target. */
  mustDeclare: string[];
  /** Importers of the target first, then the rest of the module, then other files it uses; already packed. */
  context: PackedContext;
  /** Every top-level declaration of every other source file of the module, cut files included. */
  declared: DeclaredSymbols[];
  /** Exports of files outside the module that the target uses but the context does not show in full. */
  available: DeclaredSymbols[];
  /** Test files that will judge the answer. */
  testFiles: string[];
}

/** The chat messages of a `file` task. */
export function filePrompt(input: FilePromptInput): ChatMessage[] {
  const lang = languageOf(input.target);
  const system = houseRules(lang.name, input.moduleSystem, lang.fence, 'one source file', [
    'Declare and export every symbol listed under "must declare and export", with the exact names.',
    'Do not re-declare symbols that other files of the module declare: import them from their files.',
  ]);
  const user: string[] = [`Write the file \`${input.target}\` (module \`${input.module}\`).`, ''];
  if (input.mustDeclare.length > 0)
    user.push(
      'It must declare and export (other files import these from it):',
      ...input.mustDeclare.map((n) => `- ${n === 'default' ? 'a default export' : n}`),
      '',
    );
  else user.push('No other file imports a named symbol from it; the tests exercise it directly.', '');
  user.push(`It is judged by running: ${input.testFiles.join(', ')}.`, '');
  if (input.context.shown.length > 0 || input.context.cut.length > 0)
    user.push(
      'Context: the files that import it first, then the rest of its module.',
      '',
      ...contextSection(input.context),
    );
  user.push(
    ...symbolList(
      'Declared elsewhere in the module (do not declare these again; import them from these files):',
      input.declared,
    ),
    ...symbolList(
      'Exported by other files it uses, outside its module (import from these files):',
      input.available,
    ),
  );
  user.push(`Now write \`${input.target}\` in full.`);
  return [
    { role: 'system', content: system },
    { role: 'user', content: user.join('\n') },
  ];
}

/** A heading and one `- path: names` line per file that declares something, or nothing at all. */
function symbolList(heading: string, files: DeclaredSymbols[]): string[] {
  const listed = files.filter((d) => d.names.length > 0);
  if (listed.length === 0) return [];
  return [heading, ...listed.map((d) => `- ${d.path}: ${d.names.join(', ')}`), ''];
}

/** Inputs of a `tests` task prompt. */
export interface TestsPromptInput {
  target: string;
  /** `ES modules` or `CommonJS` (see moduleSystemOf). */
  moduleSystem: string;
  module: string;
  /** How tests are written for the runner (one line). */
  testStyle: string;
  /** The source files under test, with the specifier the original imported each by. */
  subjects: { path: string; specifier: string; exports: string[] }[];
  /** Sources under test first, then other files the tests use; already packed. */
  context: PackedContext;
  /** Exports of files the code under test imports that the context does not show. */
  available: DeclaredSymbols[];
}

/** The chat messages of a `tests` task. */
export function testsPrompt(input: TestsPromptInput): ChatMessage[] {
  const lang = languageOf(input.target);
  const system = houseRules(lang.name, input.moduleSystem, lang.fence, 'one test file', [
    input.testStyle,
    'Your tests run against the reference implementation shown: they must pass on it, and they count only if they add test cases that exercise its behaviour (edge cases and error paths included).',
  ]);
  const user: string[] = [
    `Write the test file \`${input.target}\` (module \`${input.module}\`).`,
    '',
    'It tests:',
  ];
  for (const s of input.subjects)
    user.push(
      `- \`${s.path}\`, imported as '${s.specifier}'${s.exports.length > 0 ? `, which exports: ${s.exports.join(', ')}` : ''}`,
    );
  user.push('', 'Code under test:', '', ...contextSection(input.context));
  user.push(
    ...symbolList('Exported by other files the code under test imports (not shown):', input.available),
  );
  user.push(`Now write \`${input.target}\` in full.`);
  return [
    { role: 'system', content: system },
    { role: 'user', content: user.join('\n') },
  ];
}
