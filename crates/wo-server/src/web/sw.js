// WikiOracle's service worker: the offline shell of a stateless server.
// It keeps the page, its script and modules, its wasm module (the
// file format: stateless mode cannot work without it), styles, manifest and
// icons, and answers them from that cache only when the network fails, so
// an online page always gets the server's current files. It never touches
// the API (/api/, /v1/, /mcp), a request with a query (the local sign-in
// link), or anything not a GET: answers, state and tokens are never cached.
// app.js registers it in stateless mode only, and unregisters it in local
// mode.

const CACHE = 'wikioracle-shell-v3';
const SHELL = [
  '/', '/app.js', '/wasm/wo_wasm.js', '/wasm/wo_wasm_bg.wasm', '/app.css', '/manifest.webmanifest', '/icon.svg', '/icon-192.png', '/icon-512.png',
  // app.js's modules (assets::APP_MODULES; a test holds this list to it).
  '/js/backend-local.js',
  '/js/backend-stateless.js',
  '/js/backend.js',
  '/js/dom.js',
  '/js/format.js',
  '/js/highlight.js',
  '/js/http.js',
  '/js/main.js',
  '/js/prefs.js',
  '/js/render-memory.js',
  '/js/render-messages.js',
  '/js/render-settings.js',
  '/js/render-sidebar.js',
  '/js/state.js',
  '/js/tree.js',
  '/js/turn.js',
  '/js/view.js',
  '/js/xhtml.js',
];

self.addEventListener('install', (event) => {
  event.waitUntil(caches.open(CACHE).then((c) => c.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil((async () => {
    for (const key of await caches.keys()) if (key !== CACHE) await caches.delete(key);
    await self.clients.claim();
  })());
});

self.addEventListener('fetch', (event) => {
  const req = event.request;
  if (req.method !== 'GET') return;
  const url = new URL(req.url);
  if (url.origin !== self.location.origin || url.search || !SHELL.includes(url.pathname)) return;
  event.respondWith((async () => {
    try {
      const fresh = await fetch(req);
      if (fresh.ok) {
        const cache = await caches.open(CACHE);
        await cache.put(url.pathname, fresh.clone());
      }
      return fresh;
    } catch (e) {
      const kept = await caches.match(url.pathname);
      if (kept) return kept;
      throw e;
    }
  })());
});
