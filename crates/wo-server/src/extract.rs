//! The request-body extractors: every JSON body and the merge upload is
//! read through here, so each handler gets its body within the size limit
//! and the body timeout, and a bad body is answered
//! `{"error":{"kind","message","pointer"}}` with the JSON pointer of the
//! field at fault — before the handler runs.

use std::sync::Arc;

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
        read_body(state, req.into_body(), state.limits.upload_bytes)
            .await
            .map(Upload)
    }
}

/// Reads a request body up to `limit` bytes, within the body timeout (a
/// client trickling its body must not hold a connection forever). The
/// guard has already refused a `Content-Length` over the limit; this
/// catches chunked bodies that grow past it.
pub async fn read_body(app: &App, body: axum::body::Body, limit: usize) -> Result<Bytes, ApiError> {
    match tokio::time::timeout(app.limits.body_timeout, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(_)) => Err(ApiError::too_large(limit)),
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "timeout",
            format!(
                "the request body did not arrive within {} s",
                app.limits.body_timeout.as_secs()
            ),
        )),
    }
}
