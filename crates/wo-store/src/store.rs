//! [`Store`]: one loaded state file and the rules for changing it.

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use wo_format::merge3::{Baseline, merge3};
use wo_format::records;
use wo_format::validate::Issue;
use wo_format::{MessageCache, State, Timestamp};

use crate::durable::{self, CommitError};

/// Environment variable: seconds a writer waits for another's lock
/// (default 30; `0` gives up at once).
pub const LOCK_TIMEOUT_ENV: &str = "WO_LOCK_TIMEOUT";
/// Environment variable: the largest message or truth entry content, in
/// bytes (default 1 MiB).
pub const MAX_MESSAGE_BYTES_ENV: &str = "WO_MAX_MESSAGE_BYTES";
/// How often a writer re-merges because the file changed between its
/// re-read and its rename, at least, before it gives up with nothing
/// written: it keeps trying for [`WRITE_PATIENCE`] after that, so an
/// editor saving faster than this writer stages a version (an fsync on a
/// slow disk) does not starve it.
const MAX_WRITE_ATTEMPTS: u32 = 8;
/// How long a writer keeps re-merging an editor's saves (see above).
const WRITE_PATIENCE: Duration = Duration::from_secs(5);

/// Size limits with clear errors (product §2).
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest state file read or written (default 256 MiB).
    pub max_state_bytes: u64,
    /// Largest XHTML content of one message or truth entry (default 1 MiB,
    /// or `WO_MAX_MESSAGE_BYTES`). Checked for what a process adds or
    /// changes, before it is written; faces should also check raw input
    /// with [`Limits::check_message`] before converting it.
    pub max_message_bytes: usize,
    /// Largest `context` (default 64 KiB; the SPEC's target is under 8 KB).
    pub max_context_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_state_bytes: 256 * 1024 * 1024,
            max_message_bytes: std::env::var(MAX_MESSAGE_BYTES_ENV)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(1024 * 1024),
            max_context_bytes: 64 * 1024,
        }
    }
}

impl Limits {
    /// Checks the size of one message's or entry's content (`what` names it,
    /// e.g. a JSON pointer or a flag) against [`Limits::max_message_bytes`].
    pub fn check_message(&self, path: &Path, what: &str, size: usize) -> Result<(), StoreError> {
        if size > self.max_message_bytes {
            return Err(StoreError::ContentTooLarge {
                path: path.to_path_buf(),
                what: what.to_owned(),
                size,
                limit: self.max_message_bytes,
            });
        }
        Ok(())
    }
}

/// How to open a state file.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// Accept a state path that is a symbolic link (refused by default).
    pub allow_symlink: bool,
    /// Create the file with defaults if it does not exist.
    pub create_if_missing: bool,
    /// Size limits of the file and of its content.
    pub limits: Limits,
    /// How long a writer waits for another process's lock before giving up
    /// with nothing changed (default: `WO_LOCK_TIMEOUT` seconds, else 30 s).
    /// Readers never wait.
    pub lock_timeout: Option<Duration>,
    /// Sanitise XHTML content that breaks the content rules whenever the
    /// file is read (open, and every re-read after an outside change), as
    /// an import is: for a reader that serves the content to a browser.
    /// The file itself changes only with the next write.
    pub sanitise_content: bool,
}

impl OpenOptions {
    /// The lock timeout in effect.
    pub fn effective_lock_timeout(&self) -> Duration {
        self.lock_timeout.unwrap_or_else(|| {
            std::env::var(LOCK_TIMEOUT_ENV)
                .ok()
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map_or(Duration::from_secs(30), Duration::from_secs_f64)
        })
    }
}

/// Everything that can go wrong with a state file. Every variant names the
/// file; [`StoreError::exit_code`] maps write failures to 2 (product §2).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "{path}: no state file here\nhint: create one with `wo init`, or name one with --state PATH"
    )]
    /// No state file at the path.
    NotFound {
        /// The state file.
        path: PathBuf,
    },
    #[error(
        "{path}: is a symbolic link; refusing to follow it\nhint: pass --allow-symlink if you mean it"
    )]
    /// The path is a symbolic link and links were not allowed.
    Symlink {
        /// The state file.
        path: PathBuf,
    },
    #[error("{path}: is not a regular file")]
    /// The path is a directory or a special file.
    NotAFile {
        /// The state file.
        path: PathBuf,
    },
    #[error(
        "{path}: {size} bytes is over the state size limit of {limit} bytes\nhint: raise the limit with --max-state-bytes"
    )]
    /// The file is larger than the state size limit.
    TooLarge {
        /// The state file.
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    #[error("{path}: not a valid llm.json:\n{}\nhint: `wo validate {path}` lists every problem; fix them in an editor (nothing was changed)", render(.issues))]
    /// The file is not a valid `llm.json`; it is left as it is.
    Invalid {
        /// The state file.
        path: PathBuf,
        /// Every problem found, each with its JSON pointer.
        issues: Vec<Issue>,
    },
    #[error("{path}: not written: the change would leave a file wo cannot read:\n{}\nhint: correct the request (the file was not changed)", render(.issues))]
    /// A change would break the rules the file is read with; nothing was
    /// written.
    Refused {
        /// The state file.
        path: PathBuf,
        /// Every problem found, each with its JSON pointer.
        issues: Vec<Issue>,
    },
    #[error("{path}: {what} is {size} bytes, over the limit of {limit} bytes")]
    /// A message or other content is over its limit (`WO_MAX_MESSAGE_BYTES`).
    ContentTooLarge {
        /// The state file.
        path: PathBuf,
        /// What is too large (which message, the context, …).
        what: String,
        /// Its size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    #[error("{path}: cannot read: {source}")]
    /// Reading the file failed.
    Read {
        /// The state file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    #[error(
        "{path}: gave up after {:.1} s waiting for the lock {lock} held by {}; nothing was changed\nhint: try again when it is done, or wait longer with {LOCK_TIMEOUT_ENV}=SECONDS", .waited.as_secs_f64(), holder_text(*.holder)
    )]
    /// Another writer held the lock for longer than `WO_LOCK_TIMEOUT`.
    LockTimeout {
        /// The state file.
        path: PathBuf,
        /// The lock file.
        lock: PathBuf,
        /// How long this writer waited.
        waited: Duration,
        /// The process id recorded by the holder, when known.
        holder: Option<u32>,
    },
    #[error(
        "{lock}: is a symbolic link or not a regular file; refusing to use it as the lock of {path} (nothing was changed)\nhint: remove {lock}; wo creates its lock file itself"
    )]
    /// The lock file is a symbolic link or not a regular file.
    BadLock {
        /// The state file.
        path: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    #[error("{path}: cannot write, the file is unchanged: {source}{}", write_hint(.source))]
    /// Writing failed before the rename: the file is unchanged.
    Write {
        /// The state file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    #[error(
        "{path}: the new version was written and is in place, but not confirmed durable ({source}); it may not survive a power loss or crash of the machine"
    )]
    /// The new version is in place but the directory fsync failed.
    NotDurable {
        /// The state file.
        path: PathBuf,
        /// The fsync's error.
        source: io::Error,
    },
    #[error(
        "{path}: kept changing while being written ({attempts} attempts; is an editor saving it repeatedly?); nothing was written"
    )]
    /// The file changed under every write attempt; nothing was written.
    Busy {
        /// The state file.
        path: PathBuf,
        /// How many attempts were made.
        attempts: u32,
    },
    #[error("{path}: cannot back it up, nothing was changed: {source}")]
    /// Backing up an invalid file failed; nothing was changed.
    Backup {
        /// The state file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    #[error("{path}: already exists\nhint: use it as is; `wo context edit` changes its context")]
    /// `wo init` found a state file already there.
    Exists {
        /// The state file.
        path: PathBuf,
    },
    #[error(
        "{path}: found in a parent directory but owned by user {owner}, not by you; refusing to use it\nhint: pass --state {path} to use it anyway, or run `wo init` here for your own"
    )]
    /// The file found in a parent directory belongs to another user.
    ForeignOwner {
        /// The state file.
        path: PathBuf,
        /// Its owner's user id.
        owner: u32,
    },
}

/// What to do about a write that failed for lack of room.
fn write_hint(source: &io::Error) -> &'static str {
    match source.raw_os_error() {
        Some(libc::ENOSPC | libc::EDQUOT) => {
            "\nhint: the disk (or your quota) is full; free some space and try again"
        }
        Some(libc::EFBIG) => {
            "\nhint: the file would exceed this process's file size limit (`ulimit -f`); raise it and try again"
        }
        _ => "",
    }
}

fn holder_text(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!("process {pid}"),
        None => "another process".to_owned(),
    }
}

fn render(issues: &[Issue]) -> String {
    let mut out: Vec<String> = issues.iter().take(10).map(|i| format!("  {i}")).collect();
    if issues.len() > 10 {
        out.push(format!("  … and {} more", issues.len() - 10));
    }
    out.join("\n")
}

impl StoreError {
    /// The same error again, for each member of a group commit that shares
    /// one failed write ([`crate::GroupCommit`]). I/O errors are copied by
    /// kind and message (`io::Error` is not `Clone`).
    pub fn duplicate(&self) -> StoreError {
        fn io(e: &io::Error) -> io::Error {
            io::Error::new(e.kind(), e.to_string())
        }
        use StoreError::*;
        match self {
            NotFound { path } => NotFound { path: path.clone() },
            Symlink { path } => Symlink { path: path.clone() },
            NotAFile { path } => NotAFile { path: path.clone() },
            TooLarge { path, size, limit } => TooLarge {
                path: path.clone(),
                size: *size,
                limit: *limit,
            },
            Invalid { path, issues } => Invalid {
                path: path.clone(),
                issues: issues.clone(),
            },
            Refused { path, issues } => Refused {
                path: path.clone(),
                issues: issues.clone(),
            },
            ContentTooLarge {
                path,
                what,
                size,
                limit,
            } => ContentTooLarge {
                path: path.clone(),
                what: what.clone(),
                size: *size,
                limit: *limit,
            },
            Read { path, source } => Read {
                path: path.clone(),
                source: io(source),
            },
            LockTimeout {
                path,
                lock,
                waited,
                holder,
            } => LockTimeout {
                path: path.clone(),
                lock: lock.clone(),
                waited: *waited,
                holder: *holder,
            },
            BadLock { path, lock } => BadLock {
                path: path.clone(),
                lock: lock.clone(),
            },
            Write { path, source } => Write {
                path: path.clone(),
                source: io(source),
            },
            NotDurable { path, source } => NotDurable {
                path: path.clone(),
                source: io(source),
            },
            Busy { path, attempts } => Busy {
                path: path.clone(),
                attempts: *attempts,
            },
            Backup { path, source } => Backup {
                path: path.clone(),
                source: io(source),
            },
            Exists { path } => Exists { path: path.clone() },
            ForeignOwner { path, owner } => ForeignOwner {
                path: path.clone(),
                owner: *owner,
            },
        }
    }

    /// False only when the file was changed despite the error
    /// ([`StoreError::NotDurable`]: the new version is in place). Faces
    /// must not say "unchanged" when this is false.
    pub fn left_file_unchanged(&self) -> bool {
        !matches!(self, StoreError::NotDurable { .. })
    }

    /// Process exit code for this error: 2 when a write was refused or
    /// failed (nothing changed — except [`StoreError::NotDurable`], whose
    /// message says the new version is in place), 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            StoreError::Write { .. }
            | StoreError::NotDurable { .. }
            | StoreError::LockTimeout { .. }
            | StoreError::BadLock { .. }
            | StoreError::Busy { .. }
            | StoreError::Backup { .. } => 2,
            _ => 1,
        }
    }
}

/// Identity of the file's current version, to notice outside changes.
///
/// File metadata alone is not enough: inode numbers are reused and ext4's
/// mtime moves in coarse ticks, so two quick writes of the same length can
/// leave identical metadata. Every writer therefore also bumps a generation
/// number kept in the lock file (after its rename, under the lock); editors
/// that do not know about it still change the metadata — except an
/// in-place save of the same length in the very clock tick the version
/// was written in, which leaves the metadata as it was. So a version put
/// in place or read within its tick (a small file, written and fsynced
/// within a few milliseconds; an editor's save a moment ago), or on a
/// filesystem whose ticks cannot be told, keeps the CRC-32 of its bytes in
/// `content`, and the version a write displaces is checked against it
/// (see `Store::still_as_looked`); a large file's fsync outlasts the tick,
/// and then the metadata alone tells.
#[derive(Clone, Copy, Debug)]
struct Stamp {
    /// CRC-32 of the version's bytes, when a save in place could still
    /// leave its metadata unchanged (not part of equality: the metadata is
    /// what a look at the path can compare).
    content: Option<u32>,
    generation: u64,
    dev: u64,
    ino: u64,
    len: u64,
    mtime: i64,
    mtime_nsec: i64,
    ctime: i64,
    ctime_nsec: i64,
}

impl PartialEq for Stamp {
    fn eq(&self, other: &Self) -> bool {
        let key = |s: &Stamp| {
            (
                s.generation,
                s.dev,
                s.ino,
                s.len,
                s.mtime,
                s.mtime_nsec,
                s.ctime,
                s.ctime_nsec,
            )
        };
        key(self) == key(other)
    }
}

impl Eq for Stamp {}

impl Stamp {
    /// This stamp, remembering the CRC-32 of the version's bytes (`None`:
    /// the metadata alone tells a save apart).
    fn with_content(self, crc32: Option<u32>) -> Self {
        Stamp {
            content: crc32,
            ..self
        }
    }

    fn of(m: &fs::Metadata, generation: u64) -> Self {
        Stamp {
            content: None,
            generation,
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: m.mtime(),
            mtime_nsec: m.mtime_nsec(),
            ctime: m.ctime(),
            ctime_nsec: m.ctime_nsec(),
        }
    }
}

/// What a save did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SaveOutcome {
    /// The file had changed on disk and was re-read and merged first.
    pub merged_outside_changes: bool,
    /// Bytes written.
    pub bytes: u64,
}

/// One state file, loaded.
///
/// Writing follows one rule: **a writer writes only its own changes.** The
/// store remembers what it last read or wrote (the base) and, when the file
/// changed meanwhile, applies only what this process changed since the base
/// onto the file as it is now ([`wo_format::merge3`]); hand edits and
/// deletions made meanwhile are kept.
#[derive(Debug)]
pub struct Store {
    path: PathBuf,
    lock_path: PathBuf,
    opts: OpenOptions,
    state: State,
    cache: MessageCache,
    /// The on-disk version the base was read from or written as.
    stamp: Option<Stamp>,
    /// What this process last read or wrote. `None` while `state` is
    /// exactly that (nothing changed since), so read-only use and one-shot
    /// writers never pay for it.
    base: Option<Baseline>,
    /// Leading messages of `state` unchanged since the base, as far as
    /// [`State::clean_prefix`] showed before something else (the cache
    /// warm-up) reset it; `usize::MAX`: no such reset.
    unchanged: usize,
    /// Length and CRC-32 of the bytes the write in progress puts in place,
    /// recorded in the lock file once they are (see [`Written`]).
    writing: Option<Written>,
    /// How to take back the transaction in progress (see [`Checkpoint`]).
    pending: Option<Checkpoint>,
    /// The version the last write replaced, being removed (see
    /// [`Removal`]). Last, so a store being dropped frees its state while
    /// the removal finishes.
    removal: Removal,
}

impl Store {
    /// Ends a one-shot command's use of the store as dropping it would —
    /// the removal of the version the last write replaced waited for — but
    /// leaves the memory of the state, its save cache and its base to the
    /// process's exit: freeing 100k messages one by one took ~25 ms that a
    /// person waited for after their answer, before their prompt came
    /// back. Only for a process about to exit (a long-lived one would leak).
    pub fn close_for_exit(self) {
        let Store {
            state, cache, base, ..
        } = self;
        std::mem::forget((state, cache, base));
        // The other fields are dropped here, the removal (waited for) last.
    }
}

/// Below this size the version a write replaced is removed at once.
const REMOVE_LATER_MIN: u64 = 4 << 20;

/// The version a write replaced, removed on a helper thread when it is
/// large: freeing tens of MB is not free (on ext4 mounted with `discard`,
/// ~40 ms for 50 MB), and the new version is in place and durable before
/// it starts, so the writer's answer need not wait for it. The store waits
/// for it before its next write and when it is dropped, so a store that
/// ends normally leaves nothing behind; a process killed meanwhile leaves a
/// temp file that the next write sweeps (as one killed before its rename).
#[derive(Debug, Default)]
struct Removal(Option<std::thread::JoinHandle<()>>);

impl Removal {
    /// Removes `old` (`len` bytes): at once when small, or when no thread
    /// can be started; else on a helper thread.
    fn start(&mut self, old: durable::Displaced, len: u64) {
        self.wait();
        if len < REMOVE_LATER_MIN {
            drop(old);
            return;
        }
        // A failed spawn drops the closure, and with it `old`: removed here.
        self.0 = std::thread::Builder::new()
            .name("wo-remove-old".into())
            .spawn(move || drop(old))
            .ok();
    }

    /// Waits until the removal in progress, if any, is done.
    fn wait(&mut self) {
        if let Some(removing) = self.0.take() {
            // Removal cannot panic (errors are ignored); were it to, the
            // file is a stale temp the next write sweeps.
            let _ = removing.join();
        }
    }
}

impl Drop for Removal {
    fn drop(&mut self) {
        self.wait();
    }
}

/// What a transaction restores when it is refused or its write fails, so
/// the store holds exactly what it held before: the state is rolled back
/// to its savepoint ([`State::savepoint`]), and the bookkeeping that says
/// which version of the file that state is (stamp, base) is put back.
#[derive(Debug)]
struct Checkpoint {
    stamp: Option<Stamp>,
    /// There was no base: the state was exactly the file's version.
    base_was_none: bool,
    unchanged: usize,
    /// Set when a last-moment merge with an outside change replaced the
    /// state (rare: an editor saved during the write): the state and base
    /// from before the change, since the savepoint went with the old state.
    before_merge: Option<(State, Option<Baseline>)>,
}

/// What a store last wrote, as recorded in the lock file: the file's length
/// and the CRC-32 of its bytes. A one-shot process that reads the file and
/// finds it unchanged since (same length, same CRC) knows every message's
/// bytes are canonical and re-uses them instead of serialising 50 MB again
/// ([`wo_format::parse_written`]). A file changed in any byte fails the check
/// and is read and written the full way, so hand edits are never undone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Written {
    len: u64,
    crc32: u32,
}

/// Held while a read-modify-write is in progress; dropping it unlocks.
struct LockGuard(File);

/// Lock file layout: the generation (20 digits) and a newline, then the pid
/// of the last process to take the lock (10 characters) and a newline, then
/// what the last writer wrote: its length (20 digits), a space, its CRC-32
/// (8 hex digits) and a newline. Older lock files end after the pid; their
/// state file is simply read the full way once.
const PID_OFFSET: u64 = 21;
const WRITTEN_OFFSET: u64 = 32;
const WRITTEN_LEN: usize = 30;

impl LockGuard {
    fn generation(&self) -> u64 {
        parse_generation(&self.0)
    }

    /// Records a new generation; a failure only costs a needless re-read
    /// later (the metadata still changed), so it is not an error.
    fn set_generation(&self, generation: u64) {
        use std::os::unix::fs::FileExt;
        let _ = self
            .0
            .write_all_at(format!("{generation:020}\n").as_bytes(), 0);
    }

    /// Records what was just put in place; like the generation, a failure
    /// only costs the next one-shot writer the full path.
    fn set_written(&self, written: Option<Written>) {
        use std::os::unix::fs::FileExt;
        let line = match written {
            Some(w) => format!("{:020} {:08x}\n", w.len, w.crc32),
            // Unknown: a line no reader takes for a checksum.
            None => format!("{:>29}\n", ""),
        };
        let _ = self.0.write_all_at(line.as_bytes(), WRITTEN_OFFSET);
    }

    /// Records who holds the lock, for the message of a writer waiting.
    fn set_holder(&self) {
        use std::os::unix::fs::FileExt;
        let gen_line = format!("{:020}\n", self.generation());
        let line = format!("{gen_line}{:>10}\n", std::process::id());
        let _ = self.0.write_all_at(line.as_bytes(), 0);
    }
}

fn parse_generation(file: &File) -> u64 {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 21];
    let n = file.read_at(&mut buf, 0).unwrap_or(0);
    std::str::from_utf8(&buf[..n])
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

fn parse_written(file: &File) -> Option<Written> {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; WRITTEN_LEN];
    let n = file.read_at(&mut buf, WRITTEN_OFFSET).ok()?;
    let line = std::str::from_utf8(&buf[..n]).ok()?.strip_suffix('\n')?;
    let (len, crc) = line.split_once(' ')?;
    if len.len() != 20 || crc.len() != 8 {
        return None;
    }
    Some(Written {
        len: len.parse().ok()?,
        crc32: u32::from_str_radix(crc, 16).ok()?,
    })
}

fn parse_holder(file: &File) -> Option<u32> {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 11];
    let n = file.read_at(&mut buf, PID_OFFSET).ok()?;
    std::str::from_utf8(&buf[..n]).ok()?.trim().parse().ok()
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

impl Store {
    /// Opens (and validates) the state file at `path`. Never waits for a
    /// writer: it reads the last committed version (writers replace the
    /// file by rename, so one open file is always one whole version).
    pub fn open(path: impl AsRef<Path>, opts: OpenOptions) -> Result<Store, StoreError> {
        let path = resolve_allowed_symlink(path.as_ref(), &opts)?;
        match read_state_seeded(&path, &opts)? {
            Some((state, stamp, seed)) => {
                let mut store = Store::loaded(path, opts, state, stamp);
                if let Some(mut cache) = seed {
                    // The file is byte for byte what a store wrote: its
                    // messages' bytes are the canonical ones (see `Written`).
                    cache.seal(store.state.save_token());
                    store.cache = cache;
                }
                Ok(store)
            }
            None if opts.create_if_missing => {
                let mut store = Store::unsaved(path, State::new(Timestamp::now()), opts);
                // Under the lock: another first run may have created it
                // meanwhile, and then it is simply opened.
                let lock = store.lock()?;
                if let Some((state, stamp)) = read_state(&store.path, &store.opts)? {
                    drop(lock);
                    let Store { path, opts, .. } = store;
                    return Ok(Store::loaded(path, opts, state, stamp));
                }
                store.write_locked(&lock)?;
                Ok(store)
            }
            None => Err(StoreError::NotFound { path }),
        }
    }

    fn loaded(path: PathBuf, opts: OpenOptions, mut state: State, stamp: Stamp) -> Store {
        // Every message is the base's own: start the unchanged prefix there.
        state.mark_saved();
        Store::with(path, opts, state, Some(stamp), None, usize::MAX)
    }

    /// A store for `state` that has not been written to `path` yet: its
    /// base is an empty file, so everything in it counts as its own.
    fn unsaved(path: PathBuf, state: State, opts: OpenOptions) -> Store {
        let empty = Baseline::of(&State::new(state.date.clone()));
        Store::with(path, opts, state, None, Some(empty), 0)
    }

    fn with(
        path: PathBuf,
        opts: OpenOptions,
        state: State,
        stamp: Option<Stamp>,
        base: Option<Baseline>,
        unchanged: usize,
    ) -> Store {
        Store {
            lock_path: lock_path_for(&path),
            path,
            opts,
            state,
            // Every save records its checksum (see `Written`).
            cache: MessageCache::with_checksum(),
            stamp,
            base,
            unchanged,
            writing: None,
            pending: None,
            removal: Removal::default(),
        }
    }

    /// Creates a new state file holding `state`; fails if one exists.
    pub fn create(
        path: impl AsRef<Path>,
        state: State,
        opts: OpenOptions,
    ) -> Result<Store, StoreError> {
        let path = path.as_ref().to_path_buf();
        if path.symlink_metadata().is_ok() {
            return Err(StoreError::Exists { path });
        }
        let mut store = Store::unsaved(path, state, opts);
        let lock = store.lock()?;
        if store.path.symlink_metadata().is_ok() {
            return Err(StoreError::Exists { path: store.path });
        }
        store.write_locked(&lock)?;
        drop(lock);
        Ok(store)
    }

    /// Writes `state` over whatever is at `path` (used after an invalid file
    /// has been backed up with [`crate::backup_invalid`]).
    pub fn replace(
        path: impl AsRef<Path>,
        state: State,
        opts: OpenOptions,
    ) -> Result<Store, StoreError> {
        let path = path.as_ref().to_path_buf();
        if fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(StoreError::Symlink { path });
        }
        let mut store = Store::unsaved(path, state, opts);
        let lock = store.lock()?;
        // Replace exactly the version that was backed up; if it changes
        // meanwhile the re-read below fails on it or merges it.
        store.stamp = store.current_stamp()?;
        store.write_locked(&lock)?;
        drop(lock);
        Ok(store)
    }

    /// The state file this store owns.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The state as last read or written (with this process's unsaved changes).
    pub fn state(&self) -> &State {
        &self.state
    }

    /// Changes made here are written by the next [`Store::save`]; if the file
    /// changed meanwhile, only these changes are applied to the new version
    /// (product §3).
    pub fn state_mut(&mut self) -> &mut State {
        // Changes may now wait for a later save, while anything can happen
        // to the file: remember the base exactly (fingerprints).
        if self.base.is_none() {
            self.base = Some(Baseline::of(&self.state));
        }
        &mut self.state
    }

    /// The limits this store enforces.
    pub fn limits(&self) -> &Limits {
        &self.opts.limits
    }

    /// Serialises the messages now so the next save only writes bytes: call
    /// it while waiting on something else (a model's answer). Cheap when the
    /// cache is already warm.
    pub fn warm_cache(&mut self) {
        if self.cache.is_sealed_for(&self.state) {
            return;
        }
        let _ = wo_format::canonical_parts(&self.state, &mut self.cache);
        // Sealing resets the state's unchanged prefix, which also tells
        // which messages are this process's changes: keep that here.
        self.unchanged = self.unchanged.min(self.state.clean_prefix());
        let token = self.state.mark_saved();
        self.cache.seal(token);
    }

    /// How many messages the next save writes from bytes it already holds,
    /// without serialising them: all of them after a save, or after opening
    /// a file exactly as a store wrote it; none after opening one changed by
    /// anything else (a hand edit), or before the first save.
    pub fn reusable_messages(&self) -> usize {
        if self.cache.is_sealed_for(&self.state) {
            self.cache.len()
        } else {
            0
        }
    }

    /// Leading messages of the state unchanged since the base.
    fn unchanged_prefix(&self) -> usize {
        self.unchanged.min(self.state.clean_prefix())
    }

    /// Re-reads the file if it changed on disk since it was loaded or saved,
    /// applying this process's unsaved changes to the new version. Returns
    /// whether it changed.
    pub fn refresh(&mut self) -> Result<bool, StoreError> {
        let current = self.current_stamp()?;
        if current == self.stamp || current.is_none() {
            // Unchanged, or deleted under us: our copy is all there is, and
            // the next save puts it back.
            return Ok(false);
        }
        let Some((disk, stamp)) = read_state(&self.path, &self.opts)? else {
            return Ok(false);
        };
        self.take_theirs(disk, stamp);
        Ok(true)
    }

    /// The stamp of the file now (`None`: there is none).
    fn current_stamp(&self) -> Result<Option<Stamp>, StoreError> {
        let generation = current_generation(&self.lock_path);
        match fs::symlink_metadata(&self.path) {
            Ok(m) => Ok(Some(Stamp::of(&m, generation))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::Read {
                path: self.path.clone(),
                source: e,
            }),
        }
    }

    /// Makes `theirs` (just read, with its stamp) the new base, carrying
    /// over what this process changed since the old one.
    fn take_theirs(&mut self, theirs: State, stamp: Stamp) {
        match &self.base {
            // Nothing changed here since the base: theirs is all there is.
            None => {
                self.state = theirs;
                self.state.mark_saved();
            }
            Some(base) => {
                let merged = merge3(base, &self.state, self.unchanged_prefix(), theirs);
                self.state = merged.state;
                self.base = Some(merged.baseline);
            }
        }
        self.unchanged = usize::MAX;
        self.cache.clear();
        self.stamp = Some(stamp);
    }

    /// Writes the state durably under the lock, merging outside changes first.
    pub fn save(&mut self) -> Result<SaveOutcome, StoreError> {
        self.transact(|_| ()).map(|(_, outcome)| outcome)
    }

    /// A read-modify-write: under the lock, brings the state up to date with
    /// the file, applies `change`, and writes the result atomically.
    ///
    /// One rule for every transaction: validate, apply with a savepoint,
    /// write, then publish. If the result breaks a limit or the write fails
    /// with the file unchanged, the change is taken back: the store holds
    /// exactly what it held before (so the next write cannot carry it).
    pub fn transact<T>(
        &mut self,
        change: impl FnOnce(&mut State) -> T,
    ) -> Result<(T, SaveOutcome), StoreError> {
        match self.try_transact(|state| Ok::<T, std::convert::Infallible>(change(state)))? {
            Ok(done) => Ok(done),
            Err(never) => match never {},
        }
    }

    /// Like [`Store::transact`], but nothing is written when `change` fails:
    /// whatever it changed before failing is taken back.
    pub fn try_transact<T, E>(
        &mut self,
        change: impl FnOnce(&mut State) -> Result<T, E>,
    ) -> Result<Result<(T, SaveOutcome), E>, StoreError> {
        // A transaction a panic left open is taken back before anything.
        self.roll_back();
        let lock = self.lock()?;
        let refreshed = self.refresh()?;
        self.open_checkpoint();
        let value = match change(&mut self.state) {
            Ok(value) => value,
            Err(e) => {
                self.roll_back();
                return Ok(Err(e));
            }
        };
        let (bytes, merged) = self.write_checkpointed(&lock)?;
        Ok(Ok((
            value,
            SaveOutcome {
                merged_outside_changes: refreshed || merged,
                bytes,
            },
        )))
    }

    /// A transaction of several changes, each checked on its own (the group
    /// commit's batch): `apply(i, state)` applies the `i`-th of `count`; one
    /// that breaks a content limit is taken back and refused alone (its
    /// error in its slot), the others are written together. The outer
    /// error, when the write itself fails, applies to every change (each is
    /// taken back).
    pub(crate) fn transact_each(
        &mut self,
        count: usize,
        mut apply: impl FnMut(usize, &mut State),
    ) -> Result<(Vec<Option<StoreError>>, SaveOutcome), StoreError> {
        self.roll_back();
        let lock = self.lock()?;
        let refreshed = self.refresh()?;
        self.open_checkpoint();
        let mut refused = Vec::with_capacity(count);
        for i in 0..count {
            self.state.savepoint();
            apply(i, &mut self.state);
            // Only what this change inserted or replaced can be a new
            // offender: the messages it only moved are the base's or were
            // checked with the change before it that added them (questions
            // sort back among the answers written meanwhile, so that is
            // often hundreds of messages, each with its list of sources).
            let checked = match self.state.touched_since_savepoint() {
                Some(touched) => self.check_content_limits_of(touched.into_iter()),
                None => self.check_content_limits(),
            };
            match checked {
                Ok(()) => {
                    self.state.release();
                    refused.push(None);
                }
                Err(e) => {
                    self.state.rollback();
                    refused.push(Some(e));
                }
            }
        }
        let outcome = if refused.iter().all(Option::is_some) {
            // Nothing left to write: the state is as it was.
            self.roll_back();
            SaveOutcome {
                merged_outside_changes: refreshed,
                bytes: 0,
            }
        } else {
            let (bytes, merged) = self.write_checkpointed(&lock)?;
            SaveOutcome {
                merged_outside_changes: refreshed || merged,
                bytes,
            }
        };
        Ok((refused, outcome))
    }

    /// Opens the checkpoint of a transaction (after the refresh, before the
    /// change).
    fn open_checkpoint(&mut self) {
        self.pending = Some(Checkpoint {
            stamp: self.stamp,
            base_was_none: self.base.is_none(),
            unchanged: self.unchanged,
            before_merge: None,
        });
        self.state.savepoint();
        self.begin_change();
    }

    /// Writes the transaction in progress; on a failure that left the file
    /// unchanged it is taken back, otherwise (written, even if not durable)
    /// it is kept.
    fn write_checkpointed(&mut self, lock: &LockGuard) -> Result<(u64, bool), StoreError> {
        match self.write_locked(lock) {
            Ok(done) => {
                self.keep();
                Ok(done)
            }
            Err(e) if e.left_file_unchanged() => {
                self.roll_back();
                Err(e)
            }
            Err(e) => {
                self.keep();
                Err(e)
            }
        }
    }

    /// The transaction in progress was written: close its checkpoint.
    fn keep(&mut self) {
        if self.pending.take().is_some() {
            while self.state.release() {}
        }
    }

    /// Takes back the transaction in progress, if any: the state and its
    /// bookkeeping are exactly what they were before it. (Only a panic in a
    /// change leaves one in progress; the group commit calls this as soon
    /// as it caught one, every transaction before it starts.)
    pub(crate) fn roll_back(&mut self) {
        let Some(cp) = self.pending.take() else {
            return;
        };
        match cp.before_merge {
            Some((state, base)) => {
                self.state = state;
                self.base = base;
                self.cache.clear();
            }
            None => while self.state.rollback() {},
        }
        if cp.base_was_none {
            self.base = None;
        }
        self.stamp = cp.stamp;
        self.unchanged = cp.unchanged;
        self.writing = None;
    }

    /// Before a last-moment merge replaces the state: keeps what the
    /// checkpoint needs to restore it, since the savepoint goes with it.
    fn keep_state_before_merge(&mut self) {
        if let Some(cp) = &mut self.pending
            && cp.before_merge.is_none()
        {
            let mut before = self.state.clone();
            while before.rollback() {}
            cp.before_merge = Some((before, self.base.clone()));
        }
    }

    /// Before a change under the lock: the base must be known should the
    /// file change between now and the rename. The change is written at
    /// once, so the light form is enough — its messages are the state's
    /// unchanged prefix; only truth and the small fields are copied.
    fn begin_change(&mut self) {
        if self.base.is_none() {
            self.base = Some(Baseline::light(&self.state));
        }
    }

    /// Writes the state under `lock`. Returns the bytes written and whether
    /// an outside change had to be merged first (found at the last look).
    fn write_locked(&mut self, lock: &LockGuard) -> Result<(u64, bool), StoreError> {
        // The last write's old version is gone before this one stages.
        self.removal.wait();
        let mut merged = false;
        let started = Instant::now();
        let mut attempts = 0;
        while attempts < MAX_WRITE_ATTEMPTS || started.elapsed() < WRITE_PATIENCE {
            attempts += 1;
            self.check_content_limits()?;
            let previous_date = self.state.date.clone();
            let now = Timestamp::now();
            if now > self.state.date {
                self.state.date = now;
            }
            let parts = wo_format::canonical_parts(&self.state, &mut self.cache);
            let size = parts.len() as u64;
            self.writing = Some(Written {
                len: size,
                crc32: parts.crc32(),
            });
            if size > self.opts.limits.max_state_bytes {
                self.cache.clear();
                self.state.date = previous_date;
                return Err(StoreError::TooLarge {
                    path: self.path.clone(),
                    size,
                    limit: self.opts.limits.max_state_bytes,
                });
            }
            durable::remove_stale_temps(&self.path);
            let staged = match durable::stage(&self.path, &parts.chunks()) {
                Ok(staged) => staged,
                Err(source) => {
                    self.cache.clear();
                    self.state.date = previous_date;
                    return Err(StoreError::Write {
                        path: self.path.clone(),
                        source,
                    });
                }
            };
            // Before anyone can open it: if its clock tick has passed, any
            // save in place will show in its metadata and its stamp needs
            // no bytes (a large file's fsync outlasts the tick).
            let settled = staged.settled();
            #[cfg(test)]
            let settled = settled && !tests::UNSETTLED.with(std::cell::Cell::get);
            #[cfg(test)]
            tests::BEFORE_RENAME.with(|hook| {
                if let Some(f) = hook.borrow_mut().as_mut() {
                    f(&self.path);
                }
            });
            // Last look before the rename: an editor that saved (even in
            // place, truncate + write) since our re-read would be lost by
            // the rename. Re-merge onto its version and try again.
            let current = self.current_stamp()?;
            if current != self.stamp {
                merged = true;
                drop(staged);
                self.merge_current(previous_date)?;
                continue;
            }
            #[cfg(test)]
            tests::AFTER_LAST_LOOK.with(|hook| {
                if let Some(f) = hook.borrow_mut().as_mut() {
                    f(&self.path);
                }
            });
            // An editor's in-place save between the last look and the
            // rename goes into the version the exchange puts aside: it is
            // put back at once and merged like any outside change. (Should
            // putting it back fail, ours stays and theirs is merged onto it
            // and written again.) `self.stamp` equals the last look (or it
            // would have been re-read), and remembers the bytes when the
            // metadata alone could miss a save (see `Stamp`).
            let changed_aside = std::cell::Cell::new(false);
            let committed = if current.is_none() {
                staged.commit_new().map(|meta| (meta, None))
            } else {
                let looked = self.stamp;
                staged.commit_swapping(|old| {
                    let as_looked = looked.is_none_or(|l| self.still_as_looked(old, &l));
                    changed_aside.set(!as_looked);
                    as_looked
                })
            };
            return match committed {
                Ok((meta, displaced)) => {
                    if changed_aside.get()
                        && let Some(old) = &displaced
                        && let Some((theirs, _)) = read_state(old.path(), &self.opts).ok().flatten()
                    {
                        merged = true;
                        drop(displaced);
                        let stamp = self.record_written(lock, &meta, settled);
                        self.cache.clear();
                        self.keep_state_before_merge();
                        self.begin_change();
                        self.take_theirs(theirs, stamp);
                        continue;
                    }
                    if let Some(old) = displaced {
                        self.removal.start(old, current.map_or(0, |c| c.len));
                    }
                    self.after_commit(lock, &meta, settled);
                    Ok((size, merged))
                }
                // Saved in place in the last instant, and put back; or
                // created by someone else in the last instant: merge.
                Err(CommitError::ChangedMeanwhile) => {
                    merged = true;
                    self.merge_current(previous_date)?;
                    continue;
                }
                Err(CommitError::NotReplaced(source))
                    if current.is_none() && source.kind() == io::ErrorKind::AlreadyExists =>
                {
                    merged = true;
                    self.merge_current(previous_date)?;
                    continue;
                }
                Err(CommitError::NotReplaced(source)) => {
                    self.cache.clear();
                    self.state.date = previous_date;
                    Err(StoreError::Write {
                        path: self.path.clone(),
                        source,
                    })
                }
                Err(CommitError::NotDurable { source, meta }) => {
                    // The rename happened: the file holds this version.
                    match meta {
                        Some(meta) => self.after_commit(lock, &meta, settled),
                        None => {
                            self.cache.clear();
                            self.stamp = None;
                        }
                    }
                    Err(StoreError::NotDurable {
                        path: self.path.clone(),
                        source,
                    })
                }
            };
        }
        Err(StoreError::Busy {
            path: self.path.clone(),
            attempts,
        })
    }

    /// Takes back this attempt's date and merges onto the version at the
    /// path now: an outside change found at the last moment. (Nothing
    /// there: deleted meanwhile, ours goes in its place.)
    fn merge_current(&mut self, previous_date: Timestamp) -> Result<(), StoreError> {
        self.cache.clear();
        self.state.date = previous_date;
        match read_state(&self.path, &self.opts)? {
            Some((disk, stamp)) => {
                self.keep_state_before_merge();
                self.begin_change();
                self.take_theirs(disk, stamp);
            }
            None => self.stamp = None,
        }
        Ok(())
    }

    /// Whether the version a write put aside (`displaced`) is still exactly
    /// what we last looked at (`looked`): no outside writer saved into it
    /// in place since. One that cannot be examined counts as changed.
    fn still_as_looked(&self, displaced: &durable::Displaced, looked: &Stamp) -> bool {
        let Ok(meta) = displaced.metadata() else {
            return false;
        };
        let now = Stamp::of(&meta, looked.generation);
        // The exchange itself moves the change time; nothing else may move.
        let unchanged = Stamp {
            ctime: looked.ctime,
            ctime_nsec: looked.ctime_nsec,
            ..now
        } == *looked;
        // A version stamped young may hold a same-length save from its own
        // clock tick that the metadata cannot show: its bytes tell.
        let same_bytes = || match looked.content {
            Some(crc) => crc32_of_file(displaced.path()).is_ok_and(|c| c == crc),
            None => true,
        };
        unchanged && same_bytes()
    }

    /// The version just put in place, recorded in the lock file (a new
    /// generation, its length and CRC-32), and its stamp. Put in place
    /// within its clock tick (`!settled`), an editor's save in that same
    /// tick would not show in the metadata: the stamp keeps the bytes' CRC.
    fn record_written(&mut self, lock: &LockGuard, meta: &fs::Metadata, settled: bool) -> Stamp {
        let generation = lock.generation().wrapping_add(1);
        lock.set_generation(generation);
        let written = self.writing.take();
        let crc = written.as_ref().map(|w| w.crc32).filter(|_| !settled);
        lock.set_written(written);
        Stamp::of(meta, generation).with_content(crc)
    }

    /// After the new version is in place: it is the base now. `settled`: its
    /// clock tick had passed before it was put in place (see `Stamp`).
    fn after_commit(&mut self, lock: &LockGuard, meta: &fs::Metadata, settled: bool) {
        let unchanged = self.unchanged_prefix();
        let token = self.state.mark_saved();
        self.cache.seal(token);
        self.stamp = Some(self.record_written(lock, meta, settled));
        // A fingerprinted base moves forward cheaply (a turn appended adds
        // two fingerprints); a light one is dropped: the state is the base.
        match &mut self.base {
            Some(base) if base.is_exact() => base.advance(&self.state, unchanged),
            _ => self.base = None,
        }
        self.unchanged = usize::MAX;
    }

    /// Checks what this process changed since the base against the limits
    /// and the read rules, before a write.
    fn check_content_limits(&self) -> Result<(), StoreError> {
        self.check_content_limits_of(self.unchanged_prefix()..self.state.messages().len())
    }

    /// [`Store::check_content_limits`] for the messages at `positions`
    /// (ascending): the batch checks each change's own messages. Pointers
    /// are built only for what fails: a batch checks hundreds of messages
    /// that pass.
    fn check_content_limits_of(
        &self,
        positions: impl Iterator<Item = usize> + Clone,
    ) -> Result<(), StoreError> {
        let limits = &self.opts.limits;
        let too_large = |what: String, size: usize, limit: usize| StoreError::ContentTooLarge {
            path: self.path.clone(),
            what,
            size,
            limit,
        };
        if self.state.context.len() > limits.max_context_bytes {
            return Err(too_large(
                "/context".into(),
                self.state.context.len(),
                limits.max_context_bytes,
            ));
        }
        // Only messages changed since the base can be new offenders.
        let messages = self.state.messages();
        for (i, m) in positions
            .clone()
            .filter_map(|i| Some((i, messages.get(i)?)))
        {
            if m.content.len() > limits.max_message_bytes {
                return Err(too_large(
                    format!("/messages/{i}/content"),
                    m.content.len(),
                    limits.max_message_bytes,
                ));
            }
        }
        for (i, t) in self.state.truth.trust.iter().enumerate() {
            if t.content.len() > limits.max_message_bytes {
                return Err(too_large(
                    format!("/truth/trust/{i}/content"),
                    t.content.len(),
                    limits.max_message_bytes,
                ));
            }
        }
        // Whatever a writer built is held to the rules the file is read
        // with, so no write makes it unopenable.
        let mut issues = Vec::new();
        for (i, m) in positions.filter_map(|i| Some((i, messages.get(i)?))) {
            if !records::message_ok(m) {
                issues.extend(records::message_issues(m, &format!("/messages/{i}")));
            }
        }
        for (i, t) in self.state.truth.trust.iter().enumerate() {
            if !records::truth_entry_ok(t) {
                issues.extend(records::truth_entry_issues(t, &format!("/truth/trust/{i}")));
            }
        }
        if !issues.is_empty() {
            return Err(StoreError::Refused {
                path: self.path.clone(),
                issues,
            });
        }
        Ok(())
    }

    /// Takes the exclusive lock, waiting at most the lock timeout (saying
    /// once, after a second, who holds it).
    fn lock(&self) -> Result<LockGuard, StoreError> {
        let bad_lock = || StoreError::BadLock {
            path: self.path.clone(),
            lock: self.lock_path.clone(),
        };
        // Never a link planted at the lock's name (it would make us write
        // into its target), never waiting on a FIFO there.
        let file = match durable::project::open_lock_file(&self.lock_path) {
            Ok(f) => f,
            Err(e) if durable::project::refusal(&e).is_some() => return Err(bad_lock()),
            Err(source) => {
                return Err(StoreError::Write {
                    path: self.lock_path.clone(),
                    source,
                });
            }
        };
        let timeout = self.opts.effective_lock_timeout();
        let start = Instant::now();
        let mut pause = Duration::from_millis(1);
        let mut told = false;
        loop {
            match file.try_lock() {
                Ok(()) => {
                    let guard = LockGuard(file);
                    guard.set_holder();
                    return Ok(guard);
                }
                Err(fs::TryLockError::WouldBlock) if start.elapsed() < timeout => {
                    if !told && start.elapsed() >= Duration::from_secs(1) {
                        told = true;
                        eprintln!(
                            "wo: waiting for {} held by {} (up to {:.0} s; {LOCK_TIMEOUT_ENV} changes this)",
                            self.lock_path.display(),
                            holder_text(parse_holder(&file)),
                            timeout.as_secs_f64()
                        );
                    }
                    std::thread::sleep(pause.min(timeout.saturating_sub(start.elapsed())));
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                Err(fs::TryLockError::WouldBlock) => {
                    return Err(StoreError::LockTimeout {
                        path: self.path.clone(),
                        lock: self.lock_path.clone(),
                        waited: start.elapsed(),
                        holder: parse_holder(&file),
                    });
                }
                Err(fs::TryLockError::Error(source)) => {
                    return Err(StoreError::Write {
                        path: self.lock_path.clone(),
                        source,
                    });
                }
            }
        }
    }
}

/// With symlinks allowed, work on the link's target so writes replace the
/// target rather than the link.
fn resolve_allowed_symlink(path: &Path, opts: &OpenOptions) -> Result<PathBuf, StoreError> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() && opts.allow_symlink => fs::canonicalize(path)
            .map_err(|source| StoreError::Read {
                path: path.to_path_buf(),
                source,
            }),
        _ => Ok(path.to_path_buf()),
    }
}

/// The lock file of the state file at `path` (`llm.json.lock`): the
/// writers' lock and the record of the last version written, local to the
/// machine (never committed).
pub fn lock_path_for(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    durable::parent_dir(path).join(name)
}

/// The generation recorded in the lock file (0 when there is none yet).
/// Read without locking: a writer bumps it after its rename, so a stale
/// number only costs a needless re-read later, never a missed change.
fn current_generation(lock_path: &Path) -> u64 {
    open_lock_for_reading(lock_path).map_or(0, |f| parse_generation(&f))
}

/// The generation and the last writer's [`Written`] record, read together.
fn current_lock_record(lock_path: &Path) -> (u64, Option<Written>) {
    open_lock_for_reading(lock_path)
        .map_or((0, None), |f| (parse_generation(&f), parse_written(&f)))
}

fn open_lock_for_reading(lock_path: &Path) -> Option<File> {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(lock_path)
        .ok()
        .filter(|f| f.metadata().is_ok_and(|m| m.is_file()))
}

/// Reads and parses the file; `Ok(None)` when it does not exist. Takes no
/// lock: writers replace the file by rename, so the one file opened here is
/// one whole committed version, whatever writers do meanwhile.
fn read_state(path: &Path, opts: &OpenOptions) -> Result<Option<(State, Stamp)>, StoreError> {
    Ok(read_state_seeded(path, opts)?.map(|(state, stamp, _)| (state, stamp)))
}

/// [`read_state`], plus the message cache taken from the file's own bytes
/// when they are exactly what a store last wrote (the lock file's
/// [`Written`] record: same length, same CRC-32), so the next save writes
/// them back without serialising them again.
fn read_state_seeded(
    path: &Path,
    opts: &OpenOptions,
) -> Result<Option<(State, Stamp, Option<MessageCache>)>, StoreError> {
    let read_err = |source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    };
    // The generation first: see `current_generation`. The written record
    // with it: a writer updates both after its rename, so a record newer
    // than the bytes read cannot match them.
    let (generation, written) = current_lock_record(&lock_path_for(path));
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_err(e)),
    };
    if meta.file_type().is_symlink() && !opts.allow_symlink {
        return Err(StoreError::Symlink {
            path: path.to_path_buf(),
        });
    }
    // An editor saving in place (truncate + write) while we read would give
    // us half of each version: read again until the file held still. A file
    // that does not parse but was modified a moment ago may be an editor's
    // save in progress (truncated, not yet written): give it a moment.
    let mut attempts = 0;
    loop {
        attempts += 1;
        let Some(FileRead {
            bytes,
            before,
            after,
            settled,
        }) = read_once(path, opts)?
        else {
            return Ok(None);
        };
        if !same_version(&before, &after) && attempts < 5 {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        // Possibly what a store last wrote (same length): `parse_written`
        // checks the CRC-32 and parses it the fast way, seeding the cache.
        // A version read within its clock tick may get an in-place save
        // that leaves its metadata as it is (see `Stamp`): remember what
        // its bytes were.
        let crc = (!settled).then(|| crc32fast::hash(&bytes));
        let parsed = match written.filter(|w| w.len == bytes.len() as u64) {
            Some(w) => wo_format::parse_written(bytes, w.crc32),
            None => wo_format::parse(&bytes).map(|state| (state, None)),
        };
        match parsed {
            // The metadata of the file actually read, after reading: the
            // path may already name a newer one, and taking its stamp would
            // hide that change.
            Ok((mut state, mut seed)) => {
                if opts.sanitise_content {
                    let sanitised =
                        wo_format::admit::sanitise_contents(&mut state).map_err(|issues| {
                            StoreError::Invalid {
                                path: path.to_path_buf(),
                                issues,
                            }
                        })?;
                    if !sanitised.is_empty() {
                        // The cached bytes are the file's, not the state's now.
                        seed = None;
                    }
                }
                let stamp = Stamp::of(&after, generation).with_content(crc);
                return Ok(Some((state, stamp, seed)));
            }
            Err(_) if attempts < 25 && just_modified(&after) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                return Err(StoreError::Invalid {
                    path: path.to_path_buf(),
                    issues: e.issues,
                });
            }
        }
    }
}

/// The CRC-32 of a file's bytes, read a block at a time (the whole file is
/// never held: at 100k messages it is 50 MB).
fn crc32_of_file(path: &Path) -> io::Result<u32> {
    let mut file = File::open(path)?;
    let mut hasher = crc32fast::Hasher::new();
    let mut block = vec![0u8; 256 * 1024];
    loop {
        match file.read(&mut block) {
            Ok(0) => return Ok(hasher.finalize()),
            Ok(n) => hasher.update(&block[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Modified within the last second (an editor may still be writing it).
fn just_modified(meta: &fs::Metadata) -> bool {
    meta.modified()
        .ok()
        .and_then(|m| m.elapsed().ok())
        .is_some_and(|age| age < Duration::from_secs(1))
}

fn same_version(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    Stamp::of(a, 0) == Stamp::of(b, 0)
}

/// One read of the file.
struct FileRead {
    bytes: Vec<u8>,
    /// Its metadata before reading, and after.
    before: fs::Metadata,
    after: fs::Metadata,
    /// The clock tick `before` was stamped in had passed before the bytes
    /// were read: any save since shows in the metadata.
    settled: bool,
}

/// One read of the file: its bytes and its metadata before and after.
fn read_once(path: &Path, opts: &OpenOptions) -> Result<Option<FileRead>, StoreError> {
    let read_err = |source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut file = match File::open(path) {
        Ok(f) => f,
        // Replaced between the two calls by a rename: gone means gone.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_err(e)),
    };
    let meta = file.metadata().map_err(read_err)?;
    let settled = durable::modifications_move_past(&meta) == Some(true);
    if !meta.is_file() {
        return Err(StoreError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    if meta.len() > opts.limits.max_state_bytes {
        return Err(StoreError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
            limit: opts.limits.max_state_bytes,
        });
    }
    // Room to grow: these bytes may become the message cache (see
    // `read_state_seeded`), and a turn appended to it must not move 50 MB
    // to a fresh allocation. Capacity never touched costs no memory.
    let len = meta.len() as usize;
    let mut bytes = Vec::with_capacity(len + 1 + (len / 64).max(64 * 1024));
    // Read at most one byte past the limit, in case it grew meanwhile.
    (&mut file)
        .take(opts.limits.max_state_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > opts.limits.max_state_bytes {
        return Err(StoreError::TooLarge {
            path: path.to_path_buf(),
            size: bytes.len() as u64,
            limit: opts.limits.max_state_bytes,
        });
    }
    let after = file.metadata().map_err(read_err)?;
    Ok(Some(FileRead {
        bytes,
        before: meta,
        after,
        settled,
    }))
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::io::Write;

    use wo_format::{Message, TruthEntry};

    use super::*;

    type Hook = Box<dyn FnMut(&Path)>;

    thread_local! {
        /// Runs right before the last look and the rename of a write.
        pub(super) static BEFORE_RENAME: RefCell<Option<Hook>> = RefCell::new(None);
        /// Runs after the last look, right before the rename.
        pub(super) static AFTER_LAST_LOOK: RefCell<Option<Hook>> = RefCell::new(None);
        /// Writes count as put in place within their clock tick (as on a
        /// filesystem whose ticks cannot be told).
        pub(super) static UNSETTLED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// Sets `hook` to run `edit` on the state file the first time it fires;
    /// the count says how often it ran (0 or 1).
    fn edit_once(
        hook: &'static std::thread::LocalKey<RefCell<Option<Hook>>>,
        mut edit: impl FnMut(&Path) + 'static,
    ) -> std::rc::Rc<std::cell::Cell<usize>> {
        let runs = std::rc::Rc::new(std::cell::Cell::new(0));
        let counter = runs.clone();
        hook.with(|h| {
            *h.borrow_mut() = Some(Box::new(move |path: &Path| {
                if counter.get() == 0 {
                    counter.set(1);
                    edit(path);
                }
            }));
        });
        runs
    }

    /// An editor saves in place (truncate + write) a new title for the
    /// first message (and the first entry) into the file as it was read.
    fn save_in_place(path: &Path, retitle: &str, entry_title: Option<&str>) {
        let mut s = wo_format::parse(&fs::read(path).unwrap()).unwrap();
        s.messages_mut()[0].title = retitle.into();
        if let Some(title) = entry_title {
            s.truth.trust[0].title = title.into();
        }
        let mut f = fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(path)
            .unwrap();
        f.write_all(&wo_format::to_canonical_vec(&s)).unwrap();
    }

    /// An editor's in-place save in the instant between the writer's last
    /// look and its rename lands in the version the rename replaces: it is
    /// found there and merged, not lost.
    #[test]
    fn an_in_place_save_between_the_last_look_and_the_rename_is_merged() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = store_with_two(dir.path());
        let saves = edit_once(&AFTER_LAST_LOOK, |path| {
            save_in_place(path, "saved in the last instant", None)
        });
        let (_, outcome) = store
            .transact(|s| s.push_message(Message::new("alec", ts(5), "mine", "<p>m</p>")))
            .unwrap();
        AFTER_LAST_LOOK.with(|h| *h.borrow_mut() = None);
        assert_eq!(saves.get(), 1);
        assert!(outcome.merged_outside_changes);
        let disk = on_disk(&store);
        let titles = titles_of(&disk);
        assert_eq!(titles, ["saved in the last instant", "mine"]);
        assert_eq!(store.state(), &disk);
        // Nothing is left beside the file: the displaced version is gone.
        let names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp-"))
            .collect();
        assert!(names.is_empty(), "{names:?}");
        // The next write sees its own version, not an outside change.
        let (_, outcome) = store
            .transact(|s| s.push_message(Message::new("alec", ts(6), "more", "<p>n</p>")))
            .unwrap();
        assert!(!outcome.merged_outside_changes);
    }

    /// While a write merges a save from the instant between its last look
    /// and its rename, the path shows that save: an editor that reloads on
    /// every change and saves again never saves over its own edit.
    #[test]
    fn a_save_from_the_last_instant_stays_at_the_path_while_it_is_merged() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = store_with_two(dir.path());
        let saves = edit_once(&AFTER_LAST_LOOK, |path| {
            save_in_place(path, "saved in the last instant", None)
        });
        // What a reader of the path sees at each attempt's rename.
        let seen = std::rc::Rc::new(RefCell::new(Vec::<String>::new()));
        let log = seen.clone();
        BEFORE_RENAME.with(|h| {
            *h.borrow_mut() = Some(Box::new(move |path: &Path| {
                let s = wo_format::parse(&fs::read(path).unwrap()).unwrap();
                log.borrow_mut().push(s.messages()[0].title.clone());
            }));
        });
        store
            .transact(|s| s.push_message(Message::new("alec", ts(5), "mine", "<p>m</p>")))
            .unwrap();
        AFTER_LAST_LOOK.with(|h| *h.borrow_mut() = None);
        BEFORE_RENAME.with(|h| *h.borrow_mut() = None);
        assert_eq!(saves.get(), 1);
        assert_eq!(*seen.borrow(), ["first", "saved in the last instant"]);
        let disk = on_disk(&store);
        assert_eq!(disk.messages()[0].title, "saved in the last instant");
    }

    /// An editor's save in place right after a write, at the same length
    /// (within the write's clock tick, for a file this small, or not): the
    /// metadata or the bytes show it, and it is merged.
    #[test]
    fn a_same_length_save_right_after_a_write_is_merged() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = store_with_two(dir.path());
        store
            .transact(|s| s.push_message(Message::new("alec", ts(5), "mine", "<p>m</p>")))
            .unwrap();
        let written = fs::metadata(store.path()).unwrap();
        // "first" → "FIRST": the same length, as soon as possible.
        save_in_place(store.path(), "FIRST", None);
        assert_eq!(fs::metadata(store.path()).unwrap().len(), written.len());
        let (_, outcome) = store
            .transact(|s| s.push_message(Message::new("alec", ts(6), "more", "<p>n</p>")))
            .unwrap();
        assert!(outcome.merged_outside_changes);
        let disk = on_disk(&store);
        let titles = titles_of(&disk);
        assert_eq!(titles, ["FIRST", "mine", "more"]);
    }

    /// Where a write cannot wait out its clock tick (a filesystem keeping
    /// whole seconds), an editor saving in place in that tick at the same
    /// length leaves the file's metadata as the store stamped it (modelled
    /// by putting the modification time back; the change time, which moves
    /// too, is not compared once the rename is under way). The bytes tell
    /// the save apart: merged, not lost.
    #[test]
    fn a_same_length_save_in_the_writes_clock_tick_is_merged() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = store_with_two(dir.path());
        UNSETTLED.with(|u| u.set(true));
        store
            .transact(|s| s.push_message(Message::new("alec", ts(5), "mine", "<p>m</p>")))
            .unwrap();
        UNSETTLED.with(|u| u.set(false));
        let saves = edit_once(&AFTER_LAST_LOOK, |path| {
            let written = fs::metadata(path).unwrap().modified().unwrap();
            // "first" → "FIRST": the same length.
            save_in_place(path, "FIRST", None);
            let f = fs::OpenOptions::new().write(true).open(path).unwrap();
            f.set_modified(written).unwrap();
        });
        let (_, outcome) = store
            .transact(|s| s.push_message(Message::new("alec", ts(6), "more", "<p>n</p>")))
            .unwrap();
        AFTER_LAST_LOOK.with(|h| *h.borrow_mut() = None);
        assert_eq!(saves.get(), 1);
        assert!(outcome.merged_outside_changes);
        let disk = on_disk(&store);
        let titles = titles_of(&disk);
        assert_eq!(titles, ["FIRST", "mine", "more"]);
        assert_eq!(store.state(), &disk);
    }

    /// What the store's file holds now.
    fn on_disk(store: &Store) -> State {
        wo_format::parse(&fs::read(store.path()).unwrap()).unwrap()
    }

    fn titles_of(state: &State) -> Vec<&str> {
        state.messages().iter().map(|m| m.title.as_str()).collect()
    }

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_unix(1_800_000_000 + s)
    }

    fn store_with_two(dir: &Path) -> Store {
        let mut s = State::new(ts(0));
        s.push_message(Message::new("alec", ts(1), "first", "<p>one</p>"));
        s.add_truth(TruthEntry::new("entry", ts(2), 0.5, "<p>e</p>"));
        Store::create(dir.join("llm.json"), s, OpenOptions::default()).unwrap()
    }

    /// An editor saving in place (truncate, then write) between the store's
    /// re-read and its rename: the save is merged, not lost.
    #[test]
    fn an_in_place_save_right_before_the_rename_is_merged() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = store_with_two(dir.path());
        let saves = edit_once(&BEFORE_RENAME, |path| {
            save_in_place(path, "renamed in the editor", Some("entry renamed"))
        });
        let (_, outcome) = store
            .transact(|s| s.push_message(Message::new("alec", ts(5), "mine", "<p>m</p>")))
            .unwrap();
        BEFORE_RENAME.with(|h| *h.borrow_mut() = None);
        assert_eq!(saves.get(), 1);
        assert!(outcome.merged_outside_changes);
        let disk = on_disk(&store);
        let titles = titles_of(&disk);
        assert_eq!(titles, ["renamed in the editor", "mine"]);
        assert_eq!(disk.truth.trust[0].title, "entry renamed");
        assert_eq!(store.state(), &disk);
    }

    /// A file that never holds still: the writer gives up with nothing
    /// written, exit code 2.
    #[test]
    fn a_file_that_keeps_changing_is_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = store_with_two(dir.path());
        BEFORE_RENAME.with(|h| {
            *h.borrow_mut() = Some(Box::new(|path: &Path| {
                let mut s = wo_format::parse(&fs::read(path).unwrap()).unwrap();
                s.context.push('x');
                fs::write(path, wo_format::to_canonical_vec(&s)).unwrap();
            }));
        });
        let err = store
            .transact(|s| s.push_message(Message::new("alec", ts(5), "mine", "<p>m</p>")))
            .unwrap_err();
        BEFORE_RENAME.with(|h| *h.borrow_mut() = None);
        let StoreError::Busy { attempts, .. } = err else {
            panic!("not busy: {err}");
        };
        assert!(attempts >= MAX_WRITE_ATTEMPTS);
        assert_eq!(err.exit_code(), 2);
        let disk = on_disk(&store);
        assert_eq!(disk.messages().len(), 1, "nothing of ours written");
        assert_eq!(disk.context.len(), attempts as usize);
    }

    /// The rename happened but the directory fsync failed: the error says
    /// the new version is in place, and the store knows it is.
    #[test]
    fn a_failure_after_the_rename_is_reported_as_written_not_durable() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = store_with_two(dir.path());
        wo_durable::fail_dir_syncs(true);
        let err = store
            .transact(|s| s.push_message(Message::new("alec", ts(5), "mine", "<p>m</p>")))
            .unwrap_err();
        wo_durable::fail_dir_syncs(false);
        assert!(matches!(err, StoreError::NotDurable { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains("written and is in place"), "{text}");
        assert!(!text.contains("unchanged"), "{text}");
        let disk = on_disk(&store);
        assert_eq!(disk.messages().len(), 2, "the new version is there");
        // The store does not think the file changed behind its back.
        assert!(!store.refresh().unwrap());
        store.save().unwrap();
        let disk = on_disk(&store);
        assert_eq!(disk.messages().len(), 2);
    }
}
