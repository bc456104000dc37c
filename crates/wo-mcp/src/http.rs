//! MCP over streamable HTTP: rmcp's server transport around the same
//! [`WikiOracleMcp`] handler `wo mcp` serves over stdio. `wo serve` mounts
//! it at `/mcp` behind its guard (token, `Host` and `Origin` checks, rate
//! limit) and caps the body it reads; this module only chooses the
//! transport's settings.

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
pub use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};

use crate::WikiOracleMcp;

/// The `/mcp` service.
pub type McpHttpService = StreamableHttpService<WikiOracleMcp, LocalSessionManager>;

/// A streamable HTTP service in stateful mode (each client gets a session,
/// so its name is known when it writes: the provenance `by`). Every session
/// shares `server`'s store. A session idle for `idle` is closed (a client
/// that vanished without `DELETE` does not keep one forever); the client
/// then starts a new one.
pub fn service(server: WikiOracleMcp, idle: Duration) -> McpHttpService {
    let sessions = LocalSessionManager {
        sessions: Default::default(),
        session_config: SessionConfig {
            keep_alive: Some(idle),
            ..SessionConfig::default()
        },
    };
    StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(sessions),
        StreamableHttpServerConfig {
            // SSE comments keep proxies and clients from timing out a
            // quiet stream.
            sse_keep_alive: Some(Duration::from_secs(15)),
            stateful_mode: true,
        },
    )
}
