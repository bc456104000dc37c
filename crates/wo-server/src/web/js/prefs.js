// Settings, kept in this server's preferences cookie (`wo_prefs_<port>`, the
// name comes from /api/info); no state and no secret goes there. Cookies
// ignore ports, so any page on this host can write it: what is read is
// checked against what the server offers before use (`offeredPrefs`).
import { notify } from './dom.js';
import { app } from './state.js';

let prefsCookie = null; // set from /api/info before any read or write (usePrefsCookie)

/** The cookie this server names for preferences (`wo_prefs_<port>`); anything else: none is read or written. */
function usePrefsCookie(name) {
  prefsCookie = typeof name === 'string' && /^wo_prefs_\d+$/.test(name) ? name : null;
}

const PREF_SPEC = {
  provider: 'string', model: 'string', temperature: 'number', max_tokens: 'integer',
  rag: 'boolean', url_fetch: 'boolean', max_entries: 'integer', min_certainty: 'number',
  username: 'string',
};

/**
 * The range the server accepts for each number (the request's types:
 * max_tokens is a u32). Another page on this host can write the cookie, so
 * a value outside is dropped (and reported once), never sent: one bad value
 * must not make every turn fail.
 */
const PREF_RANGE = {
  temperature: [0, 2], max_tokens: [0, 4294967295], max_entries: [0, 1000000], min_certainty: [0, 1],
};

/** Preferences dropped since the page loaded, reported once (`reportDroppedPrefs`). */
const droppedPrefs = new Set();

function b64urlEncode(text) {
  let bin = '';
  for (const b of new TextEncoder().encode(text)) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function b64urlDecode(s) {
  let b64 = s.replace(/-/g, '+').replace(/_/g, '/');
  while (b64.length % 4) b64 += '=';
  const bin = atob(b64);
  return new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
}

function cleanPrefs(raw) {
  const out = {};
  if (!raw || typeof raw !== 'object') return out;
  for (const [k, type] of Object.entries(PREF_SPEC)) {
    const v = raw[k];
    if (v == null) continue;
    const range = PREF_RANGE[k];
    const inRange = !range || (v >= range[0] && v <= range[1]);
    if (type === 'string' && typeof v === 'string' && v.length) out[k] = v.slice(0, 200);
    else if (type === 'boolean' && typeof v === 'boolean') out[k] = v;
    else if (type === 'number' && typeof v === 'number' && Number.isFinite(v) && inRange) out[k] = v;
    else if (type === 'integer' && Number.isInteger(v) && inRange) out[k] = v;
    else droppedPrefs.add(k);
  }
  if (out.max_tokens === 0) delete out.max_tokens;
  return out;
}

/** Says once which stored preferences were out of range and are not used. */
function reportDroppedPrefs() {
  if (!droppedPrefs.size || reportDroppedPrefs.done) return;
  reportDroppedPrefs.done = true;
  notify(`Ignored saved settings out of range: ${[...droppedPrefs].sort().join(', ')}. Set them again in Settings.`);
}

function readPrefs() {
  if (!prefsCookie) return {};
  for (const part of document.cookie.split(';')) {
    const i = part.indexOf('=');
    if (i < 0 || part.slice(0, i).trim() !== prefsCookie) continue;
    try {
      return cleanPrefs(JSON.parse(b64urlDecode(part.slice(i + 1).trim())));
    } catch {
      return {};
    }
  }
  return {};
}

function writePrefs(prefs) {
  if (!prefsCookie) return;
  const clean = cleanPrefs(prefs);
  let value = b64urlEncode(JSON.stringify(clean));
  if (value.length > 3800) {
    // Cannot happen with the caps above; never write an oversized cookie.
    value = b64urlEncode('{}');
  }
  const secure = location.protocol === 'https:' ? '; Secure' : '';
  document.cookie = `${prefsCookie}=${value}; Path=/; Max-Age=31536000; SameSite=Strict${secure}`;
}

/**
 * Keeps only what this server offers: a provider it lists, a model it
 * lists (stateless; local mode takes any model name of plain characters),
 * max_tokens within its cap. Another page on this host may have written
 * the cookie.
 */
function offeredPrefs(prefs) {
  const out = cleanPrefs(prefs);
  const provs = (app.providers && app.providers.providers) || [];
  if (out.provider !== undefined && !provs.some((x) => x.name === out.provider)) delete out.provider;
  if (out.model !== undefined) {
    const prov = provs.find((x) => x.name === (out.provider || app.providers.default));
    const models = prov ? [prov.default_model, ...(prov.models || [])] : [];
    const plain = /^[A-Za-z0-9._:/@+-]{1,200}$/.test(out.model);
    if (!plain || (app.mode === 'stateless' && !models.includes(out.model))) delete out.model;
  }
  const cap = app.info && app.info.max_tokens;
  if (out.max_tokens !== undefined && Number.isInteger(cap) && out.max_tokens > cap) delete out.max_tokens;
  return out;
}

export {
  cleanPrefs, offeredPrefs, readPrefs, reportDroppedPrefs, usePrefsCookie, writePrefs,
};
