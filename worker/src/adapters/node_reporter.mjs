// Assay's node:test reporter: the result of every test and suite, with the file it came from
// and its nesting, in the order node reports them, written as one JSON document
// (`assay.node/v1`) when the run ends. A run cut short writes nothing, so it yields no result.
// Classification (skips, hooks, load failures) and the describe path are Assay's to decide, in
// `common::report::node`; this file only records what node said.

import { appendFileSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';

// Under `node --test` each test file runs in a child process whose output reaches the reporter
// only as `test:stdout`/`test:stderr` events: the reporter writes it on its own stdout and
// stderr, so a job keeps what its tests printed (up to the worker's output cap).
// A mutation schema's unmutated run (`ASSAY_MUTANT_TRACE=on`): each process of a test file
// writes `assay-reached\tNUMBERS` on stderr the first time it reaches a site; the reporter
// forwards those lines on its own stderr with the file node names, relative to the tree, so
// the test code never writes the file field. Everything else on the tests' stderr is theirs.
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

// Several mutants in one process (`common::runner::node_batch.cjs`): each mutant's test files
// run in suites of their own at the top (`assay-mutant N K/M FILE`, `assay-mutant-again …` for
// the runs that confirm kills), and each mutant's results are appended to the file this names
// as one document of its own, with its mutant and its time, as its last file ends, so a
// process killed later keeps what it finished.
const batchReport = process.env.ASSAY_NODE_BATCH;
const BATCH_SUITE = /^assay-mutant(-again)? (\d+) (\d+)\/(\d+) (.*)$/s;

function resultOf(type, data, nesting) {
  const error = data.details?.error;
  return {
    file: data.file ?? null,
    nesting,
    name: data.name,
    passed: type === 'test:pass',
    suite: data.details?.type === 'suite',
    skip: data.skip !== undefined && data.skip !== false,
    todo: data.todo !== undefined && data.todo !== false,
    failure_type: error?.failureType ?? null,
    message: error ? firstLine(error.cause?.message ?? error.cause ?? error.message) : null,
  };
}

async function batchReporter(source) {
  let results = [];
  // The results of the file whose suite has not ended yet: node reports children first.
  let file_results = [];
  let mutant = null;
  let ms = 0;
  let broken = null;
  // The members whose first run failed, for the runs that confirm their kills.
  const failedMembers = [];
  for await (const { type, data } of source) {
    if (type !== 'test:pass' && type !== 'test:fail') continue;
    const suite = data.nesting === 0 ? BATCH_SUITE.exec(data.name) : null;
    if (data.nesting === 0 && !suite) {
      // A test that did not nest in its file's suite (registered after a top-level await):
      // which mutant it ran under is unknown, so no mutant of this batch is judged by it.
      appendFileSync(batchReport, `${JSON.stringify({ schema: 'assay.node-batch/v1', unbatchable: data.name })}\n`);
      continue;
    }
    if (!suite) {
      file_results.push(resultOf(type, data, data.nesting - 1));
      continue;
    }
    // Every result of a file's suite is that file's, as `node --test` names them, whichever
    // file called `test()` (a preload that defines mocha's globals, say).
    const again = suite[1] !== undefined;
    const [number, file, files] = suite.slice(2, 5).map(Number);
    for (const result of file_results) result.file = suite[5];
    const ofThisFile = file_results;
    file_results = [];
    if (mutant !== number) {
      results = [];
      mutant = number;
      ms = 0;
      broken = null;
    }
    results.push(...ofThisFile);
    ms += Number(data.details?.duration_ms) || 0;
    const error = data.details?.error;
    if (type === 'test:fail' && error?.failureType !== 'subtestsFailed') {
      // The file's own failure (it threw while loading): not a result of its tests.
      broken = firstLine(error?.cause?.message ?? error?.cause ?? error?.message) || 'the file failed';
    }
    if (file !== files - 1) continue;
    const tests = results.filter((r) => !r.suite);
    const count = (keep) => tests.filter(keep).length;
    const counts = {
      tests: tests.length,
      pass: count((r) => r.passed && !r.skip && !r.todo),
      fail: count((r) => !r.passed),
      skipped: count((r) => r.skip),
      todo: count((r) => r.todo),
    };
    const document = {
      schema: 'assay.node/v1', mutant, counts, results, ms: Math.round(ms),
      failed: broken === null && counts.fail > 0,
      ...(broken === null ? {} : { broken }),
      ...(again ? { rerun: true } : {}),
    };
    appendFileSync(batchReport, `${JSON.stringify(document)}\n`);
    const watched = globalThis.__assay_batch_watch;
    if (watched && watched[0] === mutant) watched.fill(0);
    globalThis.__assay_batch_written?.(mutant);
    if (!again && document.failed) failedMembers.push(mutant);
    const last = globalThis.__assay_batch_last;
    if (last && mutant === last.mutant && again === last.again
        && (again || !globalThis.__assay_batch_confirm?.(failedMembers))) {
      // Its last mutant is done, and its kills are confirmed: exit 3 says nothing is left to
      // run, and what the tests left open does not hold the process.
      if (globalThis.__assay_batch_whole) {
        appendFileSync(batchReport, `${JSON.stringify({ schema: 'assay.node-batch/v1', confirmed: true })}\n`);
      }
      process.on('exit', () => { process.exitCode = 3; });
      setTimeout(() => process.exit(3), 100).unref();
    }
    results = [];
    mutant = null;
  }
}

// A chunk of a test file's stderr in a traced run: each site's mark becomes the line that
// names the file, and the tests' own lines pass as they are.
function traced(message, path) {
  const file = path ? relative(process.cwd(), path) : '';
  return message.split(/(?<=\n)/).map((line) => {
    if (!line.startsWith(TRACE_MARK)) return line;
    const numbers = line.slice(TRACE_MARK.length).replace(/[^0-9,]/g, '');
    return `assay-reached-in\t${JSON.stringify(file)}\t${numbers}\n`;
  }).join('');
}

export default async function* assayReporter(source) {
  if (batchReport) {
    await batchReporter(source);
    return;
  }
  const results = [];
  const counts = {};
  if (tracing) process.stderr.write('\nassay-reached-on\n');
  for await (const { type, data } of source) {
    if (type === 'test:pass' || type === 'test:fail') {
      results.push(resultOf(type, data, data.nesting));
    } else if (type === 'test:stdout') {
      process.stdout.write(String(data.message));
    } else if (type === 'test:stderr' && !tracing) {
      process.stderr.write(String(data.message));
    } else if (type === 'test:stderr') {
      process.stderr.write(traced(String(data.message), data.file));
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
