//! Crash-safe file replacement (`wo_durable`, re-exported: the one atomic
//! write, shared with the index, the importers and the CLI) and the
//! store's invalid-file backups; `project`, for opening a project's files
//! without following links out of it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

pub use wo_durable::{
    CommitError, Displaced, Staged, modifications_move_past, parent_dir, project,
    remove_stale_temps, stage, sync_dir, write_atomic,
};

/// Copies the bytes of an invalid state file to `<name>.bak-<UTC>` beside it
/// (never overwriting an earlier backup) and returns the backup's path.
///
/// The copy is complete and durable before it gets its name: it is written
/// to a temp file and fsynced, then hard-linked to the backup name (which
/// fails rather than replace an existing backup). On any failure (a full
/// disk) no backup name exists and the error says nothing was changed.
pub fn backup_invalid(path: &Path) -> Result<PathBuf, crate::StoreError> {
    let fail = |source: io::Error| crate::StoreError::Backup {
        path: path.to_path_buf(),
        source,
    };
    let bytes = fs::read(path).map_err(fail)?;
    let now = time::OffsetDateTime::now_utc();
    let stamp = format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    );
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = parent_dir(path);
    let staged = stage(&dir.join(format!("{name}.bak")), &[&bytes]).map_err(fail)?;
    for attempt in 0u32.. {
        let suffix = if attempt == 0 {
            String::new()
        } else {
            format!("-{attempt}")
        };
        let backup = dir.join(format!("{name}.bak-{stamp}{suffix}"));
        match fs::hard_link(staged.temp_path(), &backup) {
            Ok(()) => {
                drop(staged);
                sync_dir(&dir).map_err(fail)?;
                return Ok(backup);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(fail(e)),
        }
    }
    unreachable!("u32 attempts exhausted")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backups_never_collide() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("llm.json");
        fs::write(&p, b"{broken").unwrap();
        let a = backup_invalid(&p).unwrap();
        let b = backup_invalid(&p).unwrap();
        assert_ne!(a, b);
        assert!(
            a.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("llm.json.bak-")
        );
        assert_eq!(fs::read(&a).unwrap(), b"{broken");
        assert_eq!(fs::read(&b).unwrap(), b"{broken");
    }
}
