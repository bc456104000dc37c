//! `/mcp` (local mode): the Model Context Protocol over streamable HTTP,
//! served by wo-mcp's handler on the server's own store. The guard has
//! already checked the `Host`, the bearer token and any `Origin`; here the
//! body is read within the same size and time limits as every JSON body
//! (rmcp would read any amount, for as long as it takes) and handed to
//! rmcp's transport.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};

use crate::app::Local;
use crate::extract::read_body;

/// `POST`, `GET` and `DELETE /mcp`.
pub async fn handle(State(app): State<Arc<Local>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = match read_body(&app, body, app.limits.body_bytes).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let req = axum::http::Request::from_parts(parts, http_body_util::Full::new(bytes));
    app.mcp.handle(req).await.into_response()
}
