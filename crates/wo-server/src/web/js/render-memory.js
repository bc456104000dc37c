// The memory renderers: the Truth panel (entries with their filters, edit
// and delete), the Efforts panel, and the Context panel with its reviewed
// update (draft → diff dialog → apply).
import { $, clearAlert, h, notify } from './dom.js';
import { renderXhtml, xhtmlToMarkdown } from './xhtml.js';
import { compareTimestamps, formatTime, nowStamp, STAMP_RE, truthByUpdate } from './format.js';
import { app } from './state.js';
import { backend } from './backend.js';
import { chatParams } from './turn.js';
import { openPanel, reportError, run } from './view.js';

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

function jumpToTruth(id) {
  openPanel('panel-truth');
  const el = document.getElementById(`truth-${id}`);
  if (el) {
    el.classList.add('highlight');
    el.scrollIntoView({ block: 'center' });
    setTimeout(() => el.classList.remove('highlight'), 2500);
  }
}

/**
 * Where an entry stands: `superseded` (another entry replaces it),
 * `archived` (its `expires` instant has passed: out of retrieval, never
 * deleted), `resolved` (a resolved effort), else `open`.
 */
function truthStatus(t, supersededIds, now = nowStamp()) {
  if (supersededIds.has(t.id)) return 'superseded';
  if (typeof t.expires === 'string' && STAMP_RE.test(t.expires) && compareTimestamps(t.expires, now) <= 0) return 'archived';
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
  // Newest first by when each last changed (wo-format's `effective_update`).
  const updated = new Map(truthByUpdate(efforts));
  const rank = new Map([...updated.keys()].map((id, i) => [id, i]));
  const newest = (a, b) => rank.get(a.id) - rank.get(b.id);
  const effectiveUpdate = (t) => updated.get(t.id) ?? t.timestamp;
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

export {
  jumpToTruth, renderContext, renderTruth, updateContext,
};
