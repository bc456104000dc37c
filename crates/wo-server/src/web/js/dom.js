// Small DOM helpers: `$` (by id), `h` (createElement with attributes and
// children; text is always text), the status line and the alert, the
// icons, and Copy (plain text only, never HTML).

const $ = (id) => document.getElementById(id);

/** createElement with attributes/properties and children (text is text). */
function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (v === true) e.setAttribute(k, '');
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c == null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

let statusTimer = 0;

function notify(message, kind = 'info') {
  const status = $('status');
  const alertBox = $('alert');
  if (kind === 'error') {
    alertBox.textContent = message;
    alertBox.classList.add('shown');
  } else {
    status.textContent = message;
    status.classList.add('shown');
    clearTimeout(statusTimer);
    statusTimer = setTimeout(() => status.classList.remove('shown'), 6000);
  }
}

function clearAlert() {
  $('alert').textContent = '';
  $('alert').classList.remove('shown');
}

// Icons drawn as SVG nodes (no markup strings, nothing fetched).
const ICONS = {
  copy: ['M8 8h11v12H8z', 'M5 16V4h11'],
  regenerate: ['M20 12a8 8 0 1 1-2.34-5.66', 'M20 4v5h-5'],
  edit: ['M4 20h4L19 9l-4-4L4 16z', 'M13 7l4 4'],
  branch: ['M6 4v16', 'M6 9c0 4 12 2 12 8', 'M18 17v3'],
};

function icon(name) {
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('width', '18');
  svg.setAttribute('height', '18');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('focusable', 'false');
  for (const d of ICONS[name]) {
    const path = document.createElementNS(NS, 'path');
    path.setAttribute('d', d);
    svg.append(path);
  }
  return svg;
}

function iconButton(name, label, testid, onclick, extra = {}) {
  return h('button', { type: 'button', class: 'icon-button act', 'aria-label': label, title: label, 'data-testid': testid, onclick, ...extra }, icon(name));
}

/**
 * Puts `text` on the clipboard as plain text only (never HTML): the
 * Clipboard API where the page may use it, else a hidden text box and the
 * copy command.
 */
async function copyText(text, done) {
  try {
    if (!navigator.clipboard || !window.isSecureContext) throw new Error('no Clipboard API');
    await navigator.clipboard.writeText(text);
  } catch {
    const box = h('textarea', { class: 'visually-hidden', readonly: true, 'aria-hidden': 'true', tabindex: '-1' });
    box.value = text;
    document.body.append(box);
    box.select();
    let ok = false;
    try {
      ok = document.execCommand('copy');
    } catch {
      ok = false;
    }
    box.remove();
    if (!ok) {
      notify('This browser would not copy; select the text and copy it by hand.', 'error');
      return;
    }
  }
  notify(done);
}

export {
  $, clearAlert, copyText, h, iconButton, notify,
};
