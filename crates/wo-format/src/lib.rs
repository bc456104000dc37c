//! The `llm.json` state format (product §1, §3): the typed model, parsing with
//! JSON-pointer errors, the canonical serializer, XHTML sanitising,
//! content-addressed ids and the deterministic merge.
//!
//! This crate does no I/O; `wo-store` owns files and locks.

pub mod admit;
mod canonical_read;
pub mod codec;
pub mod content_keys;
pub mod context_used;
pub mod conversation;
pub mod ids;
mod known;
mod links;
pub mod merge;
pub mod merge3;
pub mod model;
mod model_de;
pub mod names;
pub mod query;
pub mod rawjson;
pub mod records;
pub mod state;
pub mod timestamp;
pub mod title;
mod transcript;
mod undo;
pub mod validate;
pub mod xhtml;

pub use codec::{
    CanonicalParts, MessageCache, ParseError, canonical_parts, parse, parse_written,
    to_canonical_vec, validate_bytes, write_canonical,
};
pub use context_used::{CONTEXT_USED_KEY, ContextUsed, UsedPart};
pub use links::BranchWalk;
pub use model::{
    ARCHIVE_KEY, EffectivePrefs, EffortStatus, Expires, Extra, Message, NEW_CONVERSATION_KEY,
    Provenance, RetrievalPrefs, Role, SCHEMA_URL, Tombstone, Truth, TruthEdit, TruthEntry,
    TruthKind, Usage,
};
pub use rawjson::RawJson;
pub use state::State;
pub use timestamp::Timestamp;
pub use transcript::TranscriptVersion;
pub use validate::Issue;
