// A node:test reporter that writes one JSON document with every test case, for vtnode's judge.
// Loaded with `node --test --test-reporter=<this file> --test-reporter-destination=<report>`.
import { resolve } from 'node:path';

/** The first line of a child's stderr that names an error (`SyntaxError: ...`, `Error: ...`). */
const ERROR_LINE = /^(?:Uncaught )?(?:[A-Za-z_$][\w$]*)?(?:Error|Exception)\b.*$/;

/**
 * node:test runs each file in a child process and reports the FILE itself as a test (named by the path
 * as given, at 1:1, nesting 0) when the child reported no test of its own or exited non-zero. That is
 * not a test case: an empty file passes it (so it must count 0 cases, not 1) and a file that fails to
 * load fails it (a file-level error, not a failed case).
 */
export function isFileLevel(d, cwd = process.cwd()) {
  return (
    d.nesting === 0 &&
    d.line === 1 &&
    d.column === 1 &&
    typeof d.name === 'string' &&
    typeof d.file === 'string' &&
    resolve(cwd, d.name) === d.file
  );
}

function errorMessage(d) {
  return String(d.details?.error?.cause?.message ?? d.details?.error?.message ?? '').split('\n')[0];
}

function caseStatus(event, d) {
  if (d.todo !== undefined && d.todo !== false) return 'todo';
  if (d.skip !== undefined && d.skip !== false) return 'skipped';
  return event.type === 'test:pass' ? 'passed' : 'failed';
}

export default async function* vtnodeJsonReporter(source) {
  const stacks = new Map();
  const stderrError = new Map();
  const cases = [];
  const errors = [];
  /** `file\0suite path` of every suite holding a failed case: its own failure is already carried. */
  const failedSuites = new Set();
  for await (const event of source) {
    const d = event.data ?? {};
    const file = d.file ?? '';
    if (event.type === 'test:stderr') {
      const key = resolve(file);
      if (!stderrError.has(key)) {
        const line = String(d.message ?? '').trim();
        if (ERROR_LINE.test(line)) stderrError.set(key, line.slice(0, 300));
      }
    } else if (event.type === 'test:start') {
      const stack = stacks.get(file) ?? [];
      stack.length = d.nesting;
      stack[d.nesting] = d.name;
      stacks.set(file, stack);
    } else if (event.type === 'test:pass' || event.type === 'test:fail') {
      if (isFileLevel(d)) {
        if (event.type === 'test:fail') {
          const code = d.details?.error?.exitCode;
          const why = stderrError.get(file) ?? errorMessage(d);
          errors.push({
            file,
            message: `the test file failed${code != null ? ` (exit code ${code})` : ''}: ${why}`,
          });
        }
        continue;
      }
      const stack = stacks.get(file) ?? [];
      const name = [...stack.slice(0, d.nesting), d.name].join(' > ');
      const message = errorMessage(d);
      if (d.details?.type === 'suite') {
        // A suite fails when a case under it failed (already a failed case) or when something no case
        // carries failed (an after hook): only the latter is an error of its own.
        if (event.type === 'test:fail' && !failedSuites.has(`${file}\0${name}`))
          errors.push({ file, message: `suite ${name}: ${message}` });
        continue;
      }
      const status = caseStatus(event, d);
      if (status === 'failed')
        for (let i = 1; i < d.nesting + 1; i++) failedSuites.add(`${file}\0${stack.slice(0, i).join(' > ')}`);
      // The integrity sentinel's report line is kept whole; other messages are capped.
      const cap = message.includes('vtnode-sentinel:') ? 65536 : 300;
      cases.push({ file, name, status, ...(status === 'failed' ? { message: message.slice(0, cap) } : {}) });
    }
  }
  yield `${JSON.stringify({ format: 'vtnode-node-test/1', cases, errors })}\n`;
}
