// Start and wire: reads /api/health, /api/info and /api/providers, picks
// the backend for the server's mode, loads the state, renders, and attaches
// every event handler; the offline shell (PWA) of a stateless server.
import { $, notify } from './dom.js';
import { api, ApiError } from './http.js';
import { latestId, leafBelow } from './tree.js';
import { app, setFilter, setMode, setPrefs, setProviders, setServerInfo, setShowArchived, showBranch } from './state.js';
import { offeredPrefs, readPrefs, reportDroppedPrefs, usePrefsCookie } from './prefs.js';
import { stateless } from './backend-stateless.js';
import { backend, keepInterruptedTurn } from './backend.js';
import { filterOnServer, renderConversations, startRename, toggleArchive } from './render-sidebar.js';
import { renderContext, renderTruth, updateContext } from './render-memory.js';
import { checkProviders, fillModels, fillPicker, fillSettings, pickProvider, readSettingsForm, renderModelBadge, savePrefs } from './render-settings.js';
import { jumpToLatest, onScroll, restoreDraft, saveDraft, send, stop } from './turn.js';
import { cancelBranch, closeDrawer, closeMenu, closeMore, closePanel, doSearch, enableUi, focusSearch, importFile, isNarrow, NARROW, openDrawer, openPanel, renderAll, run, showShortcuts, showSignin, sidebarShown, startNewChat, syncSidebarToggle, toggleMore } from './view.js';

/** Whether the keyboard's focus is in a field that takes text (where `/` and `?` are typed, not shortcuts). */
function typing(e) {
  const t = e.target;
  return t instanceof HTMLElement && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
}

/**
 * The keyboard shortcuts (listed in the shortcuts dialog): Ctrl/⌘+Shift+O
 * new chat, `/` or Ctrl/⌘+K search, `?` this list. Escape (stop, close) is
 * handled by its own listeners. True when `e` was one.
 */
function shortcut(e) {
  if (!app.state || !$('signin').hidden) return false;
  const mod = e.ctrlKey || e.metaKey;
  if (mod && e.shiftKey && !e.altKey && e.key.toLowerCase() === 'o') {
    startNewChat();
    return true;
  }
  if ((mod && !e.shiftKey && !e.altKey && e.key.toLowerCase() === 'k') || (e.key === '/' && !mod && !e.altKey && !typing(e))) {
    focusSearch();
    return true;
  }
  if (e.key === '?' && !mod && !e.altKey && !typing(e)) {
    showShortcuts();
    return true;
  }
  return false;
}

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
    if (shortcut(e)) {
      e.preventDefault();
      return;
    }
    if (e.key !== 'Escape') return;
    if (app.streaming) stop();
    else if (document.body.classList.contains('more-open')) {
      closeMore();
      $('more-toggle').focus();
    } else if (document.body.classList.contains('menu-open')) {
      closeMenu();
      $('menu-toggle').focus();
    } else if (app.branchFrom && !$('context-dialog').open) cancelBranch();
  });
  $('reply-cancel').addEventListener('click', cancelBranch);
  $('new-chat').addEventListener('click', startNewChat);
  $('conversation-rename').addEventListener('click', startRename);
  $('conversation-archive').addEventListener('click', toggleArchive);
  $('show-archived').addEventListener('change', (e) => {
    setShowArchived(e.target.checked);
    filterOnServer();
  });
  $('composer-provider').addEventListener('change', (e) => pickProvider(e.target.value));
  for (const f of ['truth-filter-kind', 'truth-filter-status', 'truth-filter-tag']) $(f).addEventListener('input', renderTruth);
  $('conversation-filter').addEventListener('input', (e) => {
    setFilter(e.target.value);
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
  $('more-toggle').addEventListener('click', () => toggleMore());
  // A tool chosen from "More", or a click elsewhere, closes it.
  $('more-tools').addEventListener('click', (e) => { if (e.target.closest('button')) closeMore(); });
  document.addEventListener('click', (e) => {
    if (!e.target.closest('#more-toggle, #more-tools')) closeMore();
  });
  $('shortcuts-button').addEventListener('click', showShortcuts);
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
  setMode('stateless', true);
  document.body.dataset.mode = 'stateless';
  document.body.dataset.offline = 'true';
  $('mode-badge').textContent = 'offline';
  $('mode-badge').title = 'Offline: your llm.json is in this browser; answering needs the server';
  setServerInfo({});
  setProviders({ default: '', providers: [] });
  setPrefs(offeredPrefs(readPrefs()));
  reportDroppedPrefs();
  await stateless.load();
  fillSettings();
  renderModelBadge();
  enableUi();
  restoreDraft();
  showBranch(latestId());
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
  setMode(health.mode === 'stateless' ? 'stateless' : 'local');
  syncOfflineShell(app.mode);
  document.body.dataset.mode = app.mode;
  $('mode-badge').textContent = app.mode === 'local' ? 'local' : 'stateless';
  $('mode-badge').title = app.mode === 'local'
    ? 'Local mode: the server keeps your llm.json'
    : 'Stateless mode: your llm.json stays in this browser';
  try {
    setServerInfo(await api('/api/info'));
  } catch (e) {
    if (e.status === 401) {
      showSignin();
      return;
    }
    setServerInfo({});
  }
  if (app.info.state_file) $('mode-badge').title += ` (${app.info.state_file})`;
  try {
    setProviders(await api('/api/providers'));
  } catch (e) {
    if (e.status === 401) {
      showSignin();
      return;
    }
    setProviders({ default: '', providers: [] });
  }
  usePrefsCookie(app.info.prefs_cookie);
  setPrefs(offeredPrefs(readPrefs()));
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
  showBranch(interrupted ? leafBelow(interrupted) : latestId());
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
