//! Exports beside the state file (`llm_YYYY.MM.DD.HHMM.json`): naming new
//! ones, and finding, merging and retiring ones copied back from elsewhere
//! (product §3 "Startup").

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::mpsc;

use wo_format::admit::{Admitted, AdmittedExport, KnownMessages, admit_bytes, admit_export};
use wo_format::merge::{MergeReport, merge_into, merge_into_unique};
use wo_format::{State, to_canonical_vec};

use crate::durable::{self, parent_dir};
use crate::store::{OpenOptions, Store, StoreError};

/// The export file name for a local time: `llm_YYYY.MM.DD.HHMM.json`.
pub fn export_file_name(local: time::OffsetDateTime) -> String {
    format!(
        "llm_{:04}.{:02}.{:02}.{:02}{:02}.json",
        local.year(),
        u8::from(local.month()),
        local.day(),
        local.hour(),
        local.minute()
    )
}

/// The export file name for now, in local time (UTC when the local offset
/// cannot be determined).
pub fn export_file_name_now() -> String {
    export_file_name(
        time::OffsetDateTime::now_local().unwrap_or_else(|_| time::OffsetDateTime::now_utc()),
    )
}

/// Writes `state` as a new export in `dir` named for the current local time
/// (a `-2`, `-3`… suffix if that minute's name is taken). Returns the path.
pub fn write_export(state: &State, dir: &Path) -> Result<PathBuf, StoreError> {
    let base = export_file_name_now();
    let stem = base.trim_end_matches(".json");
    let bytes = to_canonical_vec(state);
    for n in 1u32.. {
        let name = if n == 1 {
            base.clone()
        } else {
            format!("{stem}-{n}.json")
        };
        let path = dir.join(name);
        if path.symlink_metadata().is_ok() {
            continue;
        }
        durable::write_atomic(&path, &[&bytes]).map_err(|source| StoreError::Write {
            path: path.clone(),
            source,
        })?;
        return Ok(path);
    }
    unreachable!("u32 export names exhausted")
}

/// True for names the startup merge picks up: `llm_*.json`.
pub fn is_export_name(name: &str) -> bool {
    name.starts_with("llm_") && name.ends_with(".json") && name.len() > "llm_.json".len()
}

/// Export files beside `state_path`, sorted by name.
pub fn find_exports(state_path: &Path) -> Vec<PathBuf> {
    let dir = parent_dir(state_path);
    let own = state_path.file_name();
    let mut found: Vec<PathBuf> = fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| {
            let name = e.file_name();
            Some(name.as_os_str()) != own && is_export_name(&name.to_string_lossy())
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// The outcome for one file of a merge run.
#[derive(Debug)]
pub struct FileMerge {
    /// The export file.
    pub path: PathBuf,
    /// What its merge did, or why it failed (the file is then left as it was).
    pub result: Result<MergeReport, StoreError>,
    /// Where it was renamed after a successful merge (not in a dry run).
    pub renamed_to: Option<PathBuf>,
    /// JSON pointers (in that file) of content that broke the XHTML rules
    /// and was merged in sanitised form.
    pub sanitised: Vec<String>,
}

/// Reads an export (or any state file) for merging, through the one gate
/// for outside data ([`wo_format::admit`]): parsed with the nesting limit
/// of every reader, held to `wo validate`'s rules, content sanitised. A file
/// that fails is refused with the pointer of each problem.
pub fn read_export(path: &Path, opts: &OpenOptions) -> Result<Admitted, StoreError> {
    let mut bytes = Vec::new();
    read_limited(path, opts, &mut bytes)?;
    admit_bytes(&bytes).map_err(|issues| StoreError::Invalid {
        path: path.to_path_buf(),
        issues,
    })
}

/// [`read_export`] for merging into a state whose messages are `known`
/// (see [`admit_export`]), reading into `buf` (re-used between files).
fn read_export_against(
    path: &Path,
    opts: &OpenOptions,
    known: &KnownMessages,
    buf: &mut Vec<u8>,
) -> Result<AdmittedExport, StoreError> {
    read_limited(path, opts, buf)?;
    admit_export(buf, known).map_err(|issues| StoreError::Invalid {
        path: path.to_path_buf(),
        issues,
    })
}

/// The bytes of a file to merge, refusing what [`Store::open`] refuses: a
/// symbolic link (unless allowed), anything but a regular file, more than
/// the state size limit.
fn read_limited(path: &Path, opts: &OpenOptions, bytes: &mut Vec<u8>) -> Result<(), StoreError> {
    let read_err = |source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    };
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(StoreError::NotFound {
                path: path.to_path_buf(),
            });
        }
        Err(e) => return Err(read_err(e)),
    };
    if meta.file_type().is_symlink() && !opts.allow_symlink {
        return Err(StoreError::Symlink {
            path: path.to_path_buf(),
        });
    }
    // Checked again on the file opened: what was a regular file a moment
    // ago may be a link or a FIFO now (never followed, never waited on).
    let no_follow = if opts.allow_symlink {
        0
    } else {
        libc::O_NOFOLLOW
    };
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(no_follow | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) if !opts.allow_symlink => StoreError::Symlink {
                path: path.to_path_buf(),
            },
            _ => read_err(e),
        })?;
    let meta = file.metadata().map_err(read_err)?;
    if !meta.is_file() {
        return Err(StoreError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    let limit = opts.limits.max_state_bytes;
    let too_large = |size| StoreError::TooLarge {
        path: path.to_path_buf(),
        size,
        limit,
    };
    if meta.len() > limit {
        return Err(too_large(meta.len()));
    }
    bytes.clear();
    bytes.reserve(meta.len() as usize + 1);
    // At most one byte past the limit, in case it grew meanwhile.
    file.take(limit + 1).read_to_end(bytes).map_err(read_err)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(())
}

/// Reads several exports on all cores (parsing dominates a merge) and hands
/// each result to `take` in the order of `files`. At most about one export
/// per core is held in memory at a time: holding all of them at once made a
/// merge of ten large exports spend most of its time having the kernel zero
/// fresh pages for ten parsed states.
fn for_each_read(
    files: &[PathBuf],
    opts: &OpenOptions,
    known: &KnownMessages,
    mut take: impl FnMut(usize, Result<AdmittedExport, StoreError>),
) {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len());
    if threads < 2 {
        let mut buf = Vec::new();
        for (i, f) in files.iter().enumerate() {
            take(i, read_export_against(f, opts, known, &mut buf));
        }
        return;
    }
    let next = AtomicUsize::new(0);
    // Each worker waits for room before it takes another file, so results
    // parked here (finished ahead of their turn) stay fewer than the workers.
    let (send, receive) = mpsc::sync_channel(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let send = send.clone();
            let next = &next;
            scope.spawn(move || {
                // One read buffer per worker: fresh memory for every file
                // costs the kernel zeroing its pages each time.
                let mut buf = Vec::new();
                loop {
                    let i = next.fetch_add(1, AtomicOrdering::Relaxed);
                    let Some(f) = files.get(i) else { break };
                    let read = read_export_against(f, opts, known, &mut buf);
                    if send.send((i, read)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(send);
        let mut parked = BTreeMap::new();
        let mut due = 0;
        for (i, result) in receive {
            parked.insert(i, result);
            while let Some(result) = parked.remove(&due) {
                take(due, result);
                due += 1;
            }
        }
    });
}

/// Merges `files` into the store. Valid files are merged in one locked
/// write; then each is renamed to `<name>.merged` unless `rename` is false.
/// Invalid files are reported and left alone. With `dry_run` nothing is
/// written or renamed; the reports say what would happen.
///
/// Files are read and merged one after another, as they are parsed (see
/// [`for_each_read`]), under the lock of that one write; messages an export
/// repeats byte for byte from the state are recognised without being
/// parsed again (see [`admit_export`]).
pub fn merge_files(
    store: &mut Store,
    files: &[PathBuf],
    dry_run: bool,
    rename: bool,
) -> Result<Vec<FileMerge>, StoreError> {
    let read_opts = OpenOptions {
        limits: store.limits().clone(),
        ..OpenOptions::default()
    };
    let merge_all = |state: &mut State| {
        let mut results: Vec<(Result<MergeReport, StoreError>, Vec<String>)> =
            Vec::with_capacity(files.len());
        // The state's own messages, which most of an export repeats.
        let known = KnownMessages::of(state);
        let mut merged_one = false;
        for_each_read(files, &read_opts, &known, |_, read| match read {
            Ok(AdmittedExport { admitted, known }) => {
                // After the first merge the state repeats no id, so the
                // others need not look for repeats in it again.
                let mut report = if merged_one {
                    merge_into_unique(state, &admitted.state)
                } else {
                    merge_into(state, &admitted.state)
                };
                merged_one = true;
                // Repeats of the state's own messages: merging them is a
                // no-op (a merge is idempotent), so they are only counted.
                report.messages_skipped += known;
                results.push((Ok(report), admitted.sanitised));
            }
            Err(e) => results.push((Err(e), Vec::new())),
        });
        results
    };
    let results = if dry_run {
        store.refresh()?;
        let mut scratch = store.state().clone();
        merge_all(&mut scratch)
    } else {
        // Every file refused: nothing to write.
        match store.try_transact(|state| {
            let results = merge_all(state);
            if results.iter().any(|(r, _)| r.is_ok()) {
                Ok(results)
            } else {
                Err(results)
            }
        })? {
            Ok((results, _)) => results,
            Err(results) => results,
        }
    };
    let mut outcomes = Vec::with_capacity(files.len());
    for (path, (result, sanitised)) in files.iter().zip(results) {
        let mut renamed_to = None;
        if result.is_ok() && !dry_run && rename {
            let mut target = path.clone().into_os_string();
            target.push(".merged");
            let target = PathBuf::from(target);
            // A failed rename only means the file is merged again next time,
            // which changes nothing (merge is idempotent).
            if fs::rename(path, &target).is_ok() {
                renamed_to = Some(target);
            }
        }
        outcomes.push(FileMerge {
            path: path.clone(),
            result,
            renamed_to,
            sanitised,
        });
    }
    outcomes.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(outcomes)
}

/// The startup step of `wo serve` / `wo ask`: merge every export beside the
/// state file and rename it to `*.merged`.
pub fn auto_merge(store: &mut Store, dry_run: bool) -> Result<Vec<FileMerge>, StoreError> {
    let files = find_exports(store.path());
    if files.is_empty() {
        return Ok(Vec::new());
    }
    merge_files(store, &files, dry_run, true)
}
