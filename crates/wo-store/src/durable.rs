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
/// the original is untouched and the temp file removed — except when the
/// rename succeeded and only the directory fsync failed, which the error's
/// text says (use [`stage`] and [`Staged::commit`] to tell the two apart).
pub fn write_atomic(path: &Path, chunks: &[&[u8]]) -> io::Result<fs::Metadata> {
    match stage(path, chunks)?.commit() {
        Ok(meta) => Ok(meta),
        Err(CommitError::NotReplaced(e)) => Err(e),
        Err(CommitError::NotDurable { source, .. }) => Err(io::Error::new(
            source.kind(),
            format!("the new version is in place but not confirmed durable: {source}"),
        )),
    }
}

/// A new version of a file, written and fsynced to a temp file beside it,
/// not yet in place. Dropping it removes the temp file.
#[derive(Debug)]
pub struct Staged {
    file: Option<File>,
    tmp: PathBuf,
    path: PathBuf,
    dir: PathBuf,
}

/// Why [`Staged::commit`] failed.
#[derive(Debug)]
pub enum CommitError {
    /// The rename failed: the file at the path is what it was.
    NotReplaced(io::Error),
    /// The rename succeeded (the new version is in place, `meta` is its
    /// metadata) but the directory fsync that makes it durable failed.
    NotDurable {
        source: io::Error,
        meta: Option<Box<fs::Metadata>>,
    },
}

/// Writes `chunks` to a temp file beside `path` (same directory, so the
/// rename is atomic), with the permissions of the existing file (0600 for a
/// new one), and fsyncs it.
pub fn stage(path: &Path, chunks: &[&[u8]]) -> io::Result<Staged> {
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
    let mut staged = Staged {
        file: None,
        tmp,
        path: path.to_path_buf(),
        dir,
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&staged.tmp)?;
    staged.file = Some(file.try_clone()?);
    // The umask may have narrowed the mode; restore the original exactly.
    file.set_permissions(fs::Permissions::from_mode(mode))?;
    for chunk in chunks {
        file.write_all(chunk)?;
    }
    file.sync_all()?;
    Ok(staged)
}

impl Staged {
    /// Renames the temp file over the path and fsyncs the directory.
    /// Returns the metadata of the new version (taken from the file written,
    /// so a change someone makes right after the rename is not mistaken for
    /// ours).
    pub fn commit(mut self) -> Result<fs::Metadata, CommitError> {
        fs::rename(&self.tmp, &self.path).map_err(CommitError::NotReplaced)?;
        let file = self.file.take();
        self.tmp = PathBuf::new();
        let meta = file.as_ref().map(File::metadata);
        let synced = sync_dir(&self.dir);
        match (synced, meta) {
            (Ok(()), Some(Ok(meta))) => Ok(meta),
            (Ok(()), _) => fs::metadata(&self.path)
                .map_err(|source| CommitError::NotDurable { source, meta: None }),
            (Err(source), meta) => Err(CommitError::NotDurable {
                source,
                meta: meta.and_then(Result::ok).map(Box::new),
            }),
        }
    }

    /// Puts the new version in place only if nothing is at the path yet
    /// (a hard link fails when the name exists, so two creators cannot both
    /// win), then fsyncs the directory.
    pub fn commit_new(mut self) -> Result<fs::Metadata, CommitError> {
        fs::hard_link(&self.tmp, &self.path).map_err(CommitError::NotReplaced)?;
        let _ = fs::remove_file(&self.tmp);
        self.tmp = PathBuf::new();
        let meta = self.file.take().map(|f| f.metadata());
        match (sync_dir(&self.dir), meta) {
            (Ok(()), Some(Ok(meta))) => Ok(meta),
            (Ok(()), _) => fs::metadata(&self.path)
                .map_err(|source| CommitError::NotDurable { source, meta: None }),
            (Err(source), meta) => Err(CommitError::NotDurable {
                source,
                meta: meta.and_then(Result::ok).map(Box::new),
            }),
        }
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
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

#[cfg(test)]
thread_local! {
    /// Test hook: the next directory fsyncs on this thread fail.
    pub(crate) static FAIL_DIR_SYNC: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// fsyncs a directory so a rename in it is durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(test)]
    if FAIL_DIR_SYNC.with(std::cell::Cell::get) {
        return Err(io::Error::other("injected directory fsync failure"));
    }
    File::open(dir)?.sync_all()
}

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
        match fs::hard_link(&staged.tmp, &backup) {
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
