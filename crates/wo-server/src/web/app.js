// WikiOracle web client: one codebase for `wo serve` (local mode, the server
// owns llm.json) and `wo serve --stateless` (the browser keeps llm.json in
// IndexedDB). No framework, no build step, no external requests.
//
// Security rules kept throughout:
// - Content (messages, truth, context) is untrusted XHTML. It is parsed with
//   DOMParser (an inert document: no scripts run, nothing loads) and only an
//   allowlist of elements and attributes is copied into new nodes made with
//   createElement/textContent. Nothing from content ever reaches innerHTML.
// - Titles, usernames, ids, diff lines and error messages are text only.
// - Settings live in this server's preferences cookie (`wo_prefs_<port>`, the
//   name comes from /api/info); no state and no secret goes there. Cookies
//   ignore ports, so any page on this host can write it: what is read is
//   checked against what the server offers before use (offeredPrefs).

// The file format is Rust's: wo-format and wo-wire compiled to WebAssembly
// (crates/wo-wasm, built by scripts/build-wasm.sh, served from /wasm/). It
// is loaded once, before anything else runs. Local mode can do without it
// (the server does the format's work); stateless mode cannot, and says so.
import initRust, * as rust from './wasm/wo_wasm.js';

let rustProblem = null;
try {
  await initRust();
} catch (e) {
  rustProblem = e;
}

const SCHEMA_URL =
  'https://raw.githubusercontent.com/arborrhythms/WikiOracle/main/spec/llm_state_v1.json';
let prefsCookie = null; // set from /api/info before any read or write
const PAGE = 1000; // messages per /api/state page (local mode)
const CONVERSATION_MESSAGES = 5000; // messages of one conversation loaded when it is opened (local mode; the server's page maximum)
const CONVERSATIONS_PAGE = 200; // conversations per /api/conversations page (local mode)
const FILTER_DELAY_MS = 150; // typing in the conversation filter asks the server once it pauses
const WINDOW_MESSAGES = 20; // recent messages sent with a stateless turn
const WINDOW_BYTES = 200_000;
const TRUTH_SENT = 32; // most truth entries sent with a stateless turn
const TRUTH_BYTES = 1_000_000;
const DRAFT_MESSAGES = 200;

// ---------------------------------------------------------------- DOM helpers

const $ = (id) => document.getElementById(id);

/** createElement with attributes/properties and children (text is text). */
function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (v === true) e.setAttribute(k, '');
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c == null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

let statusTimer = 0;
function notify(message, kind = 'info') {
  const status = $('status');
  const alertBox = $('alert');
  if (kind === 'error') {
    alertBox.textContent = message;
    alertBox.classList.add('shown');
  } else {
    status.textContent = message;
    status.classList.add('shown');
    clearTimeout(statusTimer);
    statusTimer = setTimeout(() => status.classList.remove('shown'), 6000);
  }
}
function clearAlert() {
  $('alert').textContent = '';
  $('alert').classList.remove('shown');
}

// ------------------------------------------------------ untrusted XHTML → DOM

/** Elements copied when rendering content (others are unwrapped or dropped). */
const RENDER_ELEMENTS = new Set([
  'p', 'br', 'em', 'strong', 'b', 'i', 'u', 'code', 'pre', 'blockquote', 'ul', 'ol', 'li',
  'a', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'table', 'thead', 'tbody', 'tr', 'th', 'td',
  'span', 'div', 'hr', 'sub', 'sup', 'del', 'ins', 'dl', 'dt', 'dd',
]);
/** Elements dropped together with everything inside them. */
const DROP_ELEMENTS = new Set([
  'script', 'style', 'template', 'noscript', 'iframe', 'frame', 'frameset', 'object',
  'embed', 'applet', 'svg', 'math', 'textarea', 'select', 'option', 'optgroup', 'datalist',
  'title', 'head', 'meta', 'link', 'base', 'noembed', 'noframes', 'xmp', 'plaintext',
  'img', 'image', 'picture', 'source', 'video', 'audio', 'track', 'canvas', 'input',
  'button', 'param', 'portal', 'slot', 'dialog', 'map', 'area',
]);
const VOID_ELEMENTS = new Set(['br', 'hr']);
const SAFE_SCHEMES = new Set(['http:', 'https:', 'mailto:']);
const HTML_NS = 'http://www.w3.org/1999/xhtml';
const MAX_DEPTH = 100;

/** An absolute http/https/mailto URL, normalised; anything else → null. */
function safeHref(raw) {
  if (typeof raw !== 'string') return null;
  let url;
  try {
    url = new URL(raw.trim()); // absolute only: relative URLs throw
  } catch {
    return null;
  }
  return SAFE_SCHEMES.has(url.protocol) ? url.href : null;
}

function parseFragment(src) {
  // An inert document: nothing in it runs or loads.
  return new DOMParser().parseFromString(String(src ?? ''), 'text/html').body;
}

/**
 * Copies the allowed part of `from`'s children into `to`, creating nodes in
 * `doc`. `allowed` is the element allowlist; `forRender` adds the link
 * attributes used on screen.
 */
function copySafe(from, to, doc, allowed, forRender, depth) {
  for (const n of Array.from(from.childNodes)) {
    if (n.nodeType === Node.TEXT_NODE) {
      to.append(doc.createTextNode(n.data));
      continue;
    }
    if (n.nodeType !== Node.ELEMENT_NODE) continue; // comments, CDATA, PIs
    if (n.namespaceURI !== HTML_NS) continue; // svg/math subtrees
    const tag = n.localName;
    if (DROP_ELEMENTS.has(tag)) continue;
    if (depth >= MAX_DEPTH) {
      to.append(doc.createTextNode(n.textContent || ''));
      continue;
    }
    if (!allowed.has(tag)) {
      copySafe(n, to, doc, allowed, forRender, depth + 1); // unwrap
      continue;
    }
    const e = doc.createElement(tag);
    const title = n.getAttribute('title');
    if (title != null) e.setAttribute('title', title);
    if (forRender && tag === 'code') {
      // pulldown-cmark's `language-x` class names the code's language (for
      // highlighting); no other class reaches the page.
      const lang = /(?:^|\s)language-([A-Za-z0-9_+#.-]{1,32})(?:\s|$)/.exec(n.getAttribute('class') || '');
      if (lang) e.setAttribute('data-lang', lang[1]);
    }
    if (tag === 'a') {
      const href = safeHref(n.getAttribute('href'));
      if (href) {
        e.setAttribute('href', href);
        if (forRender) {
          e.setAttribute('rel', 'noopener noreferrer nofollow');
          e.setAttribute('target', '_blank');
        }
      }
    }
    if (!VOID_ELEMENTS.has(tag)) copySafe(n, e, doc, allowed, forRender, depth + 1);
    to.append(e);
  }
}

/** Untrusted XHTML → a DocumentFragment of safe nodes for this page. */
function renderXhtml(src) {
  const frag = document.createDocumentFragment();
  copySafe(parseFragment(src), frag, document, RENDER_ELEMENTS, true, 0);
  return frag;
}

function plainText(src) {
  return (parseFragment(src).textContent || '').replace(/\s+/g, ' ').trim();
}

const CONTROL_CHARS = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/g;
function escText(s) {
  return String(s)
    .replace(CONTROL_CHARS, '')
    .replace(/[&<>]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;' })[c]);
}


/** What the user typed (text, or XHTML when it starts with a tag) → safe canonical XHTML. */
function userInputToXhtml(input) {
  const s = String(input).trim();
  if (!/^<[a-zA-Z!]/.test(s)) return textToXhtml(s);
  // wo-format's sanitiser, the one the server and `wo` use.
  return callRust(rust.sanitizeHtml, s) || textToXhtml(plainText(s));
}

/** For local mode: the server reads input as Markdown (HTML included) and sanitises it. */
function userInputForServer(input) {
  return String(input).trim();
}

/**
 * For stateless mode: Markdown (plain text is Markdown) → the XHTML a
 * local server would store, by the server's own converter (nothing is kept
 * there), then held to this page's allowlist like any other input.
 */
async function markdownToXhtml(input) {
  const text = String(input).trim();
  if (!text) return '';
  const { xhtml } = await api('/api/markdown', { method: 'POST', body: { markdown: text } });
  return userInputToXhtml(String(xhtml ?? ''));
}

// ---------------------------------------------------------------- time, ids

/** Whole-second UTC `YYYY-MM-DDTHH:MM:SSZ`. */
function nowStamp() {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
}

const STAMP_PARTS = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z$/;

/** [Unix milliseconds of the whole second, nanoseconds as 9 digits], or null. */
function stampKey(ts) {
  const m = STAMP_PARTS.exec(String(ts ?? ''));
  if (!m) return null;
  const ms = Date.parse(m[1] + 'Z');
  return Number.isNaN(ms) ? null : [ms, (m[2] || '').padEnd(9, '0')];
}

// Sorting 10,000 messages compares ~130,000 pairs: each timestamp is parsed
// once, not at every comparison.
const stampKeys = new Map();
function cachedStampKey(ts) {
  const k = String(ts ?? '');
  let v = stampKeys.get(k);
  if (v === undefined) {
    if (stampKeys.size > 100_000) stampKeys.clear();
    v = stampKey(k);
    stampKeys.set(k, v);
  }
  return v;
}

/**
 * Timestamps ordered as wo-format's `Timestamp`: by instant (fractions of a
 * second included, whatever their length), then by text; text alone where
 * one does not parse.
 */
function compareStamps(a, b) {
  const x = cachedStampKey(a);
  const y = cachedStampKey(b);
  if (x && y) {
    if (x[0] !== y[0]) return x[0] < y[0] ? -1 : 1;
    if (x[1] !== y[1]) return x[1] < y[1] ? -1 : 1;
  }
  return compareUtf8(String(a ?? ''), String(b ?? ''));
}


const utf8 = new TextEncoder();
/** Strings ordered by their UTF-8 bytes, as Rust orders `str` (UTF-16 order differs above U+FFFF). */
function compareUtf8(a, b) {
  if (a === b) return 0;
  const x = utf8.encode(a);
  const y = utf8.encode(b);
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1;
  return x.length < y.length ? -1 : x.length > y.length ? 1 : 0;
}

// One formatter for every timestamp: `toLocaleString` with options builds a
// new one per call, which was most of the time spent rendering a message.
const TIME_FORMAT = new Intl.DateTimeFormat(undefined, {
  year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit',
});

function formatTime(ts) {
  const ms = Date.parse(ts);
  if (Number.isNaN(ms)) return String(ts ?? '');
  return TIME_FORMAT.format(ms);
}

/** `llm_YYYY.MM.DD.HHMM.json`, local time. */
function exportName(d = new Date()) {
  const p = (n) => String(n).padStart(2, '0');
  return `llm_${d.getFullYear()}.${p(d.getMonth() + 1)}.${p(d.getDate())}.${p(d.getHours())}${p(d.getMinutes())}.json`;
}

/** When a truth entry was last changed: `updated`, else `timestamp` (wo-format's `effective_update`). */
const effectiveUpdate = (t) => t.updated ?? t.timestamp ?? '';

/** Messages sort by (timestamp, id), as wo-format orders the transcript. */
function compareMessages(a, b) {
  return compareStamps(a.timestamp, b.timestamp) || compareUtf8(String(a.id ?? ''), String(b.id ?? ''));
}

// ------------------------------------------ the file format (Rust, as wasm)
//
// Each of these is one call into crates/wo-wasm: the same functions `wo`
// runs, so ids, the canonical export, merges, state patches and truth edits
// cannot disagree with the CLI and the server. States cross as JSON text; a
// state handed back is wo-format's canonical text, parsed.

/** Throws when the wasm module did not load (stateless mode cannot work without it). */
function requireRust() {
  if (rustProblem) {
    throw new Error(`this browser could not load WikiOracle's WebAssembly module (${rustProblem.message || rustProblem})`);
  }
}

/** Calls an export of the wasm module; what it throws (a message naming the argument) becomes an Error. */
function callRust(fn, ...args) {
  requireRust();
  try {
    return fn(...args);
  } catch (e) {
    throw new Error(typeof e === 'string' ? e : (e && e.message) || String(e));
  }
}

/** Plain text → `<p>` paragraphs with `<br/>` (wo-format's `text_to_xhtml`). */
const textToXhtml = (text) => callRust(rust.textToXhtml, String(text));
/** `m_…` of a message: its username, timestamp and content (wo-format's `ids`). */
const messageId = (username, timestamp, content) => callRust(rust.messageId, String(username), String(timestamp), String(content));
/** `t_…` of a truth entry: its title, timestamp and content. */
const truthId = (title, timestamp, content) => callRust(rust.truthId, String(title), String(timestamp), String(content));

/** The canonical bytes of a state (wo-format's `to_canonical_vec`): what `wo export` writes. */
function canonicalStateText(state) {
  return callRust(rust.canonicalState, JSON.stringify(state));
}

/** A state as wo-format reads it: ids derived, messages sorted; throws naming the JSON pointer of a problem. */
function normalizeState(state) {
  return JSON.parse(canonicalStateText(state));
}

/** A file from outside through the one gate (wo-format's `admit`): `{ state, sanitised }`, or throws with pointers. */
function admitState(text) {
  return JSON.parse(callRust(rust.admitState, String(text)));
}

/** product §3 merge of `incoming` into `base` (wo-format's `merge_into`): `{ state, report }`. */
function mergeStates(base, incoming) {
  return JSON.parse(callRust(rust.mergeStates, JSON.stringify(base), JSON.stringify(incoming)));
}

/** A turn's or memory step's `state_patch` applied (wo-wire's `apply_state_patch`); returns the new state. */
function applyStatePatch(target, patch) {
  return JSON.parse(callRust(rust.applyStatePatch, JSON.stringify(target), JSON.stringify(patch)));
}

/**
 * The state with truth entry `id` edited (`changes`: title, content as
 * XHTML, certainty) and `updated` stamped `now` or just after the version
 * edited (wo-format's `State::edit_truth`); null when there is no such entry.
 */
function editTruthIn(state, id, changes, now) {
  const r = JSON.parse(callRust(rust.editTruth, JSON.stringify(state), String(id), JSON.stringify(changes), now));
  return r.found ? r.state : null;
}

/** The state without truth entry `id`, with a tombstone that buries it (`State::delete_truth`); null when there is none. */
function deleteTruthIn(state, id, now) {
  const r = JSON.parse(callRust(rust.deleteTruth, JSON.stringify(state), String(id), now));
  return r.found ? r.state : null;
}

// ---------------------------------------------------------------- preferences

const PREF_SPEC = {
  provider: 'string', model: 'string', temperature: 'number', max_tokens: 'integer',
  rag: 'boolean', url_fetch: 'boolean', max_entries: 'integer', min_certainty: 'number',
  username: 'string',
};
/**
 * The range the server accepts for each number (the request's types:
 * max_tokens is a u32). Another page on this host can write the cookie, so
 * a value outside is dropped (and reported once), never sent: one bad value
 * must not make every turn fail.
 */
const PREF_RANGE = {
  temperature: [0, 2], max_tokens: [0, 4294967295], max_entries: [0, 1000000], min_certainty: [0, 1],
};
/** Preferences dropped since the page loaded, reported once (`reportDroppedPrefs`). */
const droppedPrefs = new Set();

function b64urlEncode(text) {
  let bin = '';
  for (const b of new TextEncoder().encode(text)) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function b64urlDecode(s) {
  let b64 = s.replace(/-/g, '+').replace(/_/g, '/');
  while (b64.length % 4) b64 += '=';
  const bin = atob(b64);
  return new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
}

function cleanPrefs(raw) {
  const out = {};
  if (!raw || typeof raw !== 'object') return out;
  for (const [k, type] of Object.entries(PREF_SPEC)) {
    const v = raw[k];
    if (v == null) continue;
    const range = PREF_RANGE[k];
    const inRange = !range || (v >= range[0] && v <= range[1]);
    if (type === 'string' && typeof v === 'string' && v.length) out[k] = v.slice(0, 200);
    else if (type === 'boolean' && typeof v === 'boolean') out[k] = v;
    else if (type === 'number' && typeof v === 'number' && Number.isFinite(v) && inRange) out[k] = v;
    else if (type === 'integer' && Number.isInteger(v) && inRange) out[k] = v;
    else droppedPrefs.add(k);
  }
  if (out.max_tokens === 0) delete out.max_tokens;
  return out;
}

/** Says once which stored preferences were out of range and are not used. */
function reportDroppedPrefs() {
  if (!droppedPrefs.size || reportDroppedPrefs.done) return;
  reportDroppedPrefs.done = true;
  notify(`Ignored saved settings out of range: ${[...droppedPrefs].sort().join(', ')}. Set them again in Settings.`);
}

function readPrefs() {
  if (!prefsCookie) return {};
  for (const part of document.cookie.split(';')) {
    const i = part.indexOf('=');
    if (i < 0 || part.slice(0, i).trim() !== prefsCookie) continue;
    try {
      return cleanPrefs(JSON.parse(b64urlDecode(part.slice(i + 1).trim())));
    } catch {
      return {};
    }
  }
  return {};
}

function writePrefs(prefs) {
  if (!prefsCookie) return;
  const clean = cleanPrefs(prefs);
  let value = b64urlEncode(JSON.stringify(clean));
  if (value.length > 3800) {
    // Cannot happen with the caps above; never write an oversized cookie.
    value = b64urlEncode('{}');
  }
  const secure = location.protocol === 'https:' ? '; Secure' : '';
  document.cookie = `${prefsCookie}=${value}; Path=/; Max-Age=31536000; SameSite=Strict${secure}`;
}

/**
 * Keeps only what this server offers: a provider it lists, a model it
 * lists (stateless; local mode takes any model name of plain characters),
 * max_tokens within its cap. Another page on this host may have written
 * the cookie.
 */
function offeredPrefs(prefs) {
  const out = cleanPrefs(prefs);
  const provs = (app.providers && app.providers.providers) || [];
  if (out.provider !== undefined && !provs.some((x) => x.name === out.provider)) delete out.provider;
  if (out.model !== undefined) {
    const prov = provs.find((x) => x.name === (out.provider || app.providers.default));
    const models = prov ? [prov.default_model, ...(prov.models || [])] : [];
    const plain = /^[A-Za-z0-9._:/@+-]{1,200}$/.test(out.model);
    if (!plain || (app.mode === 'stateless' && !models.includes(out.model))) delete out.model;
  }
  const cap = app.info && app.info.max_tokens;
  if (out.max_tokens !== undefined && Number.isInteger(cap) && out.max_tokens > cap) delete out.max_tokens;
  return out;
}

// ---------------------------------------------------------------- HTTP

class ApiError extends Error {
  constructor(status, kind, message, pointer) {
    super(message);
    this.status = status;
    this.kind = kind;
    this.pointer = pointer;
  }
}

async function errorFrom(response) {
  let kind = 'http';
  let message = `${response.status} ${response.statusText}`;
  let pointer;
  try {
    const body = await response.json();
    if (body && body.error) {
      kind = body.error.kind || kind;
      message = body.error.message || message;
      pointer = body.error.pointer;
    }
  } catch {
    // not JSON
  }
  return new ApiError(response.status, kind, message, pointer);
}

/** JSON API call; state-changing methods always send a JSON body. */
async function api(path, { method = 'GET', body, rawBody, signal } = {}) {
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' }, signal };
  if (method !== 'GET' && method !== 'HEAD') {
    init.headers['Content-Type'] = 'application/json';
    init.body = rawBody ?? JSON.stringify(body ?? {});
  }
  const r = await fetch(path, init);
  if (!r.ok) throw await errorFrom(r);
  const type = r.headers.get('content-type') || '';
  if (type.includes('json')) return r.json();
  return r.text();
}

/**
 * POST a JSON body and read the Server-Sent Events answer. `on` maps event
 * names to handlers. `done` and `error` end the answer: reading stops there
 * even if the server keeps the connection open. Resolves with the last
 * event's name.
 */
async function postSse(path, body, on, signal) {
  const r = await fetch(path, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' },
    body: JSON.stringify(body),
    signal,
  });
  if (!r.ok) throw await errorFrom(r);
  if (!r.body) throw new ApiError(0, 'internal', 'This browser cannot read a streamed answer.');
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  let last = null;
  const dispatch = (frame) => {
    let event = 'message';
    const data = [];
    for (const line of frame.split('\n')) {
      if (!line || line.startsWith(':')) continue;
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      let value = i < 0 ? '' : line.slice(i + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
    if (!data.length) return;
    let payload;
    try {
      payload = JSON.parse(data.join('\n'));
    } catch {
      payload = { text: data.join('\n') };
    }
    last = event;
    if (on[event]) on[event](payload);
  };
  // After `done` a `memory` event may follow (the interpreter ran on the
  // exchange); the stream ends after it, or right after `done` without one.
  const finished = () => last === 'memory' || last === 'error';
  while (!finished()) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    // Normalise line ends, keeping a trailing CR until its LF may arrive.
    const keepCr = buf.endsWith('\r');
    if (keepCr) buf = buf.slice(0, -1);
    buf = buf.replace(/\r\n?/g, '\n');
    let i;
    while (!finished() && (i = buf.indexOf('\n\n')) >= 0) {
      dispatch(buf.slice(0, i));
      buf = buf.slice(i + 2);
    }
    if (keepCr) buf += '\r';
  }
  if (finished()) {
    reader.cancel().catch(() => {});
    return last;
  }
  buf += decoder.decode();
  if (buf.trim()) dispatch(buf.replace(/\r\n?/g, '\n'));
  return last;
}

// ---------------------------------------------------------------- IndexedDB

const IDB_NAME = 'wikioracle';
const IDB_STORE = 'state';
const IDB_KEY = 'llm.json';

function idbOpen() {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(IDB_NAME, 1);
    req.onupgradeneeded = () => req.result.createObjectStore(IDB_STORE);
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

async function idbGet() {
  const db = await idbOpen();
  try {
    return await new Promise((resolve, reject) => {
      const req = db.transaction(IDB_STORE, 'readonly').objectStore(IDB_STORE).get(IDB_KEY);
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
  } finally {
    db.close();
  }
}

async function idbPut(value, key = IDB_KEY) {
  const db = await idbOpen();
  try {
    await new Promise((resolve, reject) => {
      const tx = db.transaction(IDB_STORE, 'readwrite');
      tx.objectStore(IDB_STORE).put(value, key);
      tx.oncomplete = () => resolve();
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error || new Error('IndexedDB write aborted'));
    });
  } finally {
    db.close();
  }
}

// ----------------------------------------------------------- state helpers

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);


function freshState() {
  return {
    version: 1,
    schema: SCHEMA_URL,
    date: nowStamp(),
    context: '',
    messages: [],
    truth: {
      trust: [],
      retrieval_prefs: {
        max_entries: 8, min_certainty: 0, prefer_higher_certainty: true,
        certainty_weight: 0.7, recency_weight: 0.3,
      },
    },
  };
}




function mergeSummary(r) {
  const parts = [];
  const add = (n, what) => { if (n) parts.push(`${n} ${what}`); };
  add(r.messages_added, 'messages added');
  add(r.messages_replaced, 'messages replaced');
  add(r.truth_added, 'memory entries added');
  add(r.truth_updated, 'memory entries updated');
  add(r.truth_deleted, 'memory entries deleted');
  add(r.tombstones_added, 'tombstones added');
  return parts.length ? parts.join(', ') : 'nothing new';
}

function searchTerms(q) {
  return String(q).toLowerCase().split(/[^\p{L}\p{N}_]+/u).filter((t) => t.length > 1);
}

function termScore(text, terms) {
  const hay = text.toLowerCase();
  let score = 0;
  for (const t of terms) {
    let i = hay.indexOf(t);
    while (i >= 0) {
      score++;
      i = hay.indexOf(t, i + t.length);
    }
  }
  return score;
}

// ---------------------------------------------------------------- app state

const app = {
  follow: true, // the page keeps the newest message in view (see onScroll)
  mode: null, // 'local' | 'stateless'
  info: {},
  providers: { default: '', providers: [] },
  prefs: {},
  state: null, // {context, truth:{trust, deleted, retrieval_prefs}, messages, …}
  offset: 0, // local: index of the first loaded message
  total: 0,
  leaf: null, // id of the last message of the displayed branch
  branchFrom: null, // {id, previousLeaf, edit} while "branch from here" or "edit" is active
  newChat: false, // "New chat": the next message starts a conversation (no parent)
  previousLeaf: null, // what New chat left, for Escape/Cancel
  filter: '', // the conversation list's filter
  // local: the server's list of every conversation (GET /api/conversations),
  // {q, total, items: [{root, title, created, updated, latest, messages, snippet}]}
  conversationList: null,
  answerErrors: new Map(), // answer id → why regenerating it failed (shown under it, once)
  reports: new Map(), // assistant id → ContextReport of this session
  memoryPending: new Set(), // answer ids whose memory step is running
  memoryNotes: new Map(), // answer id → why nothing was remembered
  streaming: null, // {controller}
  offline: false, // started from the offline shell: nothing can be sent
  windowFrom: null, // id of the first message rendered (the list is windowed: see WINDOW)
  reveal: null, // an id the next render must include (a search hit, a regenerated answer)
  plainCache: new Map(),
  unreachableShown: new Set(), // providers whose "cannot answer" was said (once each)
  followedY: 0, // where the page last scrolled to follow an answer
};

// ------------------------------------------------------------- mode backends

const local = {
  /**
   * The latest PAGE messages, the conversation on screen when its messages
   * are older than that (opened from the list), and the first page of the
   * conversation list — every conversation of the file, from the server.
   */
  async load() {
    const shown = app.state && !app.newChat && app.leaf ? currentRoot(buildTree()) : null;
    const [st] = await Promise.all([api(`/api/state?limit=${PAGE}`), local.listConversations()]);
    app.offset = st.offset ?? 0;
    app.total = st.total_messages ?? (st.messages || []).length;
    app.state = st;
    normalizeLoaded(st);
    if (shown && !st.messages.some((m) => m.id === shown)) {
      try {
        await local.loadConversation(shown);
      } catch (e) {
        // Gone (merged away, deleted by hand): the page shows the latest conversation.
        if (!(e instanceof ApiError && e.status === 404)) throw e;
      }
    }
  },
  /**
   * Adds the messages of the conversation holding `id` (a root's or any
   * message's id) to those loaded, whatever their age: opening an old
   * conversation reads it alone, not the pages between. Returns its root's id.
   */
  async loadConversation(id) {
    const st = await api(`/api/state?conversation=${encodeURIComponent(id)}&limit=${CONVERSATION_MESSAGES}`);
    const have = new Set(app.state.messages.map((m) => m.id));
    const fresh = (Array.isArray(st.messages) ? st.messages : []).filter((m) => !have.has(m.id));
    if (fresh.length) {
      app.state.messages = app.state.messages.concat(fresh);
      app.state.messages.sort(compareMessages);
    }
    return st.conversation || id;
  },
  /** The first page of the conversation list (with `more`, the next one), for the filter as typed. */
  async listConversations(more = false) {
    const q = app.filter.trim();
    const prev = app.conversationList;
    const offset = more && prev && prev.q === q ? prev.items.length : 0;
    let path = `/api/conversations?limit=${CONVERSATIONS_PAGE}&offset=${offset}`;
    if (q) path += `&q=${encodeURIComponent(q)}`;
    if (app.showArchived) path += '&archived=true';
    const r = await api(path);
    // Typed on meanwhile: this answer is for a filter no longer asked.
    if (app.filter.trim() !== q) return;
    const items = Array.isArray(r.conversations) ? r.conversations : [];
    app.conversationList = { q, total: Number(r.total) || 0, items: offset ? prev.items.concat(items) : items };
  },
  chatPath: '/api/chat',
  async chatBody(message, parent, params, newConversation) {
    const body = { message, params };
    if (parent) body.parent = parent;
    else if (newConversation) body.new_conversation = true;
    if (app.prefs.username) body.username = app.prefs.username;
    const chunks = await browserChunks(message, params);
    if (chunks.length) body.chunks = chunks;
    return body;
  },
  async afterDone() {
    await local.load();
  },
  // The server keeps a turn whose client went away (its `keep_partial`):
  // nothing to hold here while it streams.
  turnStarted() {},
  turnProgress() {},
  turnEnded() {},
  /**
   * The stopped turn as the server kept it (question + answer so far,
   * marked `stopped`): it commits once it sees the connection close, so
   * the state is read again until the new stopped answer is there.
   * Returns its id.
   */
  async keepStopped(turn) {
    const known = new Set(app.state.messages.map((m) => m.id));
    for (let i = 0; i < 40; i++) {
      await local.load();
      // New stopped answers (another tab may have stopped one too): the one
      // whose question reads as this turn's, else the newest.
      const fresh = app.state.messages.filter((m) => !known.has(m.id) && isStopped(m));
      const asked = (m) => plainText(app.state.messages.find((q) => q.id === m.parent)?.content ?? '').trim();
      const kept = fresh.find((m) => asked(m) === turn.message.trim()) || fresh[fresh.length - 1];
      if (kept) return kept.id;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    throw new Error('the server has not saved it (reload the page to look again)');
  },
  async afterMemory() {
    await local.load();
  },
  async undoMemory(exchange) {
    await api('/api/memory/undo', { method: 'POST', body: { exchange } });
    await local.load();
  },
  async addTruth(t) {
    await api('/api/truth', { method: 'POST', body: { title: t.title, content: userInputForServer(t.content), certainty: t.certainty, kind: t.kind } });
    await local.load();
  },
  async editTruth(id, changes) {
    const body = { ...changes };
    if ('content' in body) body.content = userInputForServer(body.content);
    await api(`/api/truth/${encodeURIComponent(id)}`, { method: 'PATCH', body });
    await local.load();
  },
  async deleteTruth(id) {
    await api(`/api/truth/${encodeURIComponent(id)}`, { method: 'DELETE', body: {} });
    await local.load();
  },
  async renameMessage(id, title) {
    await api(`/api/messages/${encodeURIComponent(id)}`, { method: 'PATCH', body: { title } });
    await local.load();
  },
  /** Hides (or shows again) the conversation holding `id`; its messages stay in the file. */
  async archiveConversation(id, archived) {
    await api(`/api/messages/${encodeURIComponent(id)}`, { method: 'PATCH', body: { archived } });
    await local.load();
  },
  async saveContext(text) {
    await api('/api/state', { method: 'PATCH', body: { context: userInputForServer(text) } });
    await local.load();
  },
  async draftContext(params) {
    return api('/api/context/draft', { method: 'POST', body: { params } });
  },
  async applyContext(draft) {
    await api('/api/context/apply', { method: 'POST', body: { draft: draft.draft, current: draft.current } });
    await local.load();
  },
  async search(q) {
    return api(`/api/search?q=${encodeURIComponent(q)}&limit=20`);
  },
  async exportFile() {
    const a = h('a', { href: '/api/export', download: '' });
    document.body.append(a);
    a.click();
    a.remove();
  },
  async importText(text, how) {
    const report = await api('/api/merge', { method: 'POST', rawBody: text });
    await local.load();
    return `${how === 'drop' ? 'Merged' : 'Imported (merged)'}: ${mergeSummary(countReport(report))}.`;
  },
};

/**
 * The chunks of the folder indexed in this browser (the ingestion page,
 * /ingest.html) relevant to `message`, sent with a turn as the server's own
 * index chunks would be (`chunks` of the request). ingest-lib.js is loaded
 * only here, and loads the index's wasm module only when a folder has been
 * indexed; any failure costs the chunks, never the turn.
 */
async function browserChunks(message, params) {
  if (params && params.rag === false) return [];
  try {
    const lib = await import('/ingest-lib.js');
    return await lib.contextChunks(message);
  } catch {
    return [];
  }
}

function countReport(r) {
  const n = (v) => (Array.isArray(v) ? v.length : Number(v) || 0);
  const out = {};
  for (const k of ['messages_added', 'messages_replaced', 'truth_added', 'truth_updated', 'truth_deleted', 'tombstones_added']) out[k] = n(r && r[k]);
  return out;
}

function normalizeLoaded(st) {
  if (!Array.isArray(st.messages)) st.messages = [];
  if (!isObject(st.truth)) st.truth = {};
  if (!Array.isArray(st.truth.trust)) st.truth.trust = [];
  if (typeof st.context !== 'string') st.context = '';
  st.messages.sort(compareMessages);
}

const stateless = {
  async load() {
    let st = null;
    try {
      st = await idbGet();
    } catch (e) {
      notify(`Could not read this browser's saved state (${e.message}); starting empty.`, 'error');
    }
    requireRust();
    app.state = null;
    if (st) {
      try {
        app.state = normalizeState(st);
      } catch (e) {
        // Never lost: the unreadable copy stays in IndexedDB under its own key.
        const key = `${IDB_KEY}.bak-${nowStamp()}`;
        await idbPut(st, key);
        notify(`This browser's saved state is not a valid llm.json (${e.message}); it is kept in IndexedDB as ${key} and a new one is started.`, 'error');
      }
    }
    if (!app.state) {
      app.state = normalizeState(freshState());
      if (st) await idbPut(app.state); // the backup above is made once
    }
    app.offset = 0;
    app.total = app.state.messages.length;
  },
  async save() {
    app.state.date = nowStamp();
    app.total = app.state.messages.length;
    await idbPut(app.state);
  },
  chatPath: '/api/stateless/chat',
  async chatBody(message, parent, params, newConversation, question = null) {
    const st = app.state;
    // A new conversation sends no window: it follows no message. To
    // regenerate, the window ends at the question answered again.
    const leaf = question || (parent && !newConversation ? parent : null);
    const branch = (leaf ? branchTo(leaf) : []).filter(sendableMessage);
    const windowMsgs = [];
    let bytes = 0;
    for (let i = branch.length - 1; i >= 0 && windowMsgs.length < WINDOW_MESSAGES; i--) {
      const size = JSON.stringify(branch[i]).length;
      if (windowMsgs.length && bytes + size > WINDOW_BYTES) break;
      bytes += size;
      windowMsgs.unshift(branch[i]);
    }
    const body = {
      message,
      context: st.context || '',
      truth: params.rag === false ? [] : selectTruth(message, params),
      window: windowMsgs,
      params,
    };
    if (question) body.regenerate = true;
    else if (newConversation && !parent) body.new_conversation = true;
    if (app.prefs.username) body.username = app.prefs.username;
    const chunks = await browserChunks(message, params);
    if (chunks.length) body.chunks = chunks;
    return body;
  },
  async afterDone(done) {
    if (done && isObject(done.state_patch)) {
      app.state = normalizeState(applyStatePatch(app.state, done.state_patch));
    }
    app.total = app.state.messages.length;
    await idbPut(app.state);
    savePendingTurn(null);
  },
  // The state is in this browser: the turn streaming now is kept in
  // localStorage as it streams (the question at its first event — until then
  // the stored draft holds it —, the answer at most every PENDING_SAVE_MS
  // and when the page is hidden), so that Stop, a closed tab or a lost
  // connection cannot lose it.
  turnStarted(turn) {
    savePendingTurn(turn);
  },
  turnProgress(turn, now = false) {
    if (now || Date.now() - pendingSavedAt >= PENDING_SAVE_MS) savePendingTurn(turn);
  },
  turnEnded() {
    savePendingTurn(null);
  },
  /**
   * Keeps a turn that never reached `done` (`turn`: what the page had when
   * it stopped, or the record a closed tab left): the server's engine makes
   * the two messages — the question, the answer so far marked `stopped`,
   * as the local server keeps them — and they are added to this browser's
   * state as a turn's patch is. Returns the answer's id. The record stays
   * until they are saved, so a failure here is retried on the next load.
   */
  async keepStopped(turn) {
    savePendingTurn(turn);
    const kept = await api('/api/stateless/stopped', { method: 'POST', body: stoppedBody(turn) });
    app.state = normalizeState(applyStatePatch(app.state, kept.state_patch));
    app.total = app.state.messages.length;
    await idbPut(app.state);
    savePendingTurn(null);
    return kept.assistant_message_id;
  },
  async afterMemory(m) {
    if (isObject(m.state_patch)) {
      app.state = normalizeState(applyStatePatch(app.state, m.state_patch));
    }
    if (isObject(m.record)) {
      if (!Array.isArray(app.state.memory_log)) app.state.memory_log = [];
      app.state.memory_log.push(m.record);
    }
    await idbPut(app.state);
  },
  async undoMemory(exchange) {
    // The journal and the truth entries are in this browser: the server's
    // undo runs on what is sent and answers the changes to apply.
    const body = { exchange, memory_log: app.state.memory_log || [], truth: app.state.truth.trust };
    const r = await api('/api/stateless/memory/undo', { method: 'POST', body });
    applyUndo(r);
    await stateless.save();
  },
  async addTruth(t) {
    const content = (await markdownToXhtml(t.content)) || '<p></p>';
    const timestamp = nowStamp();
    const title = String(t.title).trim();
    const entry = { id: await truthId(title, timestamp, content), title, timestamp, certainty: t.certainty, content };
    if (t.kind) entry.kind = t.kind;
    if (!app.state.truth.trust.some((e) => e.id === entry.id)) app.state.truth.trust.push(entry);
    await stateless.save();
  },
  async editTruth(id, changes) {
    const edit = {};
    if ('title' in changes) edit.title = String(changes.title).trim();
    if ('content' in changes) edit.content = (await markdownToXhtml(changes.content)) || '<p></p>';
    if ('certainty' in changes) edit.certainty = changes.certainty;
    const edited = editTruthIn(app.state, id, edit, nowStamp());
    if (!edited) throw new ApiError(404, 'not_found', 'That memory entry no longer exists.');
    app.state = edited;
    await stateless.save();
  },
  async deleteTruth(id) {
    app.state = deleteTruthIn(app.state, id, nowStamp()) ?? app.state;
    await stateless.save();
  },
  async renameMessage(id, title) {
    app.state = renameMessageIn(app.state, id, title, nowStamp());
    await stateless.save();
  },
  async saveContext(text) {
    app.state.context = await markdownToXhtml(text);
    await stateless.save();
  },
  async draftContext(params) {
    const since = lastContextUpdate();
    let msgs = app.state.messages.filter((m) => sendableMessage(m) && (!since || m.timestamp > since));
    msgs = msgs.slice(-DRAFT_MESSAGES);
    while (msgs.length > 1 && JSON.stringify(msgs).length > 400_000) msgs = msgs.slice(1);
    return api('/api/context/draft', { method: 'POST', body: { context: app.state.context || '', messages: msgs, params } });
  },
  async applyContext(draft, sentContext) {
    if ((app.state.context || '') !== sentContext) {
      throw new ApiError(409, 'conflict', 'The context changed since this draft was made; make a new draft.');
    }
    if (draft.draft === (app.state.context || '')) {
      throw new ApiError(409, 'conflict', 'The draft is the current context; nothing to apply.');
    }
    // The same record the server writes in local mode (wo-engine context_update::audit_entry).
    let content = '';
    for (const d of draft.diff || []) {
      if (d.op === 'add') content += '<p>+ ' + escText(d.text) + '</p>';
      else if (d.op === 'remove') content += '<p>\u2212 ' + escText(d.text) + '</p>';
    }
    if (!content) content = '<p>(formatting only)</p>';
    const timestamp = nowStamp();
    const title = 'Context updated';
    const entry = {
      id: await truthId(title, timestamp, content), title, timestamp, certainty: 1, content,
      kind: 'event', tags: ['context-update'],
    };
    app.state.context = draft.draft;
    app.state.truth.trust.push(entry);
    await stateless.save();
  },
  async search(q) {
    const terms = searchTerms(q);
    if (!terms.length) return { messages: [], truth: [], chunks: [] };
    const messages = [];
    for (const m of app.state.messages) {
      const score = termScore(`${m.title} ${cachedPlain(m)}`, terms);
      if (score) messages.push({ id: m.id, title: m.title, username: m.username, timestamp: m.timestamp, score });
    }
    const truth = [];
    for (const t of app.state.truth.trust) {
      const score = termScore(`${t.title} ${plainText(t.content)}`, terms);
      if (score) truth.push({ id: t.id, title: t.title, certainty: t.certainty, score });
    }
    const top = (xs) => xs.sort((a, b) => b.score - a.score).slice(0, 20);
    return { messages: top(messages), truth: top(truth), chunks: [] };
  },
  async exportFile() {
    // The bytes `wo` writes for the same state, so an export diffs and
    // merges cleanly against the CLI's.
    const text = canonicalStateText(app.state);
    const url = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
    const a = h('a', { href: url, download: exportName() });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  },
  async importText(text, how) {
    // The gate every outside file passes in `wo` and the server: validated,
    // content sanitised (and counted), or refused naming the JSON pointer.
    let admitted;
    try {
      admitted = admitState(text);
    } catch (e) {
      throw new ApiError(400, 'bad_request', `This is not an llm.json file: ${e.message}.`);
    }
    const incoming = admitted.state;
    const cleaned = admitted.sanitised.length ? ` (${admitted.sanitised.length} contents sanitised)` : '';
    if (how === 'drop') {
      const { state, report } = mergeStates(app.state, incoming);
      app.state = state;
      await idbPut(app.state);
      app.total = app.state.messages.length;
      return `Merged: ${mergeSummary(report)}${cleaned}.`;
    }
    app.state = incoming;
    app.total = incoming.messages.length;
    await idbPut(app.state);
    return `Imported: this browser's state was replaced (${incoming.messages.length} messages, ${incoming.truth.trust.length} memory entries)${cleaned}.`;
  },
};

function lastContextUpdate() {
  let since = '';
  for (const t of app.state.truth.trust) {
    if (Array.isArray(t.tags) && t.tags.includes('context-update') && t.timestamp > since) since = t.timestamp;
  }
  return since;
}

function cachedPlain(m) {
  const key = m.id + '\u0000' + m.content.length;
  let v = app.plainCache.get(key);
  if (v === undefined) {
    v = plainText(m.content);
    app.plainCache.set(key, v);
  }
  return v;
}

const STAMP_RE = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
const KINDS = new Set(['fact', 'effort', 'event', 'note']);
const ROLES = new Set(['user', 'assistant', 'system']);

/** Whether the server can read this entry (a hand-edited file may hold others; they stay here). */
function sendableTruth(t) {
  return typeof t.id === 'string' && typeof t.title === 'string' && typeof t.content === 'string'
    && typeof t.timestamp === 'string' && STAMP_RE.test(t.timestamp)
    && typeof t.certainty === 'number' && t.certainty >= 0 && t.certainty <= 1
    && (t.kind === undefined || KINDS.has(t.kind))
    && (t.updated === undefined || (typeof t.updated === 'string' && STAMP_RE.test(t.updated)))
    && (t.tags === undefined || (Array.isArray(t.tags) && t.tags.every((x) => typeof x === 'string')));
}

function sendableMessage(m) {
  return typeof m.content === 'string' && typeof m.timestamp === 'string' && STAMP_RE.test(m.timestamp)
    && (m.role === undefined || ROLES.has(m.role));
}

/** Truth entries sent with a stateless turn: term matches first, then certainty. */
function selectTruth(message, params) {
  const min = params.min_certainty ?? app.state.truth.retrieval_prefs?.min_certainty ?? 0;
  const terms = searchTerms(message);
  const scored = [];
  for (const t of app.state.truth.trust) {
    if (!sendableTruth(t)) continue;
    if (t.certainty < min) continue;
    if (t.expires === true) continue;
    const rel = terms.length ? termScore(`${t.title} ${plainText(t.content)}`, terms) : 0;
    scored.push([rel, t.certainty || 0, t]);
  }
  scored.sort((a, b) => b[0] - a[0] || b[1] - a[1]);
  const out = [];
  let bytes = 0;
  for (const [, , t] of scored.slice(0, TRUTH_SENT)) {
    const size = JSON.stringify(t).length;
    if (bytes + size > TRUTH_BYTES) continue;
    bytes += size;
    out.push(t);
  }
  return out;
}

const backend = () => (app.mode === 'local' ? local : stateless);

// ------------------------------------------------------------- branch model

/**
 * Parent of each message, by wo-format's rule (`conversation::roots`, what
 * `State::branch` follows): its `parent`; none for a message marked
 * `new_conversation` (a conversation's root, written by New chat); else
 * (no parent field: a legacy transcript) the latest earlier unlinked message
 * (no parent, no mark), so a legacy transcript is one conversation and no
 * conversation added later takes it over. `whole`: the
 * messages are the whole file (stateless mode), so a `parent` not among
 * them is not in the file; local mode loads pages and conversations, and a
 * parent not loaded makes a root there.
 */
function buildTree(msgs = app.state.messages, whole = app.mode !== 'local') {
  const byId = new Map(msgs.map((m) => [m.id, m]));
  const parentOf = new Map();
  const children = new Map();
  let parentless = null;
  for (const m of msgs) {
    let p = null;
    const linked = typeof m.parent === 'string' && m.parent;
    // A parent not in the file follows the rule for no parent, as in
    // wo-format; one merely not loaded (local mode) starts a root here.
    if (linked) p = byId.has(m.parent) ? m.parent : (whole && parentless ? parentless.id : null);
    else if (m.new_conversation === true) p = null;
    else if (parentless) p = parentless.id;
    if (p === m.id) p = null;
    parentOf.set(m.id, p);
    if (!children.has(p)) children.set(p, []);
    children.get(p).push(m.id);
    if (!linked && m.new_conversation !== true) parentless = m;
  }
  return { byId, parentOf, children };
}

/** Root → id following parent links (cycle-safe). */
function branchTo(id, tree = buildTree()) {
  const path = [];
  const seen = new Set();
  let cur = id;
  while (cur && tree.byId.has(cur) && !seen.has(cur)) {
    seen.add(cur);
    path.push(tree.byId.get(cur));
    cur = tree.parentOf.get(cur);
  }
  return path.reverse();
}

/** The latest leaf below `id` (following the newest child each time). */
function leafBelow(id, tree = buildTree()) {
  let cur = id;
  const seen = new Set();
  for (;;) {
    const kids = tree.children.get(cur);
    if (!kids || !kids.length || seen.has(cur)) return cur;
    seen.add(cur);
    cur = kids[kids.length - 1];
  }
}

function latestId() {
  const m = app.state.messages;
  return m.length ? m[m.length - 1].id : null;
}

// ---------------------------------------------------------------- rendering

function roleOf(m) {
  if (m.role) return m.role;
  if (String(m.username).toLowerCase() === 'system') return 'system';
  return m.provider || m.model ? 'assistant' : 'user';
}

function renderAll() {
  renderMessages();
  syncRenameButton();
  renderConversations();
  renderTruth();
  renderContext();
  renderReplyTo();
}

/** The root of `id`'s conversation (the top of its parent chain; cycle-safe). */
function rootOf(id, tree, memo) {
  const path = [];
  const seen = new Set();
  let cur = id;
  let root = id;
  while (cur && tree.byId.has(cur) && !seen.has(cur)) {
    if (memo.has(cur)) {
      root = memo.get(cur);
      break;
    }
    seen.add(cur);
    path.push(cur);
    root = cur;
    cur = tree.parentOf.get(cur);
  }
  for (const x of path) memo.set(x, root);
  return root;
}

/**
 * Conversations, newest first: each root (a message with no parent) and
 * everything below it, with its latest message and size.
 */
function conversations(tree = buildTree(), messages = app.state.messages) {
  const memo = new Map();
  const byRoot = new Map();
  for (const m of messages) {
    const r = rootOf(m.id, tree, memo);
    let c = byRoot.get(r);
    if (!c) {
      c = { root: tree.byId.get(r), latest: m, count: 0, messages: [] };
      byRoot.set(r, c);
    }
    c.count++;
    c.messages.push(m);
    if (compareMessages(m, c.latest) > 0) c.latest = m;
  }
  return [...byRoot.values()].sort((a, b) => compareMessages(b.latest, a.latest));
}

/** The displayed conversation's root id, or null (none, or a new chat). */
function currentRoot(tree) {
  if (app.newChat || !app.leaf || !tree.byId.has(app.leaf)) return null;
  return rootOf(app.leaf, tree, new Map());
}

/**
 * A conversation's title from its root, by wo-format's rule
 * (`conversation::title`, what the server's list says): the imported
 * conversation's own title (`x_import.title`), else the root's, else "Untitled".
 */
function conversationTitle(c) {
  const root = c && c.root;
  if (!root) return 'Untitled';
  const imported = isObject(root.x_import) && typeof root.x_import.title === 'string' ? root.x_import.title : '';
  if (imported.trim()) return imported;
  return typeof root.title === 'string' && root.title.trim() ? root.title : 'Untitled';
}

/** Runs of whitespace made one space, trimmed (the filter's and the snippets' text, as the server's). */
function collapseSpace(text) {
  return String(text).split(/\s+/).filter(Boolean).join(' ');
}

/** `text` with each case-insensitive occurrence of `q` in a <mark> (text nodes only). */
function highlighted(text, q) {
  const out = [];
  const t = String(text);
  if (!q) return [t];
  const hay = t.toLowerCase();
  const needle = q.toLowerCase();
  let at = 0;
  for (let i = hay.indexOf(needle); i >= 0; i = hay.indexOf(needle, at)) {
    if (i > at) out.push(t.slice(at, i));
    out.push(h('mark', {}, t.slice(i, i + needle.length)));
    at = i + needle.length;
  }
  if (at < t.length) out.push(t.slice(at));
  return out;
}

/**
 * Up to 30 characters before the first case-insensitive match of `q` in
 * `raw` (whitespace collapsed), the match and up to 60 after, with "…" where
 * the text goes on: the server's `conversation::snippet`, counted in
 * characters (code points) and lowercased character by character as it is.
 */
function snippetAround(raw, q) {
  const chars = Array.from(collapseSpace(raw));
  const needle = collapseSpace(q).toLowerCase();
  if (!needle) return null;
  // The lowered text, and for each of its UTF-16 units the character it came from.
  let lower = '';
  const origin = [];
  chars.forEach((c, i) => {
    const l = c.toLowerCase();
    lower += l;
    for (let k = 0; k < l.length; k++) origin.push(i);
  });
  origin.push(chars.length);
  const at = lower.indexOf(needle);
  if (at < 0) return null;
  const start = origin[at];
  const end = Math.max(start, origin[at + needle.length]);
  const from = Math.max(0, start - 30);
  const to = Math.min(chars.length, end + 60);
  return (from ? '…' : '') + chars.slice(from, to).join('') + (to < chars.length ? '…' : '');
}

/** Elements whose edges break text, as wo-format's `walk_text` reads them (`BLOCK_ELEMENTS`, headings). */
const TEXT_BREAKS = new Set(['address', 'article', 'aside', 'blockquote', 'br', 'dd', 'details', 'div', 'dl', 'dt',
  'figcaption', 'figure', 'footer', 'form', 'header', 'hr', 'li', 'main', 'nav', 'ol', 'p', 'pre', 'section',
  'summary', 'table', 'tr', 'ul', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6']);

/** A message's text as the conversation filter reads it (wo-format's `to_plain_text`, whitespace collapsed). */
function listText(m) {
  const key = m.id + '\u0000' + m.content.length;
  let v = listTextCache.get(key);
  if (v === undefined) {
    const parts = [];
    const walk = (node) => {
      for (const c of node.childNodes) {
        if (c.nodeType === 3) parts.push(c.nodeValue);
        else if (c.nodeType === 1) {
          const breaks = TEXT_BREAKS.has(c.localName);
          if (breaks) parts.push(' ');
          walk(c);
          if (breaks) parts.push(' ');
        }
      }
    };
    walk(parseFragment(m.content));
    v = collapseSpace(parts.join(''));
    listTextCache.set(key, v);
  }
  return v;
}
const listTextCache = new Map();

/**
 * The conversations of `messages` as a list shows them, by wo-format's
 * rules (`conversation::listed`, the server's GET /api/conversations):
 * newest first, titled by `conversationTitle`, and with a filter only those
 * whose title or a message's text contains it, the latter with a snippet of
 * the first such message. Rows: {root, latest, title, updated, count, snippet}.
 */
function listConversations(messages, filter) {
  const q = collapseSpace(filter);
  const rows = [];
  for (const c of conversations(buildTree(messages), messages)) {
    // Archived conversations are hidden, as wo-format's `listed` hides them.
    if (isArchived(c.root)) continue;
    const title = conversationTitle(c);
    let snippet = null;
    if (q && !title.toLowerCase().includes(q.toLowerCase())) {
      for (const m of c.messages) {
        snippet = snippetAround(listText(m), q);
        if (snippet) break;
      }
      if (!snippet) continue;
    }
    rows.push({ root: c.root ? c.root.id : c.latest.id, latest: c.latest.id, title, updated: c.latest.timestamp, count: c.count, snippet });
  }
  return rows;
}

/**
 * The sidebar's rows: local mode shows the server's list (every conversation
 * of the file, whatever is loaded); stateless mode, whose whole state is in
 * this browser, lists it here by the same rules (order, titles, snippets).
 */
function conversationRows() {
  if (app.mode === 'local' && app.conversationList) {
    return app.conversationList.items.map((c) => ({
      root: c.root, title: c.title, updated: c.updated, count: c.messages, snippet: c.snippet || null,
      open: () => openRoot(c.root, c.latest),
    }));
  }
  return listConversations(app.state.messages, app.filter).map((c) => ({ ...c, open: () => openConversation(c.latest) }));
}

function renderConversations() {
  const tree = buildTree();
  const current = currentRoot(tree);
  const q = collapseSpace(app.filter);
  const items = conversationRows().map((c) => h('li', { class: 'conversation-item' },
    h('button', {
      type: 'button', class: 'conversation-open', 'data-testid': 'conversation', 'data-root': c.root,
      'aria-current': c.root === current ? 'true' : false,
      onclick: c.open,
    },
    h('span', { class: 'conversation-name', 'data-testid': 'conversation-name' }, highlighted(c.title, q)),
    c.snippet ? h('span', { class: 'conversation-snippet', 'data-testid': 'conversation-snippet' }, highlighted(c.snippet, q)) : null,
    h('span', { class: 'conversation-meta' },
      h('time', { datetime: c.updated }, formatTime(c.updated)),
      ` · ${c.count} message${c.count === 1 ? '' : 's'}`))));
  if (!items.length) {
    items.push(h('li', { class: 'empty-hint', 'data-testid': 'conversation-none' }, q ? 'No conversation matches.' : 'No conversations yet.'));
  }
  const list = app.mode === 'local' ? app.conversationList : null;
  const more = list && list.items.length < list.total
    ? [h('li', { class: 'conversation-more' },
      h('button', { type: 'button', class: 'small', 'data-testid': 'conversations-more', onclick: () => moreConversations() },
        `Show more conversations (${list.total - list.items.length} more)`))]
    : [];
  $('conversation-list').replaceChildren(...items, ...more);
}

/** Local mode: the next page of the conversation list. */
async function moreConversations() {
  await run(async () => {
    await local.listConversations(true);
    renderConversations();
  });
}

/** Local mode: the filter is the server's (it searches every message); asked once typing pauses. */
let filterTimer = null;
function filterOnServer() {
  clearTimeout(filterTimer);
  filterTimer = setTimeout(async () => {
    try {
      await local.listConversations();
      renderConversations();
    } catch (e) {
      reportError(e);
    }
  }, FILTER_DELAY_MS);
}

/**
 * Local mode: opens a conversation of the server's list. Its messages are
 * loaded first when they are not (older than the latest page).
 */
async function openRoot(root, latest) {
  const loaded = (id) => app.state.messages.some((m) => m.id === id);
  if (!loaded(latest) || !loaded(root)) {
    try {
      await local.loadConversation(root);
    } catch (e) {
      reportError(e);
      return;
    }
  }
  openConversation(loaded(latest) ? latest : root);
}

/** Shows the conversation holding `id`, on the branch ending at its newest leaf. */
function openConversation(id) {
  app.newChat = false;
  app.branchFrom = null;
  app.leaf = leafBelow(id);
  renderAll();
  if (isNarrow()) closeDrawer(false);
  const last = $('messages').lastElementChild;
  if (last) last.scrollIntoView({ block: 'end' });
}

function startNewChat() {
  if (app.streaming) return;
  if (!app.newChat) app.previousLeaf = app.leaf;
  app.newChat = true;
  app.branchFrom = null;
  app.leaf = null;
  renderAll();
  if (isNarrow()) closeDrawer(false);
  $('composer-input').focus();
}

// The message list is windowed: a conversation of 10,000 messages renders
// its latest WINDOW (and whatever was sent since), and earlier ones a step
// at a time as the reader scrolls up to the "earlier messages" row, so
// opening a large file costs the same as opening a small one.
const WINDOW = 40;
/** Messages added per step while scrolling up: small, so no frame waits long. */
const SCROLL_STEP = 12;
/** The branch the list was last rendered from (showEarlier re-uses it rather than walk 10,000 messages again). */
let renderedBranch = { leaf: null, messages: null, count: -1, branch: [], tree: null };

/** Which part of `branch` to render: from the window's first message (kept across re-renders), else the last WINDOW; `app.reveal` pulls an earlier message in. */
function windowStart(branch) {
  let start = app.windowFrom ? branch.findIndex((m) => m.id === app.windowFrom) : -1;
  if (start < 0) start = Math.max(0, branch.length - WINDOW);
  if (app.reveal) {
    const i = branch.findIndex((m) => m.id === app.reveal);
    if (i >= 0 && i < start) start = Math.max(0, i - 2);
    app.reveal = null;
  }
  app.windowFrom = branch.length ? branch[start].id : null;
  return start;
}

/** The row above the window: how many earlier messages there are, and a button (or scrolling up to it) that shows more. */
function earlierRow(hidden) {
  const li = h('li', { class: 'earlier-row', 'data-testid': 'earlier-messages' },
    h('button', { type: 'button', class: 'small', 'data-testid': 'show-earlier', onclick: () => showEarlier() },
      `Show ${Math.min(WINDOW, hidden)} earlier message${Math.min(WINDOW, hidden) === 1 ? '' : 's'} (${hidden} in all)`));
  return li;
}

/** Renders WINDOW more messages above the first one shown (only those: the rest stay), keeping what is on screen where it is. */
function showEarlier(step = WINDOW) {
  const list = $('messages');
  const first = list.querySelector('[data-testid="message"]');
  if (!first || !app.leaf) return;
  let { tree, branch } = renderedBranch;
  if (renderedBranch.leaf !== app.leaf || renderedBranch.messages !== app.state.messages
    || renderedBranch.count !== app.state.messages.length || !tree) {
    tree = buildTree();
    branch = branchTo(app.leaf, tree);
  }
  const i = branch.findIndex((m) => m.id === first.dataset.id);
  if (i <= 0) return;
  const from = Math.max(0, i - step);
  const top = first.getBoundingClientRect().top;
  const hadFocus = document.activeElement?.dataset?.testid === 'show-earlier';
  app.windowFrom = branch[from].id;
  list.querySelector('.earlier-row')?.remove();
  first.before(...branch.slice(from, i).map((m) => messageItem(m, tree)));
  if (from > 0) list.prepend(earlierRow(from));
  // Scroll anchoring may already have kept it in place; move only by what is left.
  window.scrollBy(0, first.getBoundingClientRect().top - top);
  if (hadFocus) (list.querySelector('[data-testid="show-earlier"]') || list.querySelector('[data-testid="message"] button'))?.focus();
}

/** On scrolling: once the reader, scrolled up (not following the stream), comes near the row, the earlier messages appear. */
let earlierQueued = false;
function showEarlierIfNear() {
  if (earlierQueued || app.follow || app.streaming) return;
  const row = $('messages').querySelector('.earlier-row');
  if (!row || row.getBoundingClientRect().bottom < -400) return;
  earlierQueued = true;
  requestAnimationFrame(() => {
    earlierQueued = false;
    showEarlier(SCROLL_STEP);
  });
}

function renderMessages(tree = buildTree()) {
  const list = $('messages');
  if (!app.newChat && (!app.leaf || !tree.byId.has(app.leaf))) app.leaf = latestId();
  const branch = app.leaf ? branchTo(app.leaf, tree) : [];
  renderedBranch = { leaf: app.leaf, messages: app.state.messages, count: app.state.messages.length, branch, tree };
  const start = windowStart(branch);
  list.replaceChildren(...(start > 0 ? [earlierRow(start)] : []), ...branch.slice(start).map((m) => messageItem(m, tree)));
  const empty = $('empty-hint');
  empty.hidden = branch.length > 0;
  empty.textContent = app.state.messages.length
    ? 'A new conversation: it starts with your next message.'
    : 'No messages yet. Ask something below.';
  const root = branch[0];
  $('conversation-title').textContent = root ? (root.title || plainText(root.content).slice(0, 60) || 'Conversation') : 'New conversation';
}

/** The header's Rename button: shown for a conversation that exists (not a new chat). */
function syncRenameButton() {
  const tree = buildTree();
  const renaming = !!document.querySelector('.rename-form');
  const root = currentRoot(tree);
  $('conversation-rename').hidden = renaming || !root;
  // Archiving is the local server's (the file keeps the mark); the button
  // says what it will do.
  const archive = $('conversation-archive');
  archive.hidden = renaming || !root || app.mode !== 'local';
  const archived = !!root && isArchived(tree.byId.get(root));
  archive.textContent = archived ? 'Restore' : 'Archive';
  archive.setAttribute('aria-label', archived ? 'Restore this conversation to the list' : 'Archive this conversation (hide it from the list; nothing is deleted)');
  $('archived-toggle').hidden = app.mode !== 'local';
}

/** Whether a conversation's root says it is archived (`archive.hidden`, wo-format's `Message::archived`). */
function isArchived(root) {
  return !!root && isObject(root.archive) && root.archive.hidden === true;
}

/** Archive or restore the conversation shown; after archiving, a new chat. */
async function toggleArchive() {
  if (app.streaming) return;
  const root = currentRoot(buildTree());
  if (!root) return;
  const archived = !isArchived(buildTree().byId.get(root));
  try {
    await local.archiveConversation(root, archived);
    if (archived) {
      startNewChat();
      notify('Archived: hidden from the list, nothing deleted. Tick "Archived" in the list to find and restore it.');
    } else {
      renderAll();
      notify('Restored to the list.');
    }
  } catch (e) {
    reportError(e);
  }
}

// Icons drawn as SVG nodes (no markup strings, nothing fetched).
const ICONS = {
  copy: ['M8 8h11v12H8z', 'M5 16V4h11'],
  regenerate: ['M20 12a8 8 0 1 1-2.34-5.66', 'M20 4v5h-5'],
  edit: ['M4 20h4L19 9l-4-4L4 16z', 'M13 7l4 4'],
  branch: ['M6 4v16', 'M6 9c0 4 12 2 12 8', 'M18 17v3'],
};
function icon(name) {
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('width', '18');
  svg.setAttribute('height', '18');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('focusable', 'false');
  for (const d of ICONS[name]) {
    const path = document.createElementNS(NS, 'path');
    path.setAttribute('d', d);
    svg.append(path);
  }
  return svg;
}

function iconButton(name, label, testid, onclick, extra = {}) {
  return h('button', { type: 'button', class: 'icon-button act', 'aria-label': label, title: label, 'data-testid': testid, onclick, ...extra }, icon(name));
}

/** The sanitised content of `m` with a Copy button on each code block. */
function renderedContent(m) {
  const frag = renderXhtml(m.content);
  for (const pre of Array.from(frag.querySelectorAll('pre'))) {
    highlightCode(pre);
    const box = h('div', { class: 'code-block' });
    pre.replaceWith(box);
    box.append(pre, h('button', {
      type: 'button', class: 'small copy-code', 'data-testid': 'copy-code', 'aria-label': 'Copy this code',
      onclick: () => copyText(pre.textContent || '', 'Code copied.'),
    }, 'Copy'));
  }
  return frag;
}

function messageItem(m, tree) {
  const role = roleOf(m);
  const parent = tree.parentOf.get(m.id);
  const actions = h('div', { class: 'msg-actions' },
    iconButton('copy', 'Copy as Markdown', 'copy-message', () => copyText(messageMarkdown(m), 'Copied as Markdown.')));
  if (role === 'assistant' && parent) {
    actions.append(iconButton('regenerate', 'Regenerate this answer', 'regenerate', () => regenerate(m.id), { 'data-needs-idle': '' }));
  }
  if (role === 'user') {
    actions.append(iconButton('edit', 'Edit and resend', 'edit-resend', () => editAndResend(m.id), { 'data-needs-idle': '' }));
  }
  actions.append(iconButton('branch', 'Branch from here', 'branch-from', () => branchFrom(m.id), { 'data-id': m.id, 'data-needs-idle': '' }));
  // Branches fork where a message has siblings; a conversation's root has none.
  const siblings = parent ? tree.children.get(parent) || [] : [];
  if (siblings.length > 1) {
    const i = siblings.indexOf(m.id);
    const go = (j) => () => { app.leaf = leafBelow(siblings[j]); app.branchFrom = null; app.newChat = false; renderAll(); };
    actions.append(h('span', { class: 'sibling-nav', role: 'group', 'aria-label': 'Branches at this point' },
      h('button', { type: 'button', class: 'small', 'aria-label': 'Previous branch', 'data-testid': 'branch-prev', disabled: i === 0, onclick: go(i - 1) }, '‹'),
      h('span', { 'data-testid': 'branch-position' }, `${i + 1}/${siblings.length}`),
      h('button', { type: 'button', class: 'small', 'aria-label': 'Next branch', 'data-testid': 'branch-next', disabled: i === siblings.length - 1, onclick: go(i + 1) }, '›')));
  }
  const who = m.username || (role === 'assistant' ? 'the model' : 'you');
  const error = app.answerErrors.get(m.id);
  const stopped = role === 'assistant' && isStopped(m);
  return h('li', {
    class: `msg msg-${role}${app.branchFrom && app.branchFrom.id === m.id ? ' reply-target' : ''}`,
    id: `msg-${m.id}`, 'data-testid': 'message', 'data-id': m.id, 'data-role': role, 'data-title': m.title || '',
  },
  h('article', { 'aria-label': `${role === 'assistant' ? 'Answer' : role === 'system' ? 'System message' : 'Message'} from ${who}${stopped ? ' (incomplete)' : ''}` },
    h('header', { class: 'msg-head' },
      h('span', { class: 'msg-meta' },
        h('span', { class: 'msg-username', 'data-testid': 'message-username' }, m.username || ''),
        ' · ',
        h('time', { datetime: m.timestamp, title: m.timestamp, 'data-testid': 'message-time' }, formatTime(m.timestamp))),
      stopped ? h('span', { class: 'msg-badge incomplete', 'data-testid': 'incomplete-mark' },
        h('span', { 'aria-hidden': 'true' }, '\u25D0 '), 'Incomplete') : null),
    h('div', { class: 'msg-content rendered', 'data-testid': 'message-content' }, renderedContent(m)),
    stopped ? h('p', { class: 'msg-note incomplete-note', 'data-testid': 'incomplete-note' },
      plainText(m.content).trim()
        ? 'Stopped before the answer finished. Regenerate for a whole answer.'
        : 'Stopped before any answer came. Regenerate to ask again.') : null,
    contextDetails(m),
    memoryDetails(m),
    error ? h('p', { class: 'msg-note warn', role: 'alert', 'data-testid': 'regenerate-error' },
      `Regenerating failed: ${error.message} `,
      h('button', { type: 'button', class: 'small', 'data-testid': 'retry', onclick: () => regenerate(m.id) }, 'Retry')) : null,
    actions));
}

// ------------------------------------------------------------- copy

/** Sanitised content → Markdown (what Copy puts on the clipboard, as text). */
function toMarkdown(node, ctx = { list: null, index: 0 }) {
  let out = '';
  for (const n of node.childNodes) {
    if (n.nodeType === Node.TEXT_NODE) {
      out += n.data.replace(/\s+/g, ' ');
      continue;
    }
    if (n.nodeType !== Node.ELEMENT_NODE) continue;
    const tag = n.localName;
    const inner = () => toMarkdown(n, ctx).trim();
    switch (tag) {
      case 'br': out += '\n'; break;
      case 'p': case 'div': out += `\n\n${inner()}\n\n`; break;
      case 'h1': case 'h2': case 'h3': case 'h4': case 'h5': case 'h6':
        out += `\n\n${'#'.repeat(Number(tag[1]))} ${inner()}\n\n`; break;
      case 'strong': case 'b': out += `**${inner()}**`; break;
      case 'em': case 'i': out += `*${inner()}*`; break;
      case 'del': out += `~~${inner()}~~`; break;
      case 'code': out += '`' + (n.textContent || '') + '`'; break;
      case 'pre': out += '\n\n```\n' + (n.textContent || '').replace(/\n$/, '') + '\n```\n\n'; break;
      case 'blockquote': out += '\n\n' + inner().split('\n').map((l) => `> ${l}`).join('\n') + '\n\n'; break;
      case 'ul': case 'ol': {
        let i = 0;
        const items = [];
        for (const li of n.children) {
          if (li.localName !== 'li') continue;
          i++;
          const body = toMarkdown(li, ctx).trim().replace(/\n+/g, '\n   ');
          items.push(`${tag === 'ol' ? `${i}.` : '-'} ${body}`);
        }
        out += `\n\n${items.join('\n')}\n\n`;
        break;
      }
      case 'a': {
        const href = n.getAttribute('href');
        const text = inner();
        out += href ? `[${text}](${href})` : text;
        break;
      }
      case 'hr': out += '\n\n---\n\n'; break;
      case 'tr': out += `\n| ${Array.from(n.children).map((c) => toMarkdown(c, ctx).trim()).join(' | ')} |`; break;
      case 'table': out += `\n\n${toMarkdown(n, ctx).trim()}\n\n`; break;
      default: out += toMarkdown(n, ctx);
    }
  }
  return out;
}

function messageMarkdown(m) {
  const holder = document.createElement('div');
  holder.append(renderXhtml(m.content));
  return toMarkdown(holder).replace(/[ \t]+\n/g, '\n').replace(/\n{3,}/g, '\n\n').trim();
}

/**
 * Puts `text` on the clipboard as plain text only (never HTML): the
 * Clipboard API where the page may use it, else a hidden text box and the
 * copy command.
 */
async function copyText(text, done) {
  try {
    if (!navigator.clipboard || !window.isSecureContext) throw new Error('no Clipboard API');
    await navigator.clipboard.writeText(text);
  } catch {
    const box = h('textarea', { class: 'visually-hidden', readonly: true, 'aria-hidden': 'true', tabindex: '-1' });
    box.value = text;
    document.body.append(box);
    box.select();
    let ok = false;
    try {
      ok = document.execCommand('copy');
    } catch {
      ok = false;
    }
    box.remove();
    if (!ok) {
      notify('This browser would not copy; select the text and copy it by hand.', 'error');
      return;
    }
  }
  notify(done);
}

// ------------------------------------------------------------------ memory

/// What the memory interpreter recorded for the exchange answered by `id`
/// (the newest record not undone), from the state's `memory_log`.
function memoryRecordFor(id) {
  const log = Array.isArray(app.state.memory_log) ? app.state.memory_log : [];
  for (let i = log.length - 1; i >= 0; i--) {
    const r = log[i];
    if (isObject(r) && r.exchange === id && !r.undone) return r;
  }
  return null;
}

function describeOp(op, titleOf) {
  if (!isObject(op)) return null;
  switch (op.op) {
    case 'add': return `${op.kind || 'fact'}: ${op.title}`;
    case 'open_effort': return `effort opened: ${op.title}`;
    case 'resolve': return `effort resolved: ${titleOf(op.id)}`;
    case 'supersede': return `replaced “${titleOf(op.id)}” with: ${op.title}`;
    case 'touch': return null;
    default: return String(op.op || '');
  }
}

function memoryDetails(m) {
  if (roleOf(m) !== 'assistant') return null;
  if (app.memoryPending.has(m.id)) {
    return h('p', { class: 'msg-note memory-note', 'data-testid': 'memory-pending' }, 'Remembering…');
  }
  const rec = memoryRecordFor(m.id);
  if (rec) {
    const titles = new Map(app.state.truth.trust.map((t) => [t.id, t.title]));
    const titleOf = (id) => titles.get(id) || id;
    const items = (Array.isArray(rec.ops) ? rec.ops : []).map((op) => describeOp(op, titleOf)).filter(Boolean);
    if (!items.length) return null;
    return h('div', { class: 'memory-used', 'data-testid': 'memory-remembered' },
      h('span', { class: 'memory-label' }, 'Remembered'),
      h('ul', {}, items.map((t) => h('li', { 'data-testid': 'memory-item' }, t))),
      h('button', {
        type: 'button', class: 'small', 'data-testid': 'memory-undo', 'aria-label': 'Undo what was remembered from this exchange',
        onclick: () => run(() => backend().undoMemory(m.id), 'Undone: what this exchange taught is forgotten.'),
      }, 'Undo'));
  }
  const note = app.memoryNotes.get(m.id);
  if (note) return h('p', { class: 'msg-note memory-note', 'data-testid': 'memory-note' }, `Nothing remembered: ${note}`);
  return null;
}

/// A stateless undo's answer applied to this browser's state.
function applyUndo(r) {
  const t = app.state.truth;
  const removed = new Set(isObject(r.undone) && Array.isArray(r.undone.removed) ? r.undone.removed : []);
  t.trust = t.trust.filter((e) => !removed.has(e.id));
  for (const e of Array.isArray(r.trust) ? r.trust : []) {
    const i = t.trust.findIndex((x) => x.id === e.id);
    if (i >= 0) t.trust[i] = e;
    else t.trust.push(e);
  }
  const tombstones = Array.isArray(r.deleted) ? r.deleted : [];
  if (tombstones.length) {
    const fresh = new Set(tombstones.map((d) => d.id));
    t.deleted = (t.deleted || []).filter((d) => !fresh.has(d.id)).concat(tombstones);
    t.deleted.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }
  if (Array.isArray(r.memory_log)) app.state.memory_log = r.memory_log;
}

async function applyMemory(m) {
  app.memoryPending.delete(m.exchange);
  if (typeof m.note === 'string') app.memoryNotes.set(m.exchange, m.note);
  await backend().afterMemory(m);
  renderAll();
  if (app.follow) scrollToLatest();
}

function contextDetails(m) {
  const report = app.reports.get(m.id);
  if (report) return reportDetails(report);
  if (!Array.isArray(m.sources)) return null;
  const truthById = new Map(app.state.truth.trust.map((t) => [t.id, t]));
  const msgById = new Map(app.state.messages.map((x) => [x.id, x]));
  return h('details', { class: 'context-used', 'data-testid': 'context-used' },
    h('summary', {}, `Context used (${m.sources.length} sources)`),
    m.sources.length
      ? h('ul', {}, m.sources.map((id) => {
        const t = truthById.get(id);
        const x = msgById.get(id);
        const label = t ? `truth: ${t.title}` : x ? `message: ${x.title}` : String(id).startsWith('t_') ? 'truth (no longer present)' : String(id).startsWith('m_') ? 'message' : 'file chunk';
        return h('li', {}, h('code', {}, String(id)), ' ', label);
      }))
      : h('p', {}, 'Only the context and the conversation were sent.'));
}

function reportDetails(r) {
  const included = Array.isArray(r.included) ? r.included : [];
  const dropped = Array.isArray(r.dropped) ? r.dropped : [];
  return h('details', { class: 'context-used', 'data-testid': 'context-used' },
    h('summary', {}, `Context used (${included.length} parts sent, ${dropped.length} dropped${r.tokens != null ? `, ${r.tokens}${r.budget != null ? '/' + r.budget : ''} tokens` : ''})`),
    h('h4', {}, 'Sent'),
    h('ul', { 'data-testid': 'context-included' }, included.map((p) =>
      h('li', {}, h('span', { class: 'tag' }, String(p.kind ?? '')), ' ', String(p.label ?? p.id ?? ''), p.tokens != null ? ` (${p.tokens} tokens)` : ''))),
    dropped.length ? h('h4', {}, 'Dropped') : null,
    dropped.length ? h('ul', { 'data-testid': 'context-dropped' }, dropped.map((p) =>
      h('li', {}, h('span', { class: 'tag' }, String(p.kind ?? '')), ' ', String(p.label ?? p.id ?? ''), p.reason ? ` — ${p.reason}` : ''))) : null);
}

function renderReplyTo() {
  const box = $('reply-to');
  const b = app.branchFrom;
  if (b && b.edit) {
    box.hidden = false;
    $('reply-to-label').textContent = 'Sending an edited version of';
    $('reply-to-title').textContent = b.edit.title;
    return;
  }
  const target = b && app.state.messages.find((m) => m.id === b.id);
  box.hidden = !target;
  $('reply-to-label').textContent = 'Replying to';
  if (target) $('reply-to-title').textContent = target.title || target.id;
}

function renderTruth() {
  const list = $('truth-list');
  fillTagChoices();
  renderEfforts();
  const entries = filteredTruth().sort((a, b) => (b.certainty ?? 0) - (a.certainty ?? 0) || String(a.title).localeCompare(String(b.title)));
  const sup = supersededIds();
  list.replaceChildren(...entries.map((t) => truthItem(t, sup)));
  if (!entries.length) {
    list.append(h('li', { class: 'empty-hint', 'data-testid': 'truth-none' },
      app.state.truth.trust.length ? 'No entry matches these filters.' : 'No memory entries yet.'));
  }
  $('truth-filter-count').textContent = `${entries.length} of ${app.state.truth.trust.length}`;
}

function truthItem(t, sup = supersededIds()) {
  const item = h('li', { class: 'truth-item', id: `truth-${t.id}`, 'data-testid': 'truth-item', 'data-id': t.id });
  const certainty = typeof t.certainty === 'number' ? t.certainty : 0;
  const view = () => {
    item.replaceChildren(
      h('div', { class: 'truth-head' },
        h('h3', { 'data-testid': 'truth-title' }, t.title || '(untitled)'),
        h('span', { class: 'certainty' },
          h('meter', { min: 0, max: 1, value: certainty, 'aria-label': 'certainty' }),
          ' ', h('span', { 'data-testid': 'truth-certainty' }, certainty.toFixed(2)))),
      h('p', { class: 'truth-meta' },
        t.kind ? h('span', { class: 'tag' }, String(t.kind)) : null,
        ((st) => (st === 'open' ? null : h('span', { class: `tag status-${st}`, 'data-testid': 'truth-status' }, st)))(truthStatus(t, sup)),
        Array.isArray(t.tags) ? t.tags.map((g) => h('span', { class: 'tag' }, String(g))) : null,
        h('time', { datetime: t.updated || t.timestamp, title: t.updated || t.timestamp }, formatTime(t.updated || t.timestamp))),
      h('div', { class: 'rendered truth-content', 'data-testid': 'truth-content' }, renderXhtml(t.content)),
      h('div', { class: 'row' },
        h('button', { type: 'button', class: 'small', 'data-testid': 'truth-edit', onclick: edit }, 'Edit'),
        h('button', { type: 'button', class: 'small danger', 'data-testid': 'truth-delete', onclick: askDelete }, 'Delete')));
  };
  const askDelete = () => {
    const row = item.querySelector('.row');
    const no = h('button', { type: 'button', class: 'small', 'data-testid': 'truth-delete-cancel', onclick: view }, 'Keep');
    row.replaceChildren(
      h('span', {}, 'Delete this entry?'),
      h('button', { type: 'button', class: 'small danger', 'data-testid': 'truth-delete-confirm', onclick: () => run(() => backend().deleteTruth(t.id), 'Memory entry deleted.') }, 'Delete'),
      no);
    no.focus();
  };
  const edit = () => {
    const uid = t.id;
    const title = h('input', { id: `te-title-${uid}`, value: t.title ?? '', maxlength: 300, required: true, 'data-testid': 'truth-edit-title' });
    const content = h('textarea', { id: `te-content-${uid}`, rows: 4, 'data-testid': 'truth-edit-content' });
    const shownContent = xhtmlToMarkdown(t.content ?? ''); // edited as Markdown, never as markup
    content.value = shownContent;
    const cert = h('input', { id: `te-cert-${uid}`, type: 'number', min: 0, max: 1, step: 0.05, value: certainty, required: true, inputmode: 'decimal', 'data-testid': 'truth-edit-certainty' });
    const form = h('form', { class: 'truth-form' },
      h('label', { for: title.id }, 'Title'), title,
      h('label', { for: content.id }, 'Content (Markdown or plain text)'), content,
      h('label', { for: cert.id }, 'Certainty (0 to 1)'), cert,
      h('div', { class: 'row' },
        h('button', { type: 'submit', class: 'primary small', 'data-testid': 'truth-edit-save' }, 'Save'),
        h('button', { type: 'button', class: 'small', 'data-testid': 'truth-edit-cancel', onclick: view }, 'Cancel')));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const changes = {};
      if (title.value.trim() !== (t.title ?? '')) changes.title = title.value.trim();
      if (content.value !== shownContent) changes.content = content.value;
      const c = Number(cert.value);
      if (!(c >= 0 && c <= 1)) { notify('Certainty must be between 0 and 1.', 'error'); return; }
      if (c !== certainty) changes.certainty = c;
      if (!Object.keys(changes).length) { view(); return; }
      run(() => backend().editTruth(t.id, changes), 'Memory entry saved.');
    });
    item.replaceChildren(form);
    title.focus();
  };
  view();
  return item;
}

function renderContext() {
  $('context-view').replaceChildren(renderXhtml(app.state.context));
  // Edited as Markdown, never as the stored markup (converted back on save).
  if (document.activeElement !== $('context-input')) $('context-input').value = xhtmlToMarkdown(app.state.context || '');
}

// ------------------------------------------------------------------- actions

/** Runs an action, reporting success or the error, then re-renders. */
async function run(action, success) {
  clearAlert();
  try {
    const msg = await action();
    renderAll();
    if (typeof msg === 'string') notify(msg);
    else if (success) notify(success);
    return true;
  } catch (e) {
    reportError(e);
    if (app.state) renderAll();
    return false;
  }
}

function reportError(e) {
  if (e && e.status === 401) {
    showSignin();
    return;
  }
  notify(e && e.message ? e.message : String(e), 'error');
}

function branchFrom(id) {
  if (app.streaming) return;
  const previousLeaf = app.branchFrom ? app.branchFrom.previousLeaf : app.leaf;
  app.branchFrom = { id, previousLeaf };
  app.newChat = false;
  app.leaf = id;
  renderAll();
  $('composer-input').focus();
}

function cancelBranch() {
  if (!app.branchFrom) return;
  app.leaf = app.branchFrom.previousLeaf;
  app.newChat = !app.leaf && app.state.messages.length > 0;
  app.branchFrom = null;
  renderAll();
  $('composer-input').focus();
}

/**
 * Where a new version of question `qid` goes: beside it, under the same
 * parent, or (a conversation's first question) as a new conversation.
 */
function siblingTarget(qid) {
  const tree = buildTree();
  const q = tree.byId.get(qid);
  return q ? { question: q, parent: tree.parentOf.get(qid) || null } : null;
}

/**
 * "Edit and resend" on a question: its text goes into the message box and
 * the next send is a sibling of that question (same parent), so the
 * original and its answers stay one ‹ › switch away.
 */
function editAndResend(qid) {
  if (app.streaming) return;
  const t = siblingTarget(qid);
  if (!t) return;
  const previousLeaf = app.branchFrom ? app.branchFrom.previousLeaf : app.leaf;
  app.branchFrom = { id: t.parent, previousLeaf, edit: { id: qid, title: t.question.title || plainText(t.question.content).slice(0, 60) } };
  app.newChat = !t.parent;
  app.leaf = t.parent;
  renderAll();
  const input = $('composer-input');
  input.value = messageMarkdown(t.question);
  saveDraft(input.value);
  input.focus();
}

/**
 * "Regenerate" on an answer: another answer to the same stored question, a
 * sibling one ‹ › switch from the old, which stays (`regenerate` in the chat
 * body: the local server finds the question in the file; a stateless server
 * takes it as the window's newest message).
 */
async function regenerate(aid) {
  if (app.streaming) return;
  const tree = buildTree();
  const qid = tree.parentOf.get(aid);
  const t = qid && siblingTarget(qid);
  if (!t || roleOf(t.question) !== 'user') {
    notify('This answer has no question to ask again.', 'error');
    return;
  }
  app.answerErrors.delete(aid);
  await send({
    text: messageMarkdown(t.question),
    parent: t.parent,
    newConversation: !t.parent,
    regenerating: aid,
    question: qid,
  });
}

function chatParams() {
  const p = app.prefs;
  const out = {};
  for (const k of ['provider', 'model', 'temperature', 'max_tokens', 'rag', 'url_fetch', 'max_entries', 'min_certainty']) {
    if (p[k] !== undefined) out[k] = p[k];
  }
  return out;
}

// ---------------------------------------------------------------- drafts

/**
 * The unsent message survives a reload, a closed tab and a failed or stopped
 * turn (issue 16 item 4): it lives in localStorage under a key per mode, is
 * written on every edit, and a sent question stays in it until its turn's
 * first event arrives (`send`: from then on the turn keeps it), or back in
 * it when the turn fails. Storage may be disabled or full; then the draft
 * simply is not kept.
 */
function draftKey() {
  return `wo_draft_${app.mode || 'local'}`;
}

function saveDraft(text) {
  try {
    if (text) localStorage.setItem(draftKey(), text);
    else localStorage.removeItem(draftKey());
  } catch {
    // Storage unavailable (private mode, quota): the draft is only in the box.
  }
}

function restoreDraft() {
  let text = null;
  try {
    text = localStorage.getItem(draftKey());
  } catch {
    text = null;
  }
  const input = $('composer-input');
  if (text && !input.value) input.value = text;
}

// ---------------------------------------------------------------- stopped turns

/** True for an answer its reader stopped (`usage.truncated.reason = "stopped"`, as wo-engine marks it). */
function isStopped(m) {
  return isObject(m.usage) && isObject(m.usage.truncated) && m.usage.truncated.reason === 'stopped';
}

/** Stateless mode's record of the turn streaming now (see `stateless.turnStarted`). */
const PENDING_KEY = 'wo_pending_turn_stateless';
const PENDING_SAVE_MS = 250;
let pendingSavedAt = 0;

function savePendingTurn(turn) {
  pendingSavedAt = Date.now();
  try {
    if (turn) localStorage.setItem(PENDING_KEY, JSON.stringify(turn));
    else localStorage.removeItem(PENDING_KEY);
  } catch {
    // Storage unavailable: Stop still keeps the turn; a closed tab cannot.
  }
}

/** `POST /api/stateless/stopped`'s body for a turn record: the chat body as sent, the answer so far, when, and its sources. */
function stoppedBody(turn) {
  const chat = { message: turn.message, params: isObject(turn.params) ? turn.params : {} };
  if (turn.parent) chat.parent = turn.parent;
  else if (turn.new_conversation) chat.new_conversation = true;
  if (turn.username) chat.username = turn.username;
  return { turn: chat, answer: String(turn.answer || ''), sent_at: turn.sent_at, sources: Array.isArray(turn.sources) ? turn.sources : [] };
}

function readPendingTurn() {
  try {
    const turn = JSON.parse(localStorage.getItem(PENDING_KEY) || 'null');
    return isObject(turn) && typeof turn.message === 'string' && typeof turn.sent_at === 'string' ? turn : null;
  } catch {
    return null;
  }
}

/**
 * On load in stateless mode: a turn the page was streaming when it closed
 * is kept now, marked incomplete. Returns its answer's id, or null.
 */
async function keepInterruptedTurn() {
  const turn = app.mode === 'stateless' ? readPendingTurn() : null;
  if (!turn) return null;
  try {
    const id = await stateless.keepStopped(turn);
    notify('The answer that was streaming when this page closed is kept, marked incomplete.');
    return id;
  } catch (e) {
    notify(`The turn that was streaming when this page closed could not be kept yet (${e.message}); it stays in this browser and is tried again on the next load.`, 'error');
    return null;
  }
}

// ---------------------------------------------------------------- following the answer

/**
 * While an answer streams the page follows it to the bottom, until the user
 * scrolls up to read something; then it stays put and offers "Jump to
 * latest" (issue 16 item 2). Scrolling back to the bottom resumes following.
 */
const FOLLOW_SLACK_PX = 48;

function atBottom() {
  const doc = document.documentElement;
  return doc.scrollHeight - (window.scrollY + window.innerHeight) <= FOLLOW_SLACK_PX;
}

function scrollToLatest() {
  window.scrollTo(0, document.documentElement.scrollHeight);
  app.followedY = window.scrollY;
}

/**
 * Follows the stream after new text, unless the reader has scrolled up
 * since the page last followed it — even when that scroll's event has not
 * been handled yet (a delta can arrive first; following then would undo
 * the reader's scroll).
 */
function followStream() {
  if (app.follow && window.scrollY + FOLLOW_SLACK_PX < (app.followedY ?? 0)) {
    app.follow = false;
    $('jump-latest').hidden = false;
  }
  if (app.follow) scrollToLatest();
}

function onScroll() {
  app.follow = atBottom();
  $('jump-latest').hidden = app.follow;
  showEarlierIfNear();
}

function jumpToLatest() {
  app.follow = true;
  scrollToLatest();
  $('jump-latest').hidden = true;
  $('composer-input').focus();
}

function setBusy(busy) {
  const focusStop = busy && document.activeElement === $('send-button');
  const focusInput = !busy && document.activeElement === $('stop-button');
  $('send-button').hidden = busy;
  $('stop-button').hidden = !busy;
  $('send-button').disabled = busy;
  for (const b of document.querySelectorAll('[data-needs-idle], #new-chat')) b.disabled = busy;
  if (focusStop) $('stop-button').focus();
  if (focusInput) $('composer-input').focus();
}

/**
 * Sends one turn. Without `opts` it sends the message box to where the view
 * is (the current branch, a branch point, or a new conversation); with
 * `opts` ({text, parent, newConversation, regenerating}) it sends `text`
 * there without touching the box (Regenerate).
 */
async function send(opts = null) {
  const input = $('composer-input');
  const fromBox = !opts;
  const text = fromBox ? input.value : opts.text;
  if (!text.trim() || app.streaming) return;
  if (offlineRefusal()) return;
  clearAlert();
  const newConversation = fromBox ? app.newChat : !!opts.newConversation;
  const parent = newConversation ? null : (fromBox ? app.leaf || null : opts.parent);
  const regenerating = fromBox ? null : opts.regenerating;
  // A stored question is answered again in place: no new question is
  // stored, so none is shown.
  const inPlace = !fromBox && !!opts.question;
  const params = chatParams();
  const controller = new AbortController();
  app.streaming = { controller };
  if (regenerating) {
    // Show the conversation up to where the new answer goes.
    app.newChat = newConversation;
    app.leaf = parent;
    app.branchFrom = null;
    renderAll();
  }
  setBusy(true);

  // Provisional bubbles: the question, and the answer as it streams.
  const answerText = h('div', { class: 'msg-content streaming', 'data-testid': 'streaming-answer', 'aria-live': 'polite', 'aria-atomic': 'false', 'aria-busy': 'true' });
  const note = h('p', { class: 'msg-note', 'data-testid': 'streaming-note' }, 'Answering…');
  const pending = [
    h('li', { class: 'msg msg-user pending', 'data-testid': 'pending-question' },
      h('article', { 'aria-label': 'Your message' },
        h('header', { class: 'msg-head' }, h('span', { class: 'msg-meta' }, app.prefs.username || app.info.username || 'You')),
        h('div', { class: 'msg-content' }, text))),
    h('li', { class: 'msg msg-assistant pending', 'data-testid': 'pending-answer' },
      h('article', { 'aria-label': 'Answer' },
        h('header', { class: 'msg-head' }, h('span', { class: 'msg-meta' }, modelLabel())),
        answerText, note)),
  ];
  $('messages').append(...(inPlace ? pending.slice(1) : pending));
  $('empty-hint').hidden = true;
  app.follow = true;
  scrollToLatest();
  if (fromBox) input.value = '';

  const turn = { message: text, answer: '', sent_at: new Date().toISOString(), sources: [], params };
  if (parent) turn.parent = parent;
  else if (newConversation) turn.new_conversation = true;
  if (app.prefs.username) turn.username = app.prefs.username;
  app.streaming.turn = turn;
  // Until the turn's first event arrives, nothing but the stored draft holds
  // the question (the request may not have reached the server when the tab
  // closes): it stays the draft until then (issue 16 item 4). From the first
  // event on, the turn holds it — the local server keeps a turn its client
  // left, stateless mode's turn record (written here) keeps it in this
  // browser — and the draft is whatever the box holds since.
  if (fromBox) app.streaming.unsent = text;
  let started = false;
  const begin = () => {
    if (started) return;
    started = true;
    if (app.streaming) app.streaming.started = true;
    backend().turnStarted(turn);
    if (fromBox) {
      if (app.streaming) app.streaming.unsent = null;
      saveDraft(input.value);
    }
  };

  let report = null;
  let done = null;
  let failure = null;
  let streamed = '';
  // The answer is finished at `done`; the memory step's event may come
  // later on the same stream and is applied once the answer is saved.
  let answerSaved = null;
  let sawDone;
  const doneSeen = new Promise((resolve) => { sawDone = resolve; });
  try {
    const body = await backend().chatBody(text, parent, params, newConversation, inPlace ? opts.question : null);
    if (inPlace && app.mode === 'local') body.regenerate = opts.question;
    const streaming = postSse(backend().chatPath, body, {
      context: (r) => {
        begin();
        report = r;
        if (Array.isArray(r?.sources)) turn.sources = r.sources.filter((x) => typeof x === 'string');
      },
      delta: (d) => {
        begin();
        const t = typeof d.text === 'string' ? d.text : '';
        streamed += t;
        turn.answer = streamed;
        backend().turnProgress(turn);
        answerText.append(document.createTextNode(t));
        followStream();
      },
      done: (d) => {
        begin();
        done = d;
        if (d && d.memory_follows === true && d.assistant_message_id) app.memoryPending.add(d.assistant_message_id);
        sawDone();
      },
      memory: (m) => {
        if (isObject(m) && typeof m.exchange === 'string') {
          Promise.resolve(answerSaved).then(() => applyMemory(m)).catch(reportError);
        }
      },
      error: (e) => {
        begin();
        failure = new ApiError(0, e.kind || 'provider', e.message || 'The model failed.');
      },
    }, controller.signal);
    await Promise.race([streaming, doneSeen]);
    if (done) {
      const id = done.assistant_message_id;
      // After the answer is saved and shown (never before: a re-render then
      // would drop the streamed bubbles), a memory step that sent nothing
      // stops saying "Remembering…".
      streaming.catch(() => {}).finally(() => Promise.resolve(answerSaved).catch(() => {}).then(() => {
        if (id && app.memoryPending.delete(id)) {
          renderMessages();
          if (app.follow) scrollToLatest();
        }
      }));
    }
  } catch (e) {
    failure = e;
  }
  answerText.setAttribute('aria-busy', 'false');
  app.streaming = null;
  setBusy(false);

  // Stopped, the tab's connection lost, or the stream cut before `done`:
  // the question and the answer so far are kept, marked incomplete
  // (issue 16 item 4) — by the server in local mode, by this browser in
  // stateless mode — and shown in place of the provisional bubbles.
  if (!done && (controller.signal.aborted || !failure || failure.name === 'AbortError')) {
    note.textContent = 'Stopped; keeping the question and the answer so far…';
    try {
      const kept = await backend().keepStopped(turn);
      for (const li of pending) li.remove();
      if (fromBox) saveDraft($('composer-input').value);
      app.leaf = leafBelow(kept);
      app.branchFrom = null;
      app.newChat = false;
      app.reveal = kept;
      renderAll();
      // Where the provisional answer was: the kept one, marked incomplete.
      document.getElementById(`msg-${kept}`)?.scrollIntoView({ block: 'end' });
      notify(controller.signal.aborted
        ? 'Stopped. The question and the answer so far are kept, marked incomplete.'
        : 'The connection closed before the answer finished; the question and the answer so far are kept, marked incomplete.');
    } catch (e) {
      note.textContent = `Stopped, but the turn could not be kept yet: ${e.message}`;
      note.classList.add('warn');
      note.setAttribute('role', 'alert');
      if (fromBox && !$('composer-input').value) {
        input.value = text;
        saveDraft(text);
      }
    }
    return;
  }
  // A failed turn keeps nothing (its question goes back to the box); a
  // finished one is forgotten once its patch is saved (`afterDone`).
  if (!done) backend().turnEnded();

  if (regenerating && failure) {
    // The original answer stays, and says once, under it, what happened.
    for (const li of pending) li.remove();
    app.newChat = false;
    app.leaf = leafBelow(regenerating);
    app.reveal = regenerating;
    if (failure && failure.status === 401) {
      showSignin();
      return;
    }
    app.answerErrors.set(regenerating, failure);
    renderAll();
    document.getElementById(`msg-${regenerating}`)?.scrollIntoView({ block: 'center' });
    return;
  }
  if (failure) {
    if (failure.status === 401) {
      showSignin();
      return;
    }
    // The error is shown once, where it happened: in the failed answer's
    // bubble (an alert for screen readers), with Retry.
    note.textContent = `Failed: ${failure.message}`;
    note.classList.add('warn');
    note.setAttribute('role', 'alert');
    if (fromBox) {
      input.value = text;
      saveDraft(text);
    }
    // Retry sends the same question again; the failed bubbles go, so the
    // error is shown once rather than piling up a copy per attempt.
    note.append(' ', h('button', {
      type: 'button', class: 'small', 'data-testid': 'retry',
      onclick: () => {
        for (const li of pending) li.remove();
        if (fromBox) {
          input.value = text;
          send();
        } else {
          send(opts);
        }
      },
    }, 'Retry'));
    return;
  }
  try {
    if (report && done.assistant_message_id) app.reports.set(done.assistant_message_id, report);
    answerSaved = backend().afterDone(done);
    await answerSaved;
    // Saved: the draft has become a stored message, unless the user has
    // already started typing the next one while the answer streamed.
    if (fromBox) saveDraft($('composer-input').value);
    app.leaf = done.assistant_message_id || latestId();
    app.branchFrom = null;
    app.newChat = false;
    renderAll();
    if (app.follow) scrollToLatest();
    notify(streamed ? 'Answer saved.' : 'Saved.');
  } catch (e) {
    reportError(e);
  }
}

function stop() {
  if (app.streaming) app.streaming.controller.abort();
}

async function updateContext() {
  clearAlert();
  const button = $('context-update');
  button.disabled = true;
  const old = button.textContent;
  button.textContent = 'Drafting…';
  let draft;
  const sentContext = app.state.context || '';
  try {
    draft = await backend().draftContext(chatParams());
  } catch (e) {
    reportError(e);
    return;
  } finally {
    button.disabled = false;
    button.textContent = old;
  }
  const diff = Array.isArray(draft.diff) ? draft.diff : [];
  const changed = diff.some((d) => d.op !== 'keep');
  $('context-dialog-summary').textContent =
    `${Number(draft.new_messages) || 0} new messages${draft.since ? ` since ${formatTime(draft.since)}` : ''}. ` +
    (changed ? 'Lines marked + are added, lines marked − are removed.' : 'The draft does not change the context.');
  $('context-diff').replaceChildren(...diff.map((d) => {
    const op = d.op === 'add' || d.op === 'remove' ? d.op : 'keep';
    const mark = op === 'add' ? '+' : op === 'remove' ? '−' : ' ';
    const body = op === 'add' ? h('ins', {}, String(d.text ?? '')) : op === 'remove' ? h('del', {}, String(d.text ?? '')) : h('span', {}, String(d.text ?? ''));
    return h('li', { class: `diff-${op}`, 'data-testid': `diff-${op}` },
      h('span', { class: 'diff-mark', 'aria-hidden': 'true' }, mark),
      h('span', { class: 'visually-hidden' }, op === 'add' ? 'added: ' : op === 'remove' ? 'removed: ' : 'unchanged: '),
      body);
  }));
  const dialog = $('context-dialog');
  dialog.returnValue = '';
  dialog.showModal();
  dialog.addEventListener('close', async () => {
    if (dialog.returnValue !== 'apply') {
      notify('Context left unchanged.');
      return;
    }
    await run(() => backend().applyContext(draft, sentContext), 'Context updated; the change is recorded as a memory entry.');
  }, { once: true });
}

async function doSearch(q) {
  if (!q.trim()) return;
  clearAlert();
  let res;
  try {
    res = await backend().search(q.trim());
  } catch (e) {
    reportError(e);
    return;
  }
  const box = $('search-results');
  const section = (title, items) => [h('h3', {}, `${title} (${items.length})`), items.length ? h('ul', { class: 'results' }, items) : h('p', { class: 'empty-hint' }, 'No matches.')];
  const msgs = (res.messages || []).map((m) => h('li', {},
    h('button', { type: 'button', class: 'link', 'data-testid': 'search-hit-message', onclick: () => jumpToMessage(m.id) }, m.title || m.id),
    h('span', { class: 'hint' }, ` ${m.username || ''} · ${formatTime(m.timestamp)}`)));
  const truth = (res.truth || []).map((t) => h('li', {},
    h('button', { type: 'button', class: 'link', 'data-testid': 'search-hit-truth', onclick: () => jumpToTruth(t.id) }, t.title || t.id),
    h('span', { class: 'hint' }, ` certainty ${Number(t.certainty ?? 0).toFixed(2)}`)));
  const chunks = (res.chunks || []).map((c) => h('li', { 'data-testid': 'search-hit-chunk' },
    h('code', {}, String(c.path ?? c.ref ?? '')), c.start_line != null ? ` lines ${c.start_line}–${c.end_line}` : '', c.label ? ` ${c.label}` : ''));
  box.replaceChildren(...section('Messages', msgs), ...section('Memory', truth), ...(chunks.length ? section('Files', chunks) : []));
  openPanel('panel-search');
}

async function jumpToMessage(id) {
  if (!app.state.messages.some((m) => m.id === id) && app.mode === 'local') {
    // Older than the loaded page: load its conversation (only it).
    try {
      await local.loadConversation(id);
    } catch (e) {
      reportError(e);
      return;
    }
  }
  if (!app.state.messages.some((m) => m.id === id)) {
    notify('That message is not loaded.', 'error');
    return;
  }
  app.leaf = leafBelow(id);
  app.branchFrom = null;
  app.newChat = false;
  app.reveal = id;
  renderAll();
  const el = document.getElementById(`msg-${id}`);
  if (el) {
    el.classList.add('highlight');
    el.scrollIntoView({ block: 'center' });
    el.querySelector('button')?.focus();
    setTimeout(() => el.classList.remove('highlight'), 2500);
  }
}

function jumpToTruth(id) {
  openPanel('panel-truth');
  const el = document.getElementById(`truth-${id}`);
  if (el) {
    el.classList.add('highlight');
    el.scrollIntoView({ block: 'center' });
    setTimeout(() => el.classList.remove('highlight'), 2500);
  }
}

async function importFile(file, how) {
  clearAlert();
  if (!file) return;
  if (file.size > 256 * 1024 * 1024) {
    notify('That file is larger than 256 MiB.', 'error');
    return;
  }
  let text;
  try {
    text = await file.text();
    // Only the syntax here; what an llm.json is, the server or wo-format says.
    JSON.parse(text);
  } catch (e) {
    notify(e instanceof SyntaxError ? `${file.name} is not valid JSON.` : e.message, 'error');
    return;
  }
  await run(async () => {
    const msg = await backend().importText(text, how);
    app.leaf = latestId();
    app.branchFrom = null;
    app.newChat = false;
    return msg;
  });
}

// ---------------------------------------------------------------- panels

function openPanel(id) {
  for (const p of document.querySelectorAll('.panel')) p.hidden = p.id !== id;
  for (const b of document.querySelectorAll('.panel-toggle')) b.setAttribute('aria-expanded', String(b.getAttribute('aria-controls') === id));
  document.body.classList.add('panel-open');
  if (isNarrow()) {
    closeMenu();
    document.body.classList.remove('drawer-open');
    syncSidebarToggle();
  }
  syncScrim();
  const heading = $(id).querySelector('h2');
  if (heading) heading.focus();
}

function closePanel(id) {
  $(id).hidden = true;
  const toggle = document.querySelector(`.panel-toggle[aria-controls="${id}"]`);
  if (toggle) {
    toggle.setAttribute('aria-expanded', 'false');
    // On phones the toggle sits in the closed menu: focus what opens it.
    if (isNarrow()) $('menu-toggle').focus();
    else toggle.focus();
  }
  if (![...document.querySelectorAll('.panel')].some((p) => !p.hidden)) document.body.classList.remove('panel-open');
  syncScrim();
}

// ------------------------------------------------- renaming a conversation

/**
 * Renames the message `id` in a state held in this browser (stateless
 * mode), as the server's `PATCH /api/messages/{id}` does, with wo-format's
 * own rule (wo-wasm's `renameMessage`): the title cleaned, only the title
 * and its rename stamp change. Returns the renamed state; throws a 400
 * naming `/title` or a 404.
 */
function renameMessageIn(state, id, raw, now) {
  const r = JSON.parse(callRust(rust.renameMessage, JSON.stringify(state), String(id), String(raw ?? ''), now));
  if (r.title_error) throw new ApiError(400, 'bad_request', r.title_error, '/title');
  if (!r.found) throw new ApiError(404, 'not_found', `no message ${JSON.stringify(id)}`);
  return r.state;
}

/** The header's title becomes a small form; Enter saves, Escape cancels. */
function startRename() {
  const tree = buildTree();
  const rootId = currentRoot(tree);
  if (!rootId || app.streaming) return;
  const root = tree.byId.get(rootId);
  const head = $('conversation-head');
  const input = h('input', {
    id: 'rename-input', value: root.title || '', autocomplete: 'off', 'data-testid': 'rename-input',
    'aria-describedby': 'rename-hint',
  });
  const done = () => {
    form.remove();
    $('conversation-title').hidden = false;
    $('conversation-rename').hidden = false;
    $('conversation-rename').focus();
  };
  const form = h('form', { class: 'rename-form', 'data-testid': 'rename-form' },
    h('label', { for: 'rename-input', class: 'visually-hidden' }, 'Conversation title'),
    input,
    h('span', { id: 'rename-hint', class: 'visually-hidden' }, 'Enter saves, Escape cancels; at most 200 characters.'),
    h('button', { type: 'submit', class: 'primary small', 'data-testid': 'rename-save' }, 'Save'),
    h('button', { type: 'button', class: 'small', 'data-testid': 'rename-cancel', onclick: done }, 'Cancel'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearAlert();
    try {
      await backend().renameMessage(rootId, input.value);
    } catch (e) {
      reportError(e);
      input.focus();
      return;
    }
    done();
    renderAll();
    notify('Conversation renamed.');
  });
  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') {
      ev.preventDefault();
      ev.stopPropagation();
      done();
    }
  });
  $('conversation-title').hidden = true;
  $('conversation-rename').hidden = true;
  head.append(form);
  input.focus();
  input.select();
}

// ------------------------------------------------- syntax highlighting

// Done here, on the rendered DOM, rather than in the stored XHTML: the
// file keeps the plain code pulldown-cmark wrote (message ids hash the
// content, and other tools read llm.json), and the same code looks the same
// while it streams, in both modes. Only text nodes are made: the spans'
// text is the code's text, so nothing in it is ever parsed as markup.

const HL_KEYWORDS = new Set((
  'as async await break case catch class const continue crate def default defer del do done elif else enum esac ' +
  'except export extends extern fi finally fn for foreach from func function go goto if impl import in interface ' +
  'is lambda let loop match mod module move mut namespace new not or and package pass private protected pub public ' +
  'raise readonly ref return select self static struct super switch then this throw trait try type typeof union ' +
  'unsafe use var void where while with yield local end begin elsif unless until echo export val object override ' +
  'CREATE SELECT FROM WHERE INSERT INTO UPDATE DELETE JOIN ON GROUP BY ORDER LIMIT AND OR NOT NULL TABLE VALUES AS ' +
  'create select from where insert into update delete join on group by order limit values table'
).split(' '));
const HL_LITERALS = new Set('true false null nil None True False undefined NaN Infinity Some Ok Err'.split(' '));
/** Languages whose line comments start with `#`. */
const HASH_COMMENTS = new Set(['python', 'py', 'sh', 'bash', 'shell', 'zsh', 'console', 'ruby', 'rb', 'yaml', 'yml', 'toml', 'perl', 'r', 'make', 'makefile', 'dockerfile', 'ini', 'conf', 'nix', 'elixir', 'powershell', 'ps1']);
/** Languages whose line comments start with `--`. */
const DASH_COMMENTS = new Set(['sql', 'lua', 'haskell', 'hs', 'elm', 'ada']);
const HL_MAX_CHARS = 100_000;

/** The code's tokens: [class or '', text] pairs whose texts join to `text`. */
function codeTokens(text, lang) {
  const l = String(lang || '').toLowerCase();
  const hash = HASH_COMMENTS.has(l);
  const dash = DASH_COMMENTS.has(l);
  const slash = !hash || l === 'php';
  const out = [];
  const push = (cls, s) => {
    if (!s) return;
    const last = out[out.length - 1];
    if (last && last[0] === cls) last[1] += s;
    else out.push([cls, s]);
  };
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i];
    const rest2 = text.slice(i, i + 2);
    let j;
    if ((slash && rest2 === '//') || (hash && c === '#') || (dash && rest2 === '--')) {
      j = text.indexOf('\n', i);
      if (j < 0) j = n;
      push('hl-com', text.slice(i, j));
    } else if (slash && rest2 === '/*') {
      j = text.indexOf('*/', i + 2);
      j = j < 0 ? n : j + 2;
      push('hl-com', text.slice(i, j));
    } else if (c === '"' || c === "'" || c === '`') {
      // A quote in Rust lifetimes ('a) or English prose (don't) is not a
      // string: a string ends on its line, or it is not one.
      j = i + 1;
      while (j < n && text[j] !== c && (text[j] !== '\n' || c === '`')) j += text[j] === '\\' ? 2 : 1;
      if (j < n && text[j] === c) {
        j++;
        push('hl-str', text.slice(i, j));
      } else {
        j = i + 1;
        push('', c);
      }
    } else if (/[0-9]/.test(c) && !(i > 0 && /[\w$]/.test(text[i - 1]))) {
      const m = /^(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|[0-9][0-9_]*(?:\.[0-9_]+)?(?:[eE][+-]?[0-9]+)?)[a-zA-Z0-9_]*/.exec(text.slice(i, i + 64));
      j = i + m[0].length;
      push('hl-num', m[0]);
    } else if (/[A-Za-z_$]/.test(c)) {
      const m = /^[A-Za-z_$][\w$]*/.exec(text.slice(i, i + 256));
      const word = m[0];
      j = i + word.length;
      let cls = '';
      if (HL_KEYWORDS.has(word)) cls = 'hl-kw';
      else if (HL_LITERALS.has(word)) cls = 'hl-lit';
      else if (text[j] === '(' || (text[j] === '!' && text[j + 1] === '(')) cls = 'hl-fn';
      else if (/^[A-Z][a-z0-9]\w*$/.test(word)) cls = 'hl-ty';
      push(cls, word);
    } else {
      j = i + 1;
      push('', c);
    }
    i = j;
  }
  return out;
}

/** Highlights one rendered `<pre>` (its `<code>`'s `data-lang`, if any) in place. */
function highlightCode(pre) {
  const code = pre.querySelector('code') || pre;
  if (code.childElementCount) return; // already highlighted, or not plain code
  const text = code.textContent || '';
  if (!text || text.length > HL_MAX_CHARS) return;
  const lang = code.getAttribute('data-lang') || '';
  const parts = codeTokens(text, lang).map(([cls, s]) => (cls ? h('span', { class: cls }, s) : document.createTextNode(s)));
  code.replaceChildren(...parts);
  code.classList.add('hl');
  if (lang) pre.setAttribute('data-lang', lang);
}

// ------------------------------------------------- provider/model picker

/** The picker's value for a provider and model. */
const pickValue = (provider, model) => JSON.stringify([provider, model]);

/**
 * The composer's picker: each provider's models, providers that a check
 * found unable to answer left out (a chosen one stays, marked, so the
 * choice is visible).
 */
function fillPicker() {
  const sel = $('composer-provider');
  if (!sel) return;
  const { provider, model } = answering();
  const options = [];
  let chosen = false;
  for (const p of app.providers.providers || []) {
    const models = [...new Set([p.default_model, ...(p.models || [])].filter(Boolean))];
    if (!models.length) models.push('');
    const usable = p.reachable !== false;
    for (const m of models) {
      const isChoice = p.name === provider && m === model;
      if (!usable && !isChoice) continue;
      chosen = chosen || isChoice;
      options.push(h('option', { value: pickValue(p.name, m), disabled: !usable, 'data-provider': p.name },
        `${p.name}${m && m !== p.name ? ` · ${m}` : ''}${usable ? '' : ' (cannot answer)'}`));
    }
  }
  if (!chosen && provider) {
    options.unshift(h('option', { value: pickValue(provider, model) }, `${provider}${model ? ` · ${model}` : ''}`));
  }
  if (!options.length) options.push(h('option', { value: '' }, 'the server default model'));
  sel.replaceChildren(...options);
  sel.value = provider ? pickValue(provider, model) : '';
}

function pickProvider(value) {
  let pair;
  try {
    pair = JSON.parse(value);
  } catch {
    return;
  }
  if (!Array.isArray(pair)) return;
  const [provider, model] = pair;
  showProviderNote(''); // a "cannot answer" about the previous choice no longer applies
  const prov = (app.providers.providers || []).find((x) => x.name === provider);
  // The provider's default model is not pinned: a later change of the
  // server's default model is then followed.
  savePrefs({ ...app.prefs, provider, model: prov && model === prov.default_model ? undefined : model || undefined });
  fillSettings();
  fillPicker();
  notify(`Answers now come from ${modelLabel()}.`);
  reportUnreachable();
}

/** Says once (per provider and page) why the chosen provider cannot answer. */
function reportUnreachable() {
  const { provider } = answering();
  const p = (app.providers.providers || []).find((x) => x.name === provider);
  if (!p || p.reachable !== false || app.unreachableShown.has(p.name)) return;
  app.unreachableShown.add(p.name);
  const why = p.detail ? `: ${p.detail}` : ' right now';
  showProviderNote(`${p.name} cannot answer${why}. Pick another provider here.`);
}

/**
 * The picker's own note, under the composer: about the choice, not an
 * action, so it never doubles a failure shown where it happened (the
 * alert, a message's note).
 */
function showProviderNote(text) {
  const note = $('provider-note');
  note.textContent = text;
  note.hidden = !text;
}

/** Asks the server which providers answer (a request each), then refills the picker. */
async function checkProviders() {
  let checked;
  try {
    checked = await api('/api/providers?check=true');
  } catch {
    return; // the picker keeps every configured provider
  }
  if (!checked || !Array.isArray(checked.providers)) return;
  app.providers = checked;
  fillPicker();
  fillSettings();
  renderModelBadge();
  reportUnreachable();
}

// ------------------------------------------------- truth filters, efforts

/**
 * Where an entry stands: `superseded` (another entry replaces it),
 * `archived` (its `expires` instant has passed: out of retrieval, never
 * deleted), `resolved` (a resolved effort), else `open`.
 */
function truthStatus(t, supersededIds, now = nowStamp()) {
  if (supersededIds.has(t.id)) return 'superseded';
  if (typeof t.expires === 'string' && STAMP_RE.test(t.expires) && compareStamps(t.expires, now) <= 0) return 'archived';
  if (t.status === 'resolved') return 'resolved';
  return 'open';
}

function supersededIds() {
  const out = new Set();
  for (const t of app.state.truth.trust) if (typeof t.supersedes === 'string') out.add(t.supersedes);
  return out;
}

/** The truth entries the panel's filters let through. */
function filteredTruth() {
  const kind = $('truth-filter-kind').value;
  const status = $('truth-filter-status').value;
  const tag = $('truth-filter-tag').value.trim().toLowerCase();
  const sup = supersededIds();
  const now = nowStamp();
  return app.state.truth.trust.filter((t) => (!kind || (t.kind || 'fact') === kind)
    && (!status || truthStatus(t, sup, now) === status)
    && (!tag || (Array.isArray(t.tags) && t.tags.some((g) => String(g).toLowerCase() === tag))));
}

function fillTagChoices() {
  const tags = new Set();
  for (const t of app.state.truth.trust) if (Array.isArray(t.tags)) for (const g of t.tags) tags.add(String(g));
  $('truth-tag-list').replaceChildren(...[...tags].sort().map((g) => h('option', { value: g })));
}

/** Open efforts first (newest first), then resolved ones with how they were resolved. */
function renderEfforts() {
  const list = $('effort-list');
  if (!list) return;
  const sup = supersededIds();
  const now = nowStamp();
  const efforts = app.state.truth.trust.filter((t) => t.kind === 'effort');
  const newest = (a, b) => compareStamps(effectiveUpdate(b), effectiveUpdate(a));
  const open = efforts.filter((t) => truthStatus(t, sup, now) === 'open').sort(newest);
  const resolved = efforts.filter((t) => t.status === 'resolved').sort(newest);
  const item = (t) => {
    const byId = typeof t.resolution === 'string' ? app.state.truth.trust.find((e) => e.id === t.resolution.trim()) : null;
    return h('li', { class: 'effort-item', 'data-testid': 'effort', 'data-id': t.id, 'data-status': t.status || 'open' },
      h('a', { href: `#truth-${t.id}`, 'data-testid': 'effort-title', onclick: (ev) => { ev.preventDefault(); showTruth(t.id); } }, t.title || '(untitled)'),
      ' ', h('time', { datetime: effectiveUpdate(t) }, formatTime(effectiveUpdate(t))),
      t.status === 'resolved' && t.resolution ? h('p', { class: 'effort-resolution', 'data-testid': 'effort-resolution' },
        'Resolved: ',
        byId
          ? h('a', { href: `#truth-${byId.id}`, onclick: (ev) => { ev.preventDefault(); showTruth(byId.id); } }, byId.title || byId.id)
          : String(t.resolution)) : null);
  };
  list.replaceChildren(
    h('li', { class: 'effort-group' }, h('h3', {}, `Open (${open.length})`),
      h('ul', { 'data-testid': 'efforts-open' }, ...(open.length ? open.map(item) : [h('li', { class: 'empty-hint' }, 'No open efforts.')]))),
    h('li', { class: 'effort-group' }, h('h3', {}, `Resolved (${resolved.length})`),
      h('ul', { 'data-testid': 'efforts-resolved' }, ...(resolved.length ? resolved.map(item) : [h('li', { class: 'empty-hint' }, 'No resolved efforts.')]))));
}

/** Opens the Truth panel with its filters cleared and shows entry `id`. */
function showTruth(id) {
  for (const f of ['truth-filter-kind', 'truth-filter-status', 'truth-filter-tag']) $(f).value = '';
  renderTruth();
  jumpToTruth(id);
}

// ------------------------------------------------- context as Markdown

/** Stored XHTML → the Markdown shown for editing (never the markup itself). */
function xhtmlToMarkdown(xhtml) {
  const holder = document.createElement('div');
  holder.append(renderXhtml(xhtml));
  return toMarkdown(holder).replace(/[ \t]+\n/g, '\n').replace(/\n{3,}/g, '\n\n').trim();
}

// ---------------------------------------------------------------- settings

function fillSettings() {
  const p = app.prefs;
  const sel = $('set-provider');
  const provs = app.providers.providers || [];
  sel.replaceChildren(
    h('option', { value: '' }, `Server default${app.providers.default ? ` (${app.providers.default})` : ''}`),
    ...provs.map((x) => h('option', { value: x.name }, `${x.name} (${x.kind})`)));
  if (p.provider && !provs.some((x) => x.name === p.provider)) sel.append(h('option', { value: p.provider }, `${p.provider} (not configured here)`));
  sel.value = p.provider || '';
  fillModels();
  $('set-model').value = p.model || '';
  $('set-temperature').value = String(p.temperature ?? 0.7);
  $('temperature-value').textContent = Number(p.temperature ?? 0.7).toFixed(1) + (p.temperature === undefined ? ' (default)' : '');
  $('set-max-tokens').value = p.max_tokens ?? '';
  $('set-rag').checked = p.rag !== false;
  $('set-url-fetch').checked = p.url_fetch === true;
  $('set-max-entries').value = p.max_entries ?? '';
  $('set-min-certainty').value = p.min_certainty ?? '';
  $('set-username').value = p.username || '';
  $('set-username').placeholder = app.info.username || 'you';
}

function fillModels() {
  const name = $('set-provider').value || app.providers.default;
  const prov = (app.providers.providers || []).find((x) => x.name === name);
  const models = new Set(prov ? [prov.default_model, ...(prov.models || [])].filter(Boolean) : []);
  $('model-list').replaceChildren(...[...models].map((m) => h('option', { value: m })));
  $('set-model').placeholder = prov && prov.default_model ? `default: ${prov.default_model}` : 'default';
}

function readSettingsForm(changed) {
  const p = { ...app.prefs };
  const num = (id) => {
    const v = $(id).value.trim();
    return v === '' ? undefined : Number(v);
  };
  p.provider = $('set-provider').value || undefined;
  p.model = $('set-model').value.trim() || undefined;
  if (changed === 'set-temperature' || p.temperature !== undefined) p.temperature = Number($('set-temperature').value);
  p.max_tokens = num('set-max-tokens');
  if (p.max_tokens !== undefined) p.max_tokens = Math.round(p.max_tokens);
  p.rag = $('set-rag').checked ? undefined : false;
  p.url_fetch = $('set-url-fetch').checked ? true : undefined;
  p.max_entries = num('set-max-entries');
  if (p.max_entries !== undefined) p.max_entries = Math.round(p.max_entries);
  p.min_certainty = num('set-min-certainty');
  p.username = $('set-username').value.trim() || undefined;
  return cleanPrefs(p);
}

function savePrefs(prefs) {
  app.prefs = cleanPrefs(prefs);
  writePrefs(app.prefs);
  renderModelBadge();
  fillPicker();
}

/** The provider and model that will answer the next message: the settings, else the server's defaults. */
function answering() {
  const name = app.prefs.provider || app.providers.default || '';
  const prov = (app.providers.providers || []).find((x) => x.name === name);
  const model = app.prefs.model || (prov && prov.default_model) || '';
  return { provider: name, model };
}

function modelLabel() {
  const { provider, model } = answering();
  if (!provider) return 'the server default model';
  return model && model !== provider ? `${provider} · ${model}` : provider;
}

function renderModelBadge() {
  const badge = $('model-badge');
  const label = modelLabel();
  badge.textContent = label;
  badge.title = `Answers come from ${label} (change it in Settings)`;
}

// ---------------------------------------------------------------- drawer, menu, panels on phones

const NARROW = window.matchMedia('(max-width: 52rem)');
const isNarrow = () => NARROW.matches;

/**
 * The conversation list: a sidebar beside the conversation on wide
 * screens (the header button hides it), a drawer over it on phones.
 */
function sidebarShown() {
  return isNarrow() ? document.body.classList.contains('drawer-open') : !document.body.classList.contains('sidebar-hidden');
}

function syncSidebarToggle() {
  $('drawer-toggle').setAttribute('aria-expanded', String(sidebarShown()));
  syncScrim();
}

function openDrawer() {
  if (isNarrow()) {
    closeMenu();
    document.body.classList.add('drawer-open');
    $('sidebar-title').focus();
  } else {
    document.body.classList.remove('sidebar-hidden');
  }
  syncSidebarToggle();
}

function closeDrawer(focusToggle = true) {
  if (isNarrow()) document.body.classList.remove('drawer-open');
  else document.body.classList.add('sidebar-hidden');
  syncSidebarToggle();
  if (focusToggle) $('drawer-toggle').focus();
}

function closeMenu() {
  document.body.classList.remove('menu-open');
  $('menu-toggle').setAttribute('aria-expanded', 'false');
}

/** On phones a dimmed backdrop sits under the drawer or a panel; a tap on it closes them. */
function syncScrim() {
  const over = isNarrow() && (document.body.classList.contains('drawer-open') || document.body.classList.contains('panel-open'));
  $('scrim').hidden = !over;
}

// ---------------------------------------------------------------- sign-in

function showSignin() {
  $('signin').hidden = false;
  $('layout').hidden = true;
  for (const el of document.querySelectorAll('.toolbar button, .search input, .search button')) el.disabled = true;
}

function enableUi() {
  $('signin').hidden = true;
  $('layout').hidden = false;
  for (const el of document.querySelectorAll('.toolbar button, .search input, .search button, #composer-input, #send-button, #drawer-toggle, #menu-toggle')) el.disabled = false;
}

// ---------------------------------------------------------------- wiring

function wire() {
  $('composer').addEventListener('submit', (e) => { e.preventDefault(); send(); });
  $('composer-input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  $('composer-input').addEventListener('input', (e) => {
    // A question not yet taken by its turn stays in the stored draft too.
    const unsent = app.streaming && app.streaming.unsent;
    saveDraft(unsent ? [unsent, e.target.value].filter(Boolean).join('\n\n') : e.target.value);
  });
  // The tab closing mid-answer: the answer so far is kept (stateless mode
  // holds it here; the local server keeps it when the connection drops).
  window.addEventListener('pagehide', () => {
    // Not before its first event: until then the stored draft holds the question.
    if (app.streaming && app.streaming.started) backend().turnProgress(app.streaming.turn, true);
  });
  $('stop-button').addEventListener('click', stop);
  $('jump-latest').addEventListener('click', jumpToLatest);
  window.addEventListener('scroll', onScroll, { passive: true });
  document.addEventListener('keydown', (e) => {
    if (e.key !== 'Escape') return;
    if (app.streaming) stop();
    else if (document.body.classList.contains('menu-open')) {
      closeMenu();
      $('menu-toggle').focus();
    } else if (app.branchFrom && !$('context-dialog').open) cancelBranch();
  });
  $('reply-cancel').addEventListener('click', cancelBranch);
  $('new-chat').addEventListener('click', startNewChat);
  $('conversation-rename').addEventListener('click', startRename);
  $('conversation-archive').addEventListener('click', toggleArchive);
  $('show-archived').addEventListener('change', (e) => {
    app.showArchived = e.target.checked;
    filterOnServer();
  });
  $('composer-provider').addEventListener('change', (e) => pickProvider(e.target.value));
  for (const f of ['truth-filter-kind', 'truth-filter-status', 'truth-filter-tag']) $(f).addEventListener('input', renderTruth);
  $('conversation-filter').addEventListener('input', (e) => {
    app.filter = e.target.value;
    if (app.mode === 'local') filterOnServer();
    else renderConversations();
  });
  $('drawer-toggle').addEventListener('click', () => (sidebarShown() ? closeDrawer() : openDrawer()));
  $('sidebar-close').addEventListener('click', () => closeDrawer());
  $('sidebar').addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && isNarrow() && !app.streaming) {
      e.stopPropagation();
      closeDrawer();
    }
  });
  $('menu-toggle').addEventListener('click', () => {
    const open = !document.body.classList.contains('menu-open');
    document.body.classList.toggle('menu-open', open);
    $('menu-toggle').setAttribute('aria-expanded', String(open));
    if (open) $('search-input').focus();
  });
  $('scrim').addEventListener('click', () => {
    for (const p of document.querySelectorAll('.panel')) if (!p.hidden) closePanel(p.id);
    if (document.body.classList.contains('drawer-open')) closeDrawer(false);
  });
  NARROW.addEventListener('change', () => {
    document.body.classList.remove('drawer-open', 'menu-open');
    syncSidebarToggle();
  });

  for (const b of document.querySelectorAll('.panel-toggle')) {
    b.addEventListener('click', () => {
      const id = b.getAttribute('aria-controls');
      if ($(id).hidden) openPanel(id);
      else closePanel(id);
    });
  }
  for (const b of document.querySelectorAll('.panel-close')) b.addEventListener('click', () => closePanel(b.dataset.close));
  for (const p of document.querySelectorAll('.panel')) {
    p.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && !app.streaming) {
        e.stopPropagation();
        closePanel(p.id);
      }
    });
  }

  $('search-form').addEventListener('submit', (e) => { e.preventDefault(); closeMenu(); doSearch($('search-input').value); });

  const form = $('settings-form');
  form.addEventListener('input', (e) => {
    if (e.target.id === 'set-temperature') $('temperature-value').textContent = Number(e.target.value).toFixed(1);
  });
  form.addEventListener('change', (e) => {
    if (e.target.id === 'set-provider') fillModels();
    savePrefs(readSettingsForm(e.target.id));
    notify('Settings saved in this browser.');
  });
  form.addEventListener('submit', (e) => e.preventDefault());
  $('settings-reset').addEventListener('click', () => {
    savePrefs({});
    fillSettings();
    notify('Settings reset to the defaults.');
  });

  $('truth-add-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const f = e.target;
    const certainty = Number(f.certainty.value);
    if (!(certainty >= 0 && certainty <= 1)) { notify('Certainty must be between 0 and 1.', 'error'); return; }
    const entry = { title: f.title.value.trim(), content: f.content.value, certainty, kind: f.kind.value || undefined };
    if (!entry.title || !entry.content.trim()) return;
    run(async () => {
      await backend().addTruth(entry);
      f.reset();
    }, 'Memory entry added.');
  });

  $('context-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const text = $('context-input').value;
    run(() => backend().saveContext(text), 'Context saved.').then(() => renderContext());
  });
  $('context-update').addEventListener('click', updateContext);

  $('export-button').addEventListener('click', () => run(() => backend().exportFile(), 'Export downloaded.'));
  $('import-button').addEventListener('click', () => $('import-input').click());
  $('import-input').addEventListener('change', (e) => {
    const file = e.target.files && e.target.files[0];
    e.target.value = '';
    importFile(file, 'import');
  });

  // Dropping an llm_*.json export anywhere merges it.
  let depth = 0;
  const hasFiles = (e) => e.dataTransfer && Array.from(e.dataTransfer.types || []).includes('Files');
  document.addEventListener('dragenter', (e) => {
    if (!hasFiles(e) || !app.state) return;
    depth++;
    $('drop-overlay').hidden = false;
  });
  document.addEventListener('dragleave', () => {
    depth = Math.max(0, depth - 1);
    if (!depth) $('drop-overlay').hidden = true;
  });
  document.addEventListener('dragover', (e) => {
    if (!hasFiles(e)) return;
    e.preventDefault();
    e.dataTransfer.dropEffect = 'copy';
  });
  document.addEventListener('drop', async (e) => {
    if (!e.dataTransfer || !e.dataTransfer.files || !e.dataTransfer.files.length) return;
    e.preventDefault();
    depth = 0;
    $('drop-overlay').hidden = true;
    if (!app.state) return;
    const files = Array.from(e.dataTransfer.files);
    const exports = files.filter((f) => /^llm_.*\.json$/i.test(f.name));
    if (!exports.length) {
      notify('Only llm_*.json exports can be dropped here.', 'error');
      return;
    }
    for (const f of exports) await importFile(f, 'drop');
  });
}

// ------------------------------------------------------ offline shell (PWA)

/** localStorage key: the mode of the last server this page loaded from. */
const MODE_KEY = 'wo_last_mode';

/**
 * Stateless mode: registers the service worker (sw.js), which keeps the
 * page's own files so it opens offline. Local mode: removes any, since a
 * stateless server may have run on this port before (the page of a local
 * server always comes from it).
 */
function syncOfflineShell(mode) {
  try { localStorage.setItem(MODE_KEY, mode); } catch { /* storage off: no offline start */ }
  if (!('serviceWorker' in navigator)) return;
  if (mode === 'stateless') {
    navigator.serviceWorker.register('/sw.js', { scope: '/' }).catch(() => { /* the page works without it */ });
  } else {
    navigator.serviceWorker.getRegistrations()
      .then((rs) => Promise.all(rs.map((r) => r.unregister())))
      .catch(() => {});
  }
}

/** Why nothing is sent while offline (the question stays in the box); false when online. */
function offlineRefusal() {
  if (navigator.onLine !== false && !app.offline) return false;
  notify('You are offline: answering needs the WikiOracle server. Your question stays in the box; send it once you are back online.', 'error');
  return true;
}

/**
 * The server cannot be reached (no HTTP answer at all) and this page last
 * came from a stateless server: the offline shell shows what this browser
 * keeps, and says that chat needs the server. False when that does not
 * apply (the caller then reports the failure as before).
 */
async function startOffline(e) {
  let last = null;
  try { last = localStorage.getItem(MODE_KEY); } catch { /* no storage */ }
  if (last !== 'stateless' || e instanceof ApiError) return false;
  app.mode = 'stateless';
  app.offline = true;
  document.body.dataset.mode = 'stateless';
  document.body.dataset.offline = 'true';
  $('mode-badge').textContent = 'offline';
  $('mode-badge').title = 'Offline: your llm.json is in this browser; answering needs the server';
  app.info = {};
  app.providers = { default: '', providers: [] };
  app.prefs = offeredPrefs(readPrefs());
  reportDroppedPrefs();
  await stateless.load();
  fillSettings();
  renderModelBadge();
  enableUi();
  restoreDraft();
  app.leaf = latestId();
  syncSidebarToggle();
  renderAll();
  notify('You are offline. Your conversations are here, but answering needs the WikiOracle server.', 'error');
  // Back online (the network, or the server itself): start again from it.
  const back = setInterval(async () => {
    try {
      await api('/api/health');
    } catch {
      return;
    }
    clearInterval(back);
    location.reload();
  }, 3000);
  document.body.dataset.ready = 'true';
  performance.mark('wo-ready');
  return true;
}

async function start() {
  wire();
  let health;
  try {
    health = await api('/api/health');
  } catch (e) {
    if (await startOffline(e)) return;
    notify(`The WikiOracle server does not answer (${e.message}).`, 'error');
    return;
  }
  app.mode = health.mode === 'stateless' ? 'stateless' : 'local';
  syncOfflineShell(app.mode);
  document.body.dataset.mode = app.mode;
  $('mode-badge').textContent = app.mode === 'local' ? 'local' : 'stateless';
  $('mode-badge').title = app.mode === 'local'
    ? 'Local mode: the server keeps your llm.json'
    : 'Stateless mode: your llm.json stays in this browser';
  try {
    app.info = await api('/api/info');
  } catch (e) {
    if (e.status === 401) {
      showSignin();
      return;
    }
    app.info = {};
  }
  if (app.info.state_file) $('mode-badge').title += ` (${app.info.state_file})`;
  try {
    app.providers = await api('/api/providers');
  } catch (e) {
    if (e.status === 401) {
      showSignin();
      return;
    }
    app.providers = { default: '', providers: [] };
  }
  prefsCookie = typeof app.info.prefs_cookie === 'string' && /^wo_prefs_\d+$/.test(app.info.prefs_cookie)
    ? app.info.prefs_cookie
    : null;
  app.prefs = offeredPrefs(readPrefs());
  reportDroppedPrefs();
  try {
    await backend().load();
  } catch (e) {
    if (e.status === 401) {
      showSignin();
      return;
    }
    notify(`Could not load the state: ${e.message}`, 'error');
    return;
  }
  fillSettings();
  renderModelBadge();
  fillPicker();
  enableUi();
  restoreDraft();
  const interrupted = await keepInterruptedTurn();
  // The most recent conversation, on its newest branch (or the turn that
  // was interrupted, now kept).
  app.leaf = interrupted ? leafBelow(interrupted) : latestId();
  syncSidebarToggle();
  renderAll();
  const last = $('messages').lastElementChild;
  if (last) last.scrollIntoView({ block: 'end' });
  document.body.dataset.ready = 'true';
  checkProviders();
  // The open time the browser benchmark reads (WO_BROWSER_BENCH=1).
  performance.mark('wo-ready');
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
else start();

// For the browser suite (tests/browser/run.mjs), which imports this module
// again (the same instance: nothing above runs twice) and holds these to
// the Rust golden vectors. Exports are not globals: nothing leaks into the
// page.
export {
  admitState, applyStatePatch, canonicalStateText, codeTokens, deleteTruthIn, editTruthIn,
  listConversations, mergeStates, messageId, normalizeState, renameMessageIn, textToXhtml, truthId,
};
