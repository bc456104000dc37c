// What is shown and the actions around it: `renderAll`, `run` (an action
// with its success or error line), opening conversations, New chat, branch
// points, search and jumping to a hit, import, panels, the drawer and the
// phone menu, sign-in.
import { $, clearAlert, h, notify } from './dom.js';
import { formatTime } from './format.js';
import { latestId, leafBelow } from './tree.js';
import { app, cancelBranchPoint, showBranch, showBranchPoint, showNewChat } from './state.js';
import { local } from './backend-local.js';
import { backend } from './backend.js';
import { renderMessages, renderReplyTo } from './render-messages.js';
import { renderConversations, syncRenameButton } from './render-sidebar.js';
import { jumpToTruth, renderContext, renderTruth } from './render-memory.js';

function renderAll() {
  renderMessages();
  syncRenameButton();
  renderConversations();
  renderTruth();
  renderContext();
  renderReplyTo();
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
  showBranch(leafBelow(id));
  renderAll();
  if (isNarrow()) closeDrawer(false);
  const last = $('messages').lastElementChild;
  if (last) last.scrollIntoView({ block: 'end' });
}

function startNewChat() {
  if (app.streaming) return;
  showNewChat();
  renderAll();
  if (isNarrow()) closeDrawer(false);
  $('composer-input').focus();
}

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
  showBranchPoint(id);
  renderAll();
  $('composer-input').focus();
}

function cancelBranch() {
  if (!app.branchFrom) return;
  cancelBranchPoint();
  renderAll();
  $('composer-input').focus();
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
  showBranch(leafBelow(id), id);
  renderAll();
  const el = document.getElementById(`msg-${id}`);
  if (el) {
    el.classList.add('highlight');
    el.scrollIntoView({ block: 'center' });
    el.querySelector('button')?.focus();
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
    showBranch(latestId());
    return msg;
  });
}

function openPanel(id) {
  for (const p of document.querySelectorAll('.panel')) p.hidden = p.id !== id;
  for (const b of document.querySelectorAll('.panel-toggle')) b.setAttribute('aria-expanded', String(b.getAttribute('aria-controls') === id));
  document.body.classList.add('panel-open');
  closeMore();
  if (isNarrow()) {
    closeMenu();
    document.body.classList.remove('drawer-open');
    syncSidebarToggle();
  }
  syncScrim();
  const heading = $(id).querySelector('h2');
  // The panel sticks below the header: focusing its title must not scroll
  // the page (scrolling would put the title under the header).
  if (heading) heading.focus({ preventScroll: true });
}

function closePanel(id) {
  $(id).hidden = true;
  const toggle = document.querySelector(`.panel-toggle[aria-controls="${id}"]`);
  if (toggle) {
    toggle.setAttribute('aria-expanded', 'false');
    // On phones the toggle sits in the closed menu: focus what opens it.
    // A toggle in the closed "More" menu: focus what opens that.
    if (isNarrow()) $('menu-toggle').focus();
    else if (isShown(toggle)) toggle.focus();
    else $('more-toggle').focus();
  }
  if (![...document.querySelectorAll('.panel')].some((p) => !p.hidden)) document.body.classList.remove('panel-open');
  syncScrim();
}

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

/** The header's overflow menu ("More": the tools that do not fit its row on a narrower desktop). */
function toggleMore(open = !document.body.classList.contains('more-open')) {
  document.body.classList.toggle('more-open', open);
  $('more-toggle').setAttribute('aria-expanded', String(open));
  if (open) $('more-tools').querySelector('button:not([disabled])')?.focus();
}

function closeMore() {
  if (document.body.classList.contains('more-open')) toggleMore(false);
}

/** Whether `el` is shown (not inside a closed menu). */
const isShown = (el) => !!el && el.getClientRects().length > 0;

/** Focuses the search box (opening the phone menu first). */
function focusSearch() {
  if (isNarrow() && !document.body.classList.contains('menu-open')) $('menu-toggle').click();
  const input = $('search-input');
  input.focus();
  input.select();
}

/** The keyboard shortcuts, listed in a dialog. */
function showShortcuts() {
  closeMore();
  closeMenu();
  const dialog = $('shortcuts-dialog');
  if (!dialog.open) dialog.showModal();
}

/** On phones a dimmed backdrop sits under the drawer or a panel; a tap on it closes them. */
function syncScrim() {
  const over = isNarrow() && (document.body.classList.contains('drawer-open') || document.body.classList.contains('panel-open'));
  $('scrim').hidden = !over;
}

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

export {
  branchFrom, cancelBranch, closeDrawer, closeMenu, closeMore, closePanel, doSearch, enableUi, focusSearch,
  importFile, isNarrow, NARROW, openConversation, openDrawer, openPanel, openRoot, renderAll, reportError,
  run, showShortcuts, showSignin, sidebarShown, startNewChat, syncSidebarToggle, toggleMore,
};
