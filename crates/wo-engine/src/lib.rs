//! The chat engine (product §4): what to send a model for one turn, and how the
//! turn is recorded afterwards. Shared by `wo ask`, `wo chat` and the server
//! so that retrieval and budgeting behave the same everywhere.
//!
//! * [`bm25`] — `wo_text::bm25`, re-exported: one query scored over any
//!   set of documents (the tokenizer and formula live in `wo-text`, shared
//!   with the directory index).
//! * [`retrieve`] — ranking truth entries (relevance × certainty/recency
//!   prior) and recalling earlier messages.
//! * [`recall`] — the transcript's postings kept beside a long-lived
//!   state (the local server), extended as messages are appended; recall
//!   from it equals the scan.
//! * [`assemble`] — building the prompt within a token budget, recording
//!   what was included and what was dropped and why.
//! * [`explain`] — the parts of an assembled prompt (kind, ids, referenced
//!   ids, tokens) as text or JSON, for every face that shows the context.
//! * [`turn`] — the messages a finished turn appends to the state.
//! * [`chat`] — one turn end to end: the only code that sequences a turn
//!   (assemble, fetch links, stream, commit), for every face.
//! * [`request`] — one validation of a turn's inputs (with the config's
//!   `[defaults]`), errors naming the field.
//! * [`conversation`] — renaming a conversation: the one rule for a title
//!   a person gives a message.
//! * [`context_update`] — drafting a new context from new messages (diff,
//!   apply with an audit entry).
//! * [`files`] — file chunks from the directory index as context.
//! * [`archive`] — expiring entries unused for the configured age leave
//!   retrieval (marked, never deleted) and stay searchable on request.
//! * [`memory`] — memory by conclusions: validated operations on truth with
//!   provenance, the per-exchange journal and undo, one interpreter call.
//! * [`priority`] — answers before memory: a server's memory step gives
//!   way to answers in flight on the same model.
//! * [`agent`] — what a coding agent is handed (MCP's search, recent and
//!   context): items paged by a token budget and a cursor.
//! * [`synopsis`] — drafting the context synopsis from the index catalog.

pub mod agent;
pub mod archive;
pub mod assemble;
pub mod chat;
pub mod context_update;
pub mod conversation;
pub mod dense;
pub mod embed_file;
pub mod explain;
pub mod files;
pub mod input;
pub mod memory;
pub mod memory_jobs;
pub mod priority;
pub mod recall;
pub mod recall_file;
pub mod request;
pub mod retrieve;
pub mod setup;
pub mod synopsis;
pub mod turn;
pub mod window;

pub use wo_text::bm25;

pub use assemble::{
    Assembled, AssemblyOptions, ChunkCandidate, Dropped, Included, SourceKind, assemble,
    assemble_indexed,
};
pub use recall::RecallIndex;
