//! MCP over streamable HTTP: rmcp's server transport around the same
//! [`WikiOracleMcp`] handler `wo mcp` serves over stdio. `wo serve` mounts
//! it at `/mcp` behind its guard (token, `Host` and `Origin` checks, rate
//! limit) and caps the body it reads; this module only chooses the
//! transport's settings.
//!
//! Clients on 2025-03-26 to 2025-11-25 get a session (`initialize`, then
//! `Mcp-Session-Id`), so their name is known when they write (the
//! provenance `by`); clients on 2026-07-28 send self-contained requests
//! (the version and their name in each request's `_meta`), which rmcp
//! serves without a session.

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
pub use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use crate::WikiOracleMcp;

/// The `/mcp` service.
pub type McpHttpService = StreamableHttpService<WikiOracleMcp, LocalSessionManager>;

/// A streamable HTTP service: sessions for the handshake-era clients,
/// stateless requests for 2026-07-28 ones. Every session shares `server`'s
/// store. A session idle for `idle` is closed (a client that vanished
/// without `DELETE` does not keep one forever); the client then starts a
/// new one.
pub fn service(server: WikiOracleMcp, idle: Duration) -> McpHttpService {
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(idle);
    let config = StreamableHttpServerConfig::default()
        // SSE comments keep proxies and clients from timing out a quiet
        // stream.
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_legacy_session_mode(true)
        // `wo serve`'s guard checks `Host` and `Origin` before a request
        // gets here (one rule, with the names it was started with), and
        // reads the body within its own limit.
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(usize::MAX);
    StreamableHttpService::new(move || Ok(server.clone()), Arc::new(sessions), config)
}
