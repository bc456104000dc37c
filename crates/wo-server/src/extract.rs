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
    match tokio::time::timeout(deadline, read_within_limit(body, limit)).await {
        Ok(Read::Whole(bytes)) => Ok(bytes),
        Ok(Read::Over(rest)) => {
            linger(rest).await;
            Err(ApiError::too_large(limit))
        }
        Ok(Read::Failed) => Err(ApiError::too_large(limit)),
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

/// How much of a body past its limit is still read (and dropped) before the
/// refusal is sent, and for how long at most: a client still sending it
/// when the connection closed with unread bytes would get a reset instead
/// of the 413 (TCP discards what it had not read yet).
const LINGER_BYTES: usize = 1 << 20;
const LINGER_TIME: Duration = Duration::from_secs(3);

/// A body read up to its limit.
enum Read {
    Whole(Bytes),
    /// Past the limit: the rest, unread.
    Over(axum::body::Body),
    /// The connection failed while it was read.
    Failed,
}

async fn read_within_limit(mut body: axum::body::Body, limit: usize) -> Read {
    use http_body_util::BodyExt;
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return Read::Failed;
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if bytes.len() + data.len() > limit {
            return Read::Over(body);
        }
        bytes.extend_from_slice(&data);
    }
    Read::Whole(Bytes::from(bytes))
}

/// Reads and drops what is left of a refused body, up to [`LINGER_BYTES`]
/// and [`LINGER_TIME`].
async fn linger(mut rest: axum::body::Body) {
    use http_body_util::BodyExt;
    let drain = async {
        let mut dropped = 0usize;
        while dropped < LINGER_BYTES {
            match rest.frame().await {
                Some(Ok(frame)) => dropped += frame.data_ref().map_or(0, |d| d.len()),
                _ => break,
            }
        }
    };
    let _ = tokio::time::timeout(LINGER_TIME, drain).await;
}
