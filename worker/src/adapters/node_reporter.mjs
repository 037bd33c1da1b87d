// Assay's node:test reporter: the result of every test and suite, with the file it came from
// and its nesting, in the order node reports them, written as one JSON document
// (`assay.node/v1`) when the run ends. A run cut short writes nothing, so it yields no result.
// Classification (skips, hooks, load failures) and the describe path are Assay's to decide, in
// `common::report::node`; this file only records what node said.

import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

// A mutation schema's unmutated run (`ASSAY_MUTANT_TRACE=on`): each process of a test file
// writes `assay-reached\tNUMBERS` on stderr the first time it reaches a site; the reporter
// forwards those lines on its own stderr with the file node names, relative to the tree, so
// the test code never writes the file field. Everything else on the tests' stderr stays theirs.
// It also writes each test file's own time as `node --test` ran it in a process of its own
// (`assay-file-ms\tFILE\tMS`, start-up included): what one mutant's run of that file costs.
const tracing = process.env.ASSAY_MUTANT_TRACE === 'on';
// A mutant's failing run run again to confirm its kill (`common::runner::node`): the document
// says so, and follows the first run's in the same file.
const rerun = process.env.ASSAY_NODE_RERUN === '1';
const TRACE_MARK = 'assay-reached\t';
// A mutant's run of several test files, each in node itself one after another
// (`common::runner::node`): the last run's document holds the earlier runs' results too, read
// from the files this names (one per line), as `node --test` would have reported them all.
const earlierParts = (process.env.ASSAY_NODE_PARTS ?? '').split('\n').filter((path) => path !== '');

function firstLine(text) {
  return String(text ?? '').split('\n').find((line) => line.trim() !== '')?.trim() ?? '';
}

export default async function* assayReporter(source) {
  const results = [];
  const counts = {};
  if (tracing) process.stderr.write('\nassay-reached-on\n');
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
    } else if (type === 'test:stderr' && tracing) {
      for (const line of String(data.message).split('\n')) {
        if (!line.startsWith(TRACE_MARK)) continue;
        const file = data.file ? relative(process.cwd(), data.file) : '';
        const numbers = line.slice(TRACE_MARK.length).replace(/[^0-9,]/g, '');
        process.stderr.write(`assay-reached-in\t${JSON.stringify(file)}\t${numbers}\n`);
      }
    } else if (type === 'test:complete' && tracing && data.nesting === 0 && data.file && data.name === data.file) {
      // The runner's own event for a test file's process, named by its path.
      const ms = Number(data.details?.duration_ms);
      if (Number.isFinite(ms)) {
        process.stderr.write(`assay-file-ms\t${JSON.stringify(relative(process.cwd(), data.file))}\t${ms}\n`);
      }
    } else if (type === 'test:diagnostic' && data.nesting === 0) {
      // The run's closing counts: `tests 6`, `pass 3`, ...
      const match = /^(\w+) (\d+)$/.exec(String(data.message));
      if (match) counts[match[1]] = Number(match[2]);
    }
  }
  // The earlier runs first, then this one. A part that cannot be read throws here: the run then
  // writes no report, and is run again under `node --test`.
  const parts = earlierParts.map((path) => JSON.parse(readFileSync(path, 'utf8')));
  const merged = { schema: 'assay.node/v1', counts: {}, results: [] };
  for (const part of [...parts, { counts, results }]) {
    merged.results.push(...part.results);
    for (const [key, value] of Object.entries(part.counts)) merged.counts[key] = (merged.counts[key] ?? 0) + value;
  }
  yield `${JSON.stringify({ ...merged, ...(rerun ? { rerun } : {}) })}\n`;
}
