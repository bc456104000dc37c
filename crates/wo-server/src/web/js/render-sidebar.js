// The sidebar renderer: the conversation list (local: the server's list,
// paged, filtered on the server; stateless: listed here), the header's
// Rename and Archive of the shown conversation.
import { $, clearAlert, h, notify } from './dom.js';
import { formatTime, listConversations } from './format.js';
import { buildTree, currentRoot, isArchived } from './tree.js';
import { app } from './state.js';
import { local } from './backend-local.js';
import { backend } from './backend.js';
import { openConversation, openRoot, renderAll, reportError, run, startNewChat } from './view.js';

const FILTER_DELAY_MS = 150; // typing in the conversation filter asks the server once it pauses

/** Runs of whitespace made one space, trimmed: the filter as highlighted. */
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

export {
  filterOnServer, renderConversations, startRename, syncRenameButton, toggleArchive,
};
