//! Crash-safe file replacement and invalid-file backups.
//!
//! A reader never sees a partial file: bytes go to a temp file in the same
//! directory, which is fsynced and renamed over the target, and then the
//! directory is fsynced so the rename itself survives a power cut.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Replaces `path` with `chunks` (written in order) atomically and durably.
/// Keeps the permissions of an existing file; new files are 0600. On error
/// the original is untouched and the temp file removed.
pub fn write_atomic(path: &Path, chunks: &[&[u8]]) -> io::Result<fs::Metadata> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = parent_dir(path);
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, "state path has no file name")
    })?;
    let mode = match fs::metadata(path) {
        Ok(m) => m.permissions().mode() & 0o7777,
        Err(_) => 0o600,
    };
    let tmp = dir.join(format!(
        ".{}.tmp-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        // The umask may have narrowed the mode; restore the original exactly.
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        for chunk in chunks {
            file.write_all(chunk)?;
        }
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)?;
        sync_dir(&dir)?;
        fs::metadata(path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Removes temp files a killed writer of `path` left behind. Call only while
/// holding the state's lock: every writer holds it, so any temp file present
/// then belongs to a writer that died.
pub fn remove_stale_temps(path: &Path) {
    let Some(name) = path.file_name() else { return };
    let prefix = format!(".{}.tmp-", name.to_string_lossy());
    let Ok(entries) = fs::read_dir(parent_dir(path)) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// The directory holding `path` (`.` for a bare file name).
pub fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// fsyncs a directory so a rename in it is durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Copies the bytes of an invalid state file to `<name>.bak-<UTC>` beside it
/// (never overwriting an earlier backup) and returns the backup's path.
pub fn backup_invalid(path: &Path) -> io::Result<PathBuf> {
    let bytes = fs::read(path)?;
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
    for attempt in 0u32.. {
        let suffix = if attempt == 0 {
            String::new()
        } else {
            format!("-{attempt}")
        };
        let backup = dir.join(format!("{name}.bak-{stamp}{suffix}"));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&backup)
        {
            Ok(mut f) => {
                f.write_all(&bytes)?;
                f.sync_all()?;
                sync_dir(&dir)?;
                return Ok(backup);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    unreachable!("u32 attempts exhausted")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_content_and_keeps_mode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("llm.json");
        write_atomic(&p, &[b"one"]).unwrap();
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&p, &[b"tw", b"o"]).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o640
        );
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp files left behind");
    }

    #[test]
    fn failure_leaves_original_intact() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("llm.json");
        write_atomic(&p, &[b"original"]).unwrap();
        // A directory where the temp file would go cannot be renamed over.
        let target_dir = dir.path().join("sub");
        fs::create_dir(&target_dir).unwrap();
        fs::write(target_dir.join("x"), b"").unwrap();
        assert!(write_atomic(&target_dir, &[b"new"]).is_err());
        assert_eq!(fs::read(&p).unwrap(), b"original");
    }

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
