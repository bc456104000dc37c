//! The API's error responses: `{"error": {"kind", "message", "pointer"?}}`
//! (`wo_wire::ErrorBody`) with the matching HTTP status. Messages never carry secrets or content.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use wo_wire::openai::{OpenAiError, OpenAiErrorDetail, param_of_pointer};

/// An error answered to a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status answered.
    pub status: StatusCode,
    /// Machine-readable kind (see the OpenAPI `Error` schema).
    pub kind: &'static str,
    /// What went wrong, for a person; never a secret or stored content.
    pub message: String,
    /// JSON pointer into the request body, when one field is at fault.
    pub pointer: Option<String>,
}

impl ApiError {
    /// An error with no pointer.
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            kind,
            message: message.into(),
            pointer: None,
        }
    }

    /// 400: the request is malformed as a whole.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// A bad field of the request body, named by its JSON pointer.
    pub fn bad_field(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        let pointer = pointer.into();
        ApiError {
            message: format!(
                "{}: {}",
                if pointer.is_empty() { "body" } else { &pointer },
                message.into()
            ),
            pointer: Some(pointer),
            ..Self::bad_request("")
        }
    }

    /// The same error about a part of a larger body found at `prefix`
    /// (a pointer `/parent` becomes `/turn/parent`).
    pub fn within(self, prefix: &str) -> Self {
        match &self.pointer {
            Some(pointer) => {
                let message = self
                    .message
                    .strip_prefix(&format!(
                        "{}: ",
                        if pointer.is_empty() { "body" } else { pointer }
                    ))
                    .unwrap_or(&self.message)
                    .to_owned();
                ApiError {
                    status: self.status,
                    kind: self.kind,
                    ..Self::bad_field(format!("{prefix}{pointer}"), message)
                }
            }
            None => self,
        }
    }

    /// 404: no such path, message, entry or provider.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 401 for the web client: no session cookie or token, or a wrong one.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "not signed in: open the launch URL that `wo serve` printed, or send Authorization: Bearer <token>",
        )
    }

    /// No bearer token (or a wrong one) where only programs are served
    /// (`/v1/`, `/mcp`).
    pub fn unauthorized_program() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong token: send Authorization: Bearer <token>, the token of the URL `wo serve` printed (or WO_SERVE_TOKEN)",
        )
    }

    /// 403: a check of the guard refused the request (Host, Origin,
    /// `Sec-Fetch-Site`).
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// 413: the body is over `limit` bytes.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the request body is over the {limit}-byte limit"),
        )
    }

    /// 409: the request no longer matches the state (a context draft made
    /// before the context changed).
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 500: the state file could not be read or written (the file is unchanged).
    pub fn storage(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "storage", message)
    }

    /// 500: something that should not fail did (a worker lost, a value
    /// that would not serialise).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// The JSON body (`wo_wire::ErrorBody`).
    pub fn body(&self) -> wo_wire::ErrorBody {
        wo_wire::ErrorBody {
            error: wo_wire::ErrorDetail {
                kind: self.kind.to_owned(),
                message: self.message.clone(),
                pointer: self.pointer.clone(),
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}

impl From<wo_store::StoreError> for ApiError {
    fn from(e: wo_store::StoreError) -> Self {
        use wo_store::StoreError;
        // Only say "not changed" when it is true: a write that failed after
        // the rename (not confirmed durable) did change the file.
        let message = if e.left_file_unchanged() {
            format!("llm.json was not changed: {e}")
        } else {
            e.to_string()
        };
        match e {
            // What the client sent is too big for the state file: its
            // fault, not the server's.
            StoreError::ContentTooLarge { .. } | StoreError::TooLarge { .. } => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
            }
            // What the request would have written breaks the file's rules.
            StoreError::Refused { issues, .. } => ApiError {
                pointer: issues.first().map(|i| i.pointer.clone()),
                ..ApiError::bad_request(message)
            },
            _ => ApiError::storage(message),
        }
    }
}

/// Parses a JSON request body, naming the field at fault by its pointer.
pub fn parse_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let pointer = pointer_of(e.path());
        ApiError::bad_field(pointer, e.into_inner().to_string())
    })?;
    de.end()
        .map_err(|e| ApiError::bad_field("", format!("trailing data: {e}")))?;
    Ok(value)
}

fn pointer_of(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for seg in path.iter() {
        match seg {
            Segment::Seq { index } => out.push_str(&format!("/{index}")),
            Segment::Map { key } => {
                out.push('/');
                out.push_str(&key.replace('~', "~0").replace('/', "~1"));
            }
            Segment::Enum { variant } => {
                out.push('/');
                out.push_str(variant);
            }
            Segment::Unknown => {}
        }
    }
    out
}

/// `ApiError` in OpenAI's shape, with the same status.
pub fn error_response(e: &ApiError) -> Response {
    (e.status, Json(openai_error(e))).into_response()
}

/// The body of [`error_response`]: `type` from the status as OpenAI uses
/// it, `param` from the JSON pointer, `code` from the kind.
pub fn openai_error(e: &ApiError) -> OpenAiError {
    let (kind, code) = match e.status.as_u16() {
        401 => ("invalid_request_error", "invalid_api_key"),
        403 => ("permission_error", e.kind),
        404 => ("invalid_request_error", e.kind),
        429 => ("rate_limit_error", "rate_limit_exceeded"),
        500.. => ("server_error", e.kind),
        _ => ("invalid_request_error", e.kind),
    };
    OpenAiError {
        error: OpenAiErrorDetail {
            message: e.message.clone(),
            kind: kind.into(),
            param: e.pointer.as_deref().and_then(param_of_pointer),
            code: Some(code.into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Body {
        items: Vec<Item>,
    }
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Item {
        n: u32,
    }

    #[test]
    fn bad_fields_are_named_by_json_pointer() {
        let e = parse_json::<Body>(br#"{"items":[{"n":1},{"n":"x"}]}"#).unwrap_err();
        assert_eq!(e.pointer.as_deref(), Some("/items/1/n"));
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(parse_json::<Body>(br#"{"items":[]} x"#).is_err());
    }
}

/// `text` with every URL (`scheme://…`, up to the next space, quote or
/// bracket) replaced by `<upstream>`: what an anonymous client of a hosted
/// server is told about an upstream failure. The operator's log keeps the
/// whole message.
pub fn scrub_urls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("://") {
        return std::borrow::Cow::Borrowed(text);
    }
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while let Some(found) = text[i..].find("://") {
        let sep = i + found;
        // The scheme: letters, digits, `+`, `-`, `.` before `://`.
        let mut start = sep;
        while start > copied
            && (b[start - 1].is_ascii_alphanumeric() || matches!(b[start - 1], b'+' | b'-' | b'.'))
        {
            start -= 1;
        }
        let mut end = sep + 3;
        while end < b.len()
            && !b[end].is_ascii_whitespace()
            && !matches!(
                b[end],
                b'"' | b'\'' | b'<' | b'>' | b'(' | b')' | b'[' | b']' | b'`'
            )
        {
            end += 1;
        }
        // Punctuation after a URL is the sentence's, not the URL's.
        while end > sep + 3 && matches!(b[end - 1], b':' | b',' | b'.' | b';' | b'!' | b'?') {
            end -= 1;
        }
        if start == sep {
            // No scheme: `://` alone is not a URL; keep it.
            i = sep + 3;
            continue;
        }
        out.push_str(&text[copied..start]);
        out.push_str("<upstream>");
        copied = end;
        i = end;
    }
    out.push_str(&text[copied..]);
    std::borrow::Cow::Owned(out)
}

/// For a hosted (stateless) server: removes URLs from the message of every
/// JSON error answered (see [`scrub_urls`]), logging the original on the
/// server's stderr. Anonymous clients never learn the upstream's address.
pub async fn scrub_error_urls(resp: axum::response::Response) -> axum::response::Response {
    let is_json = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if resp.status().is_success() || !is_json {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    // Error bodies are small; anything larger is not ours to rewrite.
    let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "error body too large").into_response();
    };
    let mut v: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(_) => return axum::response::Response::from_parts(parts, bytes.into()),
    };
    let mut changed = false;
    if let Some(m) = v.pointer_mut("/error/message")
        && let Some(text) = m.as_str()
        && let std::borrow::Cow::Owned(clean) = scrub_urls(text)
    {
        eprintln!("wo serve: an error answered without its URLs: {text}");
        *m = serde_json::Value::String(clean);
        changed = true;
    }
    if !changed {
        return axum::response::Response::from_parts(parts, bytes.into());
    }
    let body = serde_json::to_vec(&v).unwrap_or_default();
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    axum::response::Response::from_parts(parts, body.into())
}

#[cfg(test)]
mod scrub_tests {
    use super::scrub_urls;

    #[test]
    fn urls_are_replaced_and_the_rest_kept() {
        assert_eq!(
            scrub_urls("error 502 from http://127.0.0.1:9/v1/chat/completions: bad gateway"),
            "error 502 from <upstream>: bad gateway"
        );
        assert_eq!(
            scrub_urls("a (https://user:pw@h.example/x?y=1) and wss://s.example"),
            "a (<upstream>) and <upstream>"
        );
        assert_eq!(scrub_urls("no url here"), "no url here");
        assert_eq!(scrub_urls(":// alone"), ":// alone");
    }
}
