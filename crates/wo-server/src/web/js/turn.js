// One turn: `send` streams a question's answer (begin → delta… → done, or
// error, or stopped) into provisional bubbles and ends it through the
// backend; Regenerate and Edit & resend; the draft that survives a reload;
// following the stream to the bottom; Stop.
import { $, clearAlert, h, notify } from './dom.js';
import { messageMarkdown, plainText } from './xhtml.js';
import { ApiError, postSse } from './http.js';
import { isObject, roleOf } from './format.js';
import { buildTree, latestId, leafBelow } from './tree.js';
import { app, beginStreaming, endStreaming, keepReport, markStreamStarted, setAnswerError, setFollow, setMemoryNote, setMemoryPending, showBranch, showEditOf, showUpTo } from './state.js';
import { backend } from './backend.js';
import { renderMessages, showEarlierIfNear } from './render-messages.js';
import { modelLabel } from './render-settings.js';
import { renderAll, reportError, showSignin } from './view.js';

/** The memory step's event (what the interpreter made of the exchange), applied once the answer is saved. */
async function applyMemory(m) {
  setMemoryPending(m.exchange, false);
  if (typeof m.note === 'string') setMemoryNote(m.exchange, m.note);
  await backend().afterMemory(m);
  renderAll();
  if (app.follow) scrollToLatest();
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
  showEditOf(t.parent, { id: qid, title: t.question.title || plainText(t.question.content).slice(0, 60) });
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
  setAnswerError(aid, null);
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

/**
 * The unsent message survives a reload, a closed tab and a failed or stopped
 * turn: it lives in localStorage under a key per mode, is
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

/**
 * While an answer streams the page follows it to the bottom, until the user
 * scrolls up to read something; then it stays put and offers "Jump to
 * latest". Scrolling back to the bottom resumes following.
 */
const FOLLOW_SLACK_PX = 48;

function atBottom() {
  const doc = document.documentElement;
  return doc.scrollHeight - (window.scrollY + window.innerHeight) <= FOLLOW_SLACK_PX;
}

function scrollToLatest() {
  window.scrollTo(0, document.documentElement.scrollHeight);
  setFollow(app.follow, window.scrollY);
}

/**
 * Follows the stream after new text, unless the reader has scrolled up
 * since the page last followed it — even when that scroll's event has not
 * been handled yet (a delta can arrive first; following then would undo
 * the reader's scroll).
 */
function followStream() {
  if (app.follow && window.scrollY + FOLLOW_SLACK_PX < (app.followedY ?? 0)) {
    setFollow(false);
    $('jump-latest').hidden = false;
  }
  if (app.follow) scrollToLatest();
}

function onScroll() {
  setFollow(atBottom());
  $('jump-latest').hidden = app.follow;
  showEarlierIfNear();
}

function jumpToLatest() {
  setFollow(true);
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
 * `opts` ({text, parent, newConversation, regenerating, question}) it sends
 * `text` there without touching the box (Regenerate).
 *
 * A turn goes begin → delta… → done, or → error, or is cut (Stop, a lost
 * connection): `turnEvents` handles the stream's events, and one of
 * `finishDone`, `finishFailed` or `finishStopped` ends it.
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
  const params = chatParams();
  const turn = { message: text, answer: '', sent_at: new Date().toISOString(), sources: [], params };
  if (parent) turn.parent = parent;
  else if (newConversation) turn.new_conversation = true;
  if (app.prefs.username) turn.username = app.prefs.username;
  const t = {
    input, fromBox, text, opts, turn, params, parent, newConversation,
    regenerating: fromBox ? null : opts.regenerating,
    // A stored question is answered again in place: no new question is
    // stored, so none is shown.
    inPlace: !fromBox && !!opts.question,
    controller: new AbortController(),
    report: null, done: null, failure: null, streamed: '',
    // The answer is finished at `done`; the memory step's event may come
    // later on the same stream and is applied once the answer is saved.
    answerSaved: null,
  };
  // Until the turn's first event arrives, nothing but the stored draft holds
  // the question (the request may not have reached the server when the tab
  // closes): it stays the draft until then. From the first event on, the
  // turn holds it — the local server keeps a turn its client left,
  // stateless mode's turn record (written at `begin`) keeps it in this
  // browser — and the draft is whatever the box holds since.
  beginStreaming(t.controller, turn, fromBox ? text : null);
  if (t.regenerating) {
    // Show the conversation up to where the new answer goes.
    showUpTo(parent, newConversation);
    renderAll();
  }
  setBusy(true);
  showPending(t);

  let sawDone;
  const doneSeen = new Promise((resolve) => { sawDone = resolve; });
  try {
    const body = await backend().chatBody(text, parent, params, newConversation, t.inPlace ? opts.question : null);
    if (t.inPlace && app.mode === 'local') body.regenerate = opts.question;
    const streaming = postSse(backend().chatPath, body, turnEvents(t, sawDone), t.controller.signal);
    await Promise.race([streaming, doneSeen]);
    if (t.done) {
      const id = t.done.assistant_message_id;
      // After the answer is saved and shown (never before: a re-render then
      // would drop the streamed bubbles), a memory step that sent nothing
      // stops saying "Remembering…".
      streaming.catch(() => {}).finally(() => Promise.resolve(t.answerSaved).catch(() => {}).then(() => {
        if (id && setMemoryPending(id, false)) {
          renderMessages();
          if (app.follow) scrollToLatest();
        }
      }));
    }
  } catch (e) {
    t.failure = e;
  }
  t.answerText.setAttribute('aria-busy', 'false');
  endStreaming();
  setBusy(false);

  // Stopped, the tab's connection lost, or the stream cut before `done`.
  if (!t.done && (t.controller.signal.aborted || !t.failure || t.failure.name === 'AbortError')) {
    await finishStopped(t);
    return;
  }
  // A failed turn keeps nothing (its question goes back to the box); a
  // finished one is forgotten once its patch is saved (`afterDone`).
  if (!t.done) {
    backend().turnEnded();
    finishFailed(t);
    return;
  }
  await finishDone(t);
}

/** Provisional bubbles: the question (unless answered again in place), and the answer as it streams. */
function showPending(t) {
  t.answerText = h('div', { class: 'msg-content streaming', 'data-testid': 'streaming-answer', 'aria-live': 'polite', 'aria-atomic': 'false', 'aria-busy': 'true' });
  t.note = h('p', { class: 'msg-note', 'data-testid': 'streaming-note' }, 'Answering…');
  t.pending = [
    h('li', { class: 'msg msg-user pending', 'data-testid': 'pending-question' },
      h('article', { 'aria-label': 'Your message' },
        h('header', { class: 'msg-head' }, h('span', { class: 'msg-meta' }, app.prefs.username || app.info.username || 'You')),
        h('div', { class: 'msg-content' }, t.text))),
    h('li', { class: 'msg msg-assistant pending', 'data-testid': 'pending-answer' },
      h('article', { 'aria-label': 'Answer' },
        h('header', { class: 'msg-head' }, h('span', { class: 'msg-meta' }, modelLabel())),
        t.answerText, t.note)),
  ];
  $('messages').append(...(t.inPlace ? t.pending.slice(1) : t.pending));
  $('empty-hint').hidden = true;
  setFollow(true);
  scrollToLatest();
  if (t.fromBox) t.input.value = '';
}

/** The stream's events for turn `t`: begin (at the first event), context, delta, done, memory, error. */
function turnEvents(t, sawDone) {
  let started = false;
  const begin = () => {
    if (started) return;
    started = true;
    markStreamStarted();
    backend().turnStarted(t.turn);
    if (t.fromBox) saveDraft(t.input.value);
  };
  return {
    context: (r) => {
      begin();
      t.report = r;
      if (Array.isArray(r?.sources)) t.turn.sources = r.sources.filter((x) => typeof x === 'string');
      if (isObject(r?.context_used)) t.turn.context_used = r.context_used;
    },
    delta: (d) => {
      begin();
      const text = typeof d.text === 'string' ? d.text : '';
      t.streamed += text;
      t.turn.answer = t.streamed;
      backend().turnProgress(t.turn);
      t.answerText.append(document.createTextNode(text));
      followStream();
    },
    done: (d) => {
      begin();
      t.done = d;
      if (d && d.memory_follows === true && d.assistant_message_id) setMemoryPending(d.assistant_message_id, true);
      sawDone();
    },
    memory: (m) => {
      if (isObject(m) && typeof m.exchange === 'string') {
        Promise.resolve(t.answerSaved).then(() => applyMemory(m)).catch(reportError);
      }
    },
    error: (e) => {
      begin();
      t.failure = new ApiError(0, e.kind || 'provider', e.message || 'The model failed.');
    },
  };
}

/**
 * A turn stopped or cut before `done`: the question and the answer so far
 * are kept, marked incomplete — by the server in local mode, by this
 * browser in stateless mode — and shown in place of the provisional bubbles.
 */
async function finishStopped(t) {
  t.note.textContent = 'Stopped; keeping the question and the answer so far…';
  try {
    const kept = await backend().keepStopped(t.turn);
    for (const li of t.pending) li.remove();
    if (t.fromBox) saveDraft($('composer-input').value);
    showBranch(leafBelow(kept), kept);
    renderAll();
    // Where the provisional answer was: the kept one, marked incomplete.
    document.getElementById(`msg-${kept}`)?.scrollIntoView({ block: 'end' });
    notify(t.controller.signal.aborted
      ? 'Stopped. The question and the answer so far are kept, marked incomplete.'
      : 'The connection closed before the answer finished; the question and the answer so far are kept, marked incomplete.');
  } catch (e) {
    t.note.textContent = `Stopped, but the turn could not be kept yet: ${e.message}`;
    t.note.classList.add('warn');
    t.note.setAttribute('role', 'alert');
    if (t.fromBox && !$('composer-input').value) {
      t.input.value = t.text;
      saveDraft(t.text);
    }
  }
}

/** A turn that failed: shown once, where it happened, with Retry; a regenerated answer's failure under the old answer. */
function finishFailed(t) {
  const { failure } = t;
  if (t.regenerating) {
    // The original answer stays, and says once, under it, what happened.
    for (const li of t.pending) li.remove();
    showBranch(leafBelow(t.regenerating), t.regenerating);
    if (failure.status === 401) {
      showSignin();
      return;
    }
    setAnswerError(t.regenerating, failure);
    renderAll();
    document.getElementById(`msg-${t.regenerating}`)?.scrollIntoView({ block: 'center' });
    return;
  }
  if (failure.status === 401) {
    showSignin();
    return;
  }
  // In the failed answer's bubble (an alert for screen readers).
  t.note.textContent = `Failed: ${failure.message}`;
  t.note.classList.add('warn');
  t.note.setAttribute('role', 'alert');
  if (t.fromBox) {
    t.input.value = t.text;
    saveDraft(t.text);
  }
  // Retry sends the same question again; the failed bubbles go, so the
  // error is shown once rather than piling up a copy per attempt.
  t.note.append(' ', h('button', {
    type: 'button', class: 'small', 'data-testid': 'retry',
    onclick: () => {
      for (const li of t.pending) li.remove();
      if (t.fromBox) {
        t.input.value = t.text;
        send();
      } else {
        send(t.opts);
      }
    },
  }, 'Retry'));
}

/** A finished turn: saved by the backend, then shown as stored messages. */
async function finishDone(t) {
  const { done } = t;
  try {
    if (t.report && done.assistant_message_id) keepReport(done.assistant_message_id, t.report);
    t.answerSaved = backend().afterDone(done);
    await t.answerSaved;
    // Saved: the draft has become a stored message, unless the user has
    // already started typing the next one while the answer streamed.
    if (t.fromBox) saveDraft($('composer-input').value);
    showBranch(done.assistant_message_id || latestId());
    renderAll();
    if (app.follow) scrollToLatest();
    notify(t.streamed ? 'Answer saved.' : 'Saved.');
  } catch (e) {
    reportError(e);
  }
}

function stop() {
  if (app.streaming) app.streaming.controller.abort();
}

/** Why nothing is sent while offline (the question stays in the box); false when online. */
function offlineRefusal() {
  if (navigator.onLine !== false && !app.offline) return false;
  notify('You are offline: answering needs the WikiOracle server. Your question stays in the box; send it once you are back online.', 'error');
  return true;
}

export {
  chatParams, editAndResend, jumpToLatest, onScroll, regenerate, restoreDraft, saveDraft, send, stop,
};
