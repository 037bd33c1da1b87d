// Assay's node:test reporter: the result of every test and suite, with the file it came from
// and its nesting, in the order node reports them, written as one JSON document
// (`assay.node/v1`) when the run ends. A run cut short writes nothing, so it yields no result.
// Classification (skips, hooks, load failures) and the describe path are Assay's to decide, in
// `common::report::node`; this file only records what node said.

function firstLine(text) {
  return String(text ?? '').split('\n').find((line) => line.trim() !== '')?.trim() ?? '';
}

export default async function* assayReporter(source) {
  const results = [];
  const counts = {};
  for await (const { type, data } of source) {
    if (type === 'test:pass' || type === 'test:fail') {
      const error = data.details?.error;
      results.push({
        file: data.file ?? null,
        nesting: data.nesting,
        name: data.name,
        passed: type === 'test:pass',
        suite: data.details?.type === 'suite',
        skip: data.skip !== undefined && data.skip !== false,
        todo: data.todo !== undefined && data.todo !== false,
        failure_type: error?.failureType ?? null,
        message: error ? firstLine(error.cause?.message ?? error.cause ?? error.message) : null,
      });
    } else if (type === 'test:diagnostic' && data.nesting === 0) {
      // The run's closing counts: `tests 6`, `pass 3`, ...
      const match = /^(\w+) (\d+)$/.exec(String(data.message));
      if (match) counts[match[1]] = Number(match[2]);
    }
  }
  yield `${JSON.stringify({ schema: 'assay.node/v1', counts, results })}\n`;
}
