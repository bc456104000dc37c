//! The embeddings sidecar: the vectors of a transcript's messages
//! ([`crate::dense::EmbeddingStore`]) kept in a file beside `llm.json`, so
//! a one-shot process (`wo ask`) embeds only the question and the messages
//! new since the file was written, never the whole transcript.
//!
//! A cache, never the source of truth. Vectors are keyed by what was
//! embedded (speaker and content: [`crate::dense::key`]), so a stale file
//! (messages edited, inserted, removed) is still used for every message it
//! holds and the rest are embedded; a store read and topped up equals one
//! rebuilt from the transcript (`tests/embed_file.rs`). A damaged,
//! truncated or foreign file, or one written for another model
//! ([`wo_providers::embed::Embedder::id`]), is ignored and rebuilt.
//!
//! What a forged file can do: make some of the transcript's own messages
//! look similar to a question, or not. It cannot put text into a prompt
//! that is not already in the transcript, and the part and question floors
//! of BM25 still decide what words alone may send. Anyone who can write
//! this file can write `llm.json` beside it.
//!
//! The file is `.<state file name>.embed` (a dot file; `wo git-setup`
//! ignores it with the recall sidecar). Layout, little-endian: [`MAGIC`],
//! `u32` length and the model's id, `u32` components per vector, `u32`
//! vectors, then per vector a `u64` key, an `f32` scale and the components
//! as `i8`, sorted by key; a CRC-32 of everything before it. Written
//! atomically (temp file, rename), like the recall sidecar.
//!
//! Then zero or more appended blocks: `u32` vectors (at least one), the
//! vectors as above (in any order), and a CRC-32 of the block. A one-shot
//! `wo ask` adds its turn's vectors as one block instead of rewriting every
//! vector (tens of megabytes at 100k messages). A block is read only when
//! whole and its checksum holds; reading stops at the first that is not (a
//! crash mid-append), and the next write then rewrites the file. An append
//! goes only to the file as it was read (same length, so no other writer
//! came between); otherwise, and whenever vectors were dropped, the whole
//! file is rewritten. A key already read is not read again.

use std::path::{Path, PathBuf};

use std::sync::Arc;
use std::time::Instant;

use wo_format::{Message, State};
use wo_providers::embed::Embedder;

use crate::dense::{DENSE_PARAMS, DenseRecall, EmbeddingStore, Reconciled};

/// The file's first bytes; the last digit is the layout's version (a file
/// of another version is rebuilt).
pub const MAGIC: &[u8; 8] = b"WOEMBED2";

/// The most [`load`] reads (a million messages' vectors and more); a larger
/// file is not one wo wrote.
pub const MAX_SIDECAR_BYTES: u64 = 1 << 30;

/// The embeddings sidecar of the state file at `state_path`.
pub fn sidecar_path(state_path: &Path) -> PathBuf {
    let name = state_path
        .file_name()
        .map_or_else(|| "llm.json".into(), |n| n.to_string_lossy().into_owned());
    state_path.with_file_name(format!(".{name}.embed"))
}

/// The lock `wo context embed` holds while it fills the sidecar of the
/// state file at `state_path` (one filler per file).
pub fn lock_path(state_path: &Path) -> PathBuf {
    let name = state_path
        .file_name()
        .map_or_else(|| "llm.json".into(), |n| n.to_string_lossy().into_owned());
    state_path.with_file_name(format!(".{name}.embed.lock"))
}

/// Where a sidecar read whole ends: what [`persist`] may append after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileEnd {
    /// The file's length, every byte of it read and checked.
    pub len: u64,
    /// Vectors read from it, in the store's first rows.
    pub rows: usize,
    /// Appended blocks read.
    pub blocks: usize,
}

/// Appended blocks after which the next write rewrites the file instead:
/// keeps the number of blocks a read walks small.
const MAX_BLOCKS: usize = 256;

/// How [`load`] got its store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loaded {
    /// Read from the file: this many vectors.
    Read(usize),
    /// No file: an empty store.
    Missing,
    /// The file could not be used (what is wrong): an empty store.
    Unusable(String),
}

/// The store in the sidecar at `path` for the model `model` with `dim`
/// components, or an empty one (see [`Loaded`]). Never fails.
pub fn load(path: &Path, model: &str, dim: usize) -> (EmbeddingStore, Loaded) {
    let (store, loaded, _) = load_with_end(path, model, dim);
    (store, loaded)
}

/// [`load`], and where the file ends when every byte of it was read (`None`:
/// missing, unusable, or a torn block at its end).
pub fn load_with_end(
    path: &Path,
    model: &str,
    dim: usize,
) -> (EmbeddingStore, Loaded, Option<FileEnd>) {
    let empty = || EmbeddingStore::new(model, dim);
    let bytes = match wo_store::durable::project::read_regular_file(path, MAX_SIDECAR_BYTES) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return (empty(), Loaded::Missing, None);
        }
        Err(e) => return (empty(), Loaded::Unusable(e.to_string()), None),
    };
    match read(&bytes, model, dim) {
        Ok((store, end)) => {
            let n = store.len();
            (store, Loaded::Read(n), end)
        }
        Err(why) => (
            empty(),
            Loaded::Unusable(format!("{}: {why}", path.display())),
            None,
        ),
    }
}

/// Vectors a read store can take in before its block grows: a turn adds
/// its two messages' (a few more when it embeds what is missing inline), a
/// long session a few a turn.
const ROOM_FOR_NEW: usize = 1024;

fn read(
    bytes: &[u8],
    model: &str,
    dim: usize,
) -> Result<(EmbeddingStore, Option<FileEnd>), String> {
    // The base: its header says how long it is; its checksum follows it and
    // is checked before anything read from it is believed.
    let mut rest = bytes;
    let mut take = |n: usize| -> Result<&[u8], String> {
        if rest.len() < n {
            return Err("cut short, or not an embeddings sidecar".into());
        }
        let (head, tail) = rest.split_at(n);
        rest = tail;
        Ok(head)
    };
    let word = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize;
    let magic = take(MAGIC.len())?;
    let id_len = word(take(4)?);
    let id = take(id_len)?;
    let file_dim = word(take(4)?);
    let count = word(take(4)?);
    let each = 12 + dim;
    let records = take(
        count
            .checked_mul(12 + file_dim)
            .ok_or("the vector count and the file's length disagree")?,
    )?;
    let sum = take(4)?;
    let mut tail = rest;
    let base_len = bytes.len() - tail.len() - sum.len();
    if crc32fast::hash(&bytes[..base_len]).to_le_bytes() != sum {
        return Err("checksum mismatch (damaged or cut short)".into());
    }
    if magic != MAGIC {
        return Err("not an embeddings sidecar of this version".into());
    }
    let id = std::str::from_utf8(id).map_err(|_| "a model id that is not UTF-8")?;
    if id != model {
        return Err(format!("written for another model ({id})"));
    }
    if file_dim != dim {
        return Err("vectors of another length".into());
    }
    let mut store = EmbeddingStore::new(model, dim);
    // Room for the appended blocks and the vectors a turn or a session adds
    // after: growing a block of 100k vectors by two copies all ~40 MB of it
    // (most of what a turn's after-answer step cost). Untouched room costs
    // no memory, only address space.
    store.reserve(count + tail.len() / each + ROOM_FOR_NEW);
    let mut previous = None;
    for rec in records.chunks_exact(each) {
        let (key, scale) = record_head(rec);
        if !scale.is_finite() {
            return Err("a vector with a non-finite scale".into());
        }
        // Written in ascending key order: each key once.
        if previous.is_some_and(|p| p >= key) {
            return Err("vectors out of key order".into());
        }
        previous = Some(key);
        store.push_new(key, scale, &rec[12..]);
    }
    // Appended blocks, while whole and checked.
    let mut blocks = 0;
    while let Some(len) = block_len(tail, each) {
        let (block, next) = tail.split_at(len);
        let (inner, sum) = block
            .split_last_chunk::<4>()
            .expect("a block holds its checksum");
        if crc32fast::hash(inner) != u32::from_le_bytes(*sum) {
            break;
        }
        let records = &inner[4..];
        if records
            .chunks_exact(each)
            .any(|rec| !record_head(rec).1.is_finite())
        {
            break;
        }
        for rec in records.chunks_exact(each) {
            let (key, scale) = record_head(rec);
            if !store.contains_key(key) {
                store.push_new(key, scale, &rec[12..]);
            }
        }
        blocks += 1;
        tail = next;
    }
    let end = tail.is_empty().then(|| FileEnd {
        len: bytes.len() as u64,
        rows: store.len(),
        blocks,
    });
    Ok((store, end))
}

/// The key and scale at the head of one stored vector.
fn record_head(rec: &[u8]) -> (u64, f32) {
    let key = u64::from_le_bytes(rec[..8].try_into().expect("8 bytes"));
    let scale = f32::from_le_bytes(rec[8..12].try_into().expect("4 bytes"));
    (key, scale)
}

/// The length of the whole appended block at the start of `tail` (`None`:
/// none there, or cut short).
fn block_len(tail: &[u8], each: usize) -> Option<usize> {
    let count = u32::from_le_bytes(*tail.first_chunk::<4>()?) as usize;
    let len = count.checked_mul(each)?.checked_add(8)?;
    (count > 0 && len <= tail.len()).then_some(len)
}

/// Writes `store` to the sidecar at `path` (temp file beside it, then a
/// rename). The caller may ignore a failure: the next run embeds again.
pub fn save(path: &Path, store: &EmbeddingStore) -> std::io::Result<()> {
    let mut vectors: Vec<_> = store.iter().collect();
    vectors.sort_unstable_by_key(|(k, _)| *k);
    let mut out = Vec::with_capacity(24 + store.model.len() + vectors.len() * (12 + store.dim));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(store.model.len() as u32).to_le_bytes());
    out.extend_from_slice(store.model.as_bytes());
    out.extend_from_slice(&(store.dim as u32).to_le_bytes());
    out.extend_from_slice(&(vectors.len() as u32).to_le_bytes());
    for (k, v) in vectors {
        out.extend_from_slice(&k.to_le_bytes());
        out.extend_from_slice(&v.scale.to_le_bytes());
        out.extend(v.q.iter().map(|x| *x as u8));
    }
    crate::recall_file::write_checked(path, out)
}

/// Appends the vectors of `store` past `end.rows` as one block to the
/// sidecar at `path`, if it is still the file [`load_with_end`] read (same
/// length). `Ok(false)`: it is not (or cannot be opened for appending); the
/// caller rewrites it.
fn append(path: &Path, store: &EmbeddingStore, end: &FileEnd) -> std::io::Result<bool> {
    let Ok(mut file) = wo_store::durable::project::open_regular_for_append(path) else {
        return Ok(false);
    };
    if file.metadata()?.len() != end.len {
        return Ok(false);
    }
    // Same length is not proof of the same file: its header must name this
    // model too, or the block would hand another model's reader our vectors.
    let mut header = Vec::with_capacity(16 + store.model.len());
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&(store.model.len() as u32).to_le_bytes());
    header.extend_from_slice(store.model.as_bytes());
    header.extend_from_slice(&(store.dim as u32).to_le_bytes());
    let mut on_disk = vec![0; header.len()];
    if std::os::unix::fs::FileExt::read_exact_at(&file, &mut on_disk, 0).is_err()
        || on_disk != header
    {
        return Ok(false);
    }
    let new: Vec<_> = store.iter().skip(end.rows).collect();
    let Ok(count) = u32::try_from(new.len()) else {
        return Ok(false);
    };
    if count == 0 {
        return Ok(true);
    }
    let mut block = Vec::with_capacity(8 + new.len() * (12 + store.dim));
    block.extend_from_slice(&count.to_le_bytes());
    for (k, v) in new {
        block.extend_from_slice(&k.to_le_bytes());
        block.extend_from_slice(&v.scale.to_le_bytes());
        block.extend(v.q.iter().map(|x| *x as u8));
    }
    let sum = crc32fast::hash(&block);
    block.extend_from_slice(&sum.to_le_bytes());
    // One write: a concurrent appender's block lands before or after it.
    std::io::Write::write_all(&mut file, &block)?;
    Ok(true)
}
/// What [`prepare`] did with the sidecar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prepared {
    /// How the sidecar was read.
    pub loaded: Loaded,
    /// Where the file ended, when read whole (what [`persist`] appends to).
    pub end: Option<FileEnd>,
    /// Messages embedded now.
    pub added: usize,
    /// Messages still without a vector (found by BM25 alone until embedded).
    pub missing: usize,
}

/// Dense recall over `messages` with `embedder`: the vectors of the sidecar
/// at `sidecar`, topped up with the messages it lacks — newest first, until
/// `deadline` (none: all). An error of the model stops the top-up; what was
/// embedded stays.
pub fn prepare(
    embedder: Arc<dyn Embedder>,
    sidecar: &std::path::Path,
    messages: &[Message],
    deadline: Option<Instant>,
) -> (DenseRecall, Prepared) {
    let (mut store, loaded, end) = load_with_end(sidecar, embedder.id(), embedder.dim());
    let reconciled = store.reconcile(messages);
    let added = store
        .embed_missing(embedder.as_ref(), &reconciled.missing, deadline)
        .unwrap_or(0);
    let missing = reconciled.missing.len() - added;
    (
        DenseRecall {
            embedder,
            store: Arc::new(store),
            params: DENSE_PARAMS,
            query: None,
        },
        Prepared {
            loaded,
            end,
            added,
            missing,
        },
    )
}

/// Tops `dense`'s store up with the messages of `state` it lacks, until
/// `deadline`, drops the vectors of messages gone, and writes the sidecar
/// when anything changed (or it could not be read). Returns whether it
/// wrote; a failure to write (a read-only directory) is only a cache miss.
pub fn persist(
    dense: &mut DenseRecall,
    sidecar: &std::path::Path,
    state: &State,
    prepared: &Prepared,
    deadline: Option<Instant>,
) -> std::io::Result<bool> {
    let reconciled = dense
        .store
        .reconcile_keyed(state.messages(), state.content_keys());
    write_reconciled(dense, sidecar, &reconciled, prepared, deadline)
}

/// [`persist`] at the end of a one-shot turn (`wo ask`): when at most
/// `most` messages lack a vector (the turn's own and a few more), embeds
/// them and writes the sidecar, returning `Ok(Some(wrote))`; when more do
/// (an import, a first use: the caller hands them to a background run),
/// changes nothing and returns `Ok(None)`. The transcript's keys are the
/// state's (computed once for the turn's recall, extended by its append).
pub fn persist_few(
    dense: &mut DenseRecall,
    sidecar: &std::path::Path,
    state: &State,
    prepared: &Prepared,
    most: usize,
) -> std::io::Result<Option<bool>> {
    let reconciled = dense
        .store
        .reconcile_keyed(state.messages(), state.content_keys());
    if reconciled.missing.len() > most {
        return Ok(None);
    }
    write_reconciled(dense, sidecar, &reconciled, prepared, None).map(Some)
}

/// [`persist`] once the transcript is reconciled with `dense`'s store.
fn write_reconciled(
    dense: &mut DenseRecall,
    sidecar: &std::path::Path,
    reconciled: &Reconciled<'_>,
    prepared: &Prepared,
    deadline: Option<Instant>,
) -> std::io::Result<bool> {
    let store = Arc::make_mut(&mut dense.store);
    let added = store
        .embed_missing(dense.embedder.as_ref(), &reconciled.missing, deadline)
        .unwrap_or(0);
    let removed = store.drop_unused(reconciled);
    let unread = !matches!(prepared.loaded, Loaded::Read(_));
    if added + prepared.added + removed == 0 && !unread {
        return Ok(false);
    }
    // New vectors only: one block after what was read, not every vector
    // again. Dropped vectors, a file read in part or too many blocks: all.
    if let Some(end) = prepared.end.as_ref().filter(|e| e.blocks < MAX_BLOCKS)
        && removed == 0
        && store.len() >= end.rows
        && append(sidecar, store, end)?
    {
        return Ok(true);
    }
    save(sidecar, store)?;
    Ok(true)
}
