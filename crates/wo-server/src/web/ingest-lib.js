// The in-browser folder index, shared by the ingestion page (ingest.js) and
// the chat page's retrieval hook (app.js imports this file only when a chat
// turn is sent, and this file loads the index's wasm module — wo-index with
// tree-sitter, several times the chat page's own module — only when an
// index has been stored). The index lives in IndexedDB (`wo-ingest`), as
// the `index.json` text `wo index` would write for the folder; nothing here
// talks to a server.

const DB_NAME = 'wo-ingest';
const STORE = 'index';
const KEY = 'current';

function openDb() {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(DB_NAME, 1);
    req.onupgradeneeded = () => req.result.createObjectStore(STORE);
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

async function tx(mode, fn) {
  const db = await openDb();
  try {
    return await new Promise((resolve, reject) => {
      const t = db.transaction(STORE, mode);
      const req = fn(t.objectStore(STORE));
      t.oncomplete = () => resolve(req && req.result);
      t.onerror = () => reject(t.error);
      t.onabort = () => reject(t.error || new Error('IndexedDB transaction aborted'));
    });
  } finally {
    db.close();
  }
}

/** The stored index: `{name, index}` (index = index.json text), or null. */
export async function loadSaved() {
  if (!('indexedDB' in globalThis)) return null;
  const rec = await tx('readonly', (s) => s.get(KEY));
  return rec && typeof rec.name === 'string' && typeof rec.index === 'string' ? rec : null;
}

/** Stores `{name, index}`, replacing the previous index. */
export function save(rec) {
  return tx('readwrite', (s) => s.put({ name: rec.name, index: rec.index }, KEY));
}

/** Removes the stored index. */
export function forget() {
  cached = null;
  return tx('readwrite', (s) => s.delete(KEY));
}

let modulePromise = null;
/** The wasm module (crates/wo-index-wasm), loaded once, on first use. */
export function loadModule() {
  modulePromise ||= import('./wasm/wo_index_wasm.js').then(async (m) => {
    await m.default();
    return m;
  });
  return modulePromise;
}

let cached = null; // { index text, Indexer } for the chat page
/**
 * The stored index's chunks for `question` (`Index::context_chunks`: the
 * rule `wo ask` follows), as `[{id, label, text}]`; [] without an index.
 */
export async function contextChunks(question) {
  const saved = await loadSaved();
  if (!saved) return [];
  if (!cached || cached.index !== saved.index) {
    const m = await loadModule();
    const ix = new m.Indexer(saved.name);
    ix.load(saved.index);
    cached = { index: saved.index, ix };
  }
  return JSON.parse(cached.ix.contextChunks(question));
}
