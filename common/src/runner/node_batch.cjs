// Several switched mutants in one node process: `node ARGS… -e SCRIPT assay-node-batch REPORT PLAN`,
// PLAN a JSON array of `{ "mutant": N, "files": [test files], "limit_ms": L }`. Each mutant's
// test files load afresh, each in a `describe` of its own (`assay-mutant N K/M FILE`), so their
// top-level tests and hooks nest there; every file of the tree they import (not node_modules)
// loads again for that mutant: ES modules under a URL of their own (a resolve hook passes the
// importing file's `assay-run` on), CommonJS modules with the require cache cleared, and the
// schema's switch read from `globalThis.__assay_mutant` as each one loads. Nothing runs before
// every file has loaded; before a mutant's tests run, its modules come back into the require
// cache and the switch is set to it, so a test that loads lazily gets that mutant's code.
//
// Assay's reporter (`ASSAY_NODE_BATCH`) appends one `assay.node/v1` document per mutant to
// REPORT as the mutant's last file ends. This script appends `assay.node-batch/v1` lines there
// too: `start` as a mutant's tests begin, and, from a watchdog thread that kills the process
// when a mutant outlives its limit (a loop node cannot interrupt from its own thread),
// `timeout`. Run again, it skips every mutant REPORT already settles, so a caller re-runs it
// until it exits 3 (nothing left). Kills are confirmed in the same process: once the last
// mutant's first run ends, each that failed runs again (`assay-mutant-again …`), its files
// loaded afresh once more; when every first run was in this process, the reporter then writes
// `confirmed`. Otherwise the caller runs it under `ASSAY_NODE_RERUN=1`, which runs the failed
// mutants without a re-run. A mutant that started and left neither a document nor a timeout
// (its tests exited node) is skipped: it runs alone elsewhere.
// `node -e` runs this in the global scope: inside a function, none of its names shadows a
// global the tests use (a preload's `describe` or `before`).
(function assayNodeBatch() {
  'use strict';
  const { describe, before } = require('node:test');
  const Module = require('node:module');
  const { pathToFileURL } = require('node:url');
  const { Worker } = require('node:worker_threads');
  const fs = require('node:fs');
  const path = require('node:path');

  const [report, planText] = process.argv.slice(-2);
  const rerun = process.env.ASSAY_NODE_RERUN === '1';
  const plan = JSON.parse(planText);
  const BATCH = 'assay.node-batch/v1';
  const NOTHING_LEFT = 3;
  const append = (line) => fs.appendFileSync(report, `${JSON.stringify(line)}\n`);

  // What REPORT already says of each mutant, for this pass (first runs, or re-runs).
  function settled() {
    let text = '';
    try { text = fs.readFileSync(report, 'utf8'); } catch { return { done: new Set(), failed: new Set() }; }
    const done = new Set(), failed = new Set();
    for (const line of text.split('\n')) {
      let doc;
      try { doc = JSON.parse(line); } catch { continue; }
      if (!doc || typeof doc.mutant !== 'number') continue;
      const ofThisPass = (doc.rerun === true) === rerun;
      if (doc.schema === BATCH && ofThisPass) done.add(doc.mutant);
      if (doc.schema === 'assay.node/v1' && ofThisPass) done.add(doc.mutant);
      if (doc.schema === 'assay.node/v1' && doc.rerun !== true && doc.failed === true) failed.add(doc.mutant);
    }
    return { done, failed };
  }

  const { done, failed } = settled();
  const todo = plan.filter(({ mutant }) => !done.has(mutant) && (!rerun || failed.has(mutant)));
  if (todo.length === 0 || typeof Module.register !== 'function') process.exit(NOTHING_LEFT);

  const root = process.cwd() + path.sep;
  const rootUrl = pathToFileURL(root).href;
  const ownFile = (file) => file.startsWith(root) && !file.split(path.sep).includes('node_modules');
  Module.register('data:text/javascript,' + encodeURIComponent(`
  const root = ${JSON.stringify(rootUrl)};
  export async function resolve(specifier, context, next) {
    const resolved = await next(specifier, context);
    const run = context.parentURL?.startsWith(root) ? new URL(context.parentURL).searchParams.get('assay-run') : null;
    if (!run || !resolved.url.startsWith(root) || resolved.url.includes('/node_modules/')) return resolved;
    const url = new URL(resolved.url);
    url.searchParams.set('assay-run', run);
    return { ...resolved, url: url.href };
  }`));

  // The watchdog: the running mutant, when it started, its limit and whether it is a re-run,
  // shared with a thread of its own that is never blocked by the tests.
  const shared = new Float64Array(new SharedArrayBuffer(32));
  const watchdog = new Worker(`
  const { workerData: { shared, report } } = require('node:worker_threads');
  const fs = require('node:fs');
  setInterval(() => {
    const [mutant, started, limit, again] = shared;
    if (started > 0 && Date.now() - started > limit) {
      fs.appendFileSync(report, JSON.stringify({ schema: ${JSON.stringify(BATCH)}, mutant, timeout: true, ms: Date.now() - started, rerun: again === 1 }) + '\\n');
      process.kill(process.pid, 'SIGKILL');
    }
  }, 20);`, { eval: true, workerData: { shared, report } });
  watchdog.unref();
  globalThis.__assay_batch_watch = shared;

  const clearOwn = () => {
    for (const key of Object.keys(require.cache)) if (ownFile(key)) delete require.cache[key];
  };
  // The reporter tells when a mutant's document is written: the next mutant's tests wait for it
  // (at most a second), so a loop that stops the process cannot take the one before with it.
  const written = new Map();
  globalThis.__assay_batch_written = (mutant) => written.get(mutant)?.();
  const writtenOf = (mutant) => new Promise((resolve) => {
    written.set(mutant, resolve);
    setTimeout(resolve, 1000).unref();
  });

  // Each file of `members` in a suite of its own, loaded one after another; their tests run
  // once all have loaded. `again`: the runs that confirm kills (`assay-mutant-again …`).
  async function runAll(members, again) {
    let allLoaded;
    const loaded = new Promise((resolve) => { allLoaded = resolve; });
    let previous = Promise.resolve();
    for (const { mutant, files, limit_ms: limit } of members) {
      const earlier = previous;
      previous = writtenOf(mutant);
      for (const [k, file] of files.entries()) {
        const modules = {};
        const name = `${again ? 'assay-mutant-again' : 'assay-mutant'} ${mutant} ${k}/${files.length} ${file}`;
        // The suite's body is synchronous up to the import, so the file's tests nest in it.
        await new Promise((settle) => {
          describe(name, () => {
            before(async () => {
              await loaded;
              if (k === 0) await earlier;
              globalThis.__assay_mutant = mutant;
              clearOwn();
              Object.assign(require.cache, modules);
              if (k === 0) {
                append({ schema: BATCH, mutant, start: true, rerun: again });
                shared.set([mutant, Date.now(), Number(limit) || 60000, again ? 1 : 0]);
              }
            });
            globalThis.__assay_mutant = mutant;
            clearOwn();
            const url = `${pathToFileURL(path.resolve(file)).href}?assay-run=${mutant}-${k}${again ? '-again' : ''}`;
            return import(url).finally(() => {
              for (const key of Object.keys(require.cache)) if (ownFile(key)) modules[key] = require.cache[key];
              settle();
            });
          });
        });
      }
    }
    allLoaded();
  }

  globalThis.__assay_batch_last = { mutant: todo[todo.length - 1].mutant, again: rerun };
  // Every member's first run in this one process: when its kills are confirmed here too, the
  // batch needs no pass of re-runs (the reporter then writes `confirmed`).
  globalThis.__assay_batch_whole = !rerun && done.size === 0;
  if (!rerun) {
    // Kills are confirmed in this process too: as the last first run ends, the reporter names
    // the members that failed, and each runs again with its files loaded afresh. A timer of
    // this script's registers them (from the reporter's own async context node:test would
    // find no parent), held up only once there is something to confirm; the reporter ends it.
    let decided = null;
    globalThis.__assay_batch_confirm = (failed) => {
      const again = todo.filter(({ mutant }) => failed.includes(mutant));
      if (again.length === 0) return false;
      globalThis.__assay_batch_last = { mutant: again[again.length - 1].mutant, again: true };
      decided = again;
      waiting.ref();
      return true;
    };
    const waiting = setInterval(() => {
      if (decided === null) return;
      clearInterval(waiting);
      runAll(decided, true);
    }, 5);
    waiting.unref();
  }
  runAll(todo, rerun);
})();
