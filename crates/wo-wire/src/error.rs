//! The body of every error answer: `{"error": {"kind", "message", "pointer"?}}`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An error answer's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// What went wrong, for a program (`kind`, `pointer`) and a person (`message`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorDetail {
    /// Machine-readable kind: `bad_request`, `unauthorized`, `forbidden`,
    /// `not_found`, `payload_too_large`, `unsupported_media_type`,
    /// `rate_limited`, `conflict`, `timeout`, `busy`, `provider`, `storage`,
    /// `internal`, ….
    pub kind: String,
    /// Human-readable; never carries a secret or message content.
    pub message: String,
    /// JSON pointer of the request body's field at fault, when one is
    /// (`""`: the body as a whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
}
