#!/usr/bin/env node
// The in-browser index's cost: the same tree indexed
// natively, in wasm under Node and in wasm in Chromium, through the same
// `Indexer` calls the ingestion page makes (`build` = wo_index::index_files,
// then `renderExports("full")`), files already in memory on every side;
// prints the times, the wasm/native ratios and the gzipped asset sizes.
//
//   node scripts/bench-ingest.mjs [DIR] [RUNS]
//
// DIR defaults to this repository's crates/ (Rust, Markdown, JSON, JS,
// HTML); RUNS (default 3) timed runs after one warm-up, the best is kept.
// Needs: the committed wasm assets (scripts/build-wasm.sh), cargo (it runs
// `cargo run --release -p wo-index-wasm --example bench_native`), and for
// Chromium tests/browser's node_modules (`npm ci` there) and CHROMIUM
// (default /usr/bin/chromium). Folders starting with "." are not read, as
// the page does not read them.

import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const WEB = path.join(ROOT, 'crates/wo-server/src/web');
const DIR = path.resolve(process.argv[2] || path.join(ROOT, 'crates'));
const RUNS = Number(process.argv[3] || 3);
const NAME = path.basename(DIR);

function readTree(dir, prefix = '', out = []) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    if (e.isDirectory()) {
      if (!e.name.startsWith('.')) readTree(path.join(dir, e.name), `${prefix}${e.name}/`, out);
    } else if (e.isFile()) {
      out.push([`${prefix}${e.name}`, fs.readFileSync(path.join(dir, e.name))]);
    }
  }
  return out;
}

const files = readTree(DIR);
const bytes = files.reduce((n, [, b]) => n + b.length, 0);
console.log(`tree: ${DIR} — ${files.length} files, ${(bytes / 1e6).toFixed(2)} MB; best of ${RUNS} after a warm-up`);

const best = (xs) => Math.min(...xs);

// ---- native (release), one thread and every core
function native(threads) {
  const env = { ...process.env };
  if (threads) env.RAYON_NUM_THREADS = String(threads);
  const out = execFileSync('cargo', ['run', '--quiet', '--release', '-p', 'wo-index-wasm', '--example', 'bench_native', '--', DIR, String(RUNS)], { cwd: ROOT, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const r = JSON.parse(out.trim().split('\n').pop());
  return { build: best(r.build_ms), exports: best(r.exports_ms) };
}

// ---- wasm in Node
async function inNode() {
  const m = await import(pathToFileURL(path.join(WEB, 'wasm/wo_index_wasm.js')).href);
  await m.default({ module_or_path: fs.readFileSync(path.join(WEB, 'wasm/wo_index_wasm_bg.wasm')) });
  const build = [];
  const exports = [];
  for (let run = 0; run <= RUNS; run++) {
    const ix = new m.Indexer(NAME);
    for (const [p, b] of files) ix.add(p, b);
    let t = performance.now();
    ix.build(undefined);
    const built = performance.now() - t;
    t = performance.now();
    ix.renderExports('full');
    const exported = performance.now() - t;
    ix.free();
    if (run > 0) { build.push(built); exports.push(exported); }
  }
  return { build: best(build), exports: best(exports) };
}

// ---- wasm in Chromium (a loopback static server: the web assets and the tree)
async function inChromium() {
  let chromium;
  try {
    ({ chromium } = createRequire(path.join(ROOT, 'tests/browser/package.json'))('playwright-core'));
  } catch (e) {
    console.log(`chromium: skipped (${e.message.split('\n')[0]}; run npm ci in tests/browser)`);
    return null;
  }
  const manifest = JSON.stringify(files.map(([p, b]) => [p, b.length]));
  const blob = Buffer.concat(files.map(([, b]) => b));
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    if (url.pathname === '/') { res.writeHead(200, { 'content-type': 'text/html' }); res.end('<!DOCTYPE html><title>bench</title>'); return; }
    if (url.pathname === '/tree.json') { res.writeHead(200, { 'content-type': 'application/json' }); res.end(manifest); return; }
    if (url.pathname === '/tree.bin') { res.writeHead(200, { 'content-type': 'application/octet-stream' }); res.end(blob); return; }
    const file = path.join(WEB, path.normalize(url.pathname));
    if (!file.startsWith(WEB) || !fs.existsSync(file)) { res.writeHead(404); res.end(); return; }
    const type = file.endsWith('.wasm') ? 'application/wasm' : 'text/javascript';
    res.writeHead(200, { 'content-type': type });
    res.end(fs.readFileSync(file));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage();
    await page.goto(`http://127.0.0.1:${server.address().port}/`);
    return await page.evaluate(async ({ runs, name }) => {
      const m = await import('/wasm/wo_index_wasm.js');
      await m.default();
      const man = await (await fetch('/tree.json')).json();
      const all = new Uint8Array(await (await fetch('/tree.bin')).arrayBuffer());
      const build = [];
      const exports = [];
      for (let run = 0; run <= runs; run++) {
        const ix = new m.Indexer(name);
        let at = 0;
        for (const [p, n] of man) { ix.add(p, all.subarray(at, at + n)); at += n; }
        let t = performance.now();
        ix.build(undefined);
        const built = performance.now() - t;
        t = performance.now();
        ix.renderExports('full');
        const exported = performance.now() - t;
        ix.free();
        if (run > 0) { build.push(built); exports.push(exported); }
      }
      return { build: Math.min(...build), exports: Math.min(...exports) };
    }, { runs: RUNS, name: NAME });
  } finally {
    await browser.close();
    server.close();
  }
}

const one = native(1);
const all = native(0);
const node = await inNode();
const chrome = await inChromium();
const ms = (x) => `${x.toFixed(0)} ms`;
const rows = [['native, 1 thread', one], ['native, every core', all], ['wasm in Node', node]];
if (chrome) rows.push(['wasm in Chromium', chrome]);
console.log('\n| | index (build) | exports (full) | build ÷ native 1 thread | build ÷ native every core |');
console.log('|---|---:|---:|---:|---:|');
for (const [label, r] of rows) {
  console.log(`| ${label} | ${ms(r.build)} | ${ms(r.exports)} | ${(r.build / one.build).toFixed(2)}× | ${(r.build / all.build).toFixed(2)}× |`);
}
console.log('\n| asset | bytes | gzipped (-9) |');
console.log('|---|---:|---:|');
for (const f of ['wo_wasm_bg.wasm', 'wo_wasm.js', 'wo_index_wasm_bg.wasm', 'wo_index_wasm.js']) {
  const b = fs.readFileSync(path.join(WEB, 'wasm', f));
  console.log(`| \`${f}\` | ${b.length.toLocaleString('en')} | ${zlib.gzipSync(b, { level: 9 }).length.toLocaleString('en')} |`);
}
