// A node:test reporter that writes one JSON document with every test case, for vtnode's judge.
// Loaded with `node --test --test-reporter=<this file> --test-reporter-destination=<report>`.
export default async function* vtnodeJsonReporter(source) {
  const stacks = new Map();
  const cases = [];
  const errors = [];
  for await (const event of source) {
    const d = event.data ?? {};
    const file = d.file ?? '';
    if (event.type === 'test:start') {
      const stack = stacks.get(file) ?? [];
      stack.length = d.nesting;
      stack[d.nesting] = d.name;
      stacks.set(file, stack);
    } else if (event.type === 'test:pass' || event.type === 'test:fail') {
      const stack = stacks.get(file) ?? [];
      const name = [...stack.slice(0, d.nesting), d.name].join(' > ');
      const message = String(d.details?.error?.cause?.message ?? d.details?.error?.message ?? '').split(
        '\n',
      )[0];
      if (d.details?.type === 'suite') {
        if (event.type === 'test:fail') errors.push({ file, message: `suite ${name}: ${message}` });
        continue;
      }
      const status =
        d.todo !== undefined && d.todo !== false
          ? 'todo'
          : d.skip !== undefined && d.skip !== false
            ? 'skipped'
            : event.type === 'test:pass'
              ? 'passed'
              : 'failed';
      // The integrity sentinel's report line is kept whole; other messages are capped.
      const cap = message.includes('vtnode-sentinel:') ? 65536 : 300;
      cases.push({ file, name, status, ...(status === 'failed' ? { message: message.slice(0, cap) } : {}) });
    }
  }
  yield `${JSON.stringify({ format: 'vtnode-node-test/1', cases, errors })}\n`;
}
