// Assay's TypeScript erasure, run by node where the tests run (`node -e SCRIPT assay-erase-types
// MODE`): every `.ts`, `.mts`, `.cts` and `.tsx` file of the tree in the working directory (not
// a declaration file, nothing under node_modules/ or .git/) transpiled file by file to the
// JavaScript beside it (`.js`, `.mjs`, `.cjs`; `.tsx` to `.js`, its JSX as calls: the project's
// `jsx` option, React's classic `createElement` (or a file's `@jsx` pragma) where it sets none,
// since node runs no JSX): types removed, nothing type-checked, as tsx,
// node's type stripping and Stryker's default do. The compiler is the project's own
// (node_modules/typescript) or the system's (`tsc` on PATH, Debian's node-typescript). The
// project's tsconfig.json gives the options (unset: ES2022 and esModuleInterop, as `tsc --init`
// writes them), except where the output goes, which module system it is (node's rule: `.mts`
// ES module, `.cts` CommonJS, `.ts` as the nearest package.json's "type" says) and what else it
// writes (no declarations, and no maps but where `write-mapped` asks).
// MODE `emit` prints {"schema", "compiler", "files": {PATH: TEXT}} on stdout; `write` writes
// the files; `write-mapped` writes them each with its source map inline, so that node's V8
// coverage can name the TypeScript lines that ran (the diff coverage run). A file the compiler cannot read is named on stderr. Without a compiler, `emit`
// exits 3 and `write` says so on stderr and exits 0, so the tests run as they would have.
'use strict';
const fs = require('fs');
const path = require('path');

const mode = process.argv[2];
const writes = mode === 'write' || mode === 'write-mapped';
const root = process.cwd();

function compiler() {
  try {
    return require(require.resolve('typescript', { paths: [root] }));
  } catch (_) {}
  for (const dir of (process.env.PATH || '').split(':')) {
    try {
      const tsc = fs.realpathSync(path.join(dir || '.', 'tsc'));
      return require(path.join(path.dirname(tsc), '..', 'lib', 'typescript.js'));
    } catch (_) {}
  }
  for (const dir of ['/usr/share/nodejs/typescript', '/usr/lib/nodejs/typescript']) {
    try {
      return require(dir);
    } catch (_) {}
  }
  return null;
}

function sources(dir, found) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name === '.git') continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      sources(full, found);
    } else if (entry.isFile() && /\.([cm]?ts|tsx)$/.test(entry.name) && !/\.d\.[cm]?ts$/.test(entry.name)) {
      found.push(path.relative(root, full).split(path.sep).join('/'));
    }
  }
  return found;
}

const packageTypes = new Map();
function isModule(file) {
  if (file.endsWith('.mts')) return true;
  if (file.endsWith('.cts')) return false;
  for (let dir = path.dirname(path.join(root, file)); ; dir = path.dirname(dir)) {
    if (!packageTypes.has(dir)) {
      let type = null;
      try {
        type = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).type || 'commonjs';
      } catch (_) {}
      packageTypes.set(dir, type);
    }
    if (packageTypes.get(dir) !== null) return packageTypes.get(dir) === 'module';
    if (dir === root || path.dirname(dir) === dir) return false;
  }
}

const found = sources(root, []).sort();
if (found.length === 0 && writes) process.exit(0);
const ts = compiler();
if (ts === null) {
  process.stderr.write('assay: TypeScript cannot run here: neither the project (node_modules/typescript) nor the system (`tsc` on PATH, Debian\'s node-typescript) has its compiler, so its types are not erased (hint: install node-typescript where the tests run)\n');
  // In place, the tests still run: a JavaScript project's stray `.ts` file does not stop them.
  process.exit(writes ? 0 : 3);
}
let options = {};
if (fs.existsSync(path.join(root, 'tsconfig.json'))) {
  const read = ts.readConfigFile(path.join(root, 'tsconfig.json'), ts.sys.readFile);
  if (read.error) {
    process.stderr.write(`assay: tsconfig.json: ${ts.flattenDiagnosticMessageText(read.error.messageText, '\n')}\n`);
  } else {
    options = ts.parseJsonConfigFileContent(read.config, ts.sys, root).options;
  }
}
for (const key of ['outDir', 'outFile', 'rootDir', 'declarationDir', 'moduleResolution', 'verbatimModuleSyntax', 'importHelpers', 'noEmitHelpers']) {
  delete options[key];
}
Object.assign(options, {
  noEmit: false, declaration: false, declarationMap: false, emitDeclarationOnly: false,
  sourceMap: false, inlineSourceMap: mode === 'write-mapped', inlineSources: false, composite: false,
  incremental: false,
});
// Unset, as `tsc --init` writes them: `import assert from 'node:assert'` works in CommonJS.
if (options.target === undefined) options.target = ts.ScriptTarget.ES2022;
if (options.esModuleInterop === undefined) options.esModuleInterop = true;
// JSX kept as written (tsc's own default) is what node cannot run.
if (options.jsx === undefined || options.jsx === ts.JsxEmit.Preserve || options.jsx === ts.JsxEmit.ReactNative) {
  options.jsx = ts.JsxEmit.React;
}

const files = {};
for (const file of found) {
  const compilerOptions = Object.assign({}, options, {
    module: isModule(file) ? ts.ModuleKind.ES2022 : ts.ModuleKind.CommonJS,
  });
  const out = ts.transpileModule(fs.readFileSync(path.join(root, file), 'utf8'), {
    compilerOptions, fileName: file, reportDiagnostics: true,
  });
  for (const d of out.diagnostics || []) {
    process.stderr.write(`assay: ${file}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}\n`);
  }
  const target = file.replace(/\.tsx$/, '.js').replace(/\.([cm]?)ts$/, '.$1js');
  if (writes) {
    fs.writeFileSync(path.join(root, target), out.outputText);
  } else {
    files[target] = out.outputText;
  }
}
if (!writes) {
  process.stdout.write(JSON.stringify({ schema: 'assay.erased-types/v1', compiler: ts.version, files }));
}
