// The messages renderer: the shown branch as a windowed list (the latest
// WINDOW messages, earlier ones as the reader scrolls up), each message with
// its actions (Copy, Regenerate, Edit & resend, Branch, ‹ i/n ›), its
// "Context used" panel (`contextDetails`: the answer's `context_used` record,
// the same live and after a reload; older answers: their `sources`), what memory remembered with Undo, and the
// reply-to bar.


// The message list is windowed: a conversation of 10,000 messages renders
// its latest WINDOW (and whatever was sent since), and earlier ones a step
// at a time as the reader scrolls up to the "earlier messages" row, so
// opening a large file costs the same as opening a small one.
import { $, copyText, h, iconButton } from './dom.js';
import { messageMarkdown, plainText, renderXhtml } from './xhtml.js';
import { formatTime, isObject, roleOf } from './format.js';
import { branchTo, buildTree, isStopped, latestId, leafBelow } from './tree.js';
import { app, fallBackTo, setWindowFrom, showBranch, takeReveal } from './state.js';
import { backend } from './backend.js';
import { highlightCode } from './highlight.js';
import { editAndResend, regenerate } from './turn.js';
import { branchFrom, renderAll, run } from './view.js';

const WINDOW = 40;

/** Messages added per step while scrolling up: small, so no frame waits long. */
const SCROLL_STEP = 12;

/** The branch the list was last rendered from (showEarlier re-uses it rather than walk 10,000 messages again). */
let renderedBranch = { leaf: null, messages: null, count: -1, branch: [], tree: null };

/** Which part of `branch` to render: from the window's first message (kept across re-renders), else the last WINDOW; `app.reveal` pulls an earlier message in. */
function windowStart(branch) {
  let start = app.windowFrom ? branch.findIndex((m) => m.id === app.windowFrom) : -1;
  if (start < 0) start = Math.max(0, branch.length - WINDOW);
  const reveal = takeReveal();
  if (reveal) {
    const i = branch.findIndex((m) => m.id === reveal);
    if (i >= 0 && i < start) start = Math.max(0, i - 2);
  }
  setWindowFrom(branch.length ? branch[start].id : null);
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
  setWindowFrom(branch[from].id);
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
  if (!app.newChat && (!app.leaf || !tree.byId.has(app.leaf))) fallBackTo(latestId());
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
    const go = (j) => () => { showBranch(leafBelow(siblings[j])); renderAll(); };
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

function contextDetails(m) {
  // The record the answer keeps (the same one the live `context` event
  // carried), so the panel reads the same live and after a reload.
  const report = app.reports.get(m.id);
  const used = isObject(m.context_used) ? m.context_used : report?.context_used;
  if (isObject(used) && Array.isArray(used.sent)) return usedDetails(used);
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
        const label = t ? `memory: ${t.title}` : x ? `message: ${x.title}` : String(id).startsWith('t_') ? 'memory (no longer present)' : String(id).startsWith('m_') ? 'message' : 'file chunk';
        return h('li', {}, h('code', {}, String(id)), ' ', label);
      }))
      : h('p', {}, 'Only the context and the conversation were sent.'));
}

/** A part of a `context_used` record as a person reads it: its label, else the title of the message or memory entry its id names, else the id. */
function usedName(p, titles) {
  if (typeof p.label === 'string') return p.label;
  if (typeof p.id === 'string') return titles.get(p.id) ?? p.id;
  if (typeof p.count === 'number') return `${p.count} turn${p.count === 1 ? '' : 's'} of the conversation`;
  return '';
}

/** The "Context used" panel from an answer's `context_used` record (wo_format::ContextUsed): each part sent with its kind, name, tokens and relevance; each group left out with its reason and what it held. */
function usedDetails(u) {
  const titles = new Map();
  for (const t of app.state.truth.trust) titles.set(t.id, t.title);
  for (const x of app.state.messages) titles.set(x.id, x.title);
  const sent = u.sent.filter(isObject);
  const left = Array.isArray(u.left_out) ? u.left_out.filter(isObject) : [];
  const more = Number.isInteger(u.left_out_more) ? u.left_out_more : 0;
  const leftCount = left.reduce((n, p) => n + (Number.isInteger(p.count) ? p.count : 1), 0) + more;
  const tokens = Number.isInteger(u.tokens) ? `, ${u.tokens}${Number.isInteger(u.budget) ? '/' + u.budget : ''} tokens` : '';
  return h('details', { class: 'context-used', 'data-testid': 'context-used' },
    h('summary', {}, `Context used (${sent.length} parts sent, ${leftCount} left out${tokens})`),
    h('h4', {}, 'Sent'),
    h('ul', { 'data-testid': 'context-included' }, sent.map((p) =>
      h('li', {}, h('span', { class: 'tag' }, String(p.kind ?? '')), ' ', usedName(p, titles),
        typeof p.score === 'number' ? ` — relevance ${p.score.toFixed(3)}` : '',
        Number.isInteger(p.tokens) ? ` (${p.tokens} tokens)` : ''))),
    left.length ? h('h4', {}, 'Left out') : null,
    left.length ? h('ul', { 'data-testid': 'context-dropped' }, left.map((p) => {
      const names = [...(Array.isArray(p.ids) ? p.ids.map((id) => titles.get(id) ?? id) : []), ...(Array.isArray(p.labels) ? p.labels : [])];
      const n = Number.isInteger(p.count) ? p.count : 1;
      return h('li', {}, h('span', { class: 'tag' }, String(p.kind ?? '')), ` ${n} — ${String(p.reason ?? '')}`,
        names.length ? h('ul', {}, names.map((x) => h('li', {}, String(x)))) : null);
    })) : null,
    more ? h('p', {}, `… and ${more} more left out`) : null);
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

export {
  renderMessages, renderReplyTo, showEarlierIfNear,
};
