// The file format's rules, run from Rust: wo-format and wo-wire compiled to
// WebAssembly (crates/wo-wasm, built by scripts/build-wasm.sh, served from
// wasm/). Each function here is one call into that module — the same
// functions `wo` runs, so ids, ordering, the canonical export, merges, state
// patches, truth edits and renames cannot disagree with the CLI and the
// server. States cross as JSON text; a state handed back is wo-format's
// canonical text, parsed. The module is loaded once, before anything else
// runs. Stateless mode cannot work without it, and says so (`requireRust`);
// local mode needs it to order, link and list what the server sent.

import initRust, * as rust from '../wasm/wo_wasm.js';
import { plainText } from './xhtml.js';
import { ApiError } from './http.js';

let rustProblem = null;
try {
  await initRust();
} catch (e) {
  rustProblem = e;
}

/** What the user typed (text, or XHTML when it starts with a tag) → safe canonical XHTML. */
function userInputToXhtml(input) {
  const s = String(input).trim();
  if (!/^<[a-zA-Z!]/.test(s)) return textToXhtml(s);
  // wo-format's sanitiser, the one the server and `wo` use.
  return callRust(rust.sanitizeHtml, s) || textToXhtml(plainText(s));
}

/** Whole-second UTC `YYYY-MM-DDTHH:MM:SSZ`. */
function nowStamp() {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
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

/** A new, empty state dated `now`, with the SPEC's defaults (`State::new`). */
function newState(now) {
  return JSON.parse(callRust(rust.newState, String(now)));
}

/** wo-format's order of two timestamps (`Timestamp`: by instant, fractions included, then text): -1, 0 or 1. */
const compareTimestamps = (a, b) => callRust(rust.compareTimestamps, String(a), String(b));

/** Sorts `messages` in place in the transcript's order (`Message::order_key`: timestamp, then id by UTF-8 bytes). */
function sortMessages(messages) {
  const order = callRust(rust.messageOrder, JSON.stringify(messages.map((m) => [m.timestamp, m.id])));
  const sorted = Array.from(order, (i) => messages[i]);
  for (let i = 0; i < sorted.length; i++) messages[i] = sorted[i];
  return messages;
}

/**
 * Each message's parent by the rule `State::branch` follows (wo-format):
 * a Map id → parent id or null. `whole`: the messages are the whole file
 * (stateless mode); otherwise (local mode's loaded pages) a parent not
 * loaded makes a root.
 */
function messageParents(messages, whole) {
  const links = messages.map((m) => ({ id: m.id, timestamp: m.timestamp, parent: m.parent, new_conversation: m.new_conversation }));
  return new Map(JSON.parse(callRust(rust.messageParents, JSON.stringify(links), !!whole)));
}

/** A message's role, inferred where the file has none (`Message::effective_role`). */
function roleOf(m) {
  const key = `${m.role ?? ''}\u0000${m.username ?? ''}\u0000${m.provider ?? ''}\u0000${m.model ?? ''}`;
  let role = roles.get(key);
  if (role === undefined) {
    try {
      role = callRust(rust.messageRole, JSON.stringify({ role: m.role, username: m.username, provider: m.provider, model: m.model }));
    } catch {
      role = typeof m.role === 'string' ? m.role : 'user'; // a field wo-format refuses: shown as written
    }
    if (roles.size > 10_000) roles.clear();
    roles.set(key, role);
  }
  return role;
}
const roles = new Map();

/**
 * The conversations of `messages` (a whole file's) as a list shows them
 * (`wo_format::conversation::listed`, the server's GET /api/conversations):
 * newest first, titled, with a filter only those whose title or a message's
 * text holds it, with a snippet; archived ones left out. Rows: {root,
 * latest, title, updated, count, snippet}.
 */
function listConversations(messages, filter) {
  return JSON.parse(callRust(rust.listConversations, JSON.stringify(messages), String(filter ?? '')));
}

/** Truth entries newest first by when each last changed (`TruthEntry::effective_update`): [[id, updated], …]. */
function truthByUpdate(entries) {
  return JSON.parse(callRust(rust.truthByUpdate, JSON.stringify(entries)));
}

/** BM25 scores (`wo_text::bm25`, what the server's search and retrieval use) of `docs` ([text, XHTML] pairs) for `query`. */
function bm25Scores(docs, query) {
  return Array.from(callRust(rust.bm25Scores, JSON.stringify(docs), String(query)));
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

const STAMP_RE = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

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

export {
  admitState, applyStatePatch, bm25Scores, canonicalStateText, compareTimestamps, deleteTruthIn, editTruthIn,
  exportName, formatTime, isObject, listConversations, mergeStates, messageId, messageParents, newState,
  normalizeState, nowStamp, renameMessageIn, requireRust, roleOf, sortMessages, STAMP_RE, textToXhtml,
  truthByUpdate, truthId, userInputToXhtml,
};
