// The page's state, and the only module that changes it. Every other
// module reads `app` (a read-only view: assigning one of its fields throws)
// and changes it by calling one of the functions below, each named for what
// happens to the page — so a reader looking for where the shown branch, the
// loaded file or a turn in flight changes finds it here.
import { isObject, sortMessages } from './format.js';

const store = {
  follow: true, // the page keeps the newest message in view (see turn.js onScroll)
  mode: null, // 'local' | 'stateless'
  info: {},
  providers: { default: '', providers: [] },
  prefs: {},
  state: null, // the llm.json loaded: {context, truth:{trust, deleted, retrieval_prefs}, messages, …}
  offset: 0, // local: index of the first loaded message
  total: 0,
  leaf: null, // id of the last message of the displayed branch
  branchFrom: null, // {id, previousLeaf, edit} while "branch from here" or "edit" is active
  newChat: false, // "New chat": the next message starts a conversation (no parent)
  previousLeaf: null, // what New chat left, for Escape/Cancel
  filter: '', // the conversation list's filter
  showArchived: false, // local: the list shows archived conversations
  // local: the server's list of every conversation (GET /api/conversations),
  // {q, total, items: [{root, title, created, updated, latest, messages, snippet}]}
  conversationList: null,
  answerErrors: new Map(), // answer id → why regenerating it failed (shown under it, once)
  reports: new Map(), // assistant id → ContextReport of this session
  memoryPending: new Set(), // answer ids whose memory step is running
  memoryNotes: new Map(), // answer id → why nothing was remembered
  streaming: null, // the turn in flight: {controller, turn, unsent, started}
  offline: false, // started from the offline shell: nothing can be sent
  windowFrom: null, // id of the first message rendered (the list is windowed: see render-messages.js WINDOW)
  reveal: null, // an id the next render must include (a search hit, a regenerated answer)
  unreachableShown: new Set(), // providers whose "cannot answer" was said (once each)
  followedY: 0, // where the page last scrolled to follow an answer
};

/** The page's state, read-only: change it through this module's functions. */
const app = new Proxy(store, {
  set(_, key) {
    throw new TypeError(`app.${String(key)} changes only through state.js`);
  },
  deleteProperty(_, key) {
    throw new TypeError(`app.${String(key)} changes only through state.js`);
  },
});

// ------------------------------------------------------------ the server

function setMode(mode, offline = false) {
  store.mode = mode;
  store.offline = offline;
}

function setServerInfo(info) {
  store.info = info;
}

function setProviders(providers) {
  store.providers = providers;
}

function setPrefs(prefs) {
  store.prefs = prefs;
}

/** Says once per provider and page that it cannot answer: false when said already. */
function firstUnreachable(name) {
  if (store.unreachableShown.has(name)) return false;
  store.unreachableShown.add(name);
  return true;
}

// ------------------------------------------------------------ the file

/** A loaded state made readable: the fields the page reads present, messages in wo-format's order. */
function normalizeLoaded(st) {
  if (!Array.isArray(st.messages)) st.messages = [];
  if (!isObject(st.truth)) st.truth = {};
  if (!Array.isArray(st.truth.trust)) st.truth.trust = [];
  if (typeof st.context !== 'string') st.context = '';
  sortMessages(st.messages);
}

/** Local mode: the server's latest page of the file. */
function setLocalPage(st) {
  store.offset = st.offset ?? 0;
  store.total = st.total_messages ?? (st.messages || []).length;
  store.state = st;
  normalizeLoaded(st);
}

/** Local mode: messages read besides the page (an older conversation opened), kept in order. */
function addLoadedMessages(messages) {
  if (!messages.length) return;
  store.state.messages = store.state.messages.concat(messages);
  sortMessages(store.state.messages);
}

/** Local mode: the server's conversation list (a first page, or one more appended). */
function setConversationList(list) {
  store.conversationList = list;
}

/** Stateless mode: the whole file, held in this browser (null while it loads). */
function setDocument(st) {
  store.state = st;
  store.offset = 0;
  store.total = st ? st.messages.length : 0;
}

/** Stateless mode: the file's `date` before it is saved. */
function stampDocument(date) {
  store.state.date = date;
  store.total = store.state.messages.length;
}

/** Stateless mode: a truth entry added (once: an entry with its id stays as it is). */
function addTruthEntry(entry) {
  if (!store.state.truth.trust.some((e) => e.id === entry.id)) store.state.truth.trust.push(entry);
}

/** Stateless mode: the context replaced (with, for a reviewed update, the entry that records it). */
function setContext(xhtml, record = null) {
  store.state.context = xhtml;
  if (record) store.state.truth.trust.push(record);
}

/** Stateless mode: what the memory step recorded, appended to the file's `memory_log`. */
function addMemoryRecord(record) {
  if (!Array.isArray(store.state.memory_log)) store.state.memory_log = [];
  store.state.memory_log.push(record);
}

/** Stateless mode: the server's undo of an exchange's memory applied to this browser's state. */
function applyUndo(r) {
  const t = store.state.truth;
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
  if (Array.isArray(r.memory_log)) store.state.memory_log = r.memory_log;
}

// ------------------------------------------------------------ what is shown

/** The branch ending at `leaf` (null: the latest message's), leaving any branch point or new chat; `reveal` must be rendered. */
function showBranch(leaf, reveal = null) {
  store.leaf = leaf;
  store.branchFrom = null;
  store.newChat = false;
  if (reveal) store.reveal = reveal;
}

/** "New chat": nothing shown, the next message starts a conversation. */
function showNewChat() {
  if (!store.newChat) store.previousLeaf = store.leaf;
  store.newChat = true;
  store.branchFrom = null;
  store.leaf = null;
}

/** "Branch from here": the branch up to `id`, the next message a sibling below it. */
function showBranchPoint(id) {
  const previousLeaf = store.branchFrom ? store.branchFrom.previousLeaf : store.leaf;
  store.branchFrom = { id, previousLeaf };
  store.newChat = false;
  store.leaf = id;
}

/** "Edit and resend" of question `question` ({id, title}): the branch up to its parent, the next message beside it. */
function showEditOf(parent, question) {
  const previousLeaf = store.branchFrom ? store.branchFrom.previousLeaf : store.leaf;
  store.branchFrom = { id: parent, previousLeaf, edit: question };
  store.newChat = !parent;
  store.leaf = parent;
}

/** Back from a branch point or an edit to what was shown before. */
function cancelBranchPoint() {
  store.leaf = store.branchFrom.previousLeaf;
  store.newChat = !store.leaf && store.state.messages.length > 0;
  store.branchFrom = null;
}

/** Regenerating: the conversation up to where the new answer goes (`newChat` for a first question). */
function showUpTo(parent, newChat) {
  store.newChat = newChat;
  store.leaf = parent;
  store.branchFrom = null;
}

/** The latest message's branch, when the one shown is gone (render-messages.js). */
function fallBackTo(leaf) {
  store.leaf = leaf;
}

/** The list's window starts at message `id` (render-messages.js). */
function setWindowFrom(id) {
  store.windowFrom = id;
}

/** The id the next render must include, taken once. */
function takeReveal() {
  const id = store.reveal;
  store.reveal = null;
  return id;
}

function setFilter(filter) {
  store.filter = filter;
}

function setShowArchived(shown) {
  store.showArchived = shown;
}

// ------------------------------------------------------------ the turn in flight

/** A turn starts: `controller` stops it; `unsent` is the question while only the stored draft holds it. */
function beginStreaming(controller, turn, unsent) {
  store.streaming = { controller, turn, unsent, started: false };
}

/** The turn's first event arrived: from now on the turn holds its question. */
function markStreamStarted() {
  if (!store.streaming) return;
  store.streaming.started = true;
  store.streaming.unsent = null;
}

function endStreaming() {
  store.streaming = null;
}

/** Whether the page follows the stream (and where it last scrolled to, following). */
function setFollow(follow, followedY = store.followedY) {
  store.follow = follow;
  store.followedY = followedY;
}

// ------------------------------------------------------------ notes under answers

/** What the context report of the turn that made answer `id` said (this session only). */
function keepReport(id, report) {
  store.reports.set(id, report);
}

/** The memory step runs (true) or ran (false) for answer `id`; false when it was not pending. */
function setMemoryPending(id, pending) {
  if (pending) {
    store.memoryPending.add(id);
    return true;
  }
  return store.memoryPending.delete(id);
}

/** Why nothing was remembered from the exchange answered by `id`. */
function setMemoryNote(id, note) {
  store.memoryNotes.set(id, note);
}

/** Why regenerating answer `id` failed (null: forget it). */
function setAnswerError(id, error) {
  if (error) store.answerErrors.set(id, error);
  else store.answerErrors.delete(id);
}

export {
  addLoadedMessages, addMemoryRecord, addTruthEntry, app, applyUndo, beginStreaming, cancelBranchPoint,
  endStreaming, fallBackTo, firstUnreachable, keepReport, markStreamStarted, setAnswerError, setContext,
  setConversationList, setDocument, setFilter, setFollow, setLocalPage, setMemoryNote, setMemoryPending,
  setMode, setPrefs, setProviders, setServerInfo, setShowArchived, setWindowFrom, showBranch,
  showBranchPoint, showEditOf, showNewChat, showUpTo, stampDocument, takeReveal,
};
