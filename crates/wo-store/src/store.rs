//! [`Store`]: one loaded state file and the rules for changing it.

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use wo_format::merge::merge_into;
use wo_format::validate::Issue;
use wo_format::{MessageCache, RetrievalPrefs, State, Timestamp};

use crate::durable;

/// Size limits with clear errors (SPEC §2).
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest state file read or written (default 256 MiB).
    pub max_state_bytes: u64,
    /// Largest XHTML content of one message or truth entry (default 1 MiB).
    pub max_message_bytes: usize,
    /// Largest `context` (default 64 KiB; the SPEC's target is under 8 KB).
    pub max_context_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_state_bytes: 256 * 1024 * 1024,
            max_message_bytes: 1024 * 1024,
            max_context_bytes: 64 * 1024,
        }
    }
}

/// How to open a state file.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// Accept a state path that is a symbolic link (refused by default).
    pub allow_symlink: bool,
    /// Create the file with defaults if it does not exist.
    pub create_if_missing: bool,
    pub limits: Limits,
    /// How long to wait for another process's lock before giving up
    /// (default 30 s).
    pub lock_timeout: Option<Duration>,
}

/// Everything that can go wrong with a state file. Every variant names the
/// file; [`StoreError::exit_code`] maps write failures to 2 (SPEC §2).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "{path}: no state file here\nhint: create one with `wo init`, or name one with --state PATH"
    )]
    NotFound { path: PathBuf },
    #[error(
        "{path}: is a symbolic link; refusing to follow it\nhint: pass --allow-symlink if you mean it"
    )]
    Symlink { path: PathBuf },
    #[error("{path}: is not a regular file")]
    NotAFile { path: PathBuf },
    #[error(
        "{path}: {size} bytes is over the state size limit of {limit} bytes\nhint: raise the limit with --max-state-bytes"
    )]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    #[error("{path}: not a valid llm.json:\n{}\nhint: `wo validate {path}` lists every problem; `wo init --force` backs the file up and starts fresh", render(.issues))]
    Invalid { path: PathBuf, issues: Vec<Issue> },
    #[error("{path}: {what} is {size} bytes, over the limit of {limit} bytes")]
    ContentTooLarge {
        path: PathBuf,
        what: String,
        size: usize,
        limit: usize,
    },
    #[error("{path}: cannot read: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error(
        "{path}: timed out after {waited:?} waiting for the lock held by another process ({lock})"
    )]
    LockTimeout {
        path: PathBuf,
        lock: PathBuf,
        waited: Duration,
    },
    #[error("{path}: cannot write, the file is unchanged: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error(
        "{path}: already exists\nhint: use it as is, or `wo init --force` to back it up and start fresh"
    )]
    Exists { path: PathBuf },
}

fn render(issues: &[Issue]) -> String {
    let mut out: Vec<String> = issues.iter().take(10).map(|i| format!("  {i}")).collect();
    if issues.len() > 10 {
        out.push(format!("  … and {} more", issues.len() - 10));
    }
    out.join("\n")
}

impl StoreError {
    /// Process exit code for this error: 2 for write failures, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            StoreError::Write { .. } => 2,
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
/// that do not know about it still change the metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    generation: u64,
    dev: u64,
    ino: u64,
    len: u64,
    mtime: i64,
    mtime_nsec: i64,
    ctime: i64,
    ctime_nsec: i64,
}

impl Stamp {
    fn of(m: &fs::Metadata, generation: u64) -> Self {
        Stamp {
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

/// Shared fields of the state as last loaded or saved, to tell which of them
/// this process changed when an outside change must be merged.
#[derive(Clone, Debug)]
struct Baseline {
    context: String,
    retrieval_prefs: RetrievalPrefs,
}

impl Baseline {
    fn of(s: &State) -> Self {
        Baseline {
            context: s.context.clone(),
            retrieval_prefs: s.truth.retrieval_prefs.clone(),
        }
    }
}

/// One state file, loaded.
#[derive(Debug)]
pub struct Store {
    path: PathBuf,
    lock_path: PathBuf,
    opts: OpenOptions,
    state: State,
    cache: MessageCache,
    /// The on-disk version `state` was read from or last written as.
    stamp: Option<Stamp>,
    baseline: Baseline,
}

/// Held while a read-modify-write is in progress; dropping it unlocks.
struct LockGuard(File);

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

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

impl Store {
    /// Opens (and validates) the state file at `path`.
    pub fn open(path: impl AsRef<Path>, opts: OpenOptions) -> Result<Store, StoreError> {
        let path = resolve_allowed_symlink(path.as_ref(), &opts)?;
        let lock_path = lock_path_for(&path);
        match read_state(&path, Some(&lock_path), &opts)? {
            Some((state, stamp)) => Ok(Store {
                baseline: Baseline::of(&state),
                path,
                lock_path,
                opts,
                state,
                cache: MessageCache::default(),
                stamp: Some(stamp),
            }),
            None if opts.create_if_missing => {
                let mut store = Store::unsaved(path, State::new(Timestamp::now()), opts);
                store.create_file()?;
                Ok(store)
            }
            None => Err(StoreError::NotFound { path }),
        }
    }

    /// A store for `state` that has not been written to `path` yet.
    fn unsaved(path: PathBuf, state: State, opts: OpenOptions) -> Store {
        Store {
            lock_path: lock_path_for(&path),
            baseline: Baseline::of(&state),
            path,
            opts,
            state,
            cache: MessageCache::default(),
            stamp: None,
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
        store.create_file()?;
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
        store.write_locked(&lock)?;
        drop(lock);
        Ok(store)
    }

    fn create_file(&mut self) -> Result<(), StoreError> {
        let lock = self.lock()?;
        if self.path.symlink_metadata().is_ok() {
            return Err(StoreError::Exists {
                path: self.path.clone(),
            });
        }
        self.write_locked(&lock)?;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    /// Changes made here are written by the next [`Store::save`]; if the file
    /// changed meanwhile, they are merged into the new version (SPEC §3).
    pub fn state_mut(&mut self) -> &mut State {
        &mut self.state
    }

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
        let token = self.state.mark_saved();
        self.cache.seal(token);
    }

    /// Re-reads the file if it changed on disk since it was loaded or saved,
    /// merging in any unsaved changes. Returns whether it changed.
    pub fn refresh(&mut self) -> Result<bool, StoreError> {
        self.refresh_inner(false)
    }

    /// `holding_lock`: the caller holds the exclusive lock, so reading must
    /// not ask for a shared one (flock locks of two descriptors conflict even
    /// within one process).
    fn refresh_inner(&mut self, holding_lock: bool) -> Result<bool, StoreError> {
        let generation = current_generation(&self.lock_path);
        let current = match fs::symlink_metadata(&self.path) {
            Ok(m) => Some(Stamp::of(&m, generation)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(StoreError::Read {
                    path: self.path.clone(),
                    source: e,
                });
            }
        };
        if current == self.stamp || current.is_none() {
            // Unchanged, or deleted under us: our copy is all there is, and
            // the next save puts it back.
            return Ok(false);
        }
        let shared_lock = (!holding_lock).then_some(self.lock_path.as_path());
        let Some((mut disk, stamp)) = read_state(&self.path, shared_lock, &self.opts)? else {
            return Ok(false);
        };
        // Our unsaved work joins the version on disk: unions of messages and
        // truth (edits carry a newer `updated`, deletions a tombstone); the
        // fields we changed since loading win over the disk's.
        merge_into(&mut disk, &self.state);
        if self.state.context != self.baseline.context {
            disk.context = self.state.context.clone();
        }
        if self.state.truth.retrieval_prefs != self.baseline.retrieval_prefs {
            disk.truth.retrieval_prefs = self.state.truth.retrieval_prefs.clone();
        }
        self.baseline = Baseline::of(&disk);
        self.state = disk;
        self.cache.clear();
        self.stamp = Some(stamp);
        Ok(true)
    }

    /// Writes the state durably under the lock, merging outside changes first.
    pub fn save(&mut self) -> Result<SaveOutcome, StoreError> {
        self.transact(|_| ()).map(|(_, outcome)| outcome)
    }

    /// A read-modify-write: under the lock, brings the state up to date with
    /// the file, applies `change`, and writes the result atomically.
    pub fn transact<T>(
        &mut self,
        change: impl FnOnce(&mut State) -> T,
    ) -> Result<(T, SaveOutcome), StoreError> {
        let lock = self.lock()?;
        let merged_outside_changes = self.refresh_inner(true)?;
        let value = change(&mut self.state);
        let bytes = self.write_locked(&lock)?;
        Ok((
            value,
            SaveOutcome {
                merged_outside_changes,
                bytes,
            },
        ))
    }

    /// Like [`Store::transact`], but nothing is written when `change` fails.
    /// `change` must check before it mutates: a failed change is not undone.
    pub fn try_transact<T, E>(
        &mut self,
        change: impl FnOnce(&mut State) -> Result<T, E>,
    ) -> Result<Result<(T, SaveOutcome), E>, StoreError> {
        let lock = self.lock()?;
        let merged_outside_changes = self.refresh_inner(true)?;
        match change(&mut self.state) {
            Ok(value) => {
                let bytes = self.write_locked(&lock)?;
                Ok(Ok((
                    value,
                    SaveOutcome {
                        merged_outside_changes,
                        bytes,
                    },
                )))
            }
            Err(e) => Ok(Err(e)),
        }
    }

    fn write_locked(&mut self, lock: &LockGuard) -> Result<u64, StoreError> {
        self.check_content_limits()?;
        let previous_date = self.state.date.clone();
        let now = Timestamp::now();
        if now > self.state.date {
            self.state.date = now;
        }
        let parts = wo_format::canonical_parts(&self.state, &mut self.cache);
        let size = parts.len() as u64;
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
        let written = durable::write_atomic(&self.path, &parts.chunks());
        match written {
            Ok(meta) => {
                let token = self.state.mark_saved();
                self.cache.seal(token);
                let generation = lock.generation().wrapping_add(1);
                lock.set_generation(generation);
                self.stamp = Some(Stamp::of(&meta, generation));
                self.baseline = Baseline::of(&self.state);
                Ok(size)
            }
            Err(source) => {
                self.cache.clear();
                self.state.date = previous_date;
                Err(StoreError::Write {
                    path: self.path.clone(),
                    source,
                })
            }
        }
    }

    fn check_content_limits(&self) -> Result<(), StoreError> {
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
        // Only messages changed since the last save can be new offenders.
        let messages = self.state.messages();
        for (i, m) in messages.iter().enumerate().skip(self.state.clean_prefix()) {
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
        Ok(())
    }

    fn lock(&self) -> Result<LockGuard, StoreError> {
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&self.lock_path)
            .map_err(|source| StoreError::Write {
                path: self.lock_path.clone(),
                source,
            })?;
        let timeout = self.opts.lock_timeout.unwrap_or(Duration::from_secs(30));
        let start = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(LockGuard(file)),
                Err(fs::TryLockError::WouldBlock) if start.elapsed() < timeout => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                Err(fs::TryLockError::WouldBlock) => {
                    return Err(StoreError::LockTimeout {
                        path: self.path.clone(),
                        lock: self.lock_path.clone(),
                        waited: start.elapsed(),
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

fn lock_path_for(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    durable::parent_dir(path).join(name)
}

/// The generation recorded in the lock file (0 when there is none yet).
fn current_generation(lock_path: &Path) -> u64 {
    File::open(lock_path).map_or(0, |f| parse_generation(&f))
}

/// Reads and parses the file; `Ok(None)` when it does not exist. With
/// `shared_lock`, holds a shared lock on that lock file while reading.
fn read_state(
    path: &Path,
    shared_lock: Option<&Path>,
    opts: &OpenOptions,
) -> Result<Option<(State, Stamp)>, StoreError> {
    let read_err = |source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    };
    // A shared lock, when a writer has ever made the lock file, so the
    // generation and the bytes read belong together. Read the generation
    // first: writers bump it after their rename, so an older number with
    // newer bytes only costs a needless re-read later, never a lost update.
    let shared = shared_lock.and_then(|p| File::open(p).ok().filter(|f| f.lock_shared().is_ok()));
    let generation = match (&shared, shared_lock) {
        (Some(f), _) => parse_generation(f),
        // Under the caller's exclusive lock: read it directly.
        (None, _) => current_generation(&lock_path_for(path)),
    };
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
    let mut file = File::open(path).map_err(read_err)?;
    let meta = file.metadata().map_err(read_err)?;
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
    let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
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
    let state = wo_format::parse(&bytes).map_err(|e| StoreError::Invalid {
        path: path.to_path_buf(),
        issues: e.issues,
    })?;
    // The metadata of the file actually read: the path may already name a
    // newer one, and taking its stamp would hide that change.
    let stamp = file.metadata().map_err(read_err)?;
    drop(shared);
    Ok(Some((state, Stamp::of(&stamp, generation))))
}
