//! The request-body extractors: every JSON body and the merge upload is
//! read through here, so each handler gets its body within the size limit
//! and the body timeout, and a bad body is answered
//! `{"error":{"kind","message","pointer"}}` with the JSON pointer of the
//! field at fault — before the handler runs.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use bytes::Bytes;
use serde::de::DeserializeOwned;

use crate::app::{App, Mode};
use crate::error::{ApiError, parse_json};

/// A JSON request body of type `T`: a JSON object at most
/// `Limits::body_bytes` long.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

/// The `POST /api/merge` upload: raw bytes, at most
/// `Limits::upload_bytes` long (the merge validates them itself).
#[derive(Debug)]
pub struct Upload(pub Bytes);

impl<T: DeserializeOwned, M: Mode> FromRequest<Arc<M>> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &Arc<M>) -> Result<Self, ApiError> {
        let bytes = read_body(state, req.into_body(), state.limits.body_bytes).await?;
        // Every body of the API is an object. serde's derived structs also
        // take an array of their fields in order, so without this `[]`
        // would pass as a body whose fields are all optional.
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(ApiError::bad_field("", "the body must be a JSON object"));
        }
        parse_json(&bytes).map(JsonBody)
    }
}

impl<M: Mode> FromRequest<Arc<M>> for Upload {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &Arc<M>) -> Result<Self, ApiError> {
        // A whole export may be large: a second more per MiB it declares
        // (the guard refused a declared length over the limit).
        let declared = req
            .headers()
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(state.limits.upload_bytes as u64)
            .min(state.limits.upload_bytes as u64);
        let deadline = state.limits.body_timeout + Duration::from_secs(declared >> 20);
        read_body_within(req.into_body(), state.limits.upload_bytes, deadline)
            .await
            .map(Upload)
    }
}

/// Reads a request body up to `limit` bytes, within the body timeout (a
/// client trickling its body must not hold a connection forever). The
/// guard has already refused a `Content-Length` over the limit; this
/// catches chunked bodies that grow past it.
pub async fn read_body(app: &App, body: axum::body::Body, limit: usize) -> Result<Bytes, ApiError> {
    read_body_within(body, limit, app.limits.body_timeout).await
}

/// [`read_body`] with its own deadline for the whole body: one deadline,
/// not a wait per piece, so a body trickled a byte at a time is cut off
/// all the same.
async fn read_body_within(
    body: axum::body::Body,
    limit: usize,
    deadline: Duration,
) -> Result<Bytes, ApiError> {
    match tokio::time::timeout(deadline, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(_)) => Err(ApiError::too_large(limit)),
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "timeout",
            format!(
                "the request body did not arrive within {} s",
                deadline.as_secs_f64().ceil()
            ),
        )),
    }
}
