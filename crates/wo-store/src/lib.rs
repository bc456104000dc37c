//! The durable store for one `llm.json` (SPEC §2, §3 startup merge).
//!
//! * [`Store`] owns one state file: it loads it, and writes it atomically
//!   (temp file → fsync → rename → fsync directory) under an advisory lock
//!   (`llm.json.lock`). If the file changed since it was loaded, it re-reads
//!   and merges before writing, so two CLI runs and a server lose nothing.
//! * Invalid files are never overwritten: [`backup_invalid`] copies them to
//!   `llm.json.bak-<UTC>` before anyone starts fresh.
//! * [`exports`] finds `llm_*.json` exports beside the state file, merges them
//!   and renames each to `*.merged`.

pub mod discover;
pub mod durable;
pub mod exports;
mod store;

pub use discover::{STATE_FILE_NAME, discover_state_path};
pub use durable::{backup_invalid, write_atomic};
pub use store::{Limits, OpenOptions, SaveOutcome, Store, StoreError};
