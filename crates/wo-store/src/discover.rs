//! Finding the state file: `./llm.json`, else the nearest one in a parent
//! directory (like git finds `.git`) — but only one that is yours.
//!
//! A parent directory may be shared (`/tmp`): an `llm.json` someone else put
//! there must not become your memory, nor receive your turns. Files found by
//! discovery must be owned by the current user (or root); naming a file with
//! `--state` is how to use any other.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::StoreError;

pub use wo_format::names::STATE_FILE_NAME;

/// The nearest `llm.json` at or above `start`. `Ok(None)`: there is none;
/// an error when the nearest one belongs to another user (its message names
/// the file and says how to use it anyway).
pub fn discover_state(start: &Path) -> Result<Option<PathBuf>, StoreError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    for dir in start.ancestors() {
        let candidate = dir.join(STATE_FILE_NAME);
        let Ok(meta) = candidate.symlink_metadata() else {
            continue;
        };
        let owner = meta.uid();
        if owner != me && owner != 0 {
            return Err(StoreError::ForeignOwner {
                path: candidate,
                owner,
            });
        }
        return Ok(Some(candidate));
    }
    Ok(None)
}

/// The nearest `llm.json` at or above `start` that is yours (owned by you or
/// root); files of other users are passed over. Prefer [`discover_state`],
/// which says so instead.
pub fn discover_state_path(start: &Path) -> Option<PathBuf> {
    // SAFETY: as above.
    let me = unsafe { libc::geteuid() };
    start
        .ancestors()
        .map(|dir| dir.join(STATE_FILE_NAME))
        .find(|candidate| {
            candidate
                .symlink_metadata()
                .is_ok_and(|m| m.uid() == me || m.uid() == 0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nearest_parent_file() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a/b/c");
        std::fs::create_dir_all(&deep).unwrap();
        assert_eq!(
            discover_state_path(&deep).filter(|p| p.starts_with(dir.path())),
            None
        );
        std::fs::write(dir.path().join("a/llm.json"), "{}").unwrap();
        assert_eq!(
            discover_state_path(&deep),
            Some(dir.path().join("a/llm.json"))
        );
        assert_eq!(
            discover_state(&deep).unwrap(),
            Some(dir.path().join("a/llm.json"))
        );
        std::fs::write(deep.join("llm.json"), "{}").unwrap();
        assert_eq!(discover_state_path(&deep), Some(deep.join("llm.json")));
    }
}
