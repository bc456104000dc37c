// Real-browser tests of the `wo serve` web client, in local and stateless
// modes, against the real binary and a real OpenAI-compatible model server.
//
// Environment:
//   WO_BIN              path to the built `wo` binary (required)
//   WO_OPENAI_BASE_URL  e.g. http://127.0.0.1:8090/v1 — an OpenAI-compatible
//                       server (llama-cpp-python with SmolLM2, alias `smollm2`)
//   CHROMIUM            browser executable (default /usr/bin/chromium)
//   WO_BROWSER_ONLY     optional: run only scenarios whose name contains this
//   WO_KEEP_TMP         optional: keep the temporary directory
//   WO_BROWSER_BENCH    1: run only the benchmark (opening and scrolling a
//                       10,000-message llm.json, against fetching and parsing
//                       the same state in the same page), instead of the tests
//   WO_SCREENSHOTS      where to write a screenshot of each screen visited, at
//                       desktop (1280×800) and phone (390×844) sizes
//                       (default: target/browser-screenshots/)
//
// Every screen shot is also audited by axe-core (light and dark colour
// schemes): a serious or critical violation fails the scenario.
//
// Prints `ok - NAME` or `not ok - NAME: REASON` per scenario and a closing
// `N passed, N failed` line; exits 1 if any failed. Every server it starts
// is killed on the way out.

import { spawn, execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
let chromium;
try {
  ({ chromium } = await import('playwright-core'));
} catch (e) {
  console.log(`not ok - runner: cannot load playwright-core (${e.message}); run \`npm ci\` in ${HERE}`);
  console.log('0 passed, 1 failed');
  process.exit(1);
}
/** axe-core's source, evaluated in pages through the DevTools protocol (which the page's CSP does not govern). */
let AXE_SOURCE;
try {
  AXE_SOURCE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
} catch (e) {
  console.log(`not ok - runner: cannot load axe-core (${e.message}); run \`npm ci\` in ${HERE}`);
  console.log('0 passed, 1 failed');
  process.exit(1);
}
const WO_BIN = process.env.WO_BIN;
const BASE_URL = process.env.WO_OPENAI_BASE_URL;
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const ONLY = process.env.WO_BROWSER_ONLY || '';
const BENCH = process.env.WO_BROWSER_BENCH === '1';
const SCENARIO_TIMEOUT_MS = 240_000;
const SHOTS = process.env.WO_SCREENSHOTS || path.join(HERE, '..', '..', 'target', 'browser-screenshots');
fs.mkdirSync(SHOTS, { recursive: true });
/** The two sizes every new-UI scenario runs at. */
const SIZES = {
  desktop: { viewport: { width: 1280, height: 800 }, reducedMotion: 'reduce' },
  phone: { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, reducedMotion: 'reduce' },
};
const ANSWER_TOKENS = 32; // keep answers of the tiny model short

if (!WO_BIN || !BASE_URL) {
  console.error('run.mjs needs WO_BIN (the wo binary) and WO_OPENAI_BASE_URL (an OpenAI-compatible server)');
  process.exit(2);
}

const TMP = fs.mkdtempSync(path.join(os.tmpdir(), 'wo-browser-'));
const HOME = path.join(TMP, 'home');
fs.mkdirSync(HOME, { recursive: true });
const CONFIG = path.join(TMP, 'config.toml');
fs.writeFileSync(CONFIG, [
  '[defaults]',
  'provider = "llama"',
  `max_tokens = ${ANSWER_TOKENS}`,
  '',
  '[providers.llama]',
  'kind = "openai"',
  `base_url = ${JSON.stringify(BASE_URL)}`,
  'model = "smollm2"',
  'context_window = 2048',
  'timeout_secs = 120',
  '',
  '# nothing listens on port 9: every turn with this provider fails',
  '[providers.dead]',
  'kind = "openai"',
  'base_url = "http://127.0.0.1:9/v1"',
  'model = "nothing"',
  'timeout_secs = 5',
  '',
  '# The memory interpreter is off but in the memory scenarios (MEMORY_CONFIG).',
  '[interpreter]',
  'mode = "off"',
  '',
].join('\n'));

// A scripted memory interpreter: a loopback OpenAI-compatible server (the
// Chat Completions streaming wire format) answering every call with one
// memory operation, so the memory view's scenario is deterministic. The
// real model still answers the chat itself; the interpreter through the
// real model is tested in crates/wikioracle/tests/memory.rs.
const SCRIPTED_OPS = JSON.stringify({ ops: [{ op: 'add', kind: 'fact', title: 'Ann lives in Lisbon', content: 'Ann said she lives in Lisbon.', certainty: 0.8 }] });
const interpreterCalls = [];
const interpreter = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => { body += c; });
  req.on('end', () => {
    try { interpreterCalls.push(JSON.parse(body)); } catch { interpreterCalls.push(null); }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const chunk = (delta, finish) => `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'scripted', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    res.write(chunk({ role: 'assistant', content: SCRIPTED_OPS }, null));
    res.write(chunk({}, 'stop'));
    res.end('data: [DONE]\n\n');
  });
});
await new Promise((resolve) => interpreter.listen(0, '127.0.0.1', resolve));
interpreter.unref();
const MEMORY_CONFIG = path.join(TMP, 'config-memory.toml');
fs.writeFileSync(MEMORY_CONFIG, fs.readFileSync(CONFIG, 'utf8').replace('mode = "off"', 'mode = "after"\nprovider = "scripted"\npause_seconds = 0') + [
  '',
  '[providers.scripted]',
  'kind = "openai"',
  `base_url = "http://127.0.0.1:${interpreter.address().port}/v1"`,
  'model = "scripted"',
  '',
].join('\n'));

const PAYLOADS = JSON.parse(fs.readFileSync(path.join(HERE, 'xss-payloads.json'), 'utf8'));

// ------------------------------------------------------------------ servers

const children = new Set();

function killAll() {
  for (const c of children) {
    try { c.kill('SIGKILL'); } catch { /* gone */ }
  }
  children.clear();
}
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => { killAll(); process.exit(130); });
}

const SERVE_HELP = (() => {
  try {
    return execFileSync(WO_BIN, ['serve', '--help'], { env: serverEnv(), encoding: 'utf8' });
  } catch (e) {
    return String(e.stdout || '') + String(e.stderr || '');
  }
})();
/** `--state` or `--file`: whichever this `wo` calls the state-file flag. */
const STATE_FLAG = /--file\b/.test(SERVE_HELP) ? '--file' : '--state';
/** The suite makes more requests a minute than a person: no rate limit where it can be turned off. */
const EXTRA_ARGS = /--rate-limit\b/.test(SERVE_HELP) ? ['--rate-limit', '0'] : [];

function serverEnv({ memory = false } = {}) {
  const env = { ...process.env, WO_CONFIG: memory ? MEMORY_CONFIG : CONFIG, HOME, XDG_CONFIG_HOME: path.join(HOME, '.config'), XDG_DATA_HOME: path.join(HOME, '.local/share') };
  delete env.WO_STATE;
  return env;
}

let serverCount = 0;
/** Starts `wo serve`; resolves with {url, origin, file, dir, stop}. */
async function startServer({ stateless = false, file = null, memory = false, port = '0', newToken = false } = {}) {
  // A port is reused right after a server on it stopped: retry while it is still taken.
  for (let attempt = 0; ; attempt++) {
    try {
      return await startServerOnce({ stateless, file, memory, port, newToken });
    } catch (e) {
      if (port === '0' || attempt >= 20 || !/Address already in use|cannot listen/.test(e.message)) throw e;
      await sleep(250);
    }
  }
}

async function startServerOnce({ stateless, file, memory, port, newToken }) {
  const n = ++serverCount;
  const dir = path.join(TMP, `server${n}`);
  fs.mkdirSync(dir, { recursive: true });
  const urlFile = path.join(dir, 'url.txt');
  const stateFile = stateless ? null : (file || path.join(dir, 'llm.json'));
  const args = stateless
    // Hosted servers offer only the default provider unless told: the
    // failure scenarios need `dead` too.
    ? ['serve', '--stateless', '--allow-provider', 'llama', '--allow-provider', 'dead', '--port', String(port), '--print-url-file', urlFile, ...EXTRA_ARGS]
    : [STATE_FLAG, stateFile, 'serve', '--port', String(port), '--print-url-file', urlFile, ...(newToken ? ['--new-token'] : []), ...EXTRA_ARGS];
  const log = fs.openSync(path.join(dir, 'server.log'), 'w');
  const child = spawn(WO_BIN, args, { cwd: dir, env: serverEnv({ memory }), stdio: ['ignore', log, log] });
  children.add(child);
  let exited = null;
  child.on('exit', (code, sig) => { exited = `exit ${code ?? sig}`; children.delete(child); });
  const deadline = Date.now() + 60_000;
  let url = '';
  while (Date.now() < deadline) {
    if (exited) break;
    if (fs.existsSync(urlFile)) {
      url = fs.readFileSync(urlFile, 'utf8').trim();
      if (url) break;
    }
    await sleep(100);
  }
  fs.closeSync(log);
  if (!url) {
    child.kill('SIGKILL');
    const out = fs.readFileSync(path.join(dir, 'server.log'), 'utf8').slice(-2000);
    throw new Error(`wo ${args.join(' ')} did not print its URL (${exited || 'timeout'}): ${out}`);
  }
  const origin = new URL(url).origin;
  return {
    url, origin, file: stateFile, dir, stateless,
    stop: async () => {
      if (child.exitCode != null || child.signalCode != null) return;
      child.kill('SIGTERM');
      for (let i = 0; i < 30 && child.exitCode == null && child.signalCode == null; i++) await sleep(100);
      if (child.exitCode == null && child.signalCode == null) child.kill('SIGKILL');
    },
  };
}

// ------------------------------------------------------------------ helpers

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}

function readState(file) {
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

const sha16 = (s) => crypto.createHash('sha256').update(s, 'utf8').digest('hex').slice(0, 16);
const stamp = (ms) => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');

function b64urlDecode(s) {
  return Buffer.from(s.replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString('utf8');
}

function b64urlEncode(s) {
  return Buffer.from(s, 'utf8').toString('base64').replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

let browser;

/** The preferences cookie of `server`: one per port (cookies ignore ports). */
function prefsCookie(server) {
  return `wo_prefs_${new URL(server.origin).port}`;
}

/**
 * A fresh browser context and page for `server`, watching for dialogs,
 * foreign requests, page errors and CSP reports. `prefs` pre-sets the
 * server's preferences cookie (`wo_prefs_<port>`).
 */
async function openPage(server, { prefs = { max_tokens: ANSWER_TOKENS }, bypassCSP = false, signIn = true, size = null } = {}) {
  const context = await browser.newContext({ acceptDownloads: true, bypassCSP, ...(size ? SIZES[size] : { viewport: { width: 1200, height: 900 } }) });
  if (prefs) {
    await context.addCookies([{ name: prefsCookie(server), value: b64urlEncode(JSON.stringify(prefs)), url: server.origin, sameSite: 'Strict' }]);
  }
  const page = await context.newPage();
  const watch = { dialogs: [], foreign: [], errors: [], csp: [], console: [] };
  page.on('dialog', (d) => { watch.dialogs.push(`${d.type()}: ${d.message()}`); d.dismiss().catch(() => {}); });
  page.on('request', (r) => {
    const u = r.url();
    if (u.startsWith('data:') || u.startsWith('blob:')) return;
    let origin = '';
    try { origin = new URL(u).origin; } catch { /* opaque */ }
    if (origin !== server.origin) watch.foreign.push(u);
  });
  page.on('pageerror', (e) => watch.errors.push(String(e && e.message ? e.message : e)));
  page.on('console', (m) => {
    const t = m.text();
    if (/Content.Security.Policy/i.test(t)) watch.csp.push(t);
    if (m.type() === 'error') watch.console.push(t);
  });
  page.setDefaultTimeout(30_000);
  await page.goto(signIn ? server.url : server.origin + '/');
  if (signIn) await page.waitForSelector('body[data-ready="true"]');
  return { context, page, watch };
}

function checkClean(watch, what = '') {
  assert(!watch.dialogs.length, `${what}dialog opened: ${watch.dialogs.join('; ')}`);
  assert(!watch.foreign.length, `${what}request to another origin: ${watch.foreign.join(', ')}`);
  assert(!watch.errors.length, `${what}uncaught page error: ${watch.errors.join('; ')}`);
}

/** Sends `text` through the UI; resolves when the answer is saved and shown. */
async function sendMessage(page, text, { expectStream = true } = {}) {
  const before = await page.locator('[data-testid="message"]').count();
  await page.evaluate(() => {
    window.__streamSeen = 0;
    const mo = new MutationObserver(() => {
      const el = document.querySelector('[data-testid="streaming-answer"]');
      if (el) window.__streamSeen = Math.max(window.__streamSeen, el.textContent.length);
    });
    mo.observe(document.getElementById('messages'), { childList: true, subtree: true, characterData: true });
    window.__streamObserver = mo;
  });
  await page.fill('[data-testid="composer-input"]', text);
  await page.click('[data-testid="send"]');
  await page.waitForFunction(
    (n) => (!document.querySelector('[data-testid="pending-answer"]') && document.querySelectorAll('[data-testid="message"]').length >= n)
      || /Failed|Stopped/.test(document.querySelector('[data-testid="streaming-note"]')?.textContent || ''),
    before + 1, { timeout: 180_000 },
  ).catch(async (e) => {
    const alertText = await page.evaluate(() => document.querySelector('[data-testid="alert"]')?.textContent ?? '');
    const note = await page.evaluate(() => document.querySelector('[data-testid="streaming-note"]')?.textContent ?? '');
    throw new Error(`no saved answer (${alertText || note || e.message})`);
  });
  const note = await page.evaluate(() => document.querySelector('[data-testid="streaming-note"]')?.textContent ?? null);
  if (note && /Failed|Stopped/.test(note)) throw new Error(`the turn did not complete: ${note}`);
  const seen = await page.evaluate(() => { window.__streamObserver.disconnect(); return window.__streamSeen; });
  if (expectStream) assert(seen > 0, 'no streamed text was shown before the answer was saved');
  return seen;
}

async function lastMessages(page, n) {
  return page.$$eval('[data-testid="message"]', (els, k) => els.slice(-k).map((e) => ({
    id: e.dataset.id,
    role: e.dataset.role,
    title: e.dataset.title,
    username: e.querySelector('[data-testid="message-username"]').textContent,
    time: e.querySelector('[data-testid="message-time"]').getAttribute('datetime'),
    content: e.querySelector('[data-testid="message-content"]').textContent,
    context: !!e.querySelector('[data-testid="context-used"]'),
    included: e.querySelectorAll('[data-testid="context-included"] li').length,
  })), n);
}

async function idbState(page) {
  return page.evaluate(() => new Promise((resolve, reject) => {
    const req = indexedDB.open('wikioracle', 1);
    req.onerror = () => reject(req.error);
    req.onsuccess = () => {
      const db = req.result;
      const get = db.transaction('state', 'readonly').objectStore('state').get('llm.json');
      get.onsuccess = () => { db.close(); resolve(get.result ?? null); };
      get.onerror = () => reject(get.error);
    };
  }));
}

/** The state as the test can see it: the file (local) or IndexedDB (stateless). */
async function stateOf(server, page) {
  const empty = { messages: [], truth: { trust: [] }, context: '' };
  if (server.stateless) return (await idbState(page)) ?? empty;
  return fs.existsSync(server.file) ? readState(server.file) : empty;
}

async function waitStatus(page, re, timeout = 60_000) {
  await page.waitForFunction((src) => {
    const r = new RegExp(src, 'i');
    const s = document.querySelector('[data-testid="status"]').textContent;
    const a = document.querySelector('[data-testid="alert"]').textContent;
    return r.test(s) || (a && a.length > 0);
  }, re.source, { timeout });
  const alertText = await page.textContent('[data-testid="alert"]');
  assert(!alertText, `error shown: ${alertText}`);
}

async function openPanel(page, which) {
  const toggle = page.locator(`[data-testid="open-${which}"]`);
  // On a narrower desktop some tools sit behind the header's "More".
  if (!(await toggle.isVisible()) && (await page.locator('[data-testid="open-more"]').isVisible())) {
    await page.click('[data-testid="open-more"]');
  }
  if ((await toggle.getAttribute('aria-expanded')) !== 'true') await toggle.click();
  await page.waitForSelector(`[data-testid="panel-${which}"]:not([hidden])`);
}

async function download(page, action) {
  const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 30_000 }), action()]);
  const file = await dl.path();
  return { name: dl.suggestedFilename(), text: fs.readFileSync(file, 'utf8') };
}

// A server for a scenario's fixture state: local mode serves it from a file
// in DIR (under TMP); stateless starts empty and `importFixtureIfStateless` imports it.
async function serveFixture(mode, fx, dir) {
  if (mode !== 'local') return startServer({ stateless: true });
  const where = path.join(TMP, dir);
  fs.mkdirSync(where, { recursive: true });
  const file = path.join(where, 'llm.json');
  fs.writeFileSync(file, JSON.stringify(fx, null, 2));
  return startServer({ file });
}

// The page's side of `serveFixture`: in stateless mode the fixture is
// imported as a file, as a user would.
async function importFixtureIfStateless(page, mode, fx) {
  if (mode !== 'stateless') return;
  await importFile(page, 'llm_2024.01.01.0000.json', JSON.stringify(fx));
  await waitStatus(page, /Imported|Merged/);
}

async function importFile(page, name, text) {
  await page.setInputFiles('[data-testid="import-input"]', { name, mimeType: 'application/json', buffer: Buffer.from(text) });
}

async function dropFile(page, name, text) {
  const dt = await page.evaluateHandle(({ name, text }) => {
    const d = new DataTransfer();
    d.items.add(new File([text], name, { type: 'application/json' }));
    return d;
  }, { name, text });
  await page.dispatchEvent('main', 'dragenter', { dataTransfer: dt });
  await page.dispatchEvent('main', 'dragover', { dataTransfer: dt });
  await page.dispatchEvent('main', 'drop', { dataTransfer: dt });
}

/** A small valid llm.json with `n` messages and a truth entry, all new ids. */
function exportFixture(tag, n = 2, base = Date.UTC(2025, 0, 2, 3, 4, 5)) {
  const messages = [];
  let parent;
  for (let i = 0; i < n; i++) {
    const username = i % 2 ? 'smollm2' : 'phone';
    const timestamp = stamp(base + i * 1000);
    const content = `<p>${tag} message ${i}</p>`;
    const m = { id: 'm_' + sha16(`${username}|${timestamp}|${content}`), title: `${tag} ${i}`, username, timestamp, content, role: i % 2 ? 'assistant' : 'user' };
    if (parent) m.parent = parent;
    parent = m.id;
    messages.push(m);
  }
  const tts = stamp(base);
  const tcontent = `<p>${tag} fact</p>`;
  return {
    version: 1,
    schema: 'https://raw.githubusercontent.com/arborrhythms/WikiOracle/main/spec/llm_state_v1.json',
    date: stamp(base + n * 1000),
    context: '',
    messages,
    truth: { trust: [{ id: 't_' + sha16(`${tag} fact|${tts}|${tcontent}`), title: `${tag} fact`, timestamp: tts, certainty: 0.7, content: tcontent }], retrieval_prefs: { max_entries: 8 } },
  };
}

/** An llm.json holding every payload raw: message contents, titles, usernames, truth, context. */
function xssFixture() {
  const base = Date.UTC(2025, 5, 1, 0, 0, 0);
  const messages = [];
  const trust = [];
  let parent;
  // Every fourth message also holds its payload as highlighted code, under
  // a language class that is itself a payload every other time.
  const esc = (t) => t.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
  PAYLOADS.forEach((p, i) => {
    const timestamp = stamp(base + i * 1000);
    const username = i % 5 === 0 ? p : (i % 2 ? 'smollm2' : 'alice');
    const title = i % 3 === 0 ? p : `payload ${i}`;
    const lang = i % 8 === 1 ? `language-${esc(p)}` : 'language-js';
    const content = i % 4 === 1 ? `${p}<pre><code class="${lang}">${esc(p)}</code></pre>` : p;
    const m = { id: 'm_' + sha16(`${username}|${timestamp}|${content}`), title, username, timestamp, content, role: i % 2 ? 'assistant' : 'user' };
    if (parent) m.parent = parent;
    if (i % 2) m.sources = [];
    parent = m.id;
    messages.push(m);
    const t = { id: 't_' + sha16(`${title}|${timestamp}|${p}`), title, timestamp, certainty: ((i % 10) + 0.5) / 10, content: p };
    if (i % 7 === 0) t.tags = [p];
    trust.push(t);
  });
  // Sources that name the truth entries (rendered as text by the client).
  for (const [i, m] of messages.entries()) if (m.sources) m.sources = [trust[i].id, trust[(i + 1) % trust.length].id];
  return {
    version: 1,
    schema: 'https://raw.githubusercontent.com/arborrhythms/WikiOracle/main/spec/llm_state_v1.json',
    date: stamp(base + PAYLOADS.length * 1000),
    context: PAYLOADS.join('\n'),
    messages,
    truth: { trust, retrieval_prefs: { max_entries: 8, min_certainty: 0 } },
  };
}

// ------------------------------------------------------------------ scenarios

const results = [];
const scenarios = [];
function scenario(name, fn) {
  scenarios.push({ name, fn });
}

async function runScenario({ name, fn }) {
  if (ONLY && !name.includes(ONLY)) return;
  if (BENCH !== name.startsWith('bench:')) return;
  const started = Date.now();
  let timer;
  try {
    await Promise.race([
      fn(),
      new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out after ${SCENARIO_TIMEOUT_MS / 1000}s`)), SCENARIO_TIMEOUT_MS); }),
    ]);
    results.push({ name, ok: true });
    console.log(`ok - ${name} (${((Date.now() - started) / 1000).toFixed(1)}s)`);
  } catch (e) {
    const reason = String(e && e.message ? e.message : e).split('\n')[0].slice(0, 500);
    results.push({ name, ok: false, reason });
    console.log(`not ok - ${name}: ${reason}`);
  } finally {
    clearTimeout(timer);
  }
}

// Shared servers, started lazily.
const servers = {};
async function localServer() {
  servers.local ||= await startServer();
  return servers.local;
}
async function statelessServer() {
  servers.stateless ||= await startServer({ stateless: true });
  return servers.stateless;
}

/** Stateless scenarios keep their IndexedDB in one persistent browser profile per scenario. */
async function withPage(server, opts, fn) {
  const { context, page, watch } = await openPage(server, opts);
  try {
    await fn(page, watch, context);
    checkClean(watch);
  } finally {
    await context.close();
  }
}

scenario('local: without the token the page says to open the printed URL', async () => {
  const server = await localServer();
  await withPage(server, { signIn: false }, async (page) => {
    const resp = await page.goto(server.origin + '/');
    const csp = resp.headers()['content-security-policy'] || '';
    assert(/script-src 'self'/.test(csp) && !/unsafe-inline/.test(csp), `page CSP: ${csp || '(none)'}`);
    await page.waitForSelector('[data-testid="signin"]:not([hidden])');
    const text = await page.textContent('[data-testid="signin"]');
    assert(/wo serve/.test(text) && /token/.test(text), `sign-in text: ${text}`);
    assert(await page.isDisabled('[data-testid="open-settings"]'), 'tools enabled without sign-in');
  });
});

for (const mode of ['local', 'stateless']) {
  const get = mode === 'local' ? localServer : statelessServer;

  scenario(`${mode}: send a message and see the streamed answer`, async () => {
    const server = await get();
    await withPage(server, {}, async (page) => {
      const before = (await stateOf(server, page))?.messages?.length ?? 0;
      await sendMessage(page, 'What colour is the sky? Answer briefly.');
      const [q, a] = await lastMessages(page, 2);
      assert(q.role === 'user' && /sky/.test(q.content), `question shown as ${JSON.stringify(q)}`);
      assert(a.role === 'assistant' && a.content.trim().length > 0, `answer shown as ${JSON.stringify(a)}`);
      assert(a.title && a.username && a.time, 'answer lacks title, username or timestamp');
      assert(a.context && a.included > 0, 'answer has no "context used" disclosure listing what was sent');
      const st = await stateOf(server, page);
      assert(st.messages.length === before + 2, `state has ${st.messages.length} messages, expected ${before + 2}`);
      const ids = st.messages.map((m) => m.id);
      assert(ids.includes(q.id) && ids.includes(a.id), 'shown ids are not the stored ids');
      const stored = st.messages.find((m) => m.id === a.id);
      assert(stored.parent === q.id, `answer's parent is ${stored.parent}, expected ${q.id}`);
      const sorted = [...st.messages].sort((x, y) => (Date.parse(x.timestamp) - Date.parse(y.timestamp)) || (x.id < y.id ? -1 : 1));
      assert(canonical(sorted.map((m) => m.id)) === canonical(ids), 'messages are not sorted by (timestamp, id)');
      // The "Context used" panel after a reload shows what it showed live:
      // kinds, names, tokens and what was left out, from the answer's record.
      assert(stored.context_used && Array.isArray(stored.context_used.sent), `the answer keeps no context record: ${JSON.stringify(stored)}`);
      const panelText = () => page.evaluate((id) => {
        const d = document.querySelector(`[data-testid="message"][data-id="${id}"] [data-testid="context-used"]`);
        if (!d) return null;
        d.open = true;
        return d.innerText;
      }, a.id);
      const live = await panelText();
      assert(live && /parts sent/.test(live) && /tokens/.test(live), `live panel: ${live}`);
      await page.reload();
      await page.waitForSelector('body[data-ready="true"]');
      await page.waitForSelector(`[data-testid="message"][data-id="${a.id}"]`);
      const reloaded = await panelText();
      assert(reloaded === live, `after a reload the panel shows ${JSON.stringify(reloaded)}, live it showed ${JSON.stringify(live)}`);
    });
  });

  for (const size of ['desktop', 'phone']) {
    const prefs = { max_tokens: 400, temperature: 0 };
    /** Sends a counting prompt and resolves once more than `chars` of its answer are shown. */
    /**
     * Sends `prompt` and waits until more than `chars` characters of the
     * answer are shown; false when the answer finished before that (the
     * real model sometimes answers a counting request in one sentence).
     */
    const startLongAnswer = async (page, prompt, chars) => {
      await page.fill('[data-testid="composer-input"]', prompt);
      await page.click('[data-testid="send"]');
      await page.waitForSelector('[data-testid="stop"]:not([hidden])');
      await page.waitForFunction((n) => (document.querySelector('[data-testid="streaming-answer"]')?.textContent.length ?? 0) > n
        || document.querySelector('[data-testid="stop"]')?.hidden, chars, { timeout: 120_000 });
      return page.isVisible('[data-testid="stop"]');
    };
    /** The stored question containing `marker` and its answer. */
    const keptTurn = (st, marker) => {
      const qs = st.messages.filter((m) => m.role === 'user' && m.content.includes(marker));
      assert(qs.length === 1, `${qs.length} stored questions contain "${marker}", expected 1`);
      const as = st.messages.filter((m) => m.parent === qs[0].id);
      assert(as.length === 1, `${as.length} stored answers to the stopped question, expected 1`);
      return [qs[0], as[0]];
    };
    /** The kept exchange is shown, the answer marked incomplete for eyes and screen readers, with Regenerate. */
    const assertShownIncomplete = async (page, q, a) => {
      const item = `[data-testid="message"][data-id="${a.id}"]`;
      await page.waitForSelector(`${item} [data-testid="incomplete-mark"]`);
      assert(await page.isVisible(`[data-testid="message"][data-id="${q.id}"]`), 'the stopped question is not shown');
      const mark = await page.textContent(`${item} [data-testid="incomplete-mark"]`);
      assert(/Incomplete/.test(mark), `incomplete mark reads "${mark}"`);
      const note = await page.textContent(`${item} [data-testid="incomplete-note"]`);
      assert(/Stopped before/.test(note) && /Regenerate/.test(note), `incomplete note reads "${note}"`);
      const label = await page.getAttribute(`${item} article`, 'aria-label');
      assert(/incomplete/.test(label), `the answer's label for screen readers is "${label}"`);
      assert((await page.locator(`${item} [data-testid="regenerate"]`).count()) === 1, 'no Regenerate on the stopped answer');
    };

    scenario(`${mode} ${size}: Stop mid-answer keeps the question and the answer so far, marked incomplete`, async () => {
      const server = await get();
      await withPage(server, { size, prefs }, async (page) => {
        const marker = `${mode} ${size} stop test`;
        await startLongAnswer(page, `Count from 1 to 200, one number per line. (${marker})`, 0);
        await page.click('[data-testid="stop"]');
        // The kept exchange replaces the provisional bubbles.
        await page.waitForSelector('[data-testid="message"] [data-testid="incomplete-mark"]', { timeout: 30_000 });
        await page.waitForSelector('[data-testid="pending-answer"]', { state: 'detached' });
        assert(await page.isVisible('[data-testid="send"]'), 'Send button not back after Stop');
        assert((await page.inputValue('[data-testid="composer-input"]')) === '', 'the kept question was also put back in the box');
        const [q, a] = keptTurn(await stateOf(server, page), marker);
        assert(a.role === 'assistant' && a.usage?.truncated?.reason === 'stopped', `the stored answer is not marked stopped: ${JSON.stringify(a.usage)}`);
        assert(a.content.replace(/<[^>]*>/g, '').trim().length > 0, 'the words shown before Stop were not kept');
        await assertShownIncomplete(page, q, a);
        assert(!(await page.textContent('body')).includes('nothing was saved'), 'the page still says nothing was saved');
        await shot(page, `${mode}-${size}-stopped-answer`);
        // Kept once, and durably: after a while and a reload it is still the one exchange.
        await sleep(1500);
        await page.goto(server.url);
        await page.waitForSelector('body[data-ready="true"]');
        const [q2, a2] = keptTurn(await stateOf(server, page), marker);
        assert(q2.id === q.id && a2.id === a.id, 'the kept exchange changed after a reload');
        await assertShownIncomplete(page, q, a);
      });
    });

    scenario(`${mode} ${size}: closing the page mid-answer keeps the question and the answer so far; reopening shows them`, async () => {
      const server = await get();
      await withPage(server, { size, prefs }, async (page, watch, context) => {
        // Until an answer is still streaming when the page closes (a short
        // finished answer is not what this scenario is about).
        let marker = '';
        for (let attempt = 1; ; attempt++) {
          marker = `${mode} ${size} close test ${attempt}`;
          const streaming = await startLongAnswer(page, `Write a long story, at least 500 words, about a dragon who learns to bake bread. (${marker})`, 20);
          // The answer so far reaches the browser's record (stateless) or
          // the server; the small model sometimes ends its story meanwhile.
          if (streaming) await sleep(600);
          if (streaming && await page.isVisible('[data-testid="stop"]')) break;
          assert(attempt < 5, 'the model finished every answer before the page could close mid-answer');
          await page.waitForSelector('[data-testid="send"]:not([hidden])');
        }
        await page.close({ runBeforeUnload: false });
        if (!server.stateless) {
          // The server keeps it when the connection drops: in the file, before any page asks.
          const deadline = Date.now() + 10_000;
          while (!readState(server.file).messages.some((m) => m.content.includes(marker)) && Date.now() < deadline) await sleep(100);
        }
        const again = await context.newPage();
        again.on('pageerror', (e) => watch.errors.push(String(e && e.message ? e.message : e)));
        await again.goto(server.url);
        await again.waitForSelector('body[data-ready="true"]');
        const [q, a] = keptTurn(await stateOf(server, again), marker);
        assert(a.usage?.truncated?.reason === 'stopped', `the stored answer is not marked stopped: ${JSON.stringify(a.usage)}`);
        assert(a.content.replace(/<[^>]*>/g, '').trim().length > 0, 'the words shown before the page closed were not kept');
        await assertShownIncomplete(again, q, a);
        assert((await again.inputValue('[data-testid="composer-input"]')) === '', 'the kept question also came back as a draft');
        // Kept once: another load adds nothing.
        await again.goto(server.url);
        await again.waitForSelector('body[data-ready="true"]');
        keptTurn(await stateOf(server, again), marker);
      });
    });
  }

  scenario(`${mode}: a provider failure is shown and nothing is saved`, async () => {
    const server = await get();
    await withPage(server, { prefs: { provider: 'dead', max_tokens: 8 } }, async (page) => {
      const before = canonical((await stateOf(server, page)).messages);
      const prompt = `This turn cannot be answered (${mode}).`;
      await page.fill('[data-testid="composer-input"]', prompt);
      await page.click('[data-testid="send"]');
      await page.waitForFunction(() => /Failed/.test(document.querySelector('[data-testid="streaming-note"]')?.textContent || ''), null, { timeout: 120_000 });
      // Shown once, where it happened: in the failed answer, not again in the page's alert.
      const noteText = await page.textContent('[data-testid="streaming-note"]');
      assert(/dead|reach|refused|connect/i.test(noteText), `error shown: ${noteText}`);
      const alertText = await page.textContent('[data-testid="alert"]');
      assert(!alertText, `the error is shown twice (also in the alert: ${alertText})`);
      assert(!(await page.isVisible('[data-testid="empty-hint"]')), '"No messages yet" shown beside the failed turn');
      assert((await page.inputValue('[data-testid="composer-input"]')) === prompt, 'the failed prompt was not put back in the box');
      assert(await page.isVisible('[data-testid="send"]'), 'Send button not back after the failure');
      // Retry sends it again and replaces the failed bubbles instead of stacking them.
      await page.click('[data-testid="retry"]');
      await page.waitForSelector('[data-testid="retry"]', { timeout: 120_000 });
      await page.waitForFunction(() => /Failed/.test(document.querySelector('[data-testid="streaming-note"]')?.textContent || ''), null, { timeout: 120_000 });
      assert((await page.locator('[data-testid="pending-question"]').count()) === 1, 'Retry left the failed question twice');
      assert((await page.locator('[data-testid="retry"]').count()) === 1, 'more than one Retry button after retrying');
      assert((await page.inputValue('[data-testid="composer-input"]')) === prompt, 'the retried prompt was not put back in the box');
      await sleep(500);
      assert(canonical((await stateOf(server, page)).messages) === before, 'a failed turn changed the stored messages');
    });
  });

  scenario(`${mode}: the unsent draft and a failed turn's question survive a reload`, async () => {
    const server = await get();
    await withPage(server, { prefs: { provider: 'dead', max_tokens: 8 } }, async (page) => {
      const draft = `A draft I have not sent yet (${mode}).`;
      await page.fill('[data-testid="composer-input"]', draft);
      await page.goto(server.url);
      await page.waitForSelector('body[data-ready="true"]');
      assert((await page.inputValue('[data-testid="composer-input"]')) === draft, 'the draft was lost on reload');
      // A turn that fails keeps its question as the draft, across a reload too.
      await page.click('[data-testid="send"]');
      await page.waitForFunction(() => /Failed/.test(document.querySelector('[data-testid="streaming-note"]')?.textContent || ''), null, { timeout: 120_000 });
      await page.goto(server.url);
      await page.waitForSelector('body[data-ready="true"]');
      assert((await page.inputValue('[data-testid="composer-input"]')) === draft, 'the failed question was lost on reload');
      // Emptying the box forgets the draft.
      await page.fill('[data-testid="composer-input"]', '');
      await page.goto(server.url);
      await page.waitForSelector('body[data-ready="true"]');
      assert((await page.inputValue('[data-testid="composer-input"]')) === '', 'an emptied draft came back');
    });
  });

  scenario(`${mode}: the page follows the stream until the user scrolls up, then offers Jump to latest`, async () => {
    const server = await get();
    await withPage(server, { prefs: { max_tokens: 1500, temperature: 0 } }, async (page) => {
      await page.setViewportSize({ width: 390, height: 500 });
      // A long conversation first, so the page is taller than the window
      // whatever the tiny model answers (at temperature 0 it may answer the
      // counting prompt in one line); the turn continues it.
      await importFile(page, 'llm_2025.01.02.0304.json', JSON.stringify(exportFixture(`follow-${mode}`, 40, Date.now() - 120_000)));
      await waitStatus(page, /Imported|Merged/);
      const gap = () => page.evaluate(() => document.documentElement.scrollHeight - (window.scrollY + window.innerHeight));
      await page.fill('[data-testid="composer-input"]', `Count from 1 to 500, one number per line. (${mode} follow test)`);
      await page.click('[data-testid="send"]');
      await page.waitForFunction(() => document.documentElement.scrollHeight > window.innerHeight + 300, null, { timeout: 120_000 });
      assert((await gap()) <= 48, `the page did not follow the stream (${await gap()}px from the bottom)`);
      assert(await page.isHidden('[data-testid="jump-latest"]'), 'Jump to latest shown while following');
      await page.evaluate(() => window.scrollTo(0, 0));
      await page.waitForSelector('[data-testid="jump-latest"]:not([hidden])');
      const len = await page.evaluate(() => document.querySelector('[data-testid="streaming-answer"]')?.textContent.length ?? 0);
      // More text arrives (or the answer ends): the page must stay where the user put it.
      await page.waitForFunction((n) => (document.querySelector('[data-testid="streaming-answer"]')?.textContent.length ?? 0) > n + 20
        || !document.querySelector('[data-testid="streaming-answer"]'), len, { timeout: 120_000 });
      assert((await page.evaluate(() => window.scrollY)) === 0, 'the page scrolled away from where the user was reading');
      // What a reader's tap would hit: the button itself, not something over
      // it. (Probed frame by frame while the saved answer re-rendered the
      // list: the button stayed put and on top, in both modes; Playwright's
      // actionability wait timing out here on a loaded CI run was the load,
      // so the click itself goes through the DOM.)
      const hit = await page.$eval('[data-testid="jump-latest"]', (b) => {
        const r = b.getBoundingClientRect();
        const at = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
        return at === b || b.contains(at) ? 'button' : (at ? at.id || at.dataset.testid || at.tagName : 'nothing');
      });
      assert(hit === 'button', `Jump to latest is covered by ${hit}`);
      await page.$eval('[data-testid="jump-latest"]', (b) => b.click());
      assert((await gap()) <= 48, 'Jump to latest did not reach the bottom');
      assert(await page.isHidden('[data-testid="jump-latest"]'), 'Jump to latest still shown at the bottom');
      if (await page.isVisible('[data-testid="stop"]')) {
        await page.click('[data-testid="stop"]');
        await page.waitForSelector('[data-testid="pending-answer"]', { state: 'detached', timeout: 30_000 });
      }
      await page.fill('[data-testid="composer-input"]', '');
    });
  });

  scenario(`${mode}: branch from an earlier message`, async () => {
    const server = await get();
    await withPage(server, {}, async (page) => {
      await sendMessage(page, 'Name a fruit.');
      await sendMessage(page, 'Name another fruit.');
      const msgs = await lastMessages(page, 4);
      const target = msgs[1]; // the answer to "Name a fruit."
      const displaced = msgs[2]; // the question that followed it
      assert(target.role === 'assistant', `expected an answer to branch from, got ${target.role}`);
      await page.click(`[data-testid="message"][data-id="${target.id}"] [data-testid="branch-from"]`);
      await page.waitForSelector('[data-testid="reply-to"]:not([hidden])');
      const replyTo = await page.textContent('[data-testid="reply-to-title"]');
      assert(replyTo === target.title, `reply-to shows "${replyTo}", expected "${target.title}"`);
      assert(!(await page.isVisible(`[data-testid="message"][data-id="${displaced.id}"]`)), 'later messages still shown after branching');
      // Cancel restores the branch, then branch again for real.
      await page.click('[data-testid="reply-cancel"]');
      await page.waitForSelector('[data-testid="reply-to"]', { state: 'hidden' });
      assert(await page.isVisible(`[data-testid="message"][data-id="${displaced.id}"]`), 'Cancel did not restore the branch');
      await page.click(`[data-testid="message"][data-id="${target.id}"] [data-testid="branch-from"]`);
      await sendMessage(page, 'Name a vegetable instead.');
      const [q] = await lastMessages(page, 2);
      const st = await stateOf(server, page);
      const stored = st.messages.find((m) => m.id === q.id);
      assert(stored, 'the branched question is not stored');
      assert(stored.parent === target.id, `branched question's parent is ${stored.parent}, expected ${target.id}`);
      assert(!(await page.isVisible(`[data-testid="message"][data-id="${displaced.id}"]`)), 'the other branch is displayed');
      const pos = await page.textContent(`[data-testid="message"][data-id="${q.id}"] [data-testid="branch-position"]`);
      // Siblings are ordered by (timestamp, id); two questions sent within
      // the same second may come in either order.
      assert(pos === '1/2' || pos === '2/2', `branch navigation shows ${pos}`);
      // Switch to the other branch.
      await page.click(`[data-testid="message"][data-id="${q.id}"] [data-testid="${pos === '2/2' ? 'branch-prev' : 'branch-next'}"]`);
      await page.waitForSelector(`[data-testid="message"][data-id="${displaced.id}"]`);
      // One linear thread: the branch switched away from is not on screen.
      assert(!(await page.isVisible(`[data-testid="message"][data-id="${q.id}"]`)), 'both branches are displayed at once');
    });
  });

  scenario(`${mode}: prefs cookie round trip`, async () => {
    const server = await get();
    await withPage(server, { prefs: null }, async (page, watch, context) => {
      await openPanel(page, 'settings');
      const providers = await page.$$eval('[data-testid="provider"] option', (os) => os.map((o) => o.value));
      assert(providers.includes('llama'), `provider picker lacks llama: ${providers}`);
      await page.selectOption('[data-testid="provider"]', 'llama');
      await page.fill('[data-testid="model"]', 'smollm2');
      await page.dispatchEvent('[data-testid="model"]', 'change');
      await page.fill('[data-testid="temperature"]', '1.3');
      await page.dispatchEvent('[data-testid="temperature"]', 'change');
      await page.uncheck('[data-testid="rag"]');
      await page.check('[data-testid="url-fetch"]');
      for (const [id, v] of [['max-tokens', '77'], ['max-entries', '5'], ['min-certainty', '0.25'], ['username', 'cookie tester ✓']]) {
        await page.fill(`[data-testid="${id}"]`, v);
        await page.dispatchEvent(`[data-testid="${id}"]`, 'change');
      }
      await page.reload();
      await page.waitForSelector('body[data-ready="true"]');
      await openPanel(page, 'settings');
      const got = {
        provider: await page.inputValue('[data-testid="provider"]'),
        model: await page.inputValue('[data-testid="model"]'),
        temperature: await page.inputValue('[data-testid="temperature"]'),
        rag: await page.isChecked('[data-testid="rag"]'),
        url_fetch: await page.isChecked('[data-testid="url-fetch"]'),
        max_tokens: await page.inputValue('[data-testid="max-tokens"]'),
        max_entries: await page.inputValue('[data-testid="max-entries"]'),
        min_certainty: await page.inputValue('[data-testid="min-certainty"]'),
        username: await page.inputValue('[data-testid="username"]'),
      };
      const want = { provider: 'llama', model: 'smollm2', temperature: '1.3', rag: false, url_fetch: true, max_tokens: '77', max_entries: '5', min_certainty: '0.25', username: 'cookie tester ✓' };
      assert(canonical(got) === canonical(want), `after reload: ${JSON.stringify(got)}`);
      const cookies = (await context.cookies(server.origin)).filter((c) => c.name === prefsCookie(server));
      assert(cookies.length === 1, `${cookies.length} ${prefsCookie(server)} cookies`);
      const c = cookies[0];
      assert(/^[A-Za-z0-9_-]+$/.test(c.value), `cookie value is not unpadded base64url: ${c.value}`);
      assert(c.path === '/', `cookie path ${c.path}`);
      assert(c.sameSite === 'Strict', `cookie SameSite ${c.sameSite}`);
      assert(c.secure === false, 'cookie is Secure on http');
      assert(!c.httpOnly, 'cookie is HttpOnly (the page must read it)');
      const days = (c.expires * 1000 - Date.now()) / 86_400_000;
      assert(days > 360 && days < 370, `cookie lives ${days.toFixed(1)} days`);
      assert(`${prefsCookie(server)}=${c.value}`.length < 4096, 'cookie is 4 KB or more');
      const prefs = JSON.parse(b64urlDecode(c.value));
      const wantPrefs = { provider: 'llama', model: 'smollm2', temperature: 1.3, rag: false, url_fetch: true, max_tokens: 77, max_entries: 5, min_certainty: 0.25, username: 'cookie tester ✓' };
      for (const [k, v] of Object.entries(wantPrefs)) assert(prefs[k] === v, `cookie ${k} = ${JSON.stringify(prefs[k])}, expected ${JSON.stringify(v)}`);
      const allowed = new Set([...Object.keys(wantPrefs), 'show_all']);
      for (const k of Object.keys(prefs)) assert(allowed.has(k), `unexpected key in the prefs cookie: ${k}`);
      // The next turn's request carries them.
      const reqBody = page.waitForRequest((r) => r.method() === 'POST' && /\/api\/(stateless\/)?chat$/.test(r.url()));
      await page.fill('[data-testid="max-tokens"]', '8');
      await page.dispatchEvent('[data-testid="max-tokens"]', 'change');
      await page.fill('[data-testid="composer-input"]', 'Say yes.');
      await page.click('[data-testid="send"]');
      const body = JSON.parse((await reqBody).postData());
      const p = body.params || {};
      assert(p.provider === 'llama' && p.temperature === 1.3 && p.rag === false && p.url_fetch === true && p.max_tokens === 8 && p.max_entries === 5 && p.min_certainty === 0.25,
        `chat params ${JSON.stringify(p)}`);
      assert(body.username === 'cookie tester ✓', `chat username ${body.username}`);
      await page.waitForSelector('[data-testid="pending-answer"]', { state: 'detached', timeout: 120_000 });
    });
  });

  scenario(`${mode}: out-of-range prefs written by another page are ignored and reported, never sent`, async () => {
    const server = await get();
    await withPage(server, { prefs: { max_tokens: 1e12, max_entries: -3, temperature: 9, min_certainty: 0.5 } }, async (page) => {
      await page.waitForFunction(() => /Ignored saved settings out of range: max_entries, max_tokens, temperature/.test(document.getElementById('status')?.textContent || ''));
      const reqBody = page.waitForRequest((r) => r.method() === 'POST' && /\/api\/(stateless\/)?chat$/.test(r.url()));
      await page.fill('[data-testid="composer-input"]', 'Say yes.');
      await page.click('[data-testid="send"]');
      const p = JSON.parse((await reqBody).postData()).params || {};
      assert(!('max_tokens' in p) && !('max_entries' in p) && !('temperature' in p) && p.min_certainty === 0.5, `chat params ${JSON.stringify(p)}`);
      // The turn is answered, not refused over a stored setting.
      await page.waitForSelector('[data-testid="pending-answer"]', { state: 'detached', timeout: 120_000 });
      assert(!/expected u32|invalid value/.test(await page.textContent('#alert')), 'the turn failed over a stored setting');
    });
  });

  scenario(`${mode}: truth add, edit, delete (tombstone)`, async () => {
    const server = await get();
    await withPage(server, {}, async (page) => {
      await openPanel(page, 'truth');
      const add = async (title, content, certainty) => {
        if (!(await page.isVisible('[data-testid="truth-add-title"]'))) await page.click('[data-testid="truth-add-open"]');
        await page.fill('[data-testid="truth-add-title"]', title);
        await page.fill('[data-testid="truth-add-content"]', content);
        await page.fill('[data-testid="truth-add-certainty"]', String(certainty));
        await page.click('[data-testid="truth-add-submit"]');
        await page.waitForFunction((t) => [...document.querySelectorAll('[data-testid="truth-title"]')].some((e) => e.textContent === t), title);
      };
      const tag = `${mode}-${Date.now()}`;
      await add(`Sky ${tag}`, 'The sky is blue & wide <b>sometimes</b>.', 0.9);
      await add(`Grass ${tag}`, 'Grass is green.', 0.3);
      await add(`Sea ${tag}`, 'The sea is salty.', 0.6);
      const order = await page.$$eval('[data-testid="truth-item"]', (els) => els.map((e) => Number(e.querySelector('[data-testid="truth-certainty"]').textContent)));
      assert(order.every((c, i) => i === 0 || order[i - 1] >= c), `truth not ordered by certainty: ${order}`);
      let st = await stateOf(server, page);
      const sky = st.truth.trust.find((t) => t.title === `Sky ${tag}`);
      assert(sky && sky.certainty === 0.9, 'added entry not stored');
      assert(/^t_[0-9a-f]{16}$/.test(sky.id), `bad id ${sky.id}`);
      assert(!/<b>sometimes<\/b>/.test(sky.content) || /&amp;/.test(sky.content), `content not XHTML: ${sky.content}`);
      if (server.stateless) {
        const want = 't_' + sha16(`${sky.title}|${sky.timestamp}|${sky.content}`);
        assert(sky.id === want, `stateless id ${sky.id} is not sha256(title|timestamp|content) = ${want}`);
        assert(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$/.test(sky.timestamp), `timestamp ${sky.timestamp}`);
      }
      // Edit certainty and content.
      const item = `[data-testid="truth-item"][data-id="${sky.id}"]`;
      await page.click(`${item} [data-testid="truth-edit"]`);
      await page.fill(`${item} [data-testid="truth-edit-certainty"]`, '0.4');
      await page.fill(`${item} [data-testid="truth-edit-content"]`, 'The sky is often blue.');
      await page.click(`${item} [data-testid="truth-edit-save"]`);
      await page.waitForFunction((sel) => document.querySelector(`${sel} [data-testid="truth-certainty"]`)?.textContent === '0.40', item);
      st = await stateOf(server, page);
      const edited = st.truth.trust.find((t) => t.id === sky.id);
      assert(edited && edited.certainty === 0.4 && /often blue/.test(edited.content), `edit not stored: ${JSON.stringify(edited)}`);
      assert(edited.updated && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$/.test(edited.updated), `edit has no updated stamp: ${edited.updated}`);
      // Delete leaves a tombstone.
      await page.click(`${item} [data-testid="truth-delete"]`);
      await page.click(`${item} [data-testid="truth-delete-confirm"]`);
      await page.waitForSelector(item, { state: 'detached' });
      st = await stateOf(server, page);
      assert(!st.truth.trust.some((t) => t.id === sky.id), 'deleted entry still stored');
      const tomb = (st.truth.deleted || []).find((d) => d.id === sky.id);
      assert(tomb && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$/.test(tomb.date), `no tombstone: ${JSON.stringify(st.truth.deleted)}`);
    });
  });

  scenario(`${mode}: context update (draft, diff, apply, audit entry)`, async () => {
    const server = await get();
    await withPage(server, { prefs: { max_tokens: ANSWER_TOKENS } }, async (page) => {
      let st = await stateOf(server, page);
      if (!st.messages.length) await sendMessage(page, 'We are building a garden planner.');
      await openPanel(page, 'context');
      await page.fill('[data-testid="context-input"]', 'This project is a test of WikiOracle.');
      await page.click('[data-testid="context-save"]');
      await waitStatus(page, /Context saved/);
      st = await stateOf(server, page);
      const saved = st.context;
      assert(/test of WikiOracle/.test(saved), `context not saved: ${saved}`);
      // Cancel first: nothing changes.
      await page.click('[data-testid="context-update"]');
      await page.waitForSelector('[data-testid="context-dialog"][open]', { timeout: 180_000 });
      await page.click('[data-testid="context-cancel"]');
      await waitStatus(page, /unchanged/);
      assert((await stateOf(server, page)).context === saved, 'Cancel changed the context');
      // Then apply.
      await page.click('[data-testid="context-update"]');
      await page.waitForSelector('[data-testid="context-dialog"][open]', { timeout: 180_000 });
      const lines = await page.$$eval('[data-testid="context-diff"] li', (els) => els.map((e) => e.className));
      assert(lines.length > 0, 'the diff is empty');
      assert(lines.some((c) => c === 'diff-add' || c === 'diff-remove'), `no added or removed lines: ${lines}`);
      const addStyle = await page.$eval('[data-testid="context-diff"] li.diff-add, [data-testid="context-diff"] li.diff-remove', (e) => getComputedStyle(e).backgroundColor);
      const keepStyle = await page.$eval('[data-testid="context-diff"]', (e) => getComputedStyle(e).backgroundColor);
      assert(addStyle !== keepStyle, 'changed lines are not styled differently');
      await page.click('[data-testid="context-apply"]');
      await waitStatus(page, /Context updated/, 60_000);
      st = await stateOf(server, page);
      assert(st.context !== saved, 'context unchanged after apply');
      const audit = st.truth.trust.filter((t) => Array.isArray(t.tags) && t.tags.includes('context-update'));
      assert(audit.length >= 1, 'no context-update truth entry');
      const a = audit[audit.length - 1];
      assert(a.kind === 'event' && a.certainty === 1 && a.title === 'Context updated', `audit entry ${JSON.stringify(a)}`);
      if (server.stateless) {
        assert(a.id === 't_' + sha16(`${a.title}|${a.timestamp}|${a.content}`), `audit id ${a.id} does not follow the id formula`);
      }
      const shown = await page.textContent('[data-testid="context-view"]');
      assert(shown.trim().length > 0, 'context view empty after apply');
    });
  });

  scenario(`${mode}: what an answer taught is shown under it, and Undo forgets it`, async () => {
    const server = await startServer({ stateless: mode === 'stateless', memory: true });
    try {
      await withPage(server, {}, async (page) => {
        const calls = interpreterCalls.length;
        await sendMessage(page, 'I am Ann and I live in Lisbon.');
        const remembered = page.locator('[data-testid="memory-remembered"]');
        await remembered.waitFor({ timeout: 60_000 });
        const [a] = await lastMessages(page, 1);
        const item = await remembered.textContent();
        assert(/Ann lives in Lisbon/.test(item), `memory line: ${item}`);
        assert(await page.locator(`#msg-${a.id} [data-testid="memory-remembered"]`).count() === 1, 'the memory line is not under the answer');
        const call = interpreterCalls[calls];
        assert(call && call.response_format && call.response_format.type === 'json_schema', `the interpreter was not asked for structured output: ${JSON.stringify(call && call.response_format)}`);
        let st = await stateOf(server, page);
        const fact = st.truth.trust.find((t) => t.title === 'Ann lives in Lisbon');
        assert(fact, 'the remembered fact is not in the state');
        assert(fact.provenance && fact.provenance.messages.includes(a.id), `provenance: ${JSON.stringify(fact.provenance)}`);
        assert(Array.isArray(st.memory_log) && st.memory_log.some((r) => r.exchange === a.id), 'no journal record for the exchange');
        // The Truth panel lists it too.
        await openPanel(page, 'truth');
        await page.waitForSelector(`[data-testid="truth-item"][data-id="${fact.id}"]`);
        // Survives a reload (the journal comes with the state).
        await page.reload();
        await page.waitForSelector('body[data-ready="true"]');
        await remembered.waitFor();
        await page.click('[data-testid="memory-undo"]');
        await remembered.waitFor({ state: 'detached' });
        st = await stateOf(server, page);
        assert(!st.truth.trust.some((t) => t.id === fact.id), 'the fact is still there after Undo');
        assert((st.truth.deleted || []).some((d) => d.id === fact.id), 'no tombstone for the forgotten fact');
        assert(st.memory_log.find((r) => r.exchange === a.id).undone, 'the journal record is not marked undone');
        assert(st.messages.some((m) => m.id === a.id), 'the exchange itself was lost');
      });
    } finally {
      await server.stop();
    }
  });

  scenario(`${mode}: search finds messages and truth`, async () => {
    const server = await get();
    await withPage(server, {}, async (page) => {
      const fixture = exportFixture('searchable', 2);
      await importFile(page, 'llm_2025.01.02.0304.json', JSON.stringify(fixture));
      await waitStatus(page, /Imported|Merged/);
      await page.fill('[data-testid="search-input"]', 'searchable');
      await page.click('[data-testid="search-submit"]');
      await page.waitForSelector('[data-testid="panel-search"]:not([hidden])');
      const hits = await page.locator('[data-testid="search-hit-message"]').count();
      assert(hits > 0, 'no message hit for "searchable"');
      const truthHits = await page.locator('[data-testid="search-hit-truth"]').count();
      assert(truthHits > 0, 'no truth hit for "searchable"');
      await page.locator('[data-testid="search-hit-message"]').first().click();
      await page.waitForSelector('[data-testid="message"].highlight');
    });
  });
}

// The memory a turn uses is chosen by wo-engine's retrieval in both modes:
// the stateless page sends its whole memory (within the request's limits)
// and the file's own retrieval_prefs rather than ranking it itself, so the
// hosted mode cannot pick otherwise than a local server would. The decoys
// share the question's letters ("kilnworks") but not its words: a substring
// count ranks them above the entries about kilns, BM25 does not. The file's
// prefs (min_certainty 0.6) leave out the less certain entry about kilns,
// which the defaults send: both modes must follow the file, not defaults.
scenario('both: stateless and local modes pick the same memory for the same state and question', async () => {
  const base = Date.UTC(2025, 2, 1, 0, 0, 0);
  const entry = (title, content, i, certainty = 0.9) => {
    const timestamp = stamp(base + i * 1000);
    return { id: 't_' + sha16(`${title}|${timestamp}|${content}`), title, timestamp, certainty, content };
  };
  const trust = [
    entry('Kiln firing', '<p>The kiln fires at 1200 degrees.</p>', 0),
    entry('Kiln glaze firing', '<p>A glaze firing in the kiln reaches a lower temperature.</p>', 1, 0.4),
  ];
  for (let i = 2; i <= 41; i++) trust.push(entry(`kilnworks ${i}`, '<p>kilnworkskilnworks kilnworks kilnworkskilnworks</p>', i));
  const fixture = (retrieval_prefs) => ({
    version: 1, schema: 'wikioracle.llm_state', date: stamp(base + 60_000), context: '', messages: [],
    truth: { trust, retrieval_prefs },
  });
  const withPrefs = fixture({ max_entries: 8, min_certainty: 0.6 });
  const question = 'What is the kiln firing temperature?';
  const memoryUsed = async (page) => {
    const details = page.locator('[data-testid="message"]').last().locator('[data-testid="context-used"]');
    await details.locator('summary').click();
    return (await details.locator('[data-testid="context-included"] li').allTextContents())
      .map((t) => t.trim().replace(/\s*\(\d+ tokens\)$/, '').replace(/ — relevance [\d.]+$/, '')).filter((t) => /^memory\b/i.test(t)).sort();
  };
  const picked = {};
  // Local mode: the server's own file holds the state (prefs and all);
  // once with the file's prefs, once with the defaults.
  for (const [name, fx] of [['local', withPrefs], ['defaults', fixture({})]]) {
    const server = await serveFixture('local', fx, `same-memory-${name}`);
    try {
      await withPage(server, {}, async (page) => {
        await sendMessage(page, question);
        picked[name] = await memoryUsed(page);
      });
    } finally {
      await server.stop();
    }
  }
  // Stateless mode: the same state as the browser keeps it (IndexedDB);
  // an import would merge it, and a merge keeps the base's prefs.
  const server = await startServer({ stateless: true });
  try {
    await withPage(server, {}, async (page) => {
      await page.evaluate((state) => new Promise((resolve, reject) => {
        const req = indexedDB.open('wikioracle', 1);
        req.onerror = () => reject(req.error);
        req.onsuccess = () => {
          const db = req.result;
          const put = db.transaction('state', 'readwrite').objectStore('state').put(state, 'llm.json');
          put.onsuccess = () => { db.close(); resolve(null); };
          put.onerror = () => reject(put.error);
        };
      }), withPrefs);
      await page.reload();
      await page.waitForSelector('body[data-ready="true"]');
      const kept = await idbState(page);
      assert(kept?.truth?.retrieval_prefs?.min_certainty === 0.6, `the stored state lost its prefs: ${JSON.stringify(kept?.truth?.retrieval_prefs)}`);
      await sendMessage(page, question);
      picked.stateless = await memoryUsed(page);
    });
  } finally {
    await server.stop();
  }
  assert(picked.local.some((t) => /Kiln firing/.test(t)) && !picked.local.some((t) => /Kiln glaze/.test(t)),
    `local mode did not follow the file's prefs (the kiln entry, not the uncertain one): ${JSON.stringify(picked.local)}`);
  assert(picked.defaults.some((t) => /Kiln glaze/.test(t)),
    `the defaults do not send the uncertain entry, so the prefs change nothing here: ${JSON.stringify(picked.defaults)}`);
  assert(JSON.stringify(picked.stateless) === JSON.stringify(picked.local),
    `the modes picked different memory: local ${JSON.stringify(picked.local)}, stateless ${JSON.stringify(picked.stateless)}`);
});

scenario('local: export, import into a fresh server, identical state', async () => {
  const server = await localServer();
  let exported;
  await withPage(server, {}, async (page) => {
    exported = await download(page, () => page.click('[data-testid="export"]'));
  });
  assert(/^llm_\d{4}\.\d\d\.\d\d\.\d{4}\.json$/.test(exported.name), `export named ${exported.name}`);
  const a = JSON.parse(exported.text);
  const disk = readState(server.file);
  assert(canonical(a) === canonical(disk), 'the export differs from llm.json');
  assert(a.messages.length > 0, 'nothing to export');
  const fresh = await startServer();
  try {
    await withPage(fresh, {}, async (page) => {
      await importFile(page, exported.name, exported.text);
      await waitStatus(page, /Imported|Merged/);
      const shown = await page.locator('[data-testid="message"]').count();
      assert(shown > 0, 'no messages shown after import');
      const again = JSON.parse((await download(page, () => page.click('[data-testid="export"]'))).text);
      assert(canonical(again.messages) === canonical(a.messages), 'messages differ after export → import → export');
      assert(canonical(again.truth.trust) === canonical(a.truth.trust), 'truth entries differ after export → import → export');
      assert(canonical(again.truth.deleted || []) === canonical(a.truth.deleted || []), 'tombstones differ after export → import → export');
    });
  } finally {
    await fresh.stop();
  }
});

scenario('stateless: export, import into a fresh browser, identical state', async () => {
  const server = await statelessServer();
  let exported;
  let before;
  await withPage(server, {}, async (page) => {
    await sendMessage(page, 'Remember the number seven.');
    before = await idbState(page);
    exported = await download(page, () => page.click('[data-testid="export"]'));
  });
  assert(/^llm_\d{4}\.\d\d\.\d\d\.\d{4}\.json$/.test(exported.name), `export named ${exported.name}`);
  const a = JSON.parse(exported.text);
  assert(exported.text.endsWith('}\n'), 'export does not end with a newline');
  assert(canonical(a) === canonical(before), 'the export differs from the stored state');
  // Byte for byte what `wo export` writes for the same state (the browser's
  // copy as IndexedDB holds it, not its export).
  const dir = fs.mkdtempSync(path.join(TMP, 'wo-export-'));
  fs.writeFileSync(path.join(dir, 'llm.json'), JSON.stringify(before));
  fs.mkdirSync(path.join(dir, 'out'));
  execFileSync(WO_BIN, ['export', '--state', path.join(dir, 'llm.json'), '--dir', path.join(dir, 'out')], { env: serverEnv(), encoding: 'utf8' });
  const written = fs.readdirSync(path.join(dir, 'out'));
  assert(written.length === 1, `wo export wrote ${written.join(', ') || 'nothing'}`);
  const cli = fs.readFileSync(path.join(dir, 'out', written[0]), 'utf8');
  assert(cli === exported.text, `the browser's export is not byte-identical to wo export's (${exported.text.length} vs ${cli.length} bytes)`);
  await withPage(server, {}, async (page) => {
    assert((await page.locator('[data-testid="message"]').count()) === 0, 'a new browser context is not empty');
    await importFile(page, exported.name, exported.text);
    await waitStatus(page, /Imported/);
    const after = await idbState(page);
    assert(canonical(after) === canonical(a), 'the imported state differs from the file');
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    const again = JSON.parse((await download(page, () => page.click('[data-testid="export"]'))).text);
    assert(canonical(again) === canonical(a), 'export → import → export changed the state');
    // A file that is not an llm.json is refused and changes nothing.
    await importFile(page, 'llm_bad.json', JSON.stringify({ hello: 'world' }));
    await page.waitForFunction(() => document.querySelector('[data-testid="alert"]').textContent.length > 0);
    assert(canonical(await idbState(page)) === canonical(a), 'a bad import changed the state');
  });
});

// app.js does the format's work by calling wo-format compiled to wasm
// (crates/wo-wasm); crates/wo-wire/tests/browser_golden.rs writes what Rust
// makes of a set of inputs natively, and every one goes through app.js's own
// functions here (imported from the page's module: the same instance, and
// the same wasm module, the page runs).
scenario('stateless: app.js agrees with the Rust golden vectors', async () => {
  const golden = JSON.parse(fs.readFileSync(path.join(HERE, 'golden.json'), 'utf8'));
  for (const part of ['ids', 'text_to_xhtml', 'merges', 'exports', 'patches', 'truth_ops', 'renames', 'conversations', 'roles', 'bm25']) {
    assert(Array.isArray(golden[part]) && golden[part].length, `golden.json has no ${part} vectors`);
  }
  const server = await statelessServer();
  await withPage(server, {}, async (page) => {
    const result = await page.evaluate(async (g) => {
      const m = await import('/app.js');
      const show = (v) => JSON.stringify(v);
      const sorted = (v) => (Array.isArray(v) ? v.map(sorted)
        : v && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])])) : v);
      /** Where two texts first differ, with some context. */
      const diff = (got, want) => {
        let i = 0;
        while (i < got.length && got[i] === want[i]) i++;
        const from = Math.max(0, i - 60);
        return `first difference at character ${i}: app.js …${show(got.slice(from, i + 60))}… Rust …${show(want.slice(from, i + 60))}…`;
      };
      // The page loaded the module it computes with (not a JavaScript copy).
      const wasm = performance.getEntriesByType('resource').filter((e) => e.name.endsWith('/wasm/wo_wasm_bg.wasm'));
      if (wasm.length !== 1) return `the page fetched /wasm/wo_wasm_bg.wasm ${wasm.length} times, not once`;
      let checked = 0;
      for (const v of g.ids) {
        const id = v.kind === 'message' ? m.messageId : m.truthId;
        const who = v.kind === 'message' ? v.username : v.title;
        const got = id(who, v.timestamp, v.content);
        if (got !== v.id) return `ids: the ${v.kind} id of ${show(who)}, ${v.timestamp}, ${show(v.content)} is ${got} in app.js, ${v.id} in Rust`;
        checked++;
      }
      for (const v of g.text_to_xhtml) {
        const got = m.textToXhtml(v.text);
        if (got !== v.xhtml) return `text_to_xhtml: ${show(v.text)} becomes ${show(got)} in app.js, ${show(v.xhtml)} in Rust`;
        checked++;
      }
      for (const v of g.exports) {
        // Through a JavaScript object and back, as the page keeps its state.
        const got = m.canonicalStateText(m.normalizeState(JSON.parse(v.input)));
        if (got !== v.canonical) return `exports: ${diff(got, v.canonical)}`;
        checked++;
      }
      for (const v of g.merges) {
        const { state } = m.mergeStates(m.normalizeState(v.base), m.normalizeState(v.incoming));
        const got = m.canonicalStateText(state);
        if (got !== v.merged) return `merges: "${v.name}": ${diff(got, v.merged)}`;
        checked++;
      }
      for (const v of g.patches) {
        const got = m.applyStatePatch(v.target, v.patch);
        if (show(sorted(got)) !== show(sorted(v.patched))) {
          return `patches: "${v.name}": app.js gives ${show(sorted(got))}, Rust ${show(sorted(v.patched))}`;
        }
        checked++;
      }
      for (const v of g.truth_ops) {
        const st = m.normalizeState(v.state);
        let after;
        if (v.op.op === 'delete') after = m.deleteTruthIn(st, v.op.id, v.op.now);
        else {
          const edit = {};
          for (const k of ['title', 'content', 'certainty']) if (k in v.op) edit[k] = v.op[k];
          after = m.editTruthIn(st, v.op.id, edit, v.op.now);
        }
        if ((after === null) !== (v.op.id === 't_x')) return `truth_ops: "${v.name}": found is ${after !== null}`;
        const got = m.canonicalStateText(after ?? st);
        if (got !== v.after) return `truth_ops: "${v.name}": ${diff(got, v.after)}`;
        checked++;
      }
      // A refusal names the argument and the JSON pointer.
      try {
        m.canonicalStateText({ version: 1, schema: 'wikioracle.llm_state', date: 'soon', messages: [] });
        return 'an invalid state was written';
      } catch (e) {
        if (!(e instanceof Error) || !/`state`.*\/date/.test(e.message)) return `refusal: ${e && e.message}`;
      }
      for (const v of g.renames) {
        let st = await m.normalizeState(structuredClone(v.state));
        let error = null;
        try {
          st = m.renameMessageIn(st, v.id, v.title, v.now);
        } catch (e) {
          error = e.message;
        }
        if (error !== (v.error ?? null)) return `renames: "${v.name}": app.js ${error ? `refuses (${error})` : 'accepts'}, Rust ${v.error ? `refuses (${v.error})` : 'accepts'}`;
        if (!error) {
          const got = m.canonicalStateText(st);
          if (got !== v.after) return `renames: "${v.name}": ${diff(got, v.after)}`;
        }
        checked++;
      }
      // The conversation list: the same conversations, order, titles, filter and snippets as the server's.
      for (const v of g.conversations) {
        const st = await m.normalizeState(structuredClone(v.state));
        const got = show(sorted(m.listConversations(st.messages, v.filter)));
        const want = show(sorted(v.listed));
        if (got !== want) return `conversations: filter ${show(v.filter)}: app.js lists ${got}, Rust ${want}`;
        checked++;
      }
      // Ordering: timestamps pairwise, and messages sorted as the transcript.
      for (const v of g.order.pairs) {
        const got = m.compareTimestamps(v.a, v.b);
        if (got !== v.order) return `order: ${v.a} vs ${v.b} is ${got} in app.js, ${v.order} in Rust`;
        checked++;
      }
      const keyed = g.order.keys.map(([timestamp, id], i) => ({ timestamp, id, i }));
      const ordered = m.sortMessages(keyed.slice()).map((x) => x.i);
      if (show(ordered) !== show(g.order.order)) return `order: messages sort as ${show(ordered)} in app.js, ${show(g.order.order)} in Rust`;
      checked++;
      // The parent rule the branch tree follows, over a whole file.
      const parents = m.messageParents(g.parents.state.messages, true);
      for (const [id, parent] of g.parents.parents) {
        if ((parents.get(id) ?? null) !== parent) return `parents: ${id}'s parent is ${parents.get(id)} in app.js, ${parent} in Rust`;
        checked++;
      }
      for (const v of g.roles) {
        const got = m.roleOf(v.message);
        if (got !== v.role) return `roles: ${show(v.message)} is ${got} in app.js, ${v.role} in Rust`;
        checked++;
      }
      const newest = m.truthByUpdate(g.truth_updates.entries);
      if (show(newest) !== show(g.truth_updates.newest_first)) return `truth_updates: ${show(newest)} in app.js, ${show(g.truth_updates.newest_first)} in Rust`;
      checked++;
      const fresh = m.canonicalStateText(m.newState(g.truth_updates.new_state.now));
      if (fresh !== g.truth_updates.new_state.state) return `new_state: ${diff(fresh, g.truth_updates.new_state.state)}`;
      checked++;
      for (const v of g.bm25) {
        const got = m.bm25Scores(v.docs, v.query);
        if (show(got) !== show(v.scores)) return `bm25: ${show(v.query)} scores ${show(got)} in app.js, ${show(v.scores)} in Rust`;
        checked++;
      }
      return { checked };
    }, golden);
    assert(typeof result === 'object', `app.js disagrees with Rust: ${result}`);
    const total = ['ids', 'text_to_xhtml', 'merges', 'exports', 'patches', 'truth_ops', 'renames', 'conversations', 'roles', 'bm25'].reduce((n, k) => n + golden[k].length, 0)
      + golden.order.pairs.length + 1 + golden.parents.parents.length + 2;
    assert(result.checked === total, `only ${result.checked} of ${total} golden vectors were checked`);
  });
});

// A saved state that wo-format refuses (an older client's, a hand edit) is
// kept aside in IndexedDB, never overwritten, and the page starts afresh.
scenario('stateless: a saved state wo-format refuses is kept aside, not lost', async () => {
  const server = await statelessServer();
  await withPage(server, {}, async (page) => {
    const bad = {
      version: 1, schema: 'wikioracle.llm_state', date: 'yesterday',
      messages: [{ title: 't', username: 'u', timestamp: '2026-01-01T00:00:00Z', content: '<p>keep me</p>' }],
    };
    const idb = (op, arg) => page.evaluate(([op, arg]) => new Promise((resolve, reject) => {
      const req = indexedDB.open('wikioracle', 1);
      req.onerror = () => reject(req.error);
      req.onsuccess = () => {
        const db = req.result;
        const store = db.transaction('state', op === 'put' ? 'readwrite' : 'readonly').objectStore('state');
        const r = op === 'put' ? store.put(arg, 'llm.json') : store.getAllKeys();
        r.onerror = () => reject(r.error);
        r.onsuccess = () => {
          if (op === 'put') { db.close(); resolve(null); return; }
          const key = r.result.find((k) => String(k).startsWith('llm.json.bak-'));
          if (!key) { db.close(); resolve(null); return; }
          const g = store.get(key);
          g.onsuccess = () => { db.close(); resolve({ key, value: g.result, keys: r.result.length }); };
        };
      };
    }), [op, arg]);
    await idb('put', bad);
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    const alert = await page.textContent('[data-testid="alert"]');
    assert(/not a valid llm\.json/.test(alert) && /\/date/.test(alert) && /llm\.json\.bak-/.test(alert), `alert: ${alert}`);
    const kept = await idb('backup');
    assert(kept && JSON.stringify(kept.value) === JSON.stringify(bad), `the refused state was not kept: ${JSON.stringify(kept)}`);
    const fresh = await idbState(page);
    assert(fresh && fresh.messages.length === 0 && /^\d{4}-/.test(fresh.date), `a fresh state is not saved: ${JSON.stringify(fresh)}`);
    // Kept once: a reload finds a valid state and makes no second backup.
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    assert((await idb('backup')).keys === 2, 'a second backup was made');
  });
});

/** Copies tests/browser/fixtures/ingest to `dir`, plus the files its .gitignore drops (not committed). */
function ingestFixture(dir) {
  fs.cpSync(path.join(HERE, 'fixtures', 'ingest'), dir, { recursive: true });
  fs.mkdirSync(path.join(dir, 'build'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'build', 'out.js'), 'function ignoredBuild() {}\n');
  fs.writeFileSync(path.join(dir, 'debug.log'), 'ignored log\n');
  fs.mkdirSync(path.join(dir, '.hidden'), { recursive: true });
  fs.writeFileSync(path.join(dir, '.hidden', 'secret.md'), '# never read\n');
  // WikiOracle's own files in the folder (its memory, an export): never indexed.
  const memory = '{"version": 1, "messages": [{"content": "<p>parseInvoice is my secret</p>"}]}\n';
  fs.writeFileSync(path.join(dir, 'llm.json'), memory);
  fs.writeFileSync(path.join(dir, 'llm_2026.11.28.1513.json'), memory);
}

/** Clicks the ingestion page's download button for `name`; the downloaded bytes. */
async function downloadExport(page, name) {
  // A real click: Chromium blocks a page's second download without a user gesture.
  await page.locator('#exports-card details').evaluate((d) => { d.open = true; });
  const [dl] = await Promise.all([
    page.waitForEvent('download', { timeout: 10_000 }),
    page.locator(`[data-export="${name}"]`).click(),
  ]).catch(async (e) => {
    throw new Error(`downloading ${name}: ${e.message.split('\n')[0]} (page says: ${await page.locator('[data-testid="error"]').textContent()})`);
  });
  return fs.readFileSync(await dl.path());
}

/** The files under `dir`, relative paths sorted. */
function filesUnder(dir, prefix = '') {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory()
    ? filesUnder(path.join(dir, e.name), `${prefix}${e.name}/`)
    : [`${prefix}${e.name}`])).sort();
}

scenario('stateless: a folder indexed in the page equals wo index and wo pack byte for byte; re-ingesting reuses unchanged files; chat turns carry its chunks', async () => {
  const root = path.join(TMP, 'ingest');
  const dir = path.join(root, 'fixture'); // the same name on both sides: it titles llms.txt and AGENTS.md
  ingestFixture(dir);
  const server = await statelessServer();
  const { context, page, watch } = await openPage(server, {});
  try {
    // The chat page links to the ingestion page.
    await page.locator('[data-testid="open-ingest"]').click();
    await page.waitForSelector('body[data-loaded="true"]');
    await page.setInputFiles('[data-testid="folder-input"]', dir);
    await page.waitForSelector('body[data-ready="true"]');
    const summary = await page.locator('[data-testid="summary"]').textContent();
    assert(/8 files/.test(summary), `summary: ${summary}`);

    const compare = async (what) => {
      execFileSync(WO_BIN, ['index', dir], { env: serverEnv(), encoding: 'utf8' });
      const out = path.join(root, `pack-${what}`);
      execFileSync(WO_BIN, ['pack', dir, '--out', out, '--layout', 'full'], { env: serverEnv(), encoding: 'utf8' });
      const native = fs.readFileSync(path.join(dir, '.wo-index', 'index.json'));
      const browser = await downloadExport(page, 'index.json');
      assert(browser.equals(native), `${what}: index.json differs from wo index's (${browser.length} vs ${native.length} bytes)`);
      const indexed = JSON.parse(browser.toString('utf8')).files.map((f) => f.path);
      assert(!indexed.some((p) => p.startsWith('llm')), `${what}: WikiOracle's own files were indexed: ${indexed.join(', ')}`);
      // What the buttons download (a real download for a few; every file's bytes read in the page).
      for (const n of ['llm.md', 'export.zip']) {
        assert((await downloadExport(page, n)).equals(fs.readFileSync(path.join(out, n))), `${what}: the downloaded ${n} differs from wo pack's`);
      }
      const names = filesUnder(out);
      for (const n of ['llm.md', 'manifest.llm.tsv', 'export.zip', 'chunks/c0001.md']) assert(names.includes(n), `${what}: wo pack wrote no ${n}`);
      const shown = await page.locator('[data-export]').evaluateAll((bs) => bs.map((b) => b.dataset.export).filter((n) => n !== 'index.json').sort());
      assert(JSON.stringify(shown) === JSON.stringify(names), `${what}: the page offers ${shown.join(',')}, wo pack wrote ${names.join(',')}`);
      for (const n of names) {
        const mine = Buffer.from(await page.evaluate((name) => Array.from(window.woIngest.exportBytes(name)), n));
        assert(mine.equals(fs.readFileSync(path.join(out, n))), `${what}: ${n} differs from wo pack's`);
      }
      fs.rmSync(path.join(dir, '.wo-index'), { recursive: true, force: true });
    };
    await compare('first');

    // Change one file and pick the folder again: the other seven are reused.
    fs.writeFileSync(path.join(dir, 'notes.txt'), 'Plain notes.\n\nThe archive moved to new storage in April.\n');
    await page.evaluate(() => { delete document.body.dataset.ready; });
    await page.setInputFiles('[data-testid="folder-input"]', dir);
    await page.waitForSelector('body[data-ready="true"]');
    const [reused, chunked] = await page.evaluate(() => [document.body.dataset.reused, document.body.dataset.chunked]);
    assert(reused === '7' && chunked === '1', `second ingestion: ${reused} reused, ${chunked} chunked`);
    await compare('second');

    // Search with a filter, in the page.
    await page.locator('[data-testid="ingest-q"]').fill('parseInvoice');
    await page.locator('[data-testid="ingest-kind"]').selectOption('typescript');
    await page.locator('[data-testid="ingest-search"]').click();
    const hit = await page.locator('[data-testid="ingest-hits"] li').first().textContent();
    assert(/src\/invoice\.ts/.test(hit), `search: ${hit}`);

    // A reload finds the stored index (IndexedDB).
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    // Screenshots (README) and axe-core at both sizes.
    await shot(page, 'ingest-desktop');
    await page.setViewportSize(SIZES.phone.viewport);
    await shot(page, 'ingest-phone');
    const wide = await page.evaluate(() => document.documentElement.scrollWidth);
    assert(wide <= 390, `the ingestion page scrolls sideways at 390 px (${wide} px wide)`);
    await page.setViewportSize({ width: 1200, height: 900 });

    // The chat page sends the index's chunks with a turn (in the request).
    await page.goto(server.origin + '/');
    await page.waitForSelector('body[data-ready="true"]');
    const bodies = [];
    page.on('request', (r) => { if (r.url().endsWith('/api/stateless/chat')) bodies.push(r.postDataJSON()); });
    await sendMessage(page, 'How do I call parseInvoice?');
    assert(bodies.length === 1, `${bodies.length} chat requests`);
    const chunks = bodies[0].chunks || [];
    assert(chunks.length > 0 && chunks.every((c) => /^chunk:[0-9a-f]{12}$/.test(c.id)), `chunks sent: ${JSON.stringify(chunks).slice(0, 300)}`);
    assert(chunks.some((c) => c.label.startsWith('src/invoice.ts:')), `no invoice.ts chunk among ${chunks.map((c) => c.label).join(', ')}`);
    checkClean(watch);
  } finally {
    await context.close();
  }
});

scenario('local: the ingestion page is served and indexes a folder', async () => {
  const dir = path.join(TMP, 'ingest-local', 'fixture');
  ingestFixture(dir);
  const server = await localServer();
  await withPage(server, {}, async (page) => {
    await page.goto(server.origin + '/ingest.html');
    await page.waitForSelector('body[data-loaded="true"]');
    await page.setInputFiles('[data-testid="folder-input"]', dir);
    await page.waitForSelector('body[data-ready="true"]');
    const summary = await page.locator('[data-testid="summary"]').textContent();
    assert(/8 files/.test(summary), `summary: ${summary}`);
  });
});

scenario('stateless: reload keeps the conversation (IndexedDB)', async () => {
  const server = await statelessServer();
  await withPage(server, {}, async (page) => {
    await sendMessage(page, 'Tell me about rivers.');
    const before = await page.$$eval('[data-testid="message"]', (els) => els.map((e) => e.dataset.id));
    const stored = await idbState(page);
    assert(stored && stored.messages.length >= 2, 'nothing in IndexedDB');
    assert(stored.schema && stored.version === 1 && Array.isArray(stored.messages), 'IndexedDB does not hold an llm.json');
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    const after = await page.$$eval('[data-testid="message"]', (els) => els.map((e) => e.dataset.id));
    assert(canonical(after) === canonical(before), `after reload ${after.length} messages shown, before ${before.length}`);
    await sendMessage(page, 'And about lakes?');
    const st = await idbState(page);
    const next = st.messages.find((m) => /about lakes/.test(m.content));
    assert(next && next.parent === before[before.length - 1], `the next turn after reload does not continue the branch (parent ${next && next.parent})`);
  });
});

for (const mode of ['local', 'stateless']) {
  scenario(`${mode}: dropping an llm_*.json file merges it`, async () => {
    const server = mode === 'local' ? await localServer() : await statelessServer();
    await withPage(server, {}, async (page) => {
      const before = await stateOf(server, page);
      const fixture = exportFixture(`dropped-${mode}`, 3);
      await dropFile(page, 'llm_2025.01.02.0304.json', JSON.stringify(fixture, null, 2));
      await waitStatus(page, /Merged/);
      const after = await stateOf(server, page);
      const ids = new Set(after.messages.map((m) => m.id));
      for (const m of fixture.messages) assert(ids.has(m.id), `dropped message ${m.id} not merged`);
      for (const m of before.messages) assert(ids.has(m.id), `message ${m.id} lost by the merge`);
      assert(after.truth.trust.some((t) => t.id === fixture.truth.trust[0].id), 'dropped truth entry not merged');
      // Dropping something that is not an export is refused.
      await dropFile(page, 'notes.json', '{}');
      await page.waitForFunction(() => /llm_/.test(document.querySelector('[data-testid="alert"]').textContent));
    });
  });
}

/** What a rendered content container may hold. */
async function domAudit(page) {
  return page.evaluate(() => {
    const ok = new Set(['P', 'BR', 'EM', 'STRONG', 'B', 'I', 'U', 'CODE', 'PRE', 'BLOCKQUOTE', 'UL', 'OL', 'LI', 'A', 'H1', 'H2', 'H3', 'H4', 'H5', 'H6', 'TABLE', 'THEAD', 'TBODY', 'TR', 'TH', 'TD', 'SPAN', 'DIV', 'HR', 'SUB', 'SUP', 'DEL', 'INS', 'DL', 'DT', 'DD']);
    const problems = [];
    const roots = document.querySelectorAll('[data-testid="message-content"], [data-testid="truth-content"], [data-testid="context-view"]');
    // The client's own Copy button on code blocks, exactly as app.js makes it.
    const ours = (el) => (el.tagName === 'DIV' && el.attributes.length === 1 && el.getAttribute('class') === 'code-block')
      || (el.tagName === 'BUTTON' && el.attributes.length === 4 && el.getAttribute('class') === 'small copy-code'
        && el.getAttribute('type') === 'button' && el.getAttribute('data-testid') === 'copy-code'
        && el.getAttribute('aria-label') === 'Copy this code' && el.childNodes.length === 1 && el.textContent === 'Copy');
    // The highlighter's spans (text only) and the language it read.
    const hl = (el) => (el.tagName === 'SPAN' && el.attributes.length === 1 && /^hl-(kw|str|num|com|fn|ty|lit)$/.test(el.getAttribute('class') || '') && !el.children.length);
    const codeAttr = (el, a) => ((el.tagName === 'CODE' || el.tagName === 'PRE') && a.name === 'data-lang' && /^[A-Za-z0-9_+#.-]{1,32}$/.test(a.value))
      || (el.tagName === 'CODE' && a.name === 'class' && a.value === 'hl');
    for (const root of roots) {
      for (const el of root.querySelectorAll('*')) {
        if (ours(el) || hl(el)) continue;
        if (!ok.has(el.tagName) || el.namespaceURI !== 'http://www.w3.org/1999/xhtml') problems.push(`<${el.tagName.toLowerCase()}>`);
        for (const a of el.attributes) {
          const name = a.name.toLowerCase();
          if (name === 'title' || codeAttr(el, a)) continue;
          if (el.tagName === 'A' && name === 'href' && /^(https?:|mailto:)/i.test(a.value)) continue;
          if (el.tagName === 'A' && name === 'rel' && a.value === 'noopener noreferrer nofollow') continue;
          if (el.tagName === 'A' && name === 'target' && a.value === '_blank') continue;
          problems.push(`${el.tagName.toLowerCase()}[${name}=${a.value.slice(0, 40)}]`);
        }
      }
    }
    // Titles, usernames and tags are text only.
    for (const el of document.querySelectorAll('[data-testid="conversation-name"] *, [data-testid="conversation-title"] *, [data-testid="message-username"] *, [data-testid="truth-title"] *')) {
      if (el.tagName === 'MARK' && !el.attributes.length && !el.children.length) continue; // the filter's highlight
      problems.push(`markup in text field: <${el.tagName}>`);
    }
    if (document.querySelectorAll('iframe, object, embed, script:not([src="/app.js"]), base, meta[http-equiv], link:not([href="/app.css"]):not([rel="icon"][href="/icon.svg"]):not([rel="apple-touch-icon"][href="/icon-192.png"]):not([rel="manifest"][href="/manifest.webmanifest"]), style').length) problems.push('active element in the document');
    return { problems, roots: roots.length, anchors: document.querySelectorAll('.rendered a[href]').length };
  });
}

async function xssCheck(server, bypassCSP, load) {
  const { context, page, watch } = await openPage(server, { bypassCSP });
  try {
    await page.addInitScript(() => { delete window.__xss; });
    await load(page);
    await page.waitForSelector('[data-testid="message"]');
    // The list is windowed: bring every payload's message in.
    for (let i = 0; i < 40; i++) {
      const b = await page.$('[data-testid="show-earlier"]');
      if (!b) break;
      await b.click().catch(() => { /* replaced meanwhile */ });
      await sleep(50);
    }
    await openPanel(page, 'truth');
    await openPanel(page, 'context');
    for (const d of await page.$$('details.context-used')) await d.evaluate((e) => { e.open = true; });
    // Hover and focus what the payloads might hide behind.
    for (const el of (await page.$$('[data-testid="message-content"] *')).slice(0, 200)) {
      await el.hover({ timeout: 500, force: true }).catch(() => {});
    }
    await page.keyboard.press('Tab');
    await page.fill('[data-testid="search-input"]', 'payload');
    await page.click('[data-testid="search-submit"]');
    await page.waitForSelector('[data-testid="panel-search"]:not([hidden])');
    // The conversation filter's snippets (local mode: the server's) of the payloads' text.
    if (await page.isVisible('[data-testid="conversation-filter"]')) {
      for (const q of ['<', 'alert', 'javascript:']) {
        await page.fill('[data-testid="conversation-filter"]', q);
        await sleep(400);
      }
    }
    await sleep(1500);
    const xss = await page.evaluate(() => window.__xss);
    const frames = page.frames().length;
    const audit = await domAudit(page);
    const shownMessages = await page.locator('[data-testid="message"]').count();
    const shownTruth = await page.locator('[data-testid="truth-item"]').count();
    assert(xss === undefined, `window.__xss = ${xss}`);
    checkClean(watch);
    assert(frames === 1, `${frames} frames in the page`);
    assert(!audit.problems.length, `unsafe markup rendered: ${audit.problems.slice(0, 8).join(', ')}`);
    assert(shownMessages === PAYLOADS.length, `${shownMessages} of ${PAYLOADS.length} messages rendered`);
    assert(shownTruth === PAYLOADS.length, `${shownTruth} of ${PAYLOADS.length} truth entries rendered`);
    assert(audit.anchors > 0, 'no safe link survived (the allowlist is too strict)');
  } finally {
    await context.close();
  }
}

scenario(`local: XSS corpus (${PAYLOADS.length} payloads) in messages, truth and context does not execute`, async () => {
  const dir = path.join(TMP, 'xss-local');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'llm.json');
  fs.writeFileSync(file, JSON.stringify(xssFixture(), null, 2) + '\n');
  const server = await startServer({ file });
  try {
    await xssCheck(server, false, async () => {});
    await xssCheck(server, true, async () => {}); // CSP off: the client's own sanitiser alone
  } finally {
    await server.stop();
  }
});

scenario(`stateless: XSS corpus (${PAYLOADS.length} payloads) imported does not execute`, async () => {
  const server = await startServer({ stateless: true });
  try {
    const text = JSON.stringify(xssFixture(), null, 2);
    for (const bypassCSP of [false, true]) {
      await xssCheck(server, bypassCSP, async (page) => {
        await importFile(page, 'llm_2025.06.01.0000.json', text);
        await waitStatus(page, /Imported/);
        await page.reload();
        await page.waitForSelector('body[data-ready="true"]');
      });
    }
  } finally {
    await server.stop();
  }
});

scenario('both: the page works at phone width with keyboard only', async () => {
  const server = await statelessServer();
  const context = await browser.newContext({ viewport: { width: 375, height: 740 }, isMobile: true, hasTouch: true });
  try {
    const page = await context.newPage();
    await page.goto(server.url);
    await page.waitForSelector('body[data-ready="true"]');
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert(overflow <= 1, `page is ${overflow}px wider than a phone screen`);
    const small = await page.$$eval('button:not([hidden])', (bs) => bs.filter((b) => b.offsetParent && b.getBoundingClientRect().height < 36).map((b) => b.textContent));
    assert(!small.length, `buttons smaller than a touch target: ${small.slice(0, 5)}`);
    // Keyboard: focus the box, type, Enter sends.
    await page.focus('[data-testid="composer-input"]');
    await page.keyboard.type('Hi');
    const req = page.waitForRequest((r) => r.method() === 'POST' && /stateless\/chat$/.test(r.url()));
    await page.keyboard.press('Enter');
    await req;
    await page.waitForSelector('[data-testid="pending-answer"]', { state: 'detached', timeout: 120_000 });
    const labelled = await page.$$eval('input, select, textarea', (els) => els.filter((e) => e.type !== 'hidden' && !e.hidden && !e.labels?.length && !e.getAttribute('aria-label')).map((e) => e.id || e.name));
    assert(!labelled.length, `controls without a label: ${labelled}`);
    for (const landmark of ['header', 'main', 'nav', 'aside']) assert(await page.$(landmark), `no <${landmark}> landmark`);
  } finally {
    await context.close();
  }
});


// ------------------------------------------------- conversations, chat conventions, phones

/** Writes a screenshot of the page as it is now to $WO_SCREENSHOTS, and audits it with axe-core. */
async function shot(page, name) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: false });
  await axeCheck(page, name);
}

/** Screens audited by axe-core, for the closing summary. */
const axeAudited = [];

/**
 * Runs axe-core on the page as it is, in the light and the dark colour
 * scheme; throws listing every serious or critical violation (rule, impact,
 * the first elements) — lesser ones are printed as notes.
 */
async function axeCheck(page, name) {
  const bad = [];
  for (const scheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme: scheme });
    if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.evaluate(AXE_SOURCE);
    const found = await page.evaluate(async () => {
      const r = await window.axe.run(document, { resultTypes: ['violations'] });
      return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n) => `${n.target.join(' ')}${n.failureSummary ? ` [${n.failureSummary.replace(/\s+/g, ' ').slice(0, 160)}]` : ''}`) }));
    });
    for (const v of found) {
      const line = `${scheme}: ${v.id} (${v.impact}: ${v.help}) at ${v.nodes.join(' | ')}`;
      if (v.impact === 'serious' || v.impact === 'critical') bad.push(line);
      else console.log(`# axe note on ${name}: ${line}`);
    }
  }
  await page.emulateMedia({ colorScheme: null });
  axeAudited.push(name);
  assert(!bad.length, `axe-core on ${name}: ${bad.join(' ;; ')}`);
}

/** Waits for the turn in flight to end; throws with the note if it failed. */
async function waitTurn(page) {
  await page.waitForSelector('[data-testid="stop"]', { state: 'hidden', timeout: 180_000 });
  await page.waitForFunction(() => !document.querySelector('[data-testid="pending-answer"]')
    || /Failed|Stopped/.test(document.querySelector('[data-testid="streaming-note"]')?.textContent || ''), null, { timeout: 180_000 });
  const note = await page.evaluate(() => document.querySelector('[data-testid="streaming-note"]')?.textContent ?? null);
  if (note && /Failed|Stopped/.test(note)) throw new Error(`the turn did not complete: ${note}`);
}

/** The conversation list, opening the drawer first on phones. */
async function openConversations(page, size) {
  if (size === 'phone' && !(await page.isVisible('[data-testid="new-chat"]'))) {
    await page.click('[data-testid="open-conversations"]');
    await page.waitForSelector('[data-testid="new-chat"]', { state: 'visible' });
  }
}

/** Lets the page write to the clipboard (Copy by keyboard). */
async function context_grant(page, server) {
  await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.origin });
}

async function shownIds(page) {
  return page.$$eval('[data-testid="message"]', (els) => els.map((e) => e.dataset.id));
}

/** A conversation of two exchanges; the last answer holds a code block. */
function codeFixture(tag) {
  const base = Date.UTC(2025, 2, 3, 4, 5, 6);
  const rows = [
    ['ann', 'user', `<p>${tag}: which language prints with print?</p>`],
    ['smollm2', 'assistant', '<p>Python.</p>'],
    ['ann', 'user', '<p>How do I print <strong>hello</strong> in it?</p>'],
    ['smollm2', 'assistant', '<p>Use <em>print</em>:</p><pre><code>print("hello")</code></pre>'],
  ];
  const messages = [];
  let parent;
  rows.forEach(([username, role, content], i) => {
    const timestamp = stamp(base + i * 1000);
    const m = { id: 'm_' + sha16(`${username}|${timestamp}|${content}`), title: `${tag} ${i}`, username, timestamp, content, role };
    if (parent) m.parent = parent;
    if (role === 'assistant') { m.provider = 'llama'; m.model = 'smollm2'; }
    parent = m.id;
    messages.push(m);
  });
  return {
    version: 1,
    schema: 'https://raw.githubusercontent.com/arborrhythms/WikiOracle/main/spec/llm_state_v1.json',
    date: stamp(base + 10_000), context: '<p>A test project.</p>', messages,
    truth: { trust: [{ id: 't_' + sha16(`${tag} fact|${stamp(base)}|<p>Python prints with print.</p>`), title: `${tag} fact`, timestamp: stamp(base), certainty: 0.9, content: '<p>Python prints with print.</p>' }], retrieval_prefs: { max_entries: 8 } },
  };
}

async function loadFixture(page, fixture) {
  await importFile(page, 'llm_2025.03.03.0405.json', JSON.stringify(fixture));
  await waitStatus(page, /Imported|Merged/);
  await page.waitForSelector(`[data-testid="message"][data-id="${fixture.messages[fixture.messages.length - 1].id}"]`);
}

for (const mode of ['local', 'stateless']) {
  for (const size of ['desktop', 'phone']) {
    const fresh = () => startServer({ stateless: mode === 'stateless' });

    scenario(`${mode} ${size}: New chat starts a conversation; the list is newest first, filters with highlights and switches`, async () => {
      const server = await fresh();
      try {
        await withPage(server, { size }, async (page) => {
          await sendMessage(page, 'Tell me about volcanoes.');
          const [q1] = await lastMessages(page, 2);
          await shot(page, `${mode}-${size}-conversation`);
          await openConversations(page, size);
          await shot(page, `${mode}-${size}-conversations`);
          if (size === 'phone') {
            const pos = await page.$eval('[data-testid="sidebar"]', (e) => ({ position: getComputedStyle(e).position, left: e.getBoundingClientRect().left }));
            assert(pos.position === 'fixed' && Math.abs(pos.left) < 1, `the drawer does not slide over the conversation: ${JSON.stringify(pos)}`);
            assert((await shownIds(page)).includes(q1.id), 'the drawer replaced the conversation');
          }
          await page.click('[data-testid="new-chat"]');
          if (size === 'phone') await page.waitForSelector('[data-testid="sidebar"]', { state: 'hidden' });
          assert((await shownIds(page)).length === 0, 'New chat still shows the old conversation');
          assert(await page.isVisible('[data-testid="empty-hint"]'), 'New chat does not say a new conversation starts');
          await sendMessage(page, 'Name a famous painter.');
          const st = await stateOf(server, page);
          const q2 = st.messages.find((m) => /famous painter/.test(m.content));
          assert(q2 && q2.parent === undefined && q2.new_conversation === true, `the New chat question is not a marked root: ${JSON.stringify(q2)}`);
          const shown = await shownIds(page);
          assert(shown[0] === q2.id && shown.length === 2 && !shown.includes(q1.id), `the new conversation shows ${shown.length} messages`);
          // The list: newest first, title = the root's title, a message count.
          await openConversations(page, size);
          const names = await page.$$eval('[data-testid="conversation-name"]', (els) => els.map((e) => e.textContent));
          assert(names.length === 2 && /painter/.test(names[0]) && /volcano/i.test(names[1]), `conversation list: ${JSON.stringify(names)}`);
          const meta = await page.textContent('[data-testid="conversation"][aria-current="true"]');
          assert(/2 messages/.test(meta), `the current conversation's entry: ${meta}`);
          // Filter: only the match, highlighted.
          await page.fill('[data-testid="conversation-filter"]', 'VOLCANO');
          await page.waitForFunction(() => document.querySelectorAll('[data-testid="conversation"]').length === 1);
          const mark = await page.textContent('[data-testid="conversation-name"] mark');
          assert(mark.toLowerCase() === 'volcano', `highlight: ${mark}`);
          await shot(page, `${mode}-${size}-conversations-filtered`);
          await page.fill('[data-testid="conversation-filter"]', 'zzzz-nothing');
          await page.waitForSelector('[data-testid="conversation-none"]');
          await page.fill('[data-testid="conversation-filter"]', 'volcano');
          await page.click('[data-testid="conversation"]');
          await page.waitForFunction((id) => document.querySelector('[data-testid="message"]')?.dataset.id === id, q1.id);
          if (size === 'phone') await page.waitForSelector('[data-testid="sidebar"]', { state: 'hidden' });
          assert(!(await shownIds(page)).includes(q2.id), 'both conversations shown at once');
          // Opening the page shows the most recent conversation.
          await page.reload();
          await page.waitForSelector('body[data-ready="true"]');
          assert((await shownIds(page))[0] === q2.id, 'the page did not open on the most recent conversation');
        });
      } finally {
        await server.stop();
      }
    });

    scenario(`${mode} ${size}: Copy (Markdown, code), Regenerate (a sibling answer) and Edit & resend (a sibling question)`, async () => {
      const server = await fresh();
      try {
        await withPage(server, { size }, async (page, watch, context) => {
          await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.origin });
          const fx = codeFixture(`conv-${mode}-${size}`);
          await loadFixture(page, fx);
          const [, a0, q, a] = fx.messages;
          assert(!(await page.$('[data-testid="message-title"]')), 'bubbles still repeat their title');
          const clip = () => page.evaluate(() => navigator.clipboard.readText());
          await page.click(`#msg-${a.id} [data-testid="copy-code"]`);
          await waitStatus(page, /copied/);
          assert((await clip()) === 'print("hello")', `code copy gave ${JSON.stringify(await clip())}`);
          await page.click(`#msg-${a.id} [data-testid="copy-message"]`);
          await page.waitForFunction(() => /Markdown/.test(document.querySelector('[data-testid="status"]').textContent));
          const md = await clip();
          assert(md === 'Use *print*:\n\n```\nprint("hello")\n```', `message copy gave ${JSON.stringify(md)}`);
          await page.click(`#msg-${q.id} [data-testid="copy-message"]`);
          await page.waitForFunction(async () => (await navigator.clipboard.readText()).includes('**hello**'));
          await shot(page, `${mode}-${size}-actions`);

          // Regenerate: another answer beside the original, which stays —
          // to the same stored question in local mode (in place), to the
          // same question sent again in stateless mode.
          await page.click(`#msg-${a.id} [data-testid="regenerate"]`);
          await waitTurn(page);
          let st = await stateOf(server, page);
          assert(st.messages.some((m) => m.id === a.id), 'the original answer was lost');
          const answers = st.messages.filter((m) => m.parent === q.id);
          assert(answers.length === 2, `regenerate stored ${JSON.stringify(answers)}`);
          assert(st.messages.filter((m) => m.parent === a0.id).length === 1, 'regenerate stored a second question');
          const newAnswer = answers.find((m) => m.id !== a.id);
          const switched = newAnswer;
          assert(newAnswer, 'no new answer stored');
          let shown = await shownIds(page);
          assert(shown.includes(newAnswer.id) && !shown.includes(a.id), 'the new answer is not the one shown');
          const pos = await page.textContent(`#msg-${switched.id} [data-testid="branch-position"]`);
          assert(pos === '2/2', `the switcher shows ${pos}`);
          await page.click(`#msg-${switched.id} [data-testid="branch-prev"]`);
          await page.waitForSelector(`#msg-${a.id}`);
          {
            // A conversation's first answer too: a sibling in place, ‹2/2›,
            // and still one conversation in the sidebar.
            await page.click(`#msg-${a0.id} [data-testid="regenerate"]`);
            await waitTurn(page);
            st = await stateOf(server, page);
            const firsts = st.messages.filter((m) => m.parent === fx.messages[0].id);
            assert(firsts.length === 2, `regenerating the first answer stored ${JSON.stringify(firsts)}`);
            const other = firsts.find((m) => m.id !== a0.id);
            assert((await page.textContent(`#msg-${other.id} [data-testid="branch-position"]`)) === '2/2', 'no ‹2/2› on the first answer');
            const roots = st.messages.filter((m) => !m.parent);
            assert(roots.length === 1, `regenerating the first answer made ${roots.length} conversations`);
            if (await page.isVisible('[data-testid="conversation-filter"]')) {
              const names = await page.$$eval('[data-testid="conversation-name"]', (els) => els.map((e) => e.textContent));
              assert(names.length === 1, `the sidebar lists ${JSON.stringify(names)}`);
            }
            await page.click(`#msg-${other.id} [data-testid="branch-prev"]`);
            await page.waitForSelector(`#msg-${a0.id}`);
            await page.waitForSelector(`#msg-${q.id}`);
          }

          // Edit & resend: the question's text in the box, sent beside it.
          await page.click(`#msg-${q.id} [data-testid="edit-resend"]`);
          await page.waitForSelector('[data-testid="reply-to"]:not([hidden])');
          assert(/edited/.test(await page.textContent('[data-testid="reply-to-label"]')), 'the banner does not say the message is being edited');
          assert((await page.inputValue('[data-testid="composer-input"]')) === 'How do I print **hello** in it?', `the box holds ${await page.inputValue('[data-testid="composer-input"]')}`);
          assert(!(await shownIds(page)).includes(q.id), 'the edited question is still shown as the branch');
          await sendMessage(page, 'How do I print goodbye in it?');
          st = await stateOf(server, page);
          const edited = st.messages.find((m) => /goodbye/.test(m.content));
          assert(edited && edited.parent === a0.id, `the edited question's parent is ${edited && edited.parent}, expected ${a0.id}`);
          shown = await shownIds(page);
          assert(shown.includes(edited.id) && !shown.includes(q.id), 'the edit is not the branch shown');
          assert((await page.textContent(`#msg-${edited.id} [data-testid="branch-position"]`)) === '2/2', 'the edit is not the second sibling question');
        });
      } finally {
        await server.stop();
      }
    });

    scenario(`${mode} ${size}: Regenerate with the dead provider shows the error once and keeps the answer`, async () => {
      const server = await fresh();
      try {
        await withPage(server, { size, prefs: { provider: 'dead', max_tokens: 8 } }, async (page) => {
          const fx = codeFixture(`dead-${mode}-${size}`);
          await loadFixture(page, fx);
          const a = fx.messages[3];
          const before = canonical((await stateOf(server, page)).messages);
          await page.click(`#msg-${a.id} [data-testid="regenerate"]`);
          await page.waitForSelector(`#msg-${a.id} [data-testid="regenerate-error"]`, { timeout: 120_000 });
          const text = await page.textContent(`#msg-${a.id} [data-testid="regenerate-error"]`);
          assert(/dead|reach|refused|connect/i.test(text), `error: ${text}`);
          const places = await page.evaluate(() => [...document.querySelectorAll('[data-testid="alert"], [data-testid="streaming-note"], [data-testid="regenerate-error"]')].filter((e) => e.textContent.trim()).length);
          assert(places === 1, `the error is shown in ${places} places`);
          assert((await page.textContent(`#msg-${a.id} [data-testid="message-content"]`)).includes('print("hello")'), 'the original answer is not shown');
          await shot(page, `${mode}-${size}-regenerate-failed`);
          assert(canonical((await stateOf(server, page)).messages) === before, 'a failed regenerate changed the stored messages');
          // Retry fails the same way, still once.
          await page.click(`#msg-${a.id} [data-testid="retry"]`);
          await page.waitForSelector(`#msg-${a.id} [data-testid="regenerate-error"]`, { timeout: 120_000 });
          assert((await page.locator('[data-testid="regenerate-error"]').count()) === 1, 'Retry stacked a second error');
        });
      } finally {
        await server.stop();
      }
    });

    scenario(`${mode} ${size}: keyboard only: Tab reaches every tool, message action and Send, with focus visible; panels open and close by keyboard`, async () => {
      const server = await fresh();
      try {
        await withPage(server, { size }, async (page) => {
          const fx = codeFixture(`kbd-${mode}-${size}`);
          await loadFixture(page, fx);
          await page.fill('[data-testid="composer-input"]', 'a draft to send');
          /** Tabs through the whole page once (until focus comes back round); what got focus, and where focus was not visible. */
          const walk = async () => {
            await page.evaluate(() => { document.activeElement?.blur(); window.scrollTo(0, 0); });
            const seen = [];
            const unseen = [];
            let first = null;
            for (let i = 0; i < 200; i++) {
              await page.keyboard.press('Tab');
              const f = await page.evaluate(() => {
                const e = document.activeElement;
                if (!e || e === document.body) return null;
                const cs = getComputedStyle(e);
                const r = e.getBoundingClientRect();
                const key = `${e.dataset.testid || e.id || e.tagName}${e.closest('[data-testid="message"]') ? '@' + e.closest('[data-testid="message"]').dataset.id : ''}`;
                return {
                  key,
                  testid: e.dataset.testid || e.id || e.tagName.toLowerCase(),
                  // The ring of :focus-visible (an outline) or a shadow, on a box the user can see.
                  shown: r.width > 0 && r.height > 0 && cs.visibility !== 'hidden' && Number(cs.opacity) > 0.5
                    && ((cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) >= 2) || cs.boxShadow !== 'none'),
                };
              });
              if (!f) continue;
              if (f.key === first) break;
              first ||= f.key;
              seen.push(f.testid);
              if (!f.shown) unseen.push(f.key);
            }
            return { seen: new Set(seen), unseen };
          };
          let { seen, unseen } = await walk();
          const need = ['composer-input', 'send', 'copy-message', 'regenerate', 'edit-resend', 'branch-from', 'copy-code']
            .concat(size === 'phone' ? ['open-conversations', 'open-menu'] : ['new-chat', 'conversation-filter', 'search-input', 'open-settings', 'open-truth', 'open-context', 'export', 'import']);
          const missing = need.filter((n) => !seen.has(n));
          assert(!missing.length, `Tab never reached ${missing.join(', ')} (reached: ${[...seen].join(', ')})`);
          assert(!unseen.length, `focus not visible on ${unseen.join(', ')}`);
          if (size === 'phone') {
            // The drawer and the menu open from the keyboard, and their contents are then reachable.
            await page.focus('[data-testid="open-menu"]');
            await page.keyboard.press('Enter');
            await page.waitForSelector('[data-testid="tools"]', { state: 'visible' });
            ({ seen } = await walk());
            const inMenu = ['search-input', 'open-settings', 'open-truth', 'open-context', 'export', 'import'].filter((n) => !seen.has(n));
            assert(!inMenu.length, `with the menu open, Tab never reached ${inMenu.join(', ')}`);
            await page.keyboard.press('Escape');
            await page.waitForSelector('[data-testid="tools"]', { state: 'hidden' });
            await page.focus('[data-testid="open-conversations"]');
            await page.keyboard.press('Enter');
            await page.waitForSelector('[data-testid="new-chat"]', { state: 'visible' });
            await shot(page, `${mode}-${size}-drawer-keyboard`);
            ({ seen } = await walk());
            assert(seen.has('new-chat') && seen.has('conversation-filter'), `with the drawer open, Tab reached only ${[...seen].join(', ')}`);
            await page.focus('[data-testid="new-chat"]');
            await page.keyboard.press('Escape');
            await page.waitForSelector('[data-testid="new-chat"]', { state: 'hidden' });
          }
          // Each panel: Enter on its toggle opens it with focus inside; Escape closes it and gives focus back.
          for (const which of ['settings', 'truth', 'context']) {
            if (size === 'phone') {
              await page.focus('[data-testid="open-menu"]');
              await page.keyboard.press('Enter');
              await page.waitForSelector('[data-testid="tools"]', { state: 'visible' });
            }
            await page.focus(`[data-testid="open-${which}"]`);
            await page.keyboard.press('Enter');
            await page.waitForSelector(`[data-testid="panel-${which}"]:not([hidden])`);
            const inside = await page.evaluate((w) => document.querySelector(`[data-testid="panel-${w}"]`).contains(document.activeElement), which);
            assert(inside, `opening ${which} left focus outside the panel`);
            await page.keyboard.press('Tab');
            const next = await page.evaluate((w) => document.querySelector(`[data-testid="panel-${w}"]`).contains(document.activeElement), which);
            assert(next, `Tab from the ${which} panel's heading left the panel`);
            await page.keyboard.press('Escape');
            await page.waitForSelector(`[data-testid="panel-${which}"]`, { state: 'hidden' });
            const back = await page.evaluate(() => document.activeElement?.dataset.testid);
            const expect = size === 'phone' ? 'open-menu' : `open-${which}`;
            assert(back === expect, `closing ${which} put focus on ${back}, expected ${expect}`);
          }
          // A message action by keyboard: Enter on Copy copies (the status says so).
          const a = fx.messages[3];
          await context_grant(page, server);
          await page.focus(`#msg-${a.id} [data-testid="copy-message"]`);
          await page.keyboard.press('Enter');
          await waitStatus(page, /Markdown/);
        });
      } finally {
        await server.stop();
      }
    });

    scenario(`${mode} ${size}: the header names provider and model in one row; panels slide over the conversation`, async () => {
      const server = await fresh();
      try {
        await withPage(server, { size }, async (page) => {
          const fx = codeFixture(`screens-${mode}-${size}`);
          await loadFixture(page, fx);
          const badge = await page.textContent('[data-testid="model-badge"]');
          assert(/llama/.test(badge) && /smollm2/.test(badge), `the header names ${JSON.stringify(badge)}`);
          const head = await page.$eval('header.topbar', (e) => {
            const tops = [...e.children].filter((c) => c.offsetParent && c.getBoundingClientRect().height).map((c) => Math.round(c.getBoundingClientRect().top));
            return { height: e.getBoundingClientRect().height, tops };
          });
          assert(head.height <= 64, `the header is ${head.height}px tall`);
          assert(Math.max(...head.tops) - Math.min(...head.tops) < 16, `the header wraps: tops ${head.tops}`);
          const composer = await page.$eval('[data-testid="composer"]', (e) => e.getBoundingClientRect().height);
          assert(composer <= 120, `the composer is ${composer}px tall`);
          const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
          assert(overflow <= 1, `page is ${overflow}px wider than the screen`);
          await shot(page, `${mode}-${size}-home`);
          const mainBox = await page.$eval('#conversation', (e) => e.getBoundingClientRect().toJSON());
          for (const which of ['settings', 'truth', 'context']) {
            if (size === 'phone') {
              await page.click('[data-testid="open-menu"]');
              await page.waitForSelector('[data-testid="tools"]', { state: 'visible' });
              if (which === 'settings') {
                // The import's notice (still shown) must not cover the open menu.
                const boxes = await page.evaluate(() => {
                  const box = (e) => e.getBoundingClientRect().toJSON();
                  const status = document.getElementById('status');
                  return { shown: status.classList.contains('shown'), status: box(status), menu: box(document.querySelector('[data-testid="tools"]')) };
                });
                assert(boxes.shown, 'the import\'s notice was gone before the menu opened');
                const overlaps = (p, q) => p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom;
                assert(!overlaps(boxes.status, boxes.menu), `the notice covers the open menu: ${JSON.stringify(boxes)}`);
                await shot(page, `${mode}-${size}-menu`);
              }
            }
            await openPanel(page, which);
            await shot(page, `${mode}-${size}-${which}`);
            if (size === 'phone') {
              const p = await page.$eval('#panels', (e) => ({ position: getComputedStyle(e).position, right: window.innerWidth - e.getBoundingClientRect().right }));
              assert(p.position === 'fixed' && Math.abs(p.right) < 1, `the ${which} panel does not slide over: ${JSON.stringify(p)}`);
              const now = await page.$eval('#conversation', (e) => e.getBoundingClientRect().toJSON());
              assert(Math.abs(now.width - mainBox.width) < 1 && (await shownIds(page)).length === 4, `the ${which} panel replaced the conversation`);
              await page.click('[data-testid="scrim"]', { position: { x: 10, y: 400 } });
              await page.waitForSelector(`[data-testid="panel-${which}"]`, { state: 'hidden' });
            } else {
              await page.click(`[data-testid="panel-${which}"] .panel-close`);
            }
          }
          if (size === 'phone') await page.click('[data-testid="open-menu"]');
          await page.fill('[data-testid="search-input"]', 'print');
          await page.click('[data-testid="search-submit"]');
          await page.waitForSelector('[data-testid="panel-search"]:not([hidden])');
          await shot(page, `${mode}-${size}-search`);
        });
      } finally {
        await server.stop();
      }
    });
  }
}

// The layout holds at the sizes people use: the header stays one row (the
// tools that do not fit go behind "More", or the phone menu), an opened
// panel shows its title and close button below the header even with the
// conversation scrolled, and the message box keeps at least half the width.
const LAYOUT_SIZES = {
  '1024x768': { viewport: { width: 1024, height: 768 }, reducedMotion: 'reduce' },
  '1280x800': SIZES.desktop,
  '390x844': SIZES.phone,
};
scenario('local: the layout holds at 1024×768, 1280×800 and 390×844 (header, panels, composer, shortcuts)', async () => {
  const server = await serveFixture('local', exportFixture('layout', 60), 'layout');
  try {
    for (const [size, opts] of Object.entries(LAYOUT_SIZES)) {
      const context = await browser.newContext({ acceptDownloads: true, ...opts });
      await context.addCookies([{ name: prefsCookie(server), value: b64urlEncode(JSON.stringify({ max_tokens: ANSWER_TOKENS })), url: server.origin, sameSite: 'Strict' }]);
      const page = await context.newPage();
      const errors = [];
      page.on('pageerror', (e) => errors.push(String(e && e.message ? e.message : e)));
      try {
        await page.goto(server.url);
        await page.waitForFunction(() => document.body.dataset.ready === 'true');
        const phone = size === '390x844';
        const width = opts.viewport.width;
        const header = async () => page.$eval('header.topbar', (e) => {
          const tops = [...e.children].filter((c) => c.offsetParent && c.getBoundingClientRect().height).map((c) => Math.round(c.getBoundingClientRect().top));
          return { height: e.getBoundingClientRect().height, bottom: e.getBoundingClientRect().bottom, spread: Math.max(...tops) - Math.min(...tops) };
        });
        const head = await header();
        assert(head.height <= 64 && head.spread < 16, `${size}: the header is ${head.height}px tall, its items ${head.spread}px apart`);
        const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        assert(overflow <= 1, `${size}: the page is ${overflow}px wider than the screen`);
        // The composer spans at least half the page, its message box at least half the composer.
        const widths = async () => page.evaluate(() => ({
          composer: document.querySelector('[data-testid="composer"]').getBoundingClientRect().width,
          box: document.querySelector('[data-testid="composer-input"]').getBoundingClientRect().width,
        }));
        const w = await widths();
        assert(w.composer >= width / 2 && w.box >= w.composer / 2, `${size}: the composer is ${Math.round(w.composer)}px of ${width}, its message box ${Math.round(w.box)}px`);
        // A status line appears and goes without moving the conversation.
        const before = await page.$eval('#conversation', (e) => e.getBoundingClientRect().top);
        await page.evaluate(() => document.querySelector('[data-testid="status"]').classList.add('shown'));
        await page.evaluate(() => { document.querySelector('[data-testid="status"]').textContent = 'Answer saved.'; });
        const after = await page.$eval('#conversation', (e) => e.getBoundingClientRect().top);
        assert(Math.abs(after - before) < 1, `${size}: a status line moved the conversation by ${after - before}px`);
        for (const which of ['settings', 'truth', 'efforts', 'context']) {
          // Scrolled down the conversation, as a reader would be.
          await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
          if (phone) {
            await page.click('[data-testid="open-menu"]');
            await page.waitForSelector('[data-testid="tools"]', { state: 'visible' });
            const search = await page.$eval('[data-testid="search-input"]', (e) => e.getBoundingClientRect().height);
            assert(search <= 56, `${size}: the menu's search box is ${search}px tall`);
          }
          await openPanel(page, which);
          const close = await page.$eval(`[data-testid="panel-${which}"] .panel-close`, (e) => e.getBoundingClientRect().toJSON());
          const title = await page.$eval(`[data-testid="panel-${which}"] h2`, (e) => e.getBoundingClientRect().toJSON());
          const top = phone ? 0 : (await header()).bottom;
          for (const [what, r] of [['close button', close], ['title', title]]) {
            assert(r.top >= top - 1 && r.bottom <= opts.viewport.height && r.left >= 0 && r.right <= width,
              `${size}: the ${which} panel's ${what} is outside the viewport or under the header: ${JSON.stringify(r)}`);
          }
          if (!phone) {
            const hd = await header();
            assert(hd.height <= 64 && hd.spread < 16, `${size}: with the ${which} panel open the header is ${hd.height}px tall`);
            const open = await widths();
            assert(open.box >= open.composer / 2, `${size}: with the ${which} panel open the message box is ${Math.round(open.box)}px of ${Math.round(open.composer)}`);
          }
          await page.click(`[data-testid="panel-${which}"] .panel-close`);
          await page.waitForSelector(`[data-testid="panel-${which}"]`, { state: 'hidden' });
        }
        // The shortcuts: `?` lists them; Ctrl+Shift+O starts a new chat; `/` focuses search.
        await page.focus('[data-testid="conversation-title"]').catch(() => {});
        await page.evaluate(() => document.activeElement?.blur());
        await page.keyboard.press('?');
        await page.waitForSelector('[data-testid="shortcuts-dialog"][open]');
        const listed = await page.textContent('[data-testid="shortcuts-list"]');
        for (const what of ['New chat', 'Search', 'Stop']) assert(listed.includes(what), `${size}: the shortcuts do not list ${what}: ${listed}`);
        await shot(page, `layout-${size}-shortcuts`);
        await page.click('[data-testid="shortcuts-close"]');
        await page.waitForSelector('[data-testid="shortcuts-dialog"]:not([open])', { state: 'attached' });
        await page.keyboard.press('Control+Shift+O');
        await page.waitForFunction(() => document.querySelector('[data-testid="conversation-title"]').textContent === 'New conversation');
        await page.evaluate(() => document.activeElement?.blur());
        await page.keyboard.press('/');
        await page.waitForFunction(() => document.activeElement?.dataset.testid === 'search-input');
        await shot(page, `layout-${size}`);
        assert(!errors.length, `${size}: page errors: ${errors.join('; ')}`);
      } finally {
        await context.close();
      }
    }
  } finally {
    await server.stop();
  }
});

// ------------------------------------------------- rename, highlighting, truth filters, efforts, context as Markdown, provider picker

/** One id the way wo derives it (content-addressed). */
const truthRecord = (title, timestamp, content, extra = {}) => ({ id: 't_' + sha16(`${title}|${timestamp}|${content}`), title, timestamp, certainty: 0.8, content, ...extra });

/** A conversation whose answer holds Python code and an HTML payload as code, and truth of every kind and status. */
function featureFixture(tag) {
  const base = Date.UTC(2025, 3, 4, 5, 6, 7);
  const code = 'def greet(name):\n    # say hi\n    return "hi " + name * 2\n';
  const rows = [
    ['ann', 'user', `<p>${tag}: how do I greet in Python?</p>`],
    ['smollm2', 'assistant', `<p>Like this:</p><pre><code class="language-python">${code.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')}</code></pre>`
      + '<pre><code class="language-x&quot; onmouseover=&quot;window.__xss=7">&lt;img src=x onerror="window.__xss=5"&gt;</code></pre>'],
  ];
  const messages = [];
  let parent;
  rows.forEach(([username, role, content], i) => {
    const timestamp = stamp(base + i * 1000);
    const m = { id: 'm_' + sha16(`${username}|${timestamp}|${content}`), title: `${tag} ${i}`, username, timestamp, content, role };
    if (parent) m.parent = parent;
    else m.new_conversation = true;
    if (role === 'assistant') { m.provider = 'llama'; m.model = 'smollm2'; }
    parent = m.id;
    messages.push(m);
  });
  const t = (i) => stamp(base + 60_000 + i * 1000);
  const fact = truthRecord('Kiln fires to cone 6', t(0), '<p>Cone 6 is 1222 °C.</p>', { kind: 'fact', tags: ['kiln'] });
  const old = truthRecord('Kiln fires to cone 5', t(1), '<p>Cone 5.</p>', { kind: 'fact', tags: ['kiln'] });
  const newer = truthRecord('Kiln fires to cone 6 now', t(2), '<p>Cone 6 now.</p>', { kind: 'fact', supersedes: old.id });
  const note = truthRecord('Glaze notes', t(3), '<p>Celadon likes reduction.</p>', { kind: 'note', tags: ['glaze'] });
  const event = truthRecord('Studio opened', t(4), '<p>In March.</p>', { kind: 'event' });
  const archived = truthRecord('Old price list', t(5), '<p>2019 prices.</p>', { kind: 'note', expires: '2020-01-01T00:00:00Z' });
  const open = truthRecord('Fix the kiln vent', t(6), '<p>The vent rattles.</p>', { kind: 'effort', status: 'open' });
  const resolved = truthRecord('Find the firing temperature', t(7), '<p>What cone?</p>', { kind: 'effort', status: 'resolved', resolution: fact.id });
  return {
    fixture: {
      version: 1,
      schema: 'https://raw.githubusercontent.com/arborrhythms/WikiOracle/main/spec/llm_state_v1.json',
      date: stamp(base + 120_000), context: '<p>A test project.</p>', messages,
      truth: { trust: [fact, old, newer, note, event, archived, open, resolved], retrieval_prefs: { max_entries: 8 } },
    },
    code, fact, old, newer, note, event, archived, open, resolved,
  };
}

/** Visible truth entries' ids. */
async function truthShown(page) {
  return page.$$eval('[data-testid="truth-item"]', (els) => els.map((e) => e.dataset.id).sort());
}

/** Opens a panel from the toolbar (behind the ⋯ menu on phones). */
async function openPanelAt(page, which, size) {
  if (size === 'phone') {
    // A panel slides over the ⋯ menu: close it first.
    for (const close of await page.$$('.panel:not([hidden]) .panel-close')) await close.click();
  }
  if (size === 'phone' && !(await page.isVisible(`[data-testid="open-${which}"]`))) {
    await page.click('[data-testid="open-menu"]');
    await page.waitForSelector('[data-testid="tools"]', { state: 'visible' });
  }
  await openPanel(page, which);
}

/** Sets one truth filter (the list follows on input). */
async function truthFilter(page, which, value) {
  const sel = `[data-testid="truth-filter-${which}"]`;
  if (which === 'tag') await page.fill(sel, value);
  else await page.selectOption(sel, value);
}

for (const mode of ['local', 'stateless']) {
  for (const size of ['desktop', 'phone']) {
    scenario(`${mode} ${size}: rename a conversation, highlighted code, truth filters, the effort panel, context edited as Markdown`, async () => {
      const server = await startServer({ stateless: mode === 'stateless' });
      try {
        await withPage(server, { size }, async (page, watch, context) => {
          await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.origin });
          const fx = featureFixture(`feat-${mode}-${size}`);
          await loadFixture(page, fx.fixture);
          const [q, a] = fx.fixture.messages;

          // Highlighted code: spans by kind, the language from the fence, the text unchanged.
          const hl = await page.$eval(`#msg-${a.id}`, (el) => {
            const code = el.querySelector('code[data-lang="python"]');
            const of = (cls) => Array.from(code ? code.querySelectorAll(`.${cls}`) : []).map((s) => s.textContent);
            return {
              lang: !!code, text: code && code.textContent, kw: of('hl-kw'), str: of('hl-str'), com: of('hl-com'), fn: of('hl-fn'), num: of('hl-num'),
              kwColor: code && code.querySelector('.hl-kw') ? getComputedStyle(code.querySelector('.hl-kw')).color : '',
              plainColor: code ? getComputedStyle(code).color : '',
              langs: Array.from(el.querySelectorAll('code')).map((c) => c.getAttribute('data-lang')),
              payload: el.querySelectorAll('img').length,
              payloadText: el.querySelectorAll('code')[1]?.textContent ?? '',
            };
          });
          assert(hl.lang, 'the python code block lost its language');
          assert(hl.text === fx.code, `highlighting changed the code's text: ${JSON.stringify(hl.text)}`);
          assert(hl.kw.includes('def') && hl.kw.includes('return'), `keywords: ${JSON.stringify(hl.kw)}`);
          assert(hl.str.includes('"hi "') && hl.com.includes('# say hi') && hl.fn.includes('greet') && hl.num.includes('2'), `highlighted: ${JSON.stringify(hl)}`);
          assert(hl.kwColor && hl.kwColor !== hl.plainColor, `keywords are not coloured (${hl.kwColor})`);
          assert(hl.langs[1] === null, `a language class carrying an attribute payload became ${hl.langs[1]}`);
          assert(!hl.payload && /<img src=x onerror/.test(hl.payloadText), 'markup inside code was not kept as text');
          await page.click(`#msg-${a.id} [data-testid="copy-code"] >> nth=0`);
          await waitStatus(page, /copied/);
          const copied = await page.evaluate(() => navigator.clipboard.readText());
          assert(copied === fx.code, `copying highlighted code gave ${JSON.stringify(copied)}`);
          await page.$eval(`#msg-${a.id} pre`, (e) => e.scrollIntoView({ block: 'center' }));
          await shot(page, `${mode}-${size}-code-highlighted`);

          // Rename: refusals say why and change nothing; the title is plain text.
          const titleOf = async () => (await stateOf(server, page)).messages.find((m) => m.id === q.id);
          const before = await titleOf();
          await page.click('[data-testid="conversation-rename"]');
          for (const [bad, says] of [['   ', /empty/], ['x'.repeat(201), /201 characters/]]) {
            await page.fill('[data-testid="rename-input"]', bad);
            await page.click('[data-testid="rename-save"]');
            await page.waitForFunction((src) => new RegExp(src).test(document.querySelector('[data-testid="alert"]').textContent), says.source);
            assert(await page.isVisible('[data-testid="rename-form"]'), 'a refused title closed the form');
            const now = await titleOf();
            assert(now.title === before.title, `a refused title changed the state: ${now.title}`);
          }
          await page.keyboard.press('Escape');
          await page.waitForSelector('[data-testid="rename-form"]', { state: 'detached' });
          assert(await page.isVisible('[data-testid="conversation-title"]'), 'Escape did not bring the title back');
          const payload = '<img src=x onerror="window.__xss=1">';
          await page.click('[data-testid="conversation-rename"]');
          await page.fill('[data-testid="rename-input"]', `  ${payload}   Kiln   plans `);
          await shot(page, `${mode}-${size}-rename`);
          await page.click('[data-testid="rename-save"]');
          await waitStatus(page, /renamed/);
          const want = `${payload} Kiln plans`;
          const shownTitle = await page.$eval('[data-testid="conversation-title"]', (e) => ({ text: e.textContent, children: e.children.length }));
          assert(shownTitle.text === want && !shownTitle.children, `the header shows ${JSON.stringify(shownTitle)}`);
          const after = await titleOf();
          assert(after.title === want && after.content === q.content && after.id === q.id, `the stored root: ${JSON.stringify(after)}`);
          const answer = (await stateOf(server, page)).messages.find((m) => m.id === a.id);
          assert(answer.title === a.title, 'renaming touched another message');
          await openConversations(page, size);
          const listed = await page.$eval(`[data-testid="conversation"][data-root="${q.id}"] [data-testid="conversation-name"]`, (e) => ({ text: e.textContent, children: e.children.length }));
          assert(listed.text === want && !listed.children, `the list shows ${JSON.stringify(listed)}`);
          if (size === 'phone') await page.click('[data-testid="close-conversations"]');
          await page.reload();
          await page.waitForSelector('body[data-ready="true"]');
          assert((await page.textContent('[data-testid="conversation-title"]')) === want, 'the new title did not survive a reload');

          // Truth filters by kind, status and tag.
          await openPanelAt(page, 'truth', size);
          const all = fx.fixture.truth.trust.map((t) => t.id).sort();
          assert(JSON.stringify(await truthShown(page)) === JSON.stringify(all), 'the unfiltered panel does not show every entry');
          const expect = async (what, ids) => {
            const want = ids.map((t) => t.id).sort();
            await page.waitForFunction((w) => JSON.stringify(Array.from(document.querySelectorAll('[data-testid="truth-item"]')).map((e) => e.dataset.id).sort()) === w, JSON.stringify(want), { timeout: 5000 })
              .catch(async () => { throw new Error(`${what}: shows ${JSON.stringify(await truthShown(page))}, want ${JSON.stringify(want)}`); });
          };
          await truthFilter(page, 'kind', 'effort');
          await expect('kind effort', [fx.open, fx.resolved]);
          await truthFilter(page, 'status', 'resolved');
          await expect('effort + resolved', [fx.resolved]);
          await truthFilter(page, 'kind', '');
          await truthFilter(page, 'status', 'superseded');
          await expect('superseded', [fx.old]);
          await truthFilter(page, 'status', 'archived');
          await expect('archived', [fx.archived]);
          await truthFilter(page, 'status', 'open');
          await truthFilter(page, 'tag', 'kiln');
          await expect('open + tag kiln', [fx.fact]);
          assert(/1 of 8/.test(await page.textContent('[data-testid="truth-filter-count"]')), 'the count does not follow the filters');
          await truthFilter(page, 'kind', 'event');
          await page.waitForSelector('[data-testid="truth-none"]');
          await truthFilter(page, 'tag', '');
          await truthFilter(page, 'status', '');
          await expect('kind event', [fx.event]);
          await shot(page, `${mode}-${size}-truth-filters`);
          await truthFilter(page, 'kind', '');
          // A truth entry is edited as Markdown too, never as its markup.
          const noteItem = `[data-testid="truth-item"][data-id="${fx.note.id}"]`;
          await page.click(`${noteItem} [data-testid="truth-edit"]`);
          const noteText = await page.inputValue(`${noteItem} [data-testid="truth-edit-content"]`);
          assert(noteText === 'Celadon likes reduction.', `the truth editor shows ${JSON.stringify(noteText)}`);
          await page.fill(`${noteItem} [data-testid="truth-edit-content"]`, '**Celadon** likes *reduction*.');
          await page.click(`${noteItem} [data-testid="truth-edit-save"]`);
          await page.waitForSelector(`${noteItem} [data-testid="truth-content"] strong`);
          const noteStored = (await stateOf(server, page)).truth.trust.find((t) => t.id === fx.note.id);
          assert(/<strong>Celadon<\/strong> likes <em>reduction<\/em>/.test(noteStored.content), `stored: ${JSON.stringify(noteStored.content)}`);

          // The effort panel: open and resolved, the resolution linked.
          await openPanelAt(page, 'efforts', size);
          const efforts = await page.evaluate(() => ({
            open: Array.from(document.querySelectorAll('[data-testid="efforts-open"] [data-testid="effort"]')).map((e) => e.dataset.id),
            resolved: Array.from(document.querySelectorAll('[data-testid="efforts-resolved"] [data-testid="effort"]')).map((e) => e.dataset.id),
            resolution: document.querySelector('[data-testid="effort-resolution"]')?.textContent ?? '',
          }));
          assert(JSON.stringify(efforts.open) === JSON.stringify([fx.open.id]) && JSON.stringify(efforts.resolved) === JSON.stringify([fx.resolved.id]), `efforts: ${JSON.stringify(efforts)}`);
          assert(efforts.resolution.includes(fx.fact.title), `the resolution does not name its entry: ${efforts.resolution}`);
          await shot(page, `${mode}-${size}-efforts`);
          await page.click('[data-testid="effort-resolution"] a');
          await page.waitForSelector(`[data-testid="panel-truth"]:not([hidden]) #truth-${fx.fact.id}`);

          // Context: shown and edited as Markdown, saved as sanitised XHTML, shown again as the same text.
          await openPanelAt(page, 'context', size);
          const shownMd = await page.inputValue('[data-testid="context-input"]');
          // A local server keeps its own context in a merge (empty here); the
          // browser's import replaces it with the fixture's.
          const wantMd = (await stateOf(server, page)).context ? 'A test project.' : '';
          assert(shownMd === wantMd, `the editor shows ${JSON.stringify(shownMd)}, not the text`);
          const md = '# Studio\n\nWe fire to **cone 6**, see `kiln.md`.\n\n- glaze\n- kiln\n\n> quiet hours after 9';
          await page.fill('[data-testid="context-input"]', md);
          await page.click('[data-testid="context-save"]');
          await waitStatus(page, /Context saved/);
          let st = await stateOf(server, page);
          assert(/<h1>Studio<\/h1>/.test(st.context) && /<strong>cone 6<\/strong>/.test(st.context) && /<li>glaze<\/li>/.test(st.context), `stored context: ${JSON.stringify(st.context)}`);
          assert(await page.$('[data-testid="context-view"] h1'), 'the saved context is not shown rendered');
          const again = await page.inputValue('[data-testid="context-input"]');
          assert(again === md, `the round trip changed the text: ${JSON.stringify(again)}`);
          await shot(page, `${mode}-${size}-context-markdown`);
          // Hostile Markdown: stored sanitised, nothing runs.
          await page.fill('[data-testid="context-input"]', 'Safe.\n\n<script>window.__xss=2</script>\n\n<img src=x onerror="window.__xss=3">\n\n[bad](javascript:window.__xss=4) [ok](https://example.org/)');
          const previous = st.context;
          await page.click('[data-testid="context-save"]');
          // The first save's "Context saved." may still show: wait for the state.
          for (let i = 0; i < 100 && (st = await stateOf(server, page)).context === previous; i++) await sleep(100);
          assert(!(await page.textContent('[data-testid="alert"]')), `saving failed: ${await page.textContent('[data-testid="alert"]')}`);
          assert(!/script|onerror|javascript|<img/i.test(st.context) && /href="https:\/\/example.org\/"/.test(st.context), `stored context: ${JSON.stringify(st.context)}`);
          // The editor is refilled from the saved state after the save
          // answers, which may come a moment after the state changed.
          let editor = await page.inputValue('[data-testid="context-input"]');
          for (let i = 0; i < 50 && /<[a-z]/i.test(editor); i++) {
            await sleep(100);
            editor = await page.inputValue('[data-testid="context-input"]');
          }
          assert(!/<[a-z]/i.test(editor), `the editor shows markup: ${editor}`);
          const audit = await domAudit(page);
          assert(!audit.problems.length, `unsafe markup rendered: ${audit.problems.slice(0, 8).join(', ')}`);
          assert((await page.evaluate(() => window.__xss)) === undefined, 'a payload ran');
        });
      } finally {
        await server.stop();
      }
    });

    // Local mode only: a stateless (hosted) server makes no outbound check
    // for an anonymous client, so its page cannot know which providers answer.
    if (mode === 'local') scenario(`${mode} ${size}: the provider picker offers only providers that answer, is remembered, and an unreachable choice says why once`, async () => {
      const server = mode === 'local' ? await localServer() : await statelessServer();
      await withPage(server, { size, prefs: { max_tokens: ANSWER_TOKENS, provider: 'dead' } }, async (page, watch, context) => {
        // The remembered choice cannot answer: said once, with the reason in local mode.
        await page.waitForFunction(() => /dead cannot answer/.test(document.querySelector('[data-testid="provider-note"]').textContent), null, { timeout: 30_000 });
        const noteText = await page.textContent('[data-testid="provider-note"]');
        assert(noteText.split('cannot answer').length === 2, `said more than once: ${noteText}`);
        if (mode === 'local') assert(/dead cannot answer: \S/.test(noteText), `no reason given: ${noteText}`);
        // The note is the picker's: the page's error area stays for failures.
        assert(!(await page.textContent('[data-testid="alert"]')), `the choice reported as an error: ${await page.textContent('[data-testid="alert"]')}`);
        const options = async () => page.$$eval('[data-testid="composer-provider"] option', (os) => os.map((o) => ({ text: o.textContent, disabled: o.disabled, selected: o.selected, value: o.value })));
        let opts = await options();
        const dead = opts.filter((o) => /^dead/.test(o.text));
        assert(dead.length === 1 && dead[0].disabled && dead[0].selected && /cannot answer/.test(dead[0].text), `the unreachable choice: ${JSON.stringify(opts)}`);
        const llama = opts.find((o) => /^llama · smollm2$/.test(o.text));
        assert(llama && !llama.disabled, `llama is not offered: ${JSON.stringify(opts)}`);
        await shot(page, `${mode}-${size}-provider-unreachable`);
        await page.selectOption('[data-testid="composer-provider"]', llama.value);
        await waitStatus(page, /Answers now come from llama · smollm2/);
        assert((await page.textContent('[data-testid="model-badge"]')) === 'llama · smollm2', 'the header does not name the provider and model');
        opts = await options();
        assert(!opts.some((o) => /^dead/.test(o.text)), `an unreachable provider is still offered: ${JSON.stringify(opts)}`);
        const cookie = (await context.cookies(server.origin)).find((c) => c.name === prefsCookie(server));
        const prefs = JSON.parse(b64urlDecode(cookie.value));
        assert(prefs.provider === 'llama' && prefs.model === undefined, `remembered: ${JSON.stringify(prefs)}`);
        // Remembered across a reload; the check runs again and says nothing.
        await page.reload();
        await page.waitForSelector('body[data-ready="true"]');
        await page.waitForFunction(() => !Array.from(document.querySelectorAll('[data-testid="composer-provider"] option')).some((o) => /^dead/.test(o.textContent)));
        await sleep(500);
        assert((await page.$eval('[data-testid="composer-provider"]', (s) => s.selectedOptions[0]?.textContent)) === 'llama · smollm2', 'the choice was not remembered');
        assert(!(await page.textContent('[data-testid="alert"]')), `an error after choosing a working provider: ${await page.textContent('[data-testid="alert"]')}`);
        assert(await page.isHidden('[data-testid="provider-note"]'), 'the unreachable note stayed after choosing a working provider');
        if (size === 'phone') {
          const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
          assert(overflow <= 1, `the composer with the picker is ${overflow}px wider than the phone`);
        }
        await shot(page, `${mode}-${size}-provider-picker`);
      });
    });
  }
}

scenario('local: the sign-in page at both sizes (screenshots)', async () => {
  const server = await localServer();
  for (const size of Object.keys(SIZES)) {
    await withPage(server, { signIn: false, size }, async (page) => {
      await page.waitForSelector('[data-testid="signin"]:not([hidden])');
      // No model is known before signing in: no empty pill in the header.
      const badge = await page.$eval('[data-testid="model-badge"]', (e) => ({ text: e.textContent, visibility: getComputedStyle(e).visibility }));
      assert(badge.text === '' && badge.visibility === 'hidden', `the header shows an empty model badge: ${JSON.stringify(badge)}`);
      await shot(page, `local-${size}-signin`);
    });
  }
});

scenario('both: axe-core fails a screen with a serious violation (the audit itself can fail)', async () => {
  const server = await statelessServer();
  await withPage(server, { size: 'desktop' }, async (page) => {
    // An image without alternative text and a button without a name.
    await page.evaluate(() => {
      const img = document.createElement('img');
      img.src = 'data:image/gif;base64,R0lGODlhAQABAAAAACw=';
      const b = document.createElement('button');
      document.querySelector('main').append(img, b);
    });
    let failed = null;
    try { await axeCheck(page, 'planted-violations'); } catch (e) { failed = e.message; }
    axeAudited.pop();
    assert(failed && /image-alt/.test(failed) && /button-name/.test(failed), `axe-core did not fail the planted violations: ${failed}`);
  });
});

scenario('local: the sign-in survives a server restart; --new-token sends the browser to a page saying how to sign in again', async () => {
  const first = await startServer();
  const port = new URL(first.origin).port;
  const { context, page, watch } = await openPage(first, { size: 'desktop' });
  let second = null;
  let third = null;
  try {
    await sendMessage(page, 'Remember this before the restart.');
    await first.stop();
    // The same project on the same port again: same link, and the page's cookie still works.
    second = await startServer({ file: first.file, port });
    assert(second.url === first.url, `the sign-in link changed across the restart: ${first.url} → ${second.url}`);
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    assert(await page.isHidden('[data-testid="signin"]'), 'the restart signed the browser out');
    assert(/before the restart/.test(await page.textContent('[data-testid="messages"]')), 'the conversation is not shown after the restart');
    await second.stop();
    // --new-token: the old cookie and the old link are dead; both say how to sign in again.
    third = await startServer({ file: first.file, port, newToken: true });
    assert(third.url !== first.url, '--new-token printed the old link');
    await page.reload();
    await page.waitForSelector('[data-testid="signin"]:not([hidden])');
    const text = await page.textContent('[data-testid="signin"]');
    assert(/wo serve/.test(text) && /Nothing is lost/.test(text) && /--new-token/.test(text), `sign-in text: ${text}`);
    const resp = await page.goto(first.url);
    assert(resp.status() === 401, `the old link answered ${resp.status()}`);
    await page.waitForSelector('[data-testid="signin-page"]');
    const page401 = await page.textContent('[data-testid="signin-page"]');
    assert(/wo serve/.test(page401) && /Nothing is lost/.test(page401), `stale-link page: ${page401}`);
    const styled = await page.$eval('[data-testid="signin-page"]', (e) => getComputedStyle(e).borderStyle);
    assert(styled !== 'none', 'the stale-link page is not styled (app.css not applied)');
    await shot(page, 'local-desktop-stale-link');
    await page.setViewportSize(SIZES.phone.viewport);
    await shot(page, 'local-phone-stale-link');
    // The new link signs in and shows everything kept.
    await page.goto(third.url);
    await page.waitForSelector('body[data-ready="true"]');
    assert(/before the restart/.test(await page.textContent('[data-testid="messages"]')), 'the conversation is not shown after signing in again');
    checkClean(watch);
  } finally {
    await context.close();
    for (const s of [first, second, third]) if (s) await s.stop();
  }
});

for (const mode of ['local', 'stateless']) {
  for (const size of ['desktop', 'phone']) {
    scenario(`${mode} ${size}: a 300-message conversation renders a window; scrolling up, Show earlier and a search hit bring in earlier messages`, async () => {
      const fx = bigFixture(300, 300);
      const server = await serveFixture(mode, fx, `window-${mode}-${size}`);
      try {
        await withPage(server, { size }, async (page) => {
          await importFixtureIfStateless(page, mode, fx);
          const last = fx.messages[299].id;
          await page.waitForSelector(`[data-testid="message"][data-id="${last}"]`);
          let ids = await shownIds(page);
          assert(ids.length >= 20 && ids.length <= 60, `${ids.length} messages rendered at once (a window is 40)`);
          assert(ids[ids.length - 1] === last, 'the newest message is not the last shown');
          const row = await page.textContent('[data-testid="earlier-messages"]');
          assert(new RegExp(`${300 - ids.length} in all`).test(row), `the earlier row says ${row}`);
          await shot(page, `${mode}-${size}-long-conversation`);
          // Scrolling up to the row shows the previous messages, keeping the one on screen in place.
          const anchor = ids[0];
          await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
          await page.mouse.move(SIZES[size].viewport.width / 2, SIZES[size].viewport.height / 2);
          for (let i = 0; i < 80 && (await page.locator('[data-testid="message"]').count()) === ids.length; i++) {
            await page.mouse.wheel(0, -800);
            await sleep(50);
          }
          assert((await page.locator('[data-testid="message"]').count()) > ids.length, 'scrolling up to the top showed no earlier messages');
          const top = await page.$eval(`#msg-${anchor}`, (e) => e.getBoundingClientRect().top);
          const height = SIZES[size].viewport.height;
          assert(top > -height && top < 2 * height, `the message that was first jumped to ${top}px`);
          ids = await shownIds(page);
          assert(ids.indexOf(anchor) > 0 && ids[ids.length - 1] === last, 'the earlier messages were not added above');
          // The button, by keyboard, until the conversation's first message is shown.
          for (let i = 0; i < 40; i++) {
            const b = await page.$('[data-testid="show-earlier"]');
            if (!b) break;
            // Scrolling may replace the row meanwhile (it shows earlier messages too): then look again.
            try {
              await b.focus();
              await page.keyboard.press('Enter');
            } catch { /* detached */ }
            await sleep(50);
          }
          ids = await shownIds(page);
          assert(ids.length === 300 && ids[0] === fx.messages[0].id, `after Show earlier: ${ids.length} shown, first ${ids[0]}`);
          // A fresh page, and a search hit far back: the window reaches it.
          await page.reload();
          await page.waitForSelector('body[data-ready="true"]');
          assert((await shownIds(page)).length <= 60, 'the reload did not start from a window again');
          if (size === 'phone') await page.click('[data-testid="open-menu"]');
          await page.fill('[data-testid="search-input"]', 'zxaah');
          await page.click('[data-testid="search-submit"]');
          await page.waitForSelector('[data-testid="search-hit-message"]');
          const hits = await page.locator('[data-testid="search-hit-message"]').count();
          assert(hits === 1, `${hits} search hits for one message's word`);
          await page.click('[data-testid="search-hit-message"]');
          await page.waitForSelector(`#msg-${fx.messages[7].id}`);
          const box = await page.$eval(`#msg-${fx.messages[7].id}`, (e) => { const r = e.getBoundingClientRect(); return { top: r.top, bottom: r.bottom }; });
          assert(box.bottom > 0 && box.top < 844, `the search hit is off screen: ${JSON.stringify(box)}`);
        });
      } finally {
        await server.stop();
      }
    });
  }
}

// ------------------------------------------------------------------ every conversation listed

/**
 * An old conversation of three messages (a word of its second message,
 * "obsidian", is in no title), a year before a conversation of `recent`
 * messages (bigFixture's): the old one is older than the latest 1,000.
 */
function oldConversationFixture(recent) {
  const fx = bigFixture(recent, recent);
  const base = Date.UTC(2023, 0, 2, 3, 4, 5);
  const rows = [
    ['ann', 'user', '<p>Which stone do raku potters polish?</p>'],
    ['smollm2', 'assistant', '<p>Often <strong>obsidian</strong> burnishing stones, smooth and dark.</p>'],
    ['ann', 'user', '<p>And how hot is the kiln?</p>'],
  ];
  const old = [];
  let parent = null;
  rows.forEach(([username, role, content], i) => {
    const timestamp = stamp(base + i * 1000);
    const m = { id: 'm_' + sha16(`${username}|${timestamp}|${content}`), title: i ? `raku ${i}` : 'Raku stones', username, timestamp, content, role };
    if (parent) m.parent = parent;
    else m.new_conversation = true;
    if (role === 'assistant') { m.provider = 'llama'; m.model = 'smollm2'; }
    parent = m.id;
    old.push(m);
  });
  fx.messages = old.concat(fx.messages);
  return { fx, old };
}

for (const mode of ['local', 'stateless']) {
  for (const size of ['desktop', 'phone']) {
    scenario(`${mode} ${size}: a conversation older than the latest 1,000 messages is listed, found by a word of its text and opens; asking in it keeps it whole`, async () => {
      const { fx, old } = oldConversationFixture(1200);
      const server = await serveFixture(mode, fx, `old-conversation-${size}`);
      try {
        await withPage(server, { size }, async (page) => {
          await importFixtureIfStateless(page, mode, fx);
          const last = fx.messages[fx.messages.length - 1].id;
          await page.waitForSelector(`[data-testid="message"][data-id="${last}"]`);
          // What the page asks the server from here on (local mode).
          const asked = [];
          page.on('request', (r) => { if (r.url().includes('/api/state')) asked.push(r.url()); });
          await openConversations(page, size);
          const names = await page.$$eval('[data-testid="conversation-name"]', (els) => els.map((e) => e.textContent));
          assert(names.length === 2 && names[0] === 'message 0' && names[1] === 'Raku stones', `conversation list: ${JSON.stringify(names)}`);
          const meta = await page.$$eval('[data-testid="conversation"]', (els) => els.map((e) => e.textContent));
          assert(/3 messages/.test(meta[1]) && /1200 messages/.test(meta[0]), `sizes: ${JSON.stringify(meta)}`);
          // A word of a message (not of a title): the snippet, highlighted.
          await page.fill('[data-testid="conversation-filter"]', 'OBSIDIAN');
          await page.waitForSelector('[data-testid="conversation-snippet"] mark');
          const rows = await page.locator('[data-testid="conversation"]').count();
          assert(rows === 1, `${rows} conversations match "obsidian"`);
          const snippet = await page.textContent('[data-testid="conversation-snippet"]');
          assert(/Often obsidian burnishing stones, smooth and dark\./.test(snippet), `snippet: ${snippet}`);
          assert((await page.textContent('[data-testid="conversation-snippet"] mark')).toLowerCase() === 'obsidian', 'the match is not highlighted');
          await shot(page, `${mode}-${size}-conversations-old-found`);
          await page.click('[data-testid="conversation"]');
          await page.waitForFunction((id) => document.querySelector('[data-testid="message"]')?.dataset.id === id, old[0].id);
          if (size === 'phone') await page.waitForSelector('[data-testid="sidebar"]', { state: 'hidden' });
          let ids = await shownIds(page);
          assert(JSON.stringify(ids) === JSON.stringify(old.map((m) => m.id)), `the old conversation shows ${JSON.stringify(ids)}`);
          if (mode === 'local') {
            // It was read alone, not by paging back through the 1,200 newer messages.
            assert(asked.some((u) => u.includes('conversation=')) && !asked.some((u) => u.includes('offset=')), `state requests: ${asked.join(' ')}`);
          }
          assert((await page.textContent('[data-testid="conversation-title"]')) === 'Raku stones', 'the header does not name the old conversation');
          // Asking in it: the answer follows its last message and the
          // conversation stays whole on screen (the reloaded page of the
          // latest messages does not hold its start); it is listed first now.
          await sendMessage(page, 'Is obsidian hard?');
          ids = await shownIds(page);
          assert(ids.length === 5 && JSON.stringify(ids.slice(0, 3)) === JSON.stringify(old.map((m) => m.id)), `after asking: ${ids.length} shown, first ${ids[0]}`);
          const st = await stateOf(server, page);
          const q = st.messages.find((m) => m.id === ids[3]);
          assert(q && q.parent === old[2].id, `the question does not follow the old conversation: ${JSON.stringify(q && q.parent)}`);
          await openConversations(page, size);
          await page.fill('[data-testid="conversation-filter"]', '');
          await page.waitForFunction(() => document.querySelectorAll('[data-testid="conversation"]').length === 2);
          const first = await page.$eval('[data-testid="conversation"]', (e) => ({ root: e.dataset.root, current: e.getAttribute('aria-current'), text: e.textContent }));
          assert(first.root === old[0].id && first.current === 'true' && /5 messages/.test(first.text), `the list's first entry: ${JSON.stringify(first)}`);
        });
      } finally {
        await server.stop();
      }
    });
  }

  scenario(`${mode}: a question whose turn has not begun is back in the composer after a reload, and leaves the draft once it has`, async () => {
    const server = await startServer({ stateless: mode === 'stateless' });
    try {
      await withPage(server, {}, async (page) => {
        const question = `What colour is obsidian? (${mode})`;
        // The chat request never reaches the server: the tab closes before
        // the turn's first event, as on a slow network.
        const chat = mode === 'local' ? '**/api/chat' : '**/api/stateless/chat';
        let held = 0;
        await page.route(chat, () => { held++; });
        await page.fill('[data-testid="composer-input"]', question);
        await page.click('[data-testid="send"]');
        await page.waitForSelector('[data-testid="pending-question"]');
        for (let i = 0; i < 50 && !held; i++) await sleep(100);
        assert(held === 1, `the chat request was not sent (${held})`);
        assert((await page.inputValue('[data-testid="composer-input"]')) === '', 'the box still holds the sent question');
        // The reload drops the held request (it is still held: unrouting
        // first would let it through).
        await page.goto(server.url);
        await page.waitForSelector('body[data-ready="true"]');
        await page.unroute(chat);
        assert((await page.inputValue('[data-testid="composer-input"]')) === question, 'the question was lost on reload');
        // Nothing was kept as a turn (the question is in the box once, not also a message).
        assert((await page.locator('[data-testid="message"]').count()) === 0, 'the unsent question was also kept as a message');
        const st = await stateOf(server, page);
        assert(st.messages.length === 0, `${st.messages.length} messages saved`);
        // Sent for real: once the turn began the draft is gone, across a reload too.
        await page.click('[data-testid="send"]');
        await waitTurn(page);
        await page.goto(server.url);
        await page.waitForSelector('body[data-ready="true"]');
        assert((await page.inputValue('[data-testid="composer-input"]')) === '', 'the answered question came back as the draft');
        const after = await stateOf(server, page);
        assert(after.messages.filter((m) => /What colour is obsidian/.test(m.content)).length === 1, 'the question was not saved once');
      });
    } finally {
      await server.stop();
    }
  });
}

// ------------------------------------------------------------------ PWA

for (const size of ['desktop', 'phone']) {
  scenario(`stateless ${size}: installable (manifest, icons, service worker) and the offline shell opens with the network off, saying chat needs the server`, async () => {
    let server = await startServer({ stateless: true });
    const port = new URL(server.origin).port;
    // A persistent profile: Chromium never offers to install from an incognito-like context.
    const profile = fs.mkdtempSync(path.join(TMP, `pwa-profile-${size}-`));
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
      ...SIZES[size],
    });
    const page = context.pages()[0] || await context.newPage();
    const watch = { dialogs: [], foreign: [], errors: [] };
    page.on('dialog', (d) => { watch.dialogs.push(d.message()); d.dismiss().catch(() => {}); });
    page.on('pageerror', (e) => watch.errors.push(String(e && e.message ? e.message : e)));
    page.on('request', (r) => { if (!r.url().startsWith(server.origin) && !/^(data|blob):/.test(r.url())) watch.foreign.push(r.url()); });
    page.setDefaultTimeout(30_000);
    try {
      await page.goto(server.url);
      await page.waitForSelector('body[data-ready="true"]');
      // What an installable app needs, with the right types and the CSP naming them.
      const get = (p) => page.request.get(server.origin + p);
      const man = await get('/manifest.webmanifest');
      assert(man.status() === 200 && man.headers()['content-type'] === 'application/manifest+json', `manifest: ${man.status()} ${man.headers()['content-type']}`);
      const m = await man.json();
      assert(m.name === 'WikiOracle' && m.start_url === '/' && m.display === 'standalone', `manifest: ${JSON.stringify(m)}`);
      for (const icon of m.icons) {
        const r = await get(icon.src);
        assert(r.status() === 200 && r.headers()['content-type'] === icon.type, `${icon.src}: ${r.status()} ${r.headers()['content-type']}`);
      }
      assert(['192x192', '512x512'].every((sz) => m.icons.some((i) => i.sizes === sz && i.type === 'image/png')), 'no 192 and 512 PNG icons');
      const sw = await get('/sw.js');
      assert(sw.status() === 200 && /javascript/.test(sw.headers()['content-type']), `sw.js: ${sw.status()}`);
      const csp = (await get('/')).headers()['content-security-policy'] || '';
      assert(/worker-src 'self'/.test(csp) && /manifest-src 'self'/.test(csp) && !/'unsafe-/.test(csp), `CSP: ${csp}`); // 'wasm-unsafe-eval' only
      // The service worker registers and takes the page; Chromium finds the app installable.
      await page.evaluate(() => navigator.serviceWorker.ready.then(() => true));
      const cdp = await context.newCDPSession(page);
      const { installabilityErrors } = await cdp.send('Page.getInstallabilityErrors');
      assert(!installabilityErrors.length, `not installable: ${JSON.stringify(installabilityErrors)}`);
      const manifest = await cdp.send('Page.getAppManifest');
      assert(!manifest.errors.length, `manifest errors: ${JSON.stringify(manifest.errors)}`);
      const fx = codeFixture(`pwa-${size}`);
      await loadFixture(page, fx);
      await page.reload();
      await page.waitForSelector('body[data-ready="true"]');
      assert(await page.evaluate(() => !!navigator.serviceWorker.controller), 'the service worker does not control the page');

      // Offline, and the server gone too: the page comes from the worker's cache.
      await server.stop();
      await context.setOffline(true);
      await page.reload();
      await page.waitForSelector('body[data-ready="true"]');
      assert(await page.evaluate(() => document.body.dataset.offline === 'true'), 'the page does not know it is offline');
      await page.waitForSelector(`[data-testid="message"][data-id="${fx.messages[3].id}"]`);
      const alert = await page.textContent('[data-testid="alert"]');
      assert(/offline/i.test(alert) && /server/.test(alert), `the offline page says ${JSON.stringify(alert)}`);
      assert((await page.textContent('[data-testid="mode-badge"]')) === 'offline', 'the badge does not say offline');
      await shot(page, `stateless-${size}-offline`);
      // Sending is refused, said once, and the question stays in the box.
      await page.fill('[data-testid="composer-input"]', 'Are you there?');
      await page.click('[data-testid="send"]');
      await page.waitForFunction(() => /answering needs/.test(document.querySelector('[data-testid="alert"]').textContent))
        .catch(async () => { throw new Error(`sending offline said ${JSON.stringify(await page.textContent('[data-testid="alert"]'))}`); });
      assert((await page.inputValue('[data-testid="composer-input"]')) === 'Are you there?', 'the question left the box');
      assert(!(await page.$('[data-testid="pending-question"]')), 'a question was sent offline');
      // Back online with the server: the page starts again from it.
      server = await startServer({ stateless: true, port });
      await context.setOffline(false);
      await page.waitForFunction(() => document.body.dataset.ready === 'true' && document.body.dataset.offline !== 'true' && document.querySelector('[data-testid="mode-badge"]').textContent === 'stateless', null, { timeout: 30_000 })
        .catch(async () => { throw new Error(`back online, the page did not start again from the server (offline=${await page.evaluate(() => document.body.dataset.offline)}, badge ${await page.textContent('[data-testid="mode-badge"]')})`); });
      checkClean(watch);
    } finally {
      await context.close();
      await server.stop();
    }
  });
}

// The page can close after a finished turn is saved but before its
// streaming record is removed: the next load must not keep it a second time.
scenario('stateless: a finished turn whose record outlived its save is not kept twice', async () => {
  const server = await startServer({ stateless: true });
  try {
    await withPage(server, {}, async (page) => {
      await sendMessage(page, 'What colour is basalt?');
      const before = await stateOf(server, page);
      const q = before.messages.find((m) => /basalt/.test(m.content));
      assert(q, 'the question was not saved');
      // The record as the page leaves it just before removing it.
      await page.evaluate((id) => localStorage.setItem('wo_pending_turn_stateless', JSON.stringify({
        message: 'What colour is basalt?', answer: 'Dark grey.', sent_at: new Date().toISOString(), sources: [], params: {}, saved_as: id,
      })), q.id);
      await page.reload();
      await page.waitForSelector('body[data-ready="true"]');
      const after = await stateOf(server, page);
      assert(after.messages.filter((m) => /basalt/.test(m.content) && m.role === 'user').length === 1,
        `the question is in the state ${after.messages.filter((m) => /basalt/.test(m.content) && m.role === 'user').length} times`);
      assert(after.messages.length === before.messages.length, `${after.messages.length - before.messages.length} messages added on reload`);
      assert(await page.evaluate(() => localStorage.getItem('wo_pending_turn_stateless')) === null, 'the record was not removed');
    });
  } finally {
    await server.stop();
  }
});

scenario('local: no service worker is registered (the page of a local server always comes from it)', async () => {
  const server = await localServer();
  await withPage(server, {}, async (page) => {
    const n = await page.evaluate(async () => (await navigator.serviceWorker.getRegistrations()).length);
    assert(n === 0, `${n} service workers registered in local mode`);
    const shell = await page.evaluate(() => localStorage.getItem('wo_last_mode'));
    assert(shell === 'local', `last mode: ${shell}`);
  });
});

// ------------------------------------------------------------------ benchmark

/**
 * An llm.json of `n` messages in conversations of `per` messages (question,
 * answer, …; roots marked `new_conversation`), ~300 bytes of XHTML each,
 * a code block in every tenth answer.
 */
function bigFixture(n, per) {
  const base = Date.UTC(2024, 0, 1, 0, 0, 0);
  const messages = [];
  let parent = null;
  for (let i = 0; i < n; i++) {
    const user = i % 2 === 0;
    const username = user ? 'ann' : 'smollm2';
    const timestamp = stamp(base + i * 1000);
    // A word found in this message alone (search finds it): zx + i in base 26.
    const code = 'zx' + [2, 1, 0].map((k) => String.fromCharCode(97 + (Math.floor(i / 26 ** k) % 26))).join('');
    const words = `message ${i} (${code}) of conversation ${Math.floor(i / per)}: the quick brown fox jumps over the lazy dog while the model explains retrieval, memory and branches`;
    const content = user
      ? `<p>${words}?</p>`
      : `<p>${words}.</p><p>A second paragraph with <strong>bold</strong> and <em>emphasis</em> to render.</p>${i % 10 === 1 ? '<pre><code>print("hello")</code></pre>' : ''}`;
    const m = { id: 'm_' + sha16(`${username}|${timestamp}|${content}`), title: `message ${i}`, username, timestamp, content, role: user ? 'user' : 'assistant' };
    if (i % per === 0) m.new_conversation = true;
    else m.parent = parent;
    if (!user) { m.provider = 'llama'; m.model = 'smollm2'; }
    parent = m.id;
    messages.push(m);
  }
  return {
    version: 1,
    schema: 'https://raw.githubusercontent.com/arborrhythms/WikiOracle/main/spec/llm_state_v1.json',
    date: stamp(base + n * 1000), context: '<p>A benchmark project.</p>', messages,
    truth: { trust: [], retrieval_prefs: { max_entries: 8 } },
  };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Reloads `page` and returns the time from navigation to the app's `wo-ready` mark, in ms. */
async function openTime(page) {
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]', { timeout: 120_000 });
  return page.evaluate(() => performance.getEntriesByName('wo-ready')[0].startTime);
}

/** Scrolls the conversation from the bottom to the top with the mouse wheel; frame times (ms) meanwhile. */
async function scrollFrames(page) {
  await page.evaluate(() => {
    window.__frames = [];
    let last = performance.now();
    const tick = (t) => { window.__frames.push(t - last); last = t; if (window.__frames.length < 100000) window.__raf = requestAnimationFrame(tick); };
    window.__raf = requestAnimationFrame(tick);
  });
  await page.mouse.move(400, 400);
  for (let i = 0; i < 60; i++) {
    await page.mouse.wheel(0, -600);
    await sleep(16);
  }
  await sleep(200);
  return page.evaluate(() => { cancelAnimationFrame(window.__raf); return window.__frames.slice(1); });
}

for (const shape of [{ name: 'one conversation of 10,000', per: 10_000 }, { name: '500 conversations of 20', per: 20 }]) {
  for (const mode of ['local', 'stateless']) {
    scenario(`bench: ${mode}, ${shape.name} messages: open and scroll`, async () => {
      const fx = bigFixture(10_000, shape.per);
      const text = JSON.stringify(fx, null, 2);
      let server;
      if (mode === 'local') {
        const dir = path.join(TMP, `bench-${mode}-${shape.per}`);
        fs.mkdirSync(dir, { recursive: true });
        const file = path.join(dir, 'llm.json');
        fs.writeFileSync(file, text);
        server = await startServer({ file });
      } else {
        server = await startServer({ stateless: true });
      }
      try {
        await withPage(server, { size: 'desktop' }, async (page) => {
          if (mode === 'stateless') {
            // Straight into IndexedDB, as an import leaves it.
            await page.evaluate((t) => new Promise((resolve, reject) => {
              const req = indexedDB.open('wikioracle', 1);
              req.onupgradeneeded = () => req.result.createObjectStore('state');
              req.onsuccess = () => {
                const tx = req.result.transaction('state', 'readwrite');
                tx.objectStore('state').put(JSON.parse(t), 'llm.json');
                tx.oncomplete = () => { req.result.close(); resolve(); };
                tx.onerror = () => reject(tx.error);
              };
              req.onerror = () => reject(req.error);
            }), text);
          }
          const opens = [];
          for (let i = 0; i < 5; i++) opens.push(await openTime(page));
          const shown = await page.locator('[data-testid="message"]').count();
          // The reference, in the same page: getting the same state and parsing it, rendering nothing.
          const refs = [];
          for (let i = 0; i < 5; i++) {
            refs.push(await page.evaluate(async (m) => {
              const t0 = performance.now();
              if (m === 'local') {
                await (await fetch('/api/export')).json();
              } else {
                await new Promise((resolve, reject) => {
                  const req = indexedDB.open('wikioracle', 1);
                  req.onsuccess = () => {
                    const g = req.result.transaction('state', 'readonly').objectStore('state').get('llm.json');
                    g.onsuccess = () => { req.result.close(); resolve(g.result); };
                    g.onerror = () => reject(g.error);
                  };
                  req.onerror = () => reject(req.error);
                });
              }
              return performance.now() - t0;
            }, mode));
          }
          const frames = await scrollFrames(page);
          const sorted = [...frames].sort((a, b) => a - b);
          const p95 = sorted[Math.floor(sorted.length * 0.95)] || 0;
          const long = frames.filter((f) => f > 50).length;
          const open = median(opens);
          const ref = median(refs);
          console.log(`# bench ${mode}, ${shape.name}: open ${open.toFixed(0)} ms (runs ${opens.map((x) => x.toFixed(0)).join(', ')}); reference fetch+parse of the whole state ${ref.toFixed(0)} ms; open/reference ${(open / ref).toFixed(2)}x; ${shown} messages in the DOM; scroll to the top: ${frames.length} frames, p95 ${p95.toFixed(1)} ms, max ${(sorted[sorted.length - 1] || 0).toFixed(1)} ms, ${long} over 50 ms`);
          assert(open < 1000, `opening took ${open.toFixed(0)} ms (goal < 1000 ms)`);
        });
      } finally {
        await server.stop();
      }
    });
  }
}

// ------------------------------------------------------------------ main

async function main() {
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  try {
    for (const s of scenarios) await runScenario(s);
  } finally {
    await browser.close().catch(() => {});
    for (const s of Object.values(servers)) await s.stop().catch(() => {});
    killAll();
  }
  const failed = results.filter((r) => !r.ok).length;
  const passed = results.length - failed;
  console.log(`# axe-core audited ${axeAudited.length} screens (light and dark): ${[...new Set(axeAudited)].join(', ')}`);
  console.log(`${passed} passed, ${failed} failed`);
  if (failed || process.env.WO_KEEP_TMP) console.log(`# temporary files (server logs): ${TMP}`);
  else fs.rmSync(TMP, { recursive: true, force: true });
  process.exitCode = failed ? 1 : 0;
}

main().catch((e) => {
  console.log(`not ok - runner: ${e && e.stack ? e.stack : e}`);
  killAll();
  process.exitCode = 1;
});
