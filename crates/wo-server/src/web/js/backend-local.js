// Local mode's backend: `wo serve` owns llm.json, and every read and change
// is a call to its JSON API (turns stream from POST /api/chat). The page
// holds the latest page of messages, the conversations opened, and the
// server's conversation list.
import { h } from './dom.js';
import { plainText } from './xhtml.js';
import { api, ApiError } from './http.js';
import { buildTree, currentRoot, isStopped } from './tree.js';
import { addLoadedMessages, app, setConversationList, setLocalPage } from './state.js';

const PAGE = 1000; // messages per /api/state page
const CONVERSATION_MESSAGES = 5000; // messages of one conversation loaded when it is opened (the server's page maximum)
const CONVERSATIONS_PAGE = 200; // conversations per /api/conversations page

/** For local mode: the server reads input as Markdown (HTML included) and sanitises it. */
function userInputForServer(input) {
  return String(input).trim();
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

const local = {
  /**
   * The latest PAGE messages, the conversation on screen when its messages
   * are older than that (opened from the list), and the first page of the
   * conversation list — every conversation of the file, from the server.
   */
  async load() {
    const shown = app.state && !app.newChat && app.leaf ? currentRoot(buildTree()) : null;
    const [st] = await Promise.all([api(`/api/state?limit=${PAGE}`), local.listConversations()]);
    setLocalPage(st);
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
    addLoadedMessages(fresh);
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
    setConversationList({ q, total: Number(r.total) || 0, items: offset ? prev.items.concat(items) : items });
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

export {
  browserChunks, local, mergeSummary,
};
