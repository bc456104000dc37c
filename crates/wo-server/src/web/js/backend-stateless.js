// Stateless mode's backend (`wo serve --stateless`): llm.json lives in this
// browser (IndexedDB) and the server keeps nothing. A turn sends the
// context, the memory chosen here and a window of the branch, and its
// answer's `state_patch` is applied here through wo-format (format.js);
// the turn streaming now is kept in localStorage so Stop, a closed tab or a
// lost connection cannot lose it.
import { h, notify } from './dom.js';
import { escText } from './xhtml.js';
import { api, ApiError } from './http.js';
import { admitState, applyStatePatch, bm25Scores, canonicalStateText, compareTimestamps, deleteTruthIn, editTruthIn, exportName, isObject, mergeStates, newState, normalizeState, nowStamp, renameMessageIn, requireRust, STAMP_RE, truthId, userInputToXhtml } from './format.js';
import { branchTo } from './tree.js';
import { addMemoryRecord, addTruthEntry, app, applyUndo, setContext, setDocument, stampDocument } from './state.js';
import { browserChunks, mergeSummary } from './backend-local.js';

const WINDOW_MESSAGES = 20; // recent messages sent with a stateless turn
const WINDOW_BYTES = 200_000;
const REQUEST_MARGIN_BYTES = 256 << 10; // a turn's request besides its window, memory, context and question
const DRAFT_MESSAGES = 200; // most messages sent to draft a context update

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

const stateless = {
  async load() {
    let st = null;
    try {
      st = await idbGet();
    } catch (e) {
      notify(`Could not read this browser's saved state (${e.message}); starting empty.`, 'error');
    }
    requireRust();
    let loaded = null;
    if (st) {
      try {
        loaded = normalizeState(st);
      } catch (e) {
        // Never lost: the unreadable copy stays in IndexedDB under its own key.
        const key = `${IDB_KEY}.bak-${nowStamp()}`;
        await idbPut(st, key);
        notify(`This browser's saved state is not a valid llm.json (${e.message}); it is kept in IndexedDB as ${key} and a new one is started.`, 'error');
      }
    }
    if (!loaded) {
      loaded = newState(nowStamp());
      if (st) await idbPut(loaded); // the backup above is made once
    }
    setDocument(loaded);
  },
  async save() {
    stampDocument(nowStamp());
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
      truth: params.rag === false ? [] : selectTruth(message, st.context || ''),
      window: windowMsgs,
      params,
    };
    // The file's retrieval prefs: the server picks the memory by them, as a
    // local server does from the same file.
    if (isObject(st.truth?.retrieval_prefs)) body.retrieval_prefs = st.truth.retrieval_prefs;
    if (question) body.regenerate = true;
    else if (newConversation && !parent) body.new_conversation = true;
    if (app.prefs.username) body.username = app.prefs.username;
    const chunks = await browserChunks(message, params);
    if (chunks.length) body.chunks = chunks;
    return body;
  },
  async afterDone(done) {
    // The record names the question's id before the state is saved: a page
    // closed between the save and the record's removal then finds the turn
    // already saved on its next load, instead of keeping it a second time.
    const pending = readPendingTurn();
    if (pending && typeof done?.user_message_id === 'string') savePendingTurn({ ...pending, saved_as: done.user_message_id });
    if (done && isObject(done.state_patch)) {
      setDocument(normalizeState(applyStatePatch(app.state, done.state_patch)));
    }
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
   * Returns null for a finished turn already saved (nothing kept).
   */
  async keepStopped(turn) {
    // A finished turn whose record outlived its save (the page closed in
    // between): already in the state, nothing to keep.
    if (typeof turn.saved_as === 'string' && app.state.messages.some((m) => m.id === turn.saved_as)) {
      savePendingTurn(null);
      return null;
    }
    savePendingTurn(turn);
    const kept = await api('/api/stateless/stopped', { method: 'POST', body: stoppedBody(turn) });
    setDocument(normalizeState(applyStatePatch(app.state, kept.state_patch)));
    await idbPut(app.state);
    savePendingTurn(null);
    return kept.assistant_message_id;
  },
  async afterMemory(m) {
    if (isObject(m.state_patch)) {
      setDocument(normalizeState(applyStatePatch(app.state, m.state_patch)));
    }
    if (isObject(m.record)) {
      addMemoryRecord(m.record);
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
    addTruthEntry(entry);
    await stateless.save();
  },
  async editTruth(id, changes) {
    const edit = {};
    if ('title' in changes) edit.title = String(changes.title).trim();
    if ('content' in changes) edit.content = (await markdownToXhtml(changes.content)) || '<p></p>';
    if ('certainty' in changes) edit.certainty = changes.certainty;
    const edited = editTruthIn(app.state, id, edit, nowStamp());
    if (!edited) throw new ApiError(404, 'not_found', 'That memory entry no longer exists.');
    setDocument(edited);
    await stateless.save();
  },
  async deleteTruth(id) {
    setDocument(deleteTruthIn(app.state, id, nowStamp()) ?? app.state);
    await stateless.save();
  },
  async renameMessage(id, title) {
    setDocument(renameMessageIn(app.state, id, title, nowStamp()));
    await stateless.save();
  },
  async saveContext(text) {
    setContext(await markdownToXhtml(text));
    await stateless.save();
  },
  async draftContext(params) {
    const since = lastContextUpdate();
    let msgs = app.state.messages.filter((m) => sendableMessage(m) && (!since || compareTimestamps(m.timestamp, since) > 0));
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
    setContext(draft.draft, entry);
    await stateless.save();
  },
  /** Messages and truth entries scored by BM25 (wo_text, in Rust), as the local server's search scores them. */
  async search(q) {
    const top = (items, docs, row) => {
      const scores = bm25Scores(docs, q);
      return items.map((x, i) => [scores[i], x]).filter(([score]) => score > 0)
        .sort((a, b) => b[0] - a[0]).slice(0, 20).map(([score, x]) => row(x, score));
    };
    const messages = top(app.state.messages, app.state.messages.map((m) => [m.title ?? '', m.content ?? '']),
      (m, score) => ({ id: m.id, title: m.title, username: m.username, timestamp: m.timestamp, score }));
    const truth = top(app.state.truth.trust, app.state.truth.trust.map((t) => [t.title ?? '', t.content ?? '']),
      (t, score) => ({ id: t.id, title: t.title, certainty: t.certainty, score }));
    return { messages, truth, chunks: [] };
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
      setDocument(state);
      await idbPut(app.state);
      return `Merged: ${mergeSummary(report)}${cleaned}.`;
    }
    setDocument(incoming);
    await idbPut(app.state);
    return `Imported: this browser's state was replaced (${incoming.messages.length} messages, ${incoming.truth.trust.length} memory entries)${cleaned}.`;
  },
};

function lastContextUpdate() {
  let since = '';
  for (const t of app.state.truth.trust) {
    if (Array.isArray(t.tags) && t.tags.includes('context-update') && STAMP_RE.test(t.timestamp)
      && (!since || compareTimestamps(t.timestamp, since) > 0)) since = t.timestamp;
  }
  return since;
}

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

/**
 * The memory sent with a stateless turn: every entry the server can read,
 * so that the server's engine ranks them exactly as a local server ranks
 * its file (wo-engine's retrieval: BM25, the relevance floor, certainty and
 * recency). Only a memory larger than one request may carry (the server's
 * `limits` in /api/info) is cut, keeping the entries that BM25 (wo_text, in
 * Rust) scores highest for the question.
 */
function selectTruth(message, context) {
  const entries = app.state.truth.trust.filter(sendableTruth);
  const limits = isObject(app.info.limits) ? app.info.limits : {};
  const maxEntries = Number.isInteger(limits.truth_entries) ? limits.truth_entries : 1000;
  const bodyBytes = Number.isInteger(limits.body_bytes) ? limits.body_bytes : 4 << 20;
  const maxBytes = bodyBytes - WINDOW_BYTES - REQUEST_MARGIN_BYTES - byteLength(context) - byteLength(message);
  const sizes = entries.map((t) => byteLength(JSON.stringify(t)));
  if (entries.length <= maxEntries && sizes.reduce((a, b) => a + b, 0) <= maxBytes) return entries;
  const scores = bm25Scores(entries.map((t) => [t.title, t.content]), message);
  const order = entries.map((_, i) => i).sort((a, b) => scores[b] - scores[a] || a - b);
  const out = [];
  let bytes = 0;
  for (const i of order) {
    if (out.length >= maxEntries) break;
    if (bytes + sizes[i] > maxBytes) continue;
    bytes += sizes[i];
    out.push(entries[i]);
  }
  return out;
}

const utf8 = new TextEncoder();
const byteLength = (text) => utf8.encode(String(text)).length;

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

/** `POST /api/stateless/stopped`'s body for a turn record: the chat body as sent, the answer so far, when, its sources and context record. */
function stoppedBody(turn) {
  const chat = { message: turn.message, params: isObject(turn.params) ? turn.params : {} };
  if (turn.parent) chat.parent = turn.parent;
  else if (turn.new_conversation) chat.new_conversation = true;
  if (turn.username) chat.username = turn.username;
  const body = { turn: chat, answer: String(turn.answer || ''), sent_at: turn.sent_at, sources: Array.isArray(turn.sources) ? turn.sources : [] };
  if (isObject(turn.context_used)) body.context_used = turn.context_used;
  return body;
}

function readPendingTurn() {
  try {
    const turn = JSON.parse(localStorage.getItem(PENDING_KEY) || 'null');
    return isObject(turn) && typeof turn.message === 'string' && typeof turn.sent_at === 'string' ? turn : null;
  } catch {
    return null;
  }
}

export {
  readPendingTurn, stateless,
};
