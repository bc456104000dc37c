//! Crash-safe file replacement: the one way WikiOracle writes a file it
//! replaces (the state file, exports, the directory index, imported
//! profiles, the server's URL file, configuration).
//!
//! A reader never sees a partial file: bytes go to a temp file in the same
//! directory (created exclusively, never through a symlink), which is
//! fsynced and renamed over the target, and then the directory is fsynced
//! so the rename itself survives a power cut. An existing file's
//! permissions are kept ([`Mode`]). On failure the original is untouched
//! and the temp file removed.
//!
//! [`project`] is the other half: opening a file inside a project folder
//! without following a link out of it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub mod project;

/// The permissions of the file written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// An existing file's permissions are kept exactly; a new file is
    /// created with `new`, narrowed by the umask as any new file is
    /// (0o600 for private data, 0o666 for what the user shares like any
    /// file they make).
    Keep {
        /// The mode of a new file, before the umask.
        new: u32,
    },
    /// Exactly this mode, whatever was there: for a file holding a secret.
    Exactly(u32),
}

/// The default for private data: an existing file's mode kept, new files
/// only the user's (0600).
pub const PRIVATE: Mode = Mode::Keep { new: 0o600 };

/// Replaces `path` with `chunks` (written in order) atomically and durably,
/// with [`PRIVATE`] permissions. On error the original is untouched and
/// the temp file removed — except when the rename succeeded and only the
/// directory fsync failed, which the error's text says (use [`stage`] and
/// [`Staged::commit`] to tell the two apart).
pub fn write_atomic(path: &Path, chunks: &[&[u8]]) -> io::Result<fs::Metadata> {
    write_atomic_with(path, PRIVATE, write_chunks(chunks))
}

/// A writer of `chunks`, in order.
fn write_chunks<'a>(chunks: &'a [&[u8]]) -> impl FnOnce(&mut dyn Write) -> io::Result<()> + 'a {
    move |w| chunks.iter().try_for_each(|chunk| w.write_all(chunk))
}

/// [`write_atomic`] with the content written by `write` (streamed through
/// a buffer, so a large value need not be serialised in memory first) and
/// the given [`Mode`].
pub fn write_atomic_with(
    path: &Path,
    mode: Mode,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<fs::Metadata> {
    match stage_with(path, mode, write)?.commit() {
        Ok(meta) => Ok(meta),
        Err(CommitError::NotReplaced(e)) => Err(e),
        // Only a swapping commit looks at the version it replaces.
        Err(CommitError::ChangedMeanwhile) => Err(io::Error::other(
            "the file changed while it was being replaced; nothing was written",
        )),
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
    /// The version at the path had changed since the caller's last look
    /// (see [`Staged::commit_swapping`]): it was put back at once, and the
    /// new version was not put in place.
    ChangedMeanwhile,
    /// The rename succeeded (the new version is in place) but the directory
    /// fsync that makes it durable failed.
    NotDurable {
        /// The fsync's error.
        source: io::Error,
        /// The new version's metadata, when it could be read.
        meta: Option<Box<fs::Metadata>>,
    },
}

/// Writes `chunks` to a temp file beside `path` with [`PRIVATE`]
/// permissions and fsyncs it (see [`stage_with`]).
pub fn stage(path: &Path, chunks: &[&[u8]]) -> io::Result<Staged> {
    stage_with(path, PRIVATE, write_chunks(chunks))
}

/// Writes a temp file beside `path` (same directory, so the rename is
/// atomic) with `write`, sets its permissions per `mode` and fsyncs it.
/// The temp file is created exclusively and never through a symlink, so
/// nothing planted at its name is written through.
pub fn stage_with(
    path: &Path,
    mode: Mode,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<Staged> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = parent_dir(path);
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let (create_mode, exact) = match (mode, fs::metadata(path)) {
        (Mode::Exactly(m), _) => (m, Some(m)),
        (Mode::Keep { .. }, Ok(m)) => {
            let kept = m.permissions().mode() & 0o7777;
            (kept, Some(kept))
        }
        (Mode::Keep { new }, Err(_)) => (new, None),
    };
    let mut attempt = 0;
    let (tmp, file) = loop {
        let tmp = dir.join(format!(
            ".{}.tmp-{}-{}",
            name.to_string_lossy(),
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let opened = OpenOptions::new()
            .write(true)
            .create_new(true)
            // Private until written: the final mode is set below.
            .mode(create_mode & 0o700)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp);
        match opened {
            Ok(file) => break (tmp, file),
            // A name left by an earlier process with our pid (or planted):
            // take the next one rather than fail.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 16 => attempt += 1,
            Err(e) => return Err(e),
        }
    };
    let staged = Staged {
        file: Some(file),
        tmp,
        path: path.to_path_buf(),
        dir,
    };
    let file = staged.file.as_ref().expect("set above");
    // Exact modes (a kept or forced one) are restored whatever the umask;
    // a new file's mode is narrowed by the umask like any new file's.
    let final_mode = exact.unwrap_or(create_mode & !current_umask());
    file.set_permissions(fs::Permissions::from_mode(final_mode))?;
    let mut writer = BufWriter::with_capacity(1 << 16, file);
    write(&mut writer)?;
    writer.flush()?;
    drop(writer);
    #[cfg(any(test, feature = "test-hooks"))]
    if let Some(errno) = FAIL_STAGES.with(std::cell::Cell::get) {
        return Err(io::Error::from_raw_os_error(errno));
    }
    file.sync_all()?;
    Ok(staged)
}

/// The process's umask, read without changing it (`/proc/self/status`,
/// Linux 4.7+); 0o022, the usual one, when it cannot be read.
fn current_umask() -> u32 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

impl Staged {
    /// Renames the temp file over the path and fsyncs the directory.
    /// Returns the metadata of the new version as written: taken from the
    /// file before the rename, and after it only if the file is still
    /// exactly that (a save landing right after the rename is someone
    /// else's version, never mistaken for ours).
    pub fn commit(mut self) -> Result<fs::Metadata, CommitError> {
        let written = self.written_meta();
        fs::rename(&self.tmp, &self.path).map_err(CommitError::NotReplaced)?;
        self.tmp = PathBuf::new();
        self.finish(written)
    }

    /// [`Staged::commit`], but the version it replaces is put aside rather
    /// than unlinked (an atomic exchange of the two names, where the
    /// filesystem offers one), so the caller can tell whether the file it
    /// replaced is still the one it last looked at: an editor saving in
    /// place in the instant between that look and the rename wrote into
    /// the displaced file.
    ///
    /// `as_looked` is asked right after the exchange. When it says the
    /// displaced version changed, the two names are exchanged back at once
    /// and the commit fails with [`CommitError::ChangedMeanwhile`]: the
    /// path holds that save again, having shown the new version (which
    /// lacks it) only for that instant — an editor that reloads on every
    /// change and saves again would otherwise save over its own edit while
    /// the caller merged. Only if putting it back fails is the displaced
    /// version returned all the same, changed, for the caller to merge.
    /// `None` where no exchange is available (the plain rename was used,
    /// or nothing was at the path).
    pub fn commit_swapping(
        mut self,
        as_looked: impl FnOnce(&Displaced) -> bool,
    ) -> Result<(fs::Metadata, Option<Displaced>), CommitError> {
        let written = self.written_meta();
        let displaced = match exchange(&self.tmp, &self.path) {
            Ok(()) => {
                let displaced = Displaced {
                    path: std::mem::take(&mut self.tmp),
                };
                if !as_looked(&displaced) && exchange(&displaced.path, &self.path).is_ok() {
                    // The temp name holds the new version again: dropping
                    // `displaced` removes it.
                    return Err(CommitError::ChangedMeanwhile);
                }
                Some(displaced)
            }
            Err(e) if exchange_unavailable(&e) => {
                fs::rename(&self.tmp, &self.path).map_err(CommitError::NotReplaced)?;
                self.tmp = PathBuf::new();
                None
            }
            Err(e) => return Err(CommitError::NotReplaced(e)),
        };
        self.finish(written).map(|meta| (meta, displaced))
    }

    /// Puts the new version in place only if nothing is at the path yet
    /// (a hard link fails when the name exists, so two creators cannot both
    /// win), then fsyncs the directory.
    pub fn commit_new(mut self) -> Result<fs::Metadata, CommitError> {
        let written = self.written_meta();
        fs::hard_link(&self.tmp, &self.path).map_err(CommitError::NotReplaced)?;
        let _ = fs::remove_file(&self.tmp);
        self.tmp = PathBuf::new();
        self.finish(written)
    }

    /// The temp file's metadata now, before it is put in place: what we
    /// wrote, whatever lands at the path afterwards.
    fn written_meta(&self) -> Option<fs::Metadata> {
        self.file.as_ref().and_then(|f| f.metadata().ok())
    }

    /// Whether any write to the staged file from now on would move its
    /// modification time (see [`modifications_move_past`]): asked before
    /// putting it in place, true means an editor's save in place will
    /// always show in the metadata. Usually true for a large file (its
    /// fsync outlasts the clock's tick); false for a small one written
    /// within the tick, or where it cannot be told (a filesystem keeping
    /// whole seconds): the caller then compares bytes, cheap for a small
    /// file.
    pub fn settled(&self) -> bool {
        self.written_meta()
            .and_then(|meta| modifications_move_past(&meta))
            .unwrap_or(false)
    }

    /// The temp file holding the new version (for a caller that links it
    /// under a name of its own choosing, such as a dated backup).
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    fn finish(&mut self, written: Option<fs::Metadata>) -> Result<fs::Metadata, CommitError> {
        #[cfg(any(test, feature = "test-hooks"))]
        AFTER_RENAME.with(|hook| {
            if let Some(f) = hook.borrow_mut().as_mut() {
                f(&self.path);
            }
        });
        // After the rename the file's change time moved (the rename sets
        // it), so its metadata now is what a later look at the path sees —
        // if nothing else wrote to it since: the same inode, length and
        // modification time as written. Otherwise the version written
        // stands, and a later look sees a change to re-read.
        let now = self.file.take().and_then(|f| f.metadata().ok());
        let meta = match (written, now) {
            (Some(w), Some(n)) if same_write(&w, &n) => Some(n),
            (Some(w), _) => Some(w),
            (None, n) => n,
        };
        match (sync_dir(&self.dir), meta) {
            (Ok(()), Some(meta)) => Ok(meta),
            (Ok(()), None) => fs::metadata(&self.path)
                .map_err(|source| CommitError::NotDurable { source, meta: None }),
            (Err(source), meta) => Err(CommitError::NotDurable {
                source,
                meta: meta.map(Box::new),
            }),
        }
    }
}

/// The version a [`Staged::commit_swapping`] replaced, under the temp
/// file's name; removed when dropped.
#[derive(Debug)]
pub struct Displaced {
    path: PathBuf,
}

impl Displaced {
    /// Where the displaced version is now (beside the target).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its metadata now: the same inode, length and modification time as
    /// at the caller's last look, or someone wrote to it since.
    pub fn metadata(&self) -> io::Result<fs::Metadata> {
        fs::symlink_metadata(&self.path)
    }
}

impl Drop for Displaced {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Swaps the names `a` and `b` atomically (both must exist).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
    };
    let (a, b) = (c(a)?, c(b)?);
    // SAFETY: both are valid NUL-terminated paths that outlive the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn exchange(_: &Path, _: &Path) -> io::Result<()> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

/// An exchange this system or filesystem cannot do (or nothing to exchange
/// with): a plain rename does the job, without the check.
fn exchange_unavailable(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP | libc::ENOENT)
    )
}

/// The same file with the same content as far as metadata tells: inode,
/// length and modification time (the change time moves with a rename).
fn same_write(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    (a.dev(), a.ino(), a.len(), a.mtime(), a.mtime_nsec())
        == (b.dev(), b.ino(), b.len(), b.mtime(), b.mtime_nsec())
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Whether every write to the file whose metadata is `meta` from now on
/// gives it a later modification time than `meta` holds: the clock the
/// kernel stamps files with (its coarse clock, which moves in ticks of a
/// few milliseconds) has moved past it. Until then a save in place of the
/// same length can leave the metadata exactly as it was. `None` when it
/// cannot be told: a time with no sub-second part may come from a
/// filesystem keeping whole (or even) seconds.
pub fn modifications_move_past(meta: &fs::Metadata) -> Option<bool> {
    use std::os::unix::fs::MetadataExt;
    if meta.mtime_nsec() == 0 {
        return None;
    }
    let now = file_clock_now()?;
    Some(now > (meta.mtime(), meta.mtime_nsec()))
}

/// The time a file modified now would be stamped with, at the latest: the
/// kernel's coarse real-time clock (seconds, nanoseconds).
#[cfg(target_os = "linux")]
fn file_clock_now() -> Option<(i64, i64)> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    // `time_t` and `c_long` are 32 bits wide on some targets.
    #[allow(clippy::unnecessary_cast)]
    (rc == 0).then_some((ts.tv_sec as i64, ts.tv_nsec as i64))
}

/// Elsewhere the clock's tick is not known: a time 2.1 s back (beyond any
/// tick, and FAT's 2 s granularity) stands in for it.
#[cfg(not(target_os = "linux"))]
fn file_clock_now() -> Option<(i64, i64)> {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .checked_sub(std::time::Duration::from_millis(2_100))?;
    Some((d.as_secs() as i64, i64::from(d.subsec_nanos())))
}

/// Removes temp files a killed writer of `path` left behind. Call only
/// while every writer of `path` is excluded (under its lock): any temp file
/// present then belongs to a writer that died.
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

#[cfg(any(test, feature = "test-hooks"))]
thread_local! {
    static FAIL_DIR_SYNC: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// What [`after_rename`] runs.
#[cfg(any(test, feature = "test-hooks"))]
pub type RenameHook = Box<dyn FnMut(&Path)>;

#[cfg(any(test, feature = "test-hooks"))]
thread_local! {
    static FAIL_STAGES: std::cell::Cell<Option<i32>> = const { std::cell::Cell::new(None) };
    static AFTER_RENAME: std::cell::RefCell<Option<RenameHook>> =
        const { std::cell::RefCell::new(None) };
}

/// Test hook (feature `test-hooks`): while `Some(errno)`, writing a temp
/// file on this thread fails with that error (`libc::ENOSPC`: a full disk)
/// after its bytes were written, before the fsync.
#[cfg(any(test, feature = "test-hooks"))]
pub fn fail_stages(errno: Option<i32>) {
    FAIL_STAGES.with(|f| f.set(errno));
}

/// Test hook (feature `test-hooks`): runs `hook` on this thread right after
/// each rename of a commit, before the new version's metadata is taken
/// again (an editor saving in that instant).
#[cfg(any(test, feature = "test-hooks"))]
pub fn after_rename(hook: Option<RenameHook>) {
    AFTER_RENAME.with(|h| *h.borrow_mut() = hook);
}

/// Test hook (feature `test-hooks`): while `on`, directory fsyncs on this
/// thread fail, as on a disk that refuses them.
#[cfg(any(test, feature = "test-hooks"))]
pub fn fail_dir_syncs(on: bool) {
    FAIL_DIR_SYNC.with(|f| f.set(on));
}

/// fsyncs a directory so a rename in it is durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(any(test, feature = "test-hooks"))]
    if FAIL_DIR_SYNC.with(std::cell::Cell::get) {
        return Err(io::Error::other("injected directory fsync failure"));
    }
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode_of(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    fn entries(dir: &Path) -> usize {
        fs::read_dir(dir).unwrap().count()
    }

    #[test]
    fn replaces_content_and_keeps_mode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("llm.json");
        write_atomic(&p, &[b"one"]).unwrap();
        assert_eq!(mode_of(&p), 0o600);
        fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&p, &[b"tw", b"o"]).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(mode_of(&p), 0o640);
        assert_eq!(entries(dir.path()), 1, "no temp files left behind");
    }

    #[test]
    fn new_shared_files_follow_the_umask_and_exact_modes_are_forced() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("index.json");
        let meta =
            write_atomic_with(&p, Mode::Keep { new: 0o666 }, |w| w.write_all(b"{}")).unwrap();
        assert_eq!(meta.len(), 2);
        assert_eq!(mode_of(&p), 0o666 & !current_umask());
        // A secret file is 0600 even where a wider file stood.
        let url = dir.path().join("url");
        fs::write(&url, b"old").unwrap();
        fs::set_permissions(&url, fs::Permissions::from_mode(0o644)).unwrap();
        write_atomic_with(&url, Mode::Exactly(0o600), |w| w.write_all(b"token")).unwrap();
        assert_eq!(
            (mode_of(&url), fs::read(&url).unwrap()),
            (0o600, b"token".to_vec())
        );
    }

    #[test]
    fn a_failing_writer_leaves_the_original_and_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("index.json");
        write_atomic(&p, &[b"original"]).unwrap();
        let err = write_atomic_with(&p, PRIVATE, |w| {
            w.write_all(b"half")?;
            Err(io::Error::other("serialiser failed"))
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "serialiser failed");
        assert_eq!(fs::read(&p).unwrap(), b"original");
        assert_eq!(entries(dir.path()), 1);
    }

    #[test]
    fn failure_to_rename_leaves_original_intact() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("llm.json");
        write_atomic(&p, &[b"original"]).unwrap();
        // A non-empty directory cannot be renamed over.
        let target_dir = dir.path().join("sub");
        fs::create_dir(&target_dir).unwrap();
        fs::write(target_dir.join("x"), b"").unwrap();
        assert!(write_atomic(&target_dir, &[b"new"]).is_err());
        assert_eq!(fs::read(&p).unwrap(), b"original");
        assert_eq!(entries(dir.path()), 2, "llm.json and sub only");
    }

    #[test]
    fn a_planted_symlink_at_a_temp_name_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("url");
        let victim = dir.path().join("victim");
        fs::write(&victim, b"keep").unwrap();
        // Links at many of the temp names this process may use next: each
        // is skipped (or, past the retries, the write fails), never written
        // through.
        for n in 0..64 {
            let name = format!(".url.tmp-{}-{n}", std::process::id());
            std::os::unix::fs::symlink(&victim, dir.path().join(name)).unwrap();
        }
        match write_atomic_with(&p, Mode::Exactly(0o600), |w| w.write_all(b"secret")) {
            Ok(_) => assert_eq!(fs::read(&p).unwrap(), b"secret"),
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::AlreadyExists),
        }
        assert_eq!(fs::read(&victim).unwrap(), b"keep");
    }

    #[test]
    fn dir_sync_failure_is_reported_with_the_new_version_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("llm.json");
        fail_dir_syncs(true);
        let result = stage(&p, &[b"new"]).unwrap().commit();
        fail_dir_syncs(false);
        match result {
            Err(CommitError::NotDurable { meta, .. }) => assert!(meta.is_some()),
            other => panic!("expected NotDurable, got {other:?}"),
        }
        assert_eq!(fs::read(&p).unwrap(), b"new");
    }

    #[test]
    fn a_swapping_commit_puts_the_old_version_aside_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("llm.json");
        fs::write(&p, b"old").unwrap();
        let before = fs::metadata(&p).unwrap();
        let (meta, displaced) = stage(&p, &[b"new"])
            .unwrap()
            .commit_swapping(|_| true)
            .unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"new");
        assert_eq!(meta.len(), 3);
        if let Some(displaced) = displaced {
            // Where the filesystem swaps: the old version, untouched.
            use std::os::unix::fs::MetadataExt;
            assert_eq!(fs::read(displaced.path()).unwrap(), b"old");
            assert_eq!(displaced.metadata().unwrap().ino(), before.ino());
            assert_eq!(entries(dir.path()), 2);
            drop(displaced);
        }
        assert_eq!(entries(dir.path()), 1);
        // Nothing at the path yet: a plain rename, nothing displaced.
        let q = dir.path().join("new.json");
        let (_, displaced) = stage(&q, &[b"x"])
            .unwrap()
            .commit_swapping(|_| true)
            .unwrap();
        assert!(displaced.is_none());
        assert_eq!(fs::read(&q).unwrap(), b"x");
    }

    #[test]
    fn a_swapping_commit_puts_a_version_changed_since_the_look_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("llm.json");
        fs::write(&p, b"old").unwrap();
        let mut asked = 0;
        let result = stage(&p, &[b"new"]).unwrap().commit_swapping(|displaced| {
            asked += 1;
            // Asked with the new version in place and the old one aside.
            assert_eq!(fs::read(displaced.path()).unwrap(), b"old");
            assert_eq!(fs::read(&p).unwrap(), b"new");
            false
        });
        if let Ok((_, None)) = result {
            return; // no exchange on this filesystem: a plain rename, nothing to ask
        }
        assert_eq!(asked, 1);
        assert!(
            matches!(result, Err(CommitError::ChangedMeanwhile)),
            "{result:?}"
        );
        // The changed version is back at the path; the new one is gone.
        assert_eq!(fs::read(&p).unwrap(), b"old");
        assert_eq!(entries(dir.path()), 1);
    }

    /// Once the file clock has passed a file's modification time, a save
    /// in place of the same length moves it.
    #[test]
    fn after_its_tick_a_same_length_save_moves_the_modification_time() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("llm.json");
        let staged = stage(&p, &[b"one"]).unwrap();
        let started = std::time::Instant::now();
        while !staged.settled() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(3),
                "the file clock never passed a fresh file's modification time"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        staged.commit().unwrap();
        let before = fs::metadata(&p).unwrap();
        assert_eq!(modifications_move_past(&before), Some(true));
        fs::write(&p, b"two").unwrap();
        let after = fs::metadata(&p).unwrap();
        assert_eq!(after.len(), before.len());
        assert_ne!(after.modified().unwrap(), before.modified().unwrap());
    }

    #[test]
    fn commit_new_never_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("llm.json");
        stage(&p, &[b"first"]).unwrap().commit_new().unwrap();
        assert!(matches!(
            stage(&p, &[b"second"]).unwrap().commit_new(),
            Err(CommitError::NotReplaced(_))
        ));
        assert_eq!(fs::read(&p).unwrap(), b"first");
        assert_eq!(entries(dir.path()), 1);
    }
}
