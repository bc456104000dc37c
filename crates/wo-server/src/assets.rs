//! What the binary serves besides the API: the web client (three files, no
//! build step) and the OpenAPI document.

/// The web client's page.
pub const INDEX_HTML: &str = include_str!("web/index.html");
/// The web client's script.
pub const APP_JS: &str = include_str!("web/app.js");
/// The page a stale sign-in link gets (local mode): how to sign in again.
pub const SIGNIN_HTML: &str = include_str!("web/signin.html");
/// The web client's styles.
pub const APP_CSS: &str = include_str!("web/app.css");
/// The API, documented (`GET /api/openapi.json`).
pub const OPENAPI_JSON: &str = include_str!("openapi.json");

/// The Content-Security-Policy of every response: the client loads nothing
/// from anywhere but this server, and runs no inline script or style, so
/// markup that slipped into content could not execute.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'";
