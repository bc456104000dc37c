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

use std::path::{Path, PathBuf};

use std::sync::Arc;
use std::time::Instant;

use wo_format::Message;
use wo_providers::embed::Embedder;

use crate::dense::{DENSE_PARAMS, DenseRecall, EmbeddingStore};

/// The file's first bytes; the last digit is the layout's version.
pub const MAGIC: &[u8; 8] = b"WOEMBED1";

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
    let empty = || EmbeddingStore::new(model, dim);
    let bytes = match wo_store::durable::project::read_regular_file(path, MAX_SIDECAR_BYTES) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (empty(), Loaded::Missing),
        Err(e) => return (empty(), Loaded::Unusable(e.to_string())),
    };
    match read(&bytes, model, dim) {
        Ok(store) => {
            let n = store.len();
            (store, Loaded::Read(n))
        }
        Err(why) => (
            empty(),
            Loaded::Unusable(format!("{}: {why}", path.display())),
        ),
    }
}

fn read(bytes: &[u8], model: &str, dim: usize) -> Result<EmbeddingStore, String> {
    let short = || "shorter than its header".to_owned();
    let (body, sum) = bytes.split_last_chunk::<4>().ok_or_else(short)?;
    if crc32fast::hash(body) != u32::from_le_bytes(*sum) {
        return Err("checksum mismatch (damaged or cut short)".into());
    }
    let (magic, rest) = body.split_first_chunk::<8>().ok_or_else(short)?;
    if magic != MAGIC {
        return Err("not an embeddings sidecar of this version".into());
    }
    let mut rest: &[u8] = rest;
    let mut take = |n: usize| -> Result<&[u8], String> {
        if rest.len() < n {
            return Err(short());
        }
        let (head, tail) = rest.split_at(n);
        rest = tail;
        Ok(head)
    };
    let word = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize;
    let id_len = word(take(4)?);
    let id = std::str::from_utf8(take(id_len)?).map_err(|_| "a model id that is not UTF-8")?;
    if id != model {
        return Err(format!("written for another model ({id})"));
    }
    if word(take(4)?) != dim {
        return Err("vectors of another length".into());
    }
    let count = word(take(4)?);
    let each = 12 + dim;
    let records = count
        .checked_mul(each)
        .map(&mut take)
        .ok_or("the vector count and the file's length disagree")??;
    if !rest.is_empty() {
        return Err("the vector count and the file's length disagree".into());
    }
    let mut store = EmbeddingStore::new(model, dim);
    store.reserve(count);
    let mut previous = None;
    for rec in records.chunks_exact(each) {
        let key = u64::from_le_bytes(rec[..8].try_into().expect("8 bytes"));
        let scale = f32::from_le_bytes(rec[8..12].try_into().expect("4 bytes"));
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
    Ok(store)
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
/// What [`prepare`] did with the sidecar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prepared {
    /// How the sidecar was read.
    pub loaded: Loaded,
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
    let (mut store, loaded) = load(sidecar, embedder.id(), embedder.dim());
    let added = store
        .fill(embedder.as_ref(), messages, deadline)
        .unwrap_or(0);
    let missing = store.missing(messages).len();
    (
        DenseRecall {
            embedder,
            store: Arc::new(store),
            params: DENSE_PARAMS,
            query: None,
        },
        Prepared {
            loaded,
            added,
            missing,
        },
    )
}

/// Tops `dense`'s store up with the messages of `messages` it lacks, until
/// `deadline`, drops the vectors of messages gone, and writes the sidecar
/// when anything changed (or it could not be read). Returns whether it
/// wrote; a failure to write (a read-only directory) is only a cache miss.
pub fn persist(
    dense: &mut DenseRecall,
    sidecar: &std::path::Path,
    messages: &[Message],
    prepared: &Prepared,
    deadline: Option<Instant>,
) -> std::io::Result<bool> {
    let store = Arc::make_mut(&mut dense.store);
    let added = store
        .fill(dense.embedder.as_ref(), messages, deadline)
        .unwrap_or(0);
    let removed = store.retain_only(messages);
    let unread = !matches!(prepared.loaded, Loaded::Read(_));
    if added + prepared.added + removed == 0 && !unread {
        return Ok(false);
    }
    save(sidecar, store)?;
    Ok(true)
}
