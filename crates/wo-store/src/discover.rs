//! Finding the state file: `./llm.json`, else the nearest one in a parent
//! directory (like git finds `.git`).

use std::path::{Path, PathBuf};

/// The conventional file name.
pub const STATE_FILE_NAME: &str = "llm.json";

/// The nearest `llm.json` at or above `start`, if any.
pub fn discover_state_path(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|dir| dir.join(STATE_FILE_NAME))
        .find(|candidate| candidate.symlink_metadata().is_ok())
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
        std::fs::write(deep.join("llm.json"), "{}").unwrap();
        assert_eq!(discover_state_path(&deep), Some(deep.join("llm.json")));
    }
}
