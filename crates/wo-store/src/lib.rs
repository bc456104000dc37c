//! The durable store for one `llm.json` (product §2, §3 startup merge).
//!
//! * [`Store`] owns one state file: it loads it (never waiting for a
//!   writer), and writes it atomically (temp file → fsync → rename → fsync
//!   directory) under an advisory lock (`llm.json.lock`, waited for at most
//!   `WO_LOCK_TIMEOUT` seconds). A writer writes only its own changes: if
//!   the file changed since it was read — by `wo`, a server or an editor —
//!   it re-reads it and applies only what it changed since then (a
//!   three-way merge), and it looks again right before the rename.
//! * Invalid files are never overwritten: [`backup_invalid`] copies them to
//!   `llm.json.bak-<UTC>` before anyone starts fresh.
//! * [`GroupCommit`] lets many threads commit to one shared store with one
//!   write (and one fsync) for the changes that arrive together; each is
//!   acknowledged only once that write is durable.
//! * [`exports`] finds `llm_*.json` exports beside the state file, merges them
//!   and renames each to `*.merged`.

pub mod discover;
pub mod durable;
pub mod exports;
mod group;
mod store;

pub use discover::{STATE_FILE_NAME, discover_state, discover_state_path};
pub use durable::{backup_invalid, write_atomic};
pub use group::GroupCommit;
pub use store::{
    LOCK_TIMEOUT_ENV, Limits, MAX_MESSAGE_BYTES_ENV, OpenOptions, SaveOutcome, Store, StoreError,
    lock_path_for,
};
