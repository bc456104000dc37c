//! What the binary serves besides the API: the web client (its page, script
//! and styles, no build step; its wasm package, committed; the stale sign-in
//! page; the PWA's manifest, service worker and icons) and the OpenAPI
//! document.

/// The web client's page.
pub const INDEX_HTML: &str = include_str!("web/index.html");
/// The web client's entry module (`GET /app.js`): it imports the modules of
/// [`APP_MODULES`] by relative paths.
pub const APP_JS: &str = include_str!("web/app.js");
/// The web client's ES modules (`GET /js/<name>`), no build step: each is
/// served as written, with `app.js`'s type, caching and CSP. ARCHITECTURE.md's
/// web-client table says what each owns; `sw.js` keeps each for the offline
/// shell (a test holds the three lists equal).
pub const APP_MODULES: &[(&str, &str)] = &[
    ("backend-local.js", include_str!("web/js/backend-local.js")),
    (
        "backend-stateless.js",
        include_str!("web/js/backend-stateless.js"),
    ),
    ("backend.js", include_str!("web/js/backend.js")),
    ("dom.js", include_str!("web/js/dom.js")),
    ("format.js", include_str!("web/js/format.js")),
    ("highlight.js", include_str!("web/js/highlight.js")),
    ("http.js", include_str!("web/js/http.js")),
    ("main.js", include_str!("web/js/main.js")),
    ("prefs.js", include_str!("web/js/prefs.js")),
    ("render-memory.js", include_str!("web/js/render-memory.js")),
    (
        "render-messages.js",
        include_str!("web/js/render-messages.js"),
    ),
    (
        "render-settings.js",
        include_str!("web/js/render-settings.js"),
    ),
    (
        "render-sidebar.js",
        include_str!("web/js/render-sidebar.js"),
    ),
    ("state.js", include_str!("web/js/state.js")),
    ("tree.js", include_str!("web/js/tree.js")),
    ("turn.js", include_str!("web/js/turn.js")),
    ("view.js", include_str!("web/js/view.js")),
    ("xhtml.js", include_str!("web/js/xhtml.js")),
];
/// The page a stale sign-in link gets (local mode): how to sign in again.
pub const SIGNIN_HTML: &str = include_str!("web/signin.html");
/// The web client's styles.
pub const APP_CSS: &str = include_str!("web/app.css");
/// wasm-bindgen's glue for the web client's wasm module (`GET /wasm/wo_wasm.js`):
/// crates/wo-wasm built by `scripts/build-wasm.sh`, committed so that a
/// `cargo build` needs no wasm toolchain (`--check` holds it to a fresh build).
pub const WASM_JS: &str = include_str!("web/wasm/wo_wasm.js");
/// The web client's wasm module (`GET /wasm/wo_wasm_bg.wasm`): wo-format and
/// wo-wire compiled for the browser.
pub const WASM_MODULE: &[u8] = include_bytes!("web/wasm/wo_wasm_bg.wasm");
/// The ingestion page (`GET /ingest.html`): pick a folder, index it in the
/// browser, search it, download the exports. Its assets are named
/// relatively, so the `web/` folder also works from a static file server.
pub const INGEST_HTML: &str = include_str!("web/ingest.html");
/// The ingestion page's script.
pub const INGEST_JS: &str = include_str!("web/ingest.js");
/// The in-browser index's storage and retrieval, shared by the ingestion
/// page and the chat page's retrieval hook.
pub const INGEST_LIB_JS: &str = include_str!("web/ingest-lib.js");
/// The ingestion page's styles.
pub const INGEST_CSS: &str = include_str!("web/ingest.css");
/// wasm-bindgen's glue for the index's wasm module
/// (`GET /wasm/wo_index_wasm.js`): crates/wo-index-wasm built by
/// `scripts/build-wasm.sh`, committed like the chat page's.
pub const INDEX_WASM_JS: &str = include_str!("web/wasm/wo_index_wasm.js");
/// The index's wasm module (`GET /wasm/wo_index_wasm_bg.wasm`): wo-index
/// with tree-sitter, loaded only by the ingestion page (and by the chat page
/// once a folder has been indexed in this browser).
pub const INDEX_WASM_MODULE: &[u8] = include_bytes!("web/wasm/wo_index_wasm_bg.wasm");
/// The web app's manifest (installable as a PWA).
pub const MANIFEST: &str = include_str!("web/manifest.webmanifest");
/// The service worker: the stateless mode's offline shell.
pub const SERVICE_WORKER: &str = include_str!("web/sw.js");
/// The app's icon.
pub const ICON_SVG: &str = include_str!("web/icon.svg");
/// The icon at 192×192 (rendered from the SVG by `scripts/make-icons.mjs`).
pub const ICON_192: &[u8] = include_bytes!("web/icon-192.png");
/// The icon at 512×512.
pub const ICON_512: &[u8] = include_bytes!("web/icon-512.png");
/// The API, documented (`GET /api/openapi.json`).
pub const OPENAPI_JSON: &str = include_str!("openapi.json");

/// The Content-Security-Policy of every response: the client loads nothing
/// from anywhere but this server, and runs no inline script or style, so
/// markup that slipped into content could not execute. The service worker
/// and the manifest come from this server too. `'wasm-unsafe-eval'` lets
/// the page compile its own wasm module (from `'self'`, as every script);
/// it allows no JavaScript `eval`.
pub const CSP: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; img-src 'self' data:; connect-src 'self'; worker-src 'self'; manifest-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'";

#[cfg(test)]
mod tests {
    use super::{APP_MODULES, SERVICE_WORKER};

    /// Every module under `web/js/` is embedded, and the service worker's
    /// offline shell keeps each: a module missing from either would leave
    /// the page unable to start (served) or to start offline (cached).
    #[test]
    fn every_web_module_is_served_and_kept_offline() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/web/js");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".js"))
            .collect();
        on_disk.sort();
        let mut embedded: Vec<String> = APP_MODULES.iter().map(|(n, _)| (*n).to_owned()).collect();
        embedded.sort();
        assert_eq!(
            embedded, on_disk,
            "assets::APP_MODULES must list every file of {dir}"
        );
        for name in &on_disk {
            assert!(
                SERVICE_WORKER.contains(&format!("'/js/{name}'")),
                "sw.js's SHELL does not keep /js/{name}"
            );
        }
    }
}
