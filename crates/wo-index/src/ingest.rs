//! Building and incrementally updating the on-disk index (`index_directory`).
//!
//! Pipeline: walk → apply byte caps in path order → per file (in parallel) reuse the previous
//! chunks when the content hash is unchanged, otherwise read, sniff, decode and chunk → sort all
//! chunks into ref order → assign ids/refs → rebuild the BM25 postings over every chunk → write
//! `index.json` atomically. Everything that reaches `index.json` is derived from file paths and
//! bytes only, so the same tree always produces the same bytes.
//!
//! A separate `stat.json` remembers (size, mtime, hash) per file so unchanged files need not be
//! re-read; it is machine-specific and never exported.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::chunk::{Piece, chunk_text};
use crate::error::{IndexError, Result};
use crate::model::{Chunk, FileMeta, INDEX_VERSION, IndexFile, Kind, Stats, Warning, WarningKind};
use crate::options::IndexOptions;
use crate::postings_build::{PrevPostings, build_postings};
use crate::util::{chunk_id, chunk_ref, sha256_hex, slugify, truncate_chars};
use crate::walk::{CACHE_DIR, Candidate, kind_for_path, looks_binary, walk};

/// File name of the index inside the cache directory.
pub const INDEX_FILE: &str = "index.json";
const STAT_FILE: &str = "stat.json";
/// Files modified this close to the previous run's start are re-hashed: their mtime may not
/// have changed on a same-size edit within the filesystem's timestamp granularity.
const RACY_WINDOW_NS: u128 = 2_000_000_000;

/// Phase of an indexing run, for progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Listing files.
    Walking,
    /// Reading and chunking files (`done` of `total` files).
    Chunking,
    /// Building postings.
    Indexing,
    /// Writing the cache.
    Writing,
}

/// A progress notification; `total` is 0 while unknown.
#[derive(Debug, Clone)]
pub struct Progress<'a> {
    /// Current phase.
    pub phase: Phase,
    /// Units finished in this phase.
    pub done: usize,
    /// Units in this phase (0 if unknown).
    pub total: usize,
    /// File just finished, when relevant.
    pub path: Option<&'a str>,
}

/// What an indexing run did.
#[derive(Debug, Clone)]
pub struct IndexReport {
    /// Where the index was written.
    pub index_path: PathBuf,
    /// The new index id.
    pub index_id: String,
    /// Files in the index.
    pub files: usize,
    /// Files (re)chunked in this run.
    pub files_chunked: usize,
    /// Files whose chunks were reused unchanged.
    pub files_reused: usize,
    /// Files of the previous index that are gone.
    pub files_removed: usize,
    /// Chunks in the index.
    pub chunks: usize,
    /// Bytes of source indexed.
    pub bytes: u64,
    /// Size of `index.json`.
    pub index_bytes: u64,
    /// Skipped/truncated file notices (also stored in the index).
    pub warnings: Vec<Warning>,
    /// Why a previous index could not be reused, if one existed.
    pub rebuilt_because: Option<String>,
    /// Wall time of the run.
    pub elapsed: std::time::Duration,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct StatCache {
    /// Start time of the run that wrote this cache (ns since epoch).
    built_at_ns: u128,
    /// path -> (size, mtime_ns, sha256)
    files: BTreeMap<String, (u64, u128, String)>,
}

/// Result of processing one file.
struct FileResult {
    /// `None` for files that are skipped after reading (binary content).
    meta: Option<FileMeta>,
    chunks: Vec<Chunk>,
    warnings: Vec<Warning>,
    reused: bool,
    stat: (u64, u128, String),
}

/// The cache directory for a project root.
pub fn cache_dir(root: &Path) -> PathBuf {
    root.join(CACHE_DIR)
}

/// Reads `<root>/.wo-index/index.json`.
pub(crate) fn read_index_file(root: &Path) -> Result<IndexFile> {
    let path = cache_dir(root).join(INDEX_FILE);
    let bytes = match crate::guard::read_in(
        &cache_dir(root),
        INDEX_FILE,
        crate::guard::MAX_CACHE_FILE_BYTES,
    ) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(IndexError::NoIndex { path });
        }
        Err(e) => return Err(IndexError::io(path, e)),
    };
    parse_index_file(&bytes, &path)
}

/// Permissions of new cache files: as shareable as any file the user makes (0666 less the
/// umask), like the project files the index is made of; a replaced file keeps its own.
#[cfg(not(target_arch = "wasm32"))]
const CACHE_MODE: wo_durable::Mode = wo_durable::Mode::Keep { new: 0o666 };

/// Replaces `path` with `bytes` atomically and durably (`wo_durable`: temp file, fsync,
/// rename, fsync of the directory), so readers never see a torn file.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    wo_durable::write_atomic_with(path, CACHE_MODE, |w| w.write_all(bytes))
        .map(drop)
        .map_err(|e| IndexError::io(path, e))
}

/// The previous index to build on, or why there is none to use (`None` reason: no index yet).
fn usable_previous(
    previous: Result<IndexFile>,
    opts: &IndexOptions,
) -> (Option<IndexFile>, Option<String>) {
    if opts.full_rebuild {
        return (None, Some("full rebuild requested".to_string()));
    }
    match previous {
        Ok(prev) if prev.chunking == opts.chunking => (Some(prev), None),
        Ok(_) => (None, Some("chunking caps changed".to_string())),
        Err(IndexError::NoIndex { .. }) => (None, None),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// Indexes the directory tree at `root` into `<root>/.wo-index/`, reusing the previous index
/// for files whose content is unchanged. Problems with individual files become warnings.
///
/// The index itself is built by the same core as [`index_files`] (the in-memory entry point
/// the browser uses); this function adds the walk, the stat cache and the writes.
pub fn index_directory(
    root: &Path,
    opts: &IndexOptions,
    progress: &(dyn Fn(&Progress<'_>) + Sync),
) -> Result<IndexReport> {
    let started = Instant::now();
    let run_start_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    if !root.is_dir() {
        return Err(IndexError::NotADirectory {
            path: root.to_path_buf(),
        });
    }
    let cache = cache_dir(root);
    let (previous, mut rebuilt_because) = if opts.full_rebuild {
        usable_previous(
            Err(IndexError::NoIndex {
                path: cache.clone(),
            }),
            opts,
        )
    } else {
        usable_previous(read_index_file(root), opts)
    };
    let stat_cache: StatCache = if previous.is_some() {
        crate::guard::read_in(&cache, STAT_FILE, crate::guard::MAX_CACHE_FILE_BYTES)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    } else {
        StatCache::default()
    };

    progress(&Progress {
        phase: Phase::Walking,
        done: 0,
        total: 0,
        path: None,
    });
    let (candidates, warnings) = walk(root, opts);
    let read = |cand: &Candidate| {
        crate::guard::read_walked(
            root,
            &cand.rel,
            &cand.abs,
            opts.follow_symlinks,
            opts.max_file_bytes,
        )
        .ok()
        .map(Cow::Owned)
    };
    let built = build(
        candidates,
        warnings,
        previous,
        &stat_cache,
        opts,
        &read,
        progress,
        true,
    );
    let new_stat = StatCache {
        built_at_ns: run_start_ns,
        files: built.stat,
    };
    let file = match built.index {
        Built::Unchanged { index_id, bytes } => {
            let index_path = cache.join(INDEX_FILE);
            write_stat(&cache, &new_stat)?;
            return Ok(IndexReport {
                index_bytes: std::fs::metadata(&index_path).map_or(0, |m| m.len()),
                index_path,
                index_id,
                files: built.files,
                files_chunked: 0,
                files_reused: built.reused,
                files_removed: 0,
                chunks: built.chunks,
                bytes,
                warnings: built.warnings,
                rebuilt_because,
                elapsed: started.elapsed(),
            });
        }
        Built::New(file) => *file,
    };
    if !built.had_previous && rebuilt_because.is_none() && cache.join(INDEX_FILE).exists() {
        rebuilt_because = Some("previous index unreadable".to_string());
    }

    progress(&Progress {
        phase: Phase::Writing,
        done: 0,
        total: 0,
        path: None,
    });
    // A link at `.wo-index` (or in it) would make the index write into another folder.
    crate::guard::ensure_dir(&cache, "").map_err(|e| IndexError::io(&cache, e))?;
    // Keep the cache out of version control without touching the project's own .gitignore.
    let ignore_file = cache.join(".gitignore");
    if std::fs::symlink_metadata(&ignore_file).is_err() {
        crate::guard::create_in(&cache, ".gitignore")
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"*\n"))
            .map_err(|e| IndexError::io(&ignore_file, e))?;
    }
    let index_path = cache.join(INDEX_FILE);
    let index_bytes = write_index_atomic(&index_path, &file)?;
    write_stat(&cache, &new_stat)?;

    Ok(IndexReport {
        index_path,
        index_id: file.index_id.clone(),
        files: file.files.len(),
        files_chunked: built.chunked,
        files_reused: built.reused,
        files_removed: built.removed,
        chunks: file.chunks.len(),
        bytes: file.stats.total_bytes,
        index_bytes,
        warnings: file.warnings,
        rebuilt_because,
        elapsed: started.elapsed(),
    })
}

/// What [`index_files`] did (the in-memory counterpart of [`IndexReport`]: no paths, no clock).
#[derive(Debug, Clone, Serialize)]
pub struct BuildReport {
    /// The new index id.
    pub index_id: String,
    /// Files in the index.
    pub files: usize,
    /// Files (re)chunked in this run.
    pub files_chunked: usize,
    /// Files whose chunks were reused from the previous index.
    pub files_reused: usize,
    /// Files of the previous index that are gone.
    pub files_removed: usize,
    /// Chunks in the index.
    pub chunks: usize,
    /// Bytes of source indexed.
    pub bytes: u64,
    /// Skipped/truncated file notices (also stored in the index).
    pub warnings: Vec<Warning>,
    /// Why the previous index given could not be reused, if one was given.
    pub rebuilt_because: Option<String>,
}

/// Indexes files given in memory — `(path relative to the root, bytes)` — with no file system
/// and no clock: the browser's entry point (`crates/wo-index-wasm`).
///
/// The files go through the same selection as the directory walk ([`walk::select`]: hidden
/// names, `.gitignore`/`.ignore` files among them, the cache and `.git` folders; bad paths
/// become warnings) and the same core as [`index_directory`], so the same tree gives the same
/// `index.json` bytes either way. With `previous` (an index of an earlier version of the
/// tree, e.g. read with [`parse_index_file`]) unchanged files reuse their chunks and postings
/// by content hash, the rule the native index follows.
pub fn index_files(
    files: &[(String, Vec<u8>)],
    previous: Option<IndexFile>,
    opts: &IndexOptions,
    progress: &(dyn Fn(&Progress<'_>) + Sync),
) -> (IndexFile, BuildReport) {
    let (previous, rebuilt_because) = match previous {
        Some(prev) => usable_previous(Ok(prev), opts),
        None => (None, None),
    };
    progress(&Progress {
        phase: Phase::Walking,
        done: 0,
        total: 0,
        path: None,
    });
    let (selected, warnings) =
        crate::walk::select(files.iter().map(|(p, b)| (p.as_str(), b.as_slice())), opts);
    let by_path: HashMap<&str, &[u8]> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .collect();
    let read = |cand: &Candidate| by_path.get(cand.rel.as_str()).map(|b| Cow::Borrowed(*b));
    let built = build(
        selected,
        warnings,
        previous,
        &StatCache::default(),
        opts,
        &read,
        progress,
        false,
    );
    let Built::New(file) = built.index else {
        unreachable!("build() reassembles when asked not to keep an unchanged index")
    };
    let report = BuildReport {
        index_id: file.index_id.clone(),
        files: file.files.len(),
        files_chunked: built.chunked,
        files_reused: built.reused,
        files_removed: built.removed,
        chunks: file.chunks.len(),
        bytes: file.stats.total_bytes,
        warnings: file.warnings.clone(),
        rebuilt_because,
    };
    (*file, report)
}

/// Parses `index.json` bytes (as written by [`index_directory`] or serialised from
/// [`index_files`]); `name` is what errors call the file.
pub fn parse_index_file(bytes: &[u8], name: &Path) -> Result<IndexFile> {
    let file: IndexFile = serde_json::from_slice(bytes).map_err(|e| IndexError::Corrupt {
        path: name.to_path_buf(),
        reason: e.to_string(),
    })?;
    if file.version != INDEX_VERSION {
        return Err(IndexError::Corrupt {
            path: name.to_path_buf(),
            reason: format!(
                "index version {} (this build reads {INDEX_VERSION}); run `wo index` to rebuild it",
                file.version
            ),
        });
    }
    Ok(file)
}

/// The index a [`build`] produced.
enum Built {
    /// Nothing changed and the caller keeps the previous index as it is.
    Unchanged {
        /// Its id.
        index_id: String,
        /// Its source bytes.
        bytes: u64,
    },
    /// A new (or reassembled) index (boxed: it is large, the other variant small).
    New(Box<IndexFile>),
}

/// What [`build`] did.
struct BuildOutcome {
    index: Built,
    had_previous: bool,
    files: usize,
    chunks: usize,
    chunked: usize,
    reused: usize,
    removed: usize,
    /// The warnings (those of the new index, when one was assembled).
    warnings: Vec<Warning>,
    /// path -> (size, mtime_ns, sha256) for the stat cache.
    stat: BTreeMap<String, (u64, u128, String)>,
}

/// The core both entry points share: caps in path order → per file (in parallel) reuse by
/// content hash or read, sniff, decode and chunk → assemble. `read` gives a file's bytes
/// (`None`: unreadable); `stat_cache` lets the native run skip reading files whose size and
/// mtime are unchanged. With `keep_unchanged`, a run that changed nothing returns
/// [`Built::Unchanged`] instead of reassembling the same index.
#[allow(clippy::too_many_arguments)]
fn build<'b>(
    candidates: Vec<Candidate>,
    warnings: Vec<Warning>,
    previous: Option<IndexFile>,
    stat_cache: &StatCache,
    opts: &IndexOptions,
    read: &(dyn Fn(&Candidate) -> Option<Cow<'b, [u8]>> + Sync),
    progress: &(dyn Fn(&Progress<'_>) + Sync),
    keep_unchanged: bool,
) -> BuildOutcome {
    // Every parallel step (files, then postings) runs on `opts.threads` threads.
    let run = || {
        build_in_pool(
            candidates,
            warnings,
            previous,
            stat_cache,
            opts,
            read,
            progress,
            keep_unchanged,
        )
    };
    match opts.threads {
        0 => run(),
        n => match rayon::ThreadPoolBuilder::new().num_threads(n).build() {
            Ok(pool) => pool.install(run),
            Err(_) => run(),
        },
    }
}

/// [`build`] on the current rayon pool.
#[allow(clippy::too_many_arguments)]
fn build_in_pool<'b>(
    candidates: Vec<Candidate>,
    mut warnings: Vec<Warning>,
    previous: Option<IndexFile>,
    stat_cache: &StatCache,
    opts: &IndexOptions,
    read: &(dyn Fn(&Candidate) -> Option<Cow<'b, [u8]>> + Sync),
    progress: &(dyn Fn(&Progress<'_>) + Sync),
    keep_unchanged: bool,
) -> BuildOutcome {
    // Caps are applied sequentially in path order so the same files are kept every time.
    let mut accepted: Vec<Candidate> = Vec::with_capacity(candidates.len());
    let mut total_bytes = 0u64;
    for cand in candidates {
        if cand.size > opts.max_file_bytes {
            warnings.push(Warning {
                path: cand.rel,
                kind: WarningKind::FileTooLarge,
                message: format!(
                    "{} bytes exceeds max_file_bytes ({}); skipped",
                    cand.size, opts.max_file_bytes
                ),
            });
            continue;
        }
        if total_bytes + cand.size > opts.max_total_bytes {
            warnings.push(Warning {
                path: cand.rel,
                kind: WarningKind::TotalBytesExceeded,
                message: format!(
                    "max_total_bytes ({}) reached; skipped",
                    opts.max_total_bytes
                ),
            });
            continue;
        }
        total_bytes += cand.size;
        accepted.push(cand);
    }

    // The previous index, taken apart by path; chunks are moved out, not cloned, because a
    // large tree's chunk text dominates memory.
    let mut prev_files: HashMap<String, FileMeta> = HashMap::new();
    let mut prev_chunks: HashMap<String, Vec<Chunk>> = HashMap::new();
    let mut prev_warnings: HashMap<String, Vec<Warning>> = HashMap::new();
    let mut prev_summary: Option<(String, Vec<Warning>, u64)> = None;
    let mut prev_postings: Option<PrevPostings> = None;
    if let Some(prev) = previous {
        prev_postings = Some(PrevPostings {
            ids: prev.chunks.iter().map(|c| c.id.clone()).collect(),
            doc_lens: prev.doc_lens,
            inverted: prev.inverted_index,
        });
        for c in prev.chunks {
            prev_chunks.entry(c.path.clone()).or_default().push(c);
        }
        for w in &prev.warnings {
            if is_content_warning(w.kind) {
                prev_warnings
                    .entry(w.path.clone())
                    .or_default()
                    .push(w.clone());
            }
        }
        for f in prev.files {
            prev_files.insert(f.path.clone(), f);
        }
        prev_summary = Some((prev.index_id, prev.warnings, prev.stats.total_bytes));
    }

    let total = accepted.len();
    let done = AtomicUsize::new(0);
    let process = |cand: &Candidate| -> Option<FileResult> {
        let result = process_file(cand, opts, stat_cache, read, &prev_files, &prev_warnings);
        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
        progress(&Progress {
            phase: Phase::Chunking,
            done: n,
            total,
            path: Some(&cand.rel),
        });
        result
    };
    let results: Vec<Result<FileResult, Warning>> = accepted
        .par_iter()
        .map(|c| process(c).ok_or_else(|| unreadable(c)))
        .collect();

    progress(&Progress {
        phase: Phase::Indexing,
        done: 0,
        total: 0,
        path: None,
    });
    let mut files = Vec::new();
    let mut chunks = Vec::new();
    let mut new_stat: BTreeMap<String, (u64, u128, String)> = BTreeMap::new();
    let (mut reused, mut chunked) = (0usize, 0usize);
    for result in results {
        match result {
            Ok(fr) => {
                warnings.extend(fr.warnings);
                if let Some(meta) = fr.meta {
                    if fr.reused {
                        reused += 1;
                        chunks.extend(prev_chunks.remove(&meta.path).unwrap_or_default());
                    } else {
                        chunked += 1;
                        chunks.extend(fr.chunks);
                    }
                    new_stat.insert(meta.path.clone(), fr.stat);
                    files.push(meta);
                }
            }
            Err(w) => warnings.push(w),
        }
    }
    let removed = {
        let now: HashSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
        prev_files
            .keys()
            .filter(|p| !now.contains(p.as_str()))
            .count()
    };
    warnings.sort();
    warnings.dedup();

    // Nothing changed: the previous index is already exactly what `assemble` would produce, so
    // a caller that still has it skips rebuilding postings and rewriting it (the common
    // "re-index an unchanged tree" case).
    let had_previous = prev_summary.is_some();
    if keep_unchanged
        && let Some((index_id, prev_warns, prev_bytes)) = prev_summary
        && chunked == 0
        && removed == 0
        && prev_warns == warnings
    {
        return BuildOutcome {
            index: Built::Unchanged {
                index_id,
                bytes: prev_bytes,
            },
            had_previous,
            files: files.len(),
            chunks: chunks.len(),
            chunked: 0,
            reused,
            removed: 0,
            warnings,
            stat: new_stat,
        };
    }
    let (nfiles, nchunks) = (files.len(), chunks.len());
    let file = assemble(files, chunks, warnings, opts, prev_postings);
    BuildOutcome {
        warnings: file.warnings.clone(),
        index: Built::New(Box::new(file)),
        had_previous,
        files: nfiles,
        chunks: nchunks,
        chunked,
        reused,
        removed,
        stat: new_stat,
    }
}

/// Streams `file` as compact JSON ([`write_index_json`]) to `path`, atomically and durably like
/// [`write_atomic`]; returns the size. Streaming avoids holding a second, serialised copy of a
/// large index in memory.
#[cfg(not(target_arch = "wasm32"))]
fn write_index_atomic(path: &Path, file: &IndexFile) -> Result<u64> {
    wo_durable::write_atomic_with(path, CACHE_MODE, |w| write_index_json(w, file))
        .map(|meta| meta.len())
        .map_err(|e| IndexError::io(path, e))
}

/// Items serialised together per parallel task, and tasks per written batch: the batch's text
/// is all that is held at once.
#[cfg(not(target_arch = "wasm32"))]
const SER_TASK: usize = 256;
#[cfg(not(target_arch = "wasm32"))]
const SER_BATCH: usize = 16 * SER_TASK;

/// Writes exactly the bytes `serde_json::to_writer(w, file)` writes (the golden test holds
/// them equal), with the two large members — `chunks` and `inverted_index`, nearly all of the
/// file — serialised in parallel, batch by batch. Serialising on one thread was the largest
/// serial step left of an index once chunking and postings ran on every core. (The browser
/// serialises its index with serde_json itself: the same bytes.)
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn write_index_json(
    w: &mut dyn std::io::Write,
    file: &IndexFile,
) -> std::io::Result<()> {
    fn field<T: Serialize + ?Sized>(
        w: &mut dyn std::io::Write,
        first: bool,
        name: &str,
        value: &T,
    ) -> std::io::Result<()> {
        w.write_all(if first { b"{\"" } else { b",\"" })?;
        w.write_all(name.as_bytes())?;
        w.write_all(b"\":")?;
        serde_json::to_writer(&mut *w, value).map_err(std::io::Error::from)
    }
    /// `[` or `{`, then `items` rendered by `render` in parallel and joined with commas, then
    /// `close`.
    fn parallel<T: Sync>(
        w: &mut dyn std::io::Write,
        open: u8,
        close: u8,
        items: &[T],
        render: impl Fn(&mut Vec<u8>, &T) -> serde_json::Result<()> + Sync,
    ) -> std::io::Result<()> {
        w.write_all(&[open])?;
        for (b, batch) in items.chunks(SER_BATCH).enumerate() {
            let texts: Vec<Vec<u8>> = batch
                .par_chunks(SER_TASK)
                .map(|task| {
                    let mut out = Vec::new();
                    for (i, item) in task.iter().enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        render(&mut out, item)?;
                    }
                    Ok(out)
                })
                .collect::<serde_json::Result<_>>()?;
            for (t, text) in texts.iter().enumerate() {
                if b > 0 || t > 0 {
                    w.write_all(b",")?;
                }
                w.write_all(text)?;
            }
        }
        w.write_all(&[close])
    }
    // The members in `IndexFile`'s declaration order, as the derived `Serialize` writes them.
    field(w, true, "version", &file.version)?;
    field(w, false, "index_id", &file.index_id)?;
    field(w, false, "chunking", &file.chunking)?;
    field(w, false, "files", &file.files)?;
    w.write_all(b",\"chunks\":")?;
    parallel(w, b'[', b']', &file.chunks, |out, c| {
        serde_json::to_writer(out, c)
    })?;
    field(w, false, "chunk_refs", &file.chunk_refs)?;
    field(w, false, "doc_lens", &file.doc_lens)?;
    w.write_all(b",\"inverted_index\":")?;
    let postings: Vec<(&String, &Vec<u32>)> = file.inverted_index.iter().collect();
    parallel(w, b'{', b'}', &postings, |out, (term, list)| {
        serde_json::to_writer(&mut *out, term)?;
        out.push(b':');
        serde_json::to_writer(out, list)
    })?;
    field(w, false, "stats", &file.stats)?;
    field(w, false, "warnings", &file.warnings)?;
    w.write_all(b"}")?;
    w.flush()
}

/// In the browser there is no file system (wo-durable is Unix-only): writes fail as
/// `std::fs` does there, Unsupported; the browser's entry points never write.
#[cfg(target_arch = "wasm32")]
pub(crate) fn write_atomic(path: &Path, _bytes: &[u8]) -> Result<()> {
    Err(IndexError::io(path, std::io::ErrorKind::Unsupported.into()))
}

#[cfg(target_arch = "wasm32")]
fn write_index_atomic(path: &Path, _file: &IndexFile) -> Result<u64> {
    Err(IndexError::io(path, std::io::ErrorKind::Unsupported.into()))
}

fn write_stat(cache: &Path, stat: &StatCache) -> Result<()> {
    match serde_json::to_vec(stat) {
        Ok(bytes) => write_atomic(&cache.join(STAT_FILE), &bytes),
        Err(_) => Ok(()),
    }
}

fn unreadable(cand: &Candidate) -> Warning {
    Warning {
        path: cand.rel.clone(),
        kind: WarningKind::Unreadable,
        message: "cannot read file; skipped".to_string(),
    }
}

/// Warnings that depend only on a file's content, so they can be reused with its chunks.
fn is_content_warning(kind: WarningKind) -> bool {
    matches!(
        kind,
        WarningKind::InvalidUtf8
            | WarningKind::ParseFallback
            | WarningKind::LongLine
            | WarningKind::TooManyChunks
    )
}

fn process_file<'b>(
    cand: &Candidate,
    opts: &IndexOptions,
    stat_cache: &StatCache,
    read: &(dyn Fn(&Candidate) -> Option<Cow<'b, [u8]>> + Sync),
    prev_files: &HashMap<String, FileMeta>,
    prev_warnings: &HashMap<String, Vec<Warning>>,
) -> Option<FileResult> {
    // Reused files carry no chunks here; the caller moves them over from the previous index.
    let reuse = |hash: &str| -> Option<FileResult> {
        let meta = prev_files.get(&cand.rel)?;
        if meta.hash != hash {
            return None;
        }
        Some(FileResult {
            meta: Some(meta.clone()),
            chunks: Vec::new(),
            warnings: prev_warnings.get(&cand.rel).cloned().unwrap_or_default(),
            reused: true,
            stat: (cand.size, cand.mtime_ns, hash.to_string()),
        })
    };
    if opts.trust_mtime
        && let Some((size, mtime, hash)) = stat_cache.files.get(&cand.rel)
    {
        let racy = cand.mtime_ns + RACY_WINDOW_NS >= stat_cache.built_at_ns;
        if *size == cand.size
            && *mtime == cand.mtime_ns
            && cand.mtime_ns != 0
            && !racy
            && let Some(result) = reuse(hash)
        {
            return Some(result);
        }
    }
    let bytes = read(cand)?;
    let hash = sha256_hex(&bytes);
    if let Some(result) = reuse(&hash) {
        return Some(result);
    }
    let kind = kind_for_path(&cand.rel);
    let mut warnings = Vec::new();
    let stat = (bytes.len() as u64, cand.mtime_ns, hash.clone());
    let (pieces, line_count) = if kind == Kind::Image {
        let piece = Piece {
            start_line: 1,
            end_line: 1,
            content: cand.rel.clone(),
            ..Piece::default()
        };
        (vec![piece], 0)
    } else if looks_binary(&bytes) {
        return Some(FileResult {
            meta: None,
            chunks: Vec::new(),
            warnings: vec![Warning {
                path: cand.rel.clone(),
                kind: WarningKind::Binary,
                message: "binary content; not indexed".to_string(),
            }],
            reused: false,
            stat,
        });
    } else {
        let text = match std::str::from_utf8(&bytes) {
            Ok(t) => std::borrow::Cow::Borrowed(t),
            Err(e) => {
                warnings.push(Warning {
                    path: cand.rel.clone(),
                    kind: WarningKind::InvalidUtf8,
                    message: format!(
                        "invalid UTF-8 at byte {}; decoded with replacement characters",
                        e.valid_up_to()
                    ),
                });
                String::from_utf8_lossy(&bytes)
            }
        };
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let out = chunk_text(kind, &cand.rel, text, &opts.chunking);
        for (wkind, message) in out.warnings {
            warnings.push(Warning {
                path: cand.rel.clone(),
                kind: wkind,
                message,
            });
        }
        let lines = if text.is_empty() {
            0
        } else {
            text.split('\n').count() - usize::from(text.ends_with('\n'))
        };
        (out.pieces, lines)
    };
    let chunks = make_chunks(&cand.rel, kind, pieces);
    Some(FileResult {
        meta: Some(FileMeta {
            path: cand.rel.clone(),
            kind,
            bytes: bytes.len() as u64,
            hash,
            line_count,
            chunk_count: chunks.len(),
        }),
        chunks,
        warnings,
        reused: false,
        stat,
    })
}

/// Turns pieces into chunk records with stable ids (occurrence counted per content hash).
fn make_chunks(path: &str, kind: Kind, pieces: Vec<Piece>) -> Vec<Chunk> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let stem = path
        .rsplit('/')
        .next()
        .unwrap_or(path)
        .split('.')
        .next()
        .unwrap_or("");
    pieces
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let content_hash = sha256_hex(p.content.as_bytes());
            let occurrence = seen.entry(content_hash.clone()).or_insert(0);
            let id = chunk_id(path, &content_hash, *occurrence);
            *occurrence += 1;
            let local = p
                .symbol
                .clone()
                .or_else(|| p.heading_path.last().cloned())
                .or_else(|| p.address.clone())
                .unwrap_or_default();
            let mut slug = slugify(&format!("{stem} {local}"));
            if slug.is_empty() {
                slug = "chunk".to_string();
            }
            let slug = truncate_chars(&slug, 48).trim_end_matches('-').to_string();
            let chars = p.content.chars().count();
            Chunk {
                short_id: id[..12].to_string(),
                id,
                slug,
                path: path.to_string(),
                kind,
                chunk_index: i,
                start_line: p.start_line,
                end_line: p.end_line,
                token_estimate: chars.div_ceil(4),
                content: p.content,
                content_hash,
                heading_path: p.heading_path,
                symbol: p.symbol,
                symbols: p.symbols,
                address: p.address,
                asset_path: (kind == Kind::Image).then(|| format!("images/{path}")),
            }
        })
        .collect()
}

/// Sorts, assigns refs and builds postings and stats.
fn assemble(
    mut files: Vec<FileMeta>,
    mut chunks: Vec<Chunk>,
    warnings: Vec<Warning>,
    opts: &IndexOptions,
    prev: Option<PrevPostings>,
) -> IndexFile {
    files.sort_by(|a, b| a.path.cmp(&b.path));
    chunks.sort_by(|a, b| {
        (a.path.as_str(), a.start_line, a.end_line, a.id.as_str()).cmp(&(
            b.path.as_str(),
            b.start_line,
            b.end_line,
            b.id.as_str(),
        ))
    });
    let chunk_refs: BTreeMap<String, String> = chunks
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id.clone(), chunk_ref(i + 1)))
        .collect();

    let (inverted_index, doc_lens) = build_postings(&chunks, prev);
    let total_terms: u64 = doc_lens.iter().map(|&n| u64::from(n)).sum();

    let mut id_input = String::new();
    for f in &files {
        id_input.push_str(&f.path);
        id_input.push('\t');
        id_input.push_str(&f.hash);
        id_input.push('\n');
    }
    let stats = Stats {
        total_files: files.len(),
        total_chunks: chunks.len(),
        total_bytes: files.iter().map(|f| f.bytes).sum(),
        total_terms,
        avg_doc_len: if chunks.is_empty() {
            0.0
        } else {
            total_terms as f64 / chunks.len() as f64
        },
    };
    IndexFile {
        version: INDEX_VERSION,
        index_id: sha256_hex(id_input.as_bytes()),
        chunking: opts.chunking,
        files,
        chunks,
        chunk_refs,
        doc_lens,
        inverted_index,
        stats,
        warnings,
    }
}
