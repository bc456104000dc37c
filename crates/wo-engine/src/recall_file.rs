//! The recall sidecar: a one-shot process (`wo ask`) reads the transcript's
//! postings from a file beside `llm.json` instead of tokenising 100k
//! messages to answer one question.
//!
//! It is a cache, never the source of truth. Each indexed message is keyed
//! by a checksum of what recall scores (speaker and content) and the
//! content's length; [`load`] takes the file only when those keys match the
//! state's first messages one for one, and then adds the messages appended
//! since (the common case: the turns `wo ask` itself wrote). The keys tell
//! a stale file from a current one; they prove nothing against a forged one
//! (anyone can compute a CRC-32). So nothing read from the file is sent on
//! its word: every hit recall takes from the file's postings is scored
//! again from the message's own text with the query's statistics
//! ([`wo_text::bm25::rescore`]) and must match bit for bit; one that does
//! not marks the index untrusted, recall scans instead (the same context as
//! without the file), and [`save`] rewrites the file from the transcript.
//! What a forged file can still do is leave out: a message it omits from
//! a word's list is never checked, so it can keep a matching message from
//! being recalled (and so shift the words' weights) — never make a message
//! that does not hold the question's words, as scored, be sent. A missing,
//! stale (a hand edit, an insertion, a re-sort), truncated or damaged file,
//! one written by another tokenizer ([`terms_probe`]) or another layout,
//! is rebuilt from the transcript — the recall result is the same either
//! way (`tests/recall_file.rs`). [`save`] replaces the file atomically
//! (temp file, rename; not fsynced: a torn file after a crash fails its
//! checksum and is rebuilt), only when it was rebuilt or more than
//! [`REWRITE_AFTER`] messages were appended since it was written.
//!
//! The file is `.<state file name>.recall` (a dot file: invisible to `ls`;
//! `wo git-setup` adds it to `.gitignore`). Layout, little-endian:
//! [`MAGIC`], `u32` tokenizer probe, `u32` messages indexed, a `u64` key
//! per message, the postings ([`wo_text::postings::Postings::to_bytes`]:
//! a term directory, then the lists), and a CRC-32 of everything before it.
//! The postings are read lazily ([`Postings::read_lazy`]): the directory at
//! once, a term's list when the question (or an appended message) needs it,
//! checked then; a malformed one makes recall scan instead (the same
//! context either way).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use wo_format::State;
use wo_text::postings::Postings;

use crate::recall::RecallIndex;

/// The file's first bytes; the last digit is the layout's version.
pub const MAGIC: &[u8; 8] = b"WORECAL2";

/// After this many messages appended since the file was written, [`save`]
/// rewrites it (below it, [`load`] tokenises them: a few milliseconds).
pub const REWRITE_AFTER: usize = 1024;

/// The most [`load`] reads: a sidecar indexes at most a state file's
/// messages (at most 256 MiB), and its postings are smaller than their
/// text; a larger file is not one wo wrote (it is rebuilt).
pub const MAX_SIDECAR_BYTES: u64 = 1 << 30;

/// What the names of the sidecar's temp files match (a glob, for
/// `.gitignore`): one left by a crash between create and rename.
pub const TEMP_PATTERN: &str = ".recall-*.tmp";

/// How old a sidecar temp file must be before [`save`] takes it for one a
/// killed process left behind and removes it. Writing one takes well under
/// a second; a younger one may be another process's write in progress
/// (sidecar writes take no lock: the file is only a cache).
pub const STALE_TEMP_AGE: std::time::Duration = std::time::Duration::from_secs(600);

/// The sidecar of the state file at `state_path`.
pub fn sidecar_path(state_path: &Path) -> PathBuf {
    let name = state_path
        .file_name()
        .map_or_else(|| "llm.json".into(), |n| n.to_string_lossy().into_owned());
    state_path.with_file_name(format!(".{name}.recall"))
}

/// Why [`load`] built the index from the transcript instead of reading it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rebuilt {
    /// There was no file.
    Missing,
    /// The file could not be read, or is not a sidecar this build wrote
    /// (damaged, truncated, another layout or tokenizer): what is wrong.
    Unreadable(String),
    /// The file is intact but indexes messages the state no longer has
    /// as they were.
    Stale,
}

/// How [`load`] got its index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loaded {
    /// Read from the file, which covered this many messages; the rest were
    /// added.
    Read {
        /// Messages the file indexed.
        covered: usize,
    },
    /// Built from the whole transcript.
    Rebuilt(Rebuilt),
}

/// A number that changes whenever the tokenizer's terms do (stopwords,
/// stems, identifier splitting): the terms of a fixed text, checksummed. A
/// file written by a `wo` that tokenised differently is rebuilt.
pub fn terms_probe() -> u32 {
    const PROBE: &str = "The running kilns' glazes were FIRED retrievalPrefs HTTPServer \
                         x_y generously dying skies étude 日本 news ugly 3.14 a I";
    let mut crc = crc32fast::Hasher::new();
    wo_text::terms::for_each_term(PROBE, |t| {
        crc.update(t.as_bytes());
        crc.update(&[0xff]);
    });
    crc.finalize()
}

/// The recall index of `state`: from the sidecar at `path` when it indexes
/// the state's first messages as they are (plus the ones appended since),
/// else built from the whole transcript. Never fails: a file that cannot be
/// used is rebuilt (see [`Loaded`]).
pub fn load(path: &Path, state: &State) -> (RecallIndex, Loaded) {
    read(path).index(state)
}

/// What [`read`] made of the sidecar before any state is at hand: the
/// file's checked postings and the keys of the messages they index, or
/// why it cannot be used. [`Self::index`] matches it to a state.
#[derive(Debug)]
pub struct Sidecar(Result<Intact, Rebuilt>);

/// An intact sidecar: its postings (terms' lists read lazily) and the key
/// of each message it indexes.
#[derive(Debug)]
struct Intact {
    postings: Postings,
    keys: Vec<u64>,
}

/// Reads and checks the sidecar at `path` — everything [`load`] does that
/// needs no state (the read, the checksum, the header, the term
/// directory), so a one-shot process can do it while the state file is
/// parsed; [`Sidecar::index`] then matches it to the state.
pub fn read(path: &Path) -> Sidecar {
    // A regular file only, never through a link (one to /dev/zero would be
    // read until memory ran out), and at most what a sidecar can be.
    let bytes = match wo_store::durable::project::read_regular_file(path, MAX_SIDECAR_BYTES) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Sidecar(Err(Rebuilt::Missing));
        }
        // The error names the path (and, for a refusal, why).
        Err(e) => return Sidecar(Err(Rebuilt::Unreadable(e.to_string()))),
    };
    Sidecar(intact(bytes).map_err(|why| Rebuilt::Unreadable(format!("{}: {why}", path.display()))))
}

impl Sidecar {
    /// The recall index of `state` from this sidecar when it indexes the
    /// state's first messages as they are (the messages appended since are
    /// added), else built from the whole transcript.
    pub fn index(self, state: &State) -> (RecallIndex, Loaded) {
        let rebuilt = |why| (built(state), Loaded::Rebuilt(why));
        let intact = match self.0 {
            Ok(intact) => intact,
            Err(why) => return rebuilt(why),
        };
        let messages = state.messages();
        let covered = intact.keys.len();
        if covered > messages.len() || intact.keys[..] != state.content_keys()[..covered] {
            return rebuilt(Rebuilt::Stale);
        }
        (
            RecallIndex::adopt(intact.postings, state),
            Loaded::Read { covered },
        )
    }
}

fn built(state: &State) -> RecallIndex {
    let mut index = RecallIndex::new();
    index.sync(state);
    index
}

/// The postings in `bytes` and the keys of the messages they index, when
/// `bytes` is an intact sidecar of this layout and tokenizer.
fn intact(bytes: Vec<u8>) -> Result<Intact, String> {
    let Some((body, sum)) = bytes.split_last_chunk::<4>() else {
        return Err("shorter than its header".into());
    };
    if crc32fast::hash(body) != u32::from_le_bytes(*sum) {
        return Err("checksum mismatch (damaged or cut short)".into());
    }
    let Some((magic, rest)) = body.split_first_chunk::<8>() else {
        return Err("shorter than its header".into());
    };
    if magic != MAGIC {
        return Err("not a recall sidecar of this version".into());
    }
    let word = |b: &[u8], at: usize| -> Result<u32, String> {
        b.get(at..at + 4)
            .map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes")))
            .ok_or_else(|| "shorter than its header".to_owned())
    };
    if word(rest, 0)? != terms_probe() {
        return Err("written by a build that tokenises differently".into());
    }
    let covered = word(rest, 4)? as usize;
    let keys_end = covered
        .checked_mul(8)
        .and_then(|n| n.checked_add(8))
        .filter(|&e| e <= rest.len())
        .ok_or("more messages than the file holds")?;
    let keys = rest[8..keys_end]
        .chunks_exact(8)
        .map(|k| u64::from_le_bytes(k.try_into().expect("8 bytes")))
        .collect();
    // `rest` starts after the magic; the checksum follows the postings.
    let (start, end) = (MAGIC.len() + keys_end, body.len());
    let postings = Postings::read_lazy(bytes, start..end).map_err(|e| e.to_string())?;
    if postings.len() != covered {
        return Err("the postings and the keys disagree on the message count".into());
    }
    Ok(Intact { postings, keys })
}

/// Writes `index` (synced with `state`) to the sidecar at `path` when it
/// needs to be: after a rebuild (a file whose postings failed a hit's
/// check included), or when more than [`REWRITE_AFTER`]
/// messages were added to what the file covered. Returns whether it wrote.
/// The caller may ignore a failure (a read-only directory): the next run
/// rebuilds. A sidecar that is a link or not a regular file is never
/// replaced: the error says so ([`refused_note`]).
pub fn save(
    path: &Path,
    index: &mut RecallIndex,
    state: &State,
    loaded: &Loaded,
) -> std::io::Result<bool> {
    // A file whose postings failed a hit's check is rewritten from the
    // transcript (`sync` rebuilds an untrusted index).
    let untrusted = index.is_untrusted();
    remove_stale_temps(path);
    index.sync(state);
    let needed = untrusted
        || match loaded {
            Loaded::Read { covered } => {
                state.messages().len().saturating_sub(*covered) > REWRITE_AFTER
            }
            Loaded::Rebuilt(_) => true,
        };
    if !needed || !index.is_current(state) {
        return Ok(false);
    }
    write(path, index.postings(), state.content_keys())?;
    Ok(true)
}

/// When `result` (of a sidecar's [`save`] or of the embeddings sidecar's
/// `persist`) failed because the file is a link or not a regular file,
/// the one line a face shows: the path, why, and that recall works without
/// it. `None` for anything else (a read-only folder is only a cache miss).
pub fn refused_note<T>(result: &std::io::Result<T>) -> Option<String> {
    use wo_store::durable::project::{Refusal, refusal};
    let refused = refusal(result.as_ref().err()?)?;
    let what = match &refused.why {
        Refusal::Symlink => "is a symbolic link".to_owned(),
        why => why.to_string(),
    };
    Some(format!(
        "{}: {what}; wo neither follows nor replaces it and recalls without this cache \
         (moved aside, it is rebuilt)",
        refused.path.display()
    ))
}

/// [`refused_note`] for the sidecar at `path` as it is now (checked without
/// opening it): for a long-running face (`wo serve`, `wo chat`) to say once,
/// when it opens the sidecar, that it will not be used.
pub fn refused_sidecar(path: &Path) -> Option<String> {
    refused_note(&wo_store::durable::project::check_regular_or_missing(path))
}

/// Removes the sidecar temp files ([`TEMP_PATTERN`]) beside the sidecar at
/// `path` that a killed process left: regular files (never a link) last
/// modified more than [`STALE_TEMP_AGE`] ago. Each is as large as a sidecar,
/// and nothing else ever removes them. Returns how many were removed;
/// failures (a read-only directory) are ignored: it is only tidying.
pub fn remove_stale_temps(path: &Path) -> usize {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with(".recall-") && name.ends_with(".tmp")) {
            continue;
        }
        // `DirEntry::metadata` does not follow a symlink.
        let stale = entry.metadata().is_ok_and(|m| {
            m.is_file()
                && m.modified()
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > STALE_TEMP_AGE)
        });
        if stale && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Replaces the file at `path` with the sidecar of `postings` over the
/// messages whose content keys ([`State::content_keys`]: speaker and
/// content, the text recall scores) are `keys`: a new temp file beside it
/// (created exclusively, 0600), then a rename, so a reader sees the old
/// file or the new one whole.
fn write(path: &Path, postings: &Postings, keys: &[u64]) -> std::io::Result<()> {
    let mut out = Vec::with_capacity(16 + 8 * keys.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&terms_probe().to_le_bytes());
    out.extend_from_slice(&(keys.len() as u32).to_le_bytes());
    for k in keys {
        out.extend_from_slice(&k.to_le_bytes());
    }
    out.extend_from_slice(&postings.to_bytes());
    write_checked(path, out)
}

/// Writes a sidecar's bytes `out` to `path` with their CRC-32 appended: a
/// new temp file beside it (created exclusively, 0600, named `.recall-*.tmp`
/// so that `remove_stale_temps` and the `.gitignore` pattern cover every
/// sidecar), then a rename, so a reader sees the old file or the new one
/// whole. The recall and embeddings sidecars share it. Something at `path`
/// that is not a regular file (a link, a FIFO: a project folder may come
/// from anywhere) is refused, naming the path and why, and left as it is:
/// the rename would not write through it, but would silently replace what
/// the person put there.
pub(crate) fn write_checked(path: &Path, mut out: Vec<u8>) -> std::io::Result<()> {
    wo_store::durable::project::check_regular_or_missing(path)?;
    let sum = crc32fast::hash(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".recall-")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    tmp.write_all(&out)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A link or a FIFO at the sidecar's name: read as missing (rebuilt from
    /// the transcript), never replaced by `save`, and the note names it.
    #[test]
    fn a_sidecar_that_is_a_link_or_fifo_is_rebuilt_in_memory_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("secret");
        std::fs::write(&outside, b"outside").unwrap();
        let state = State::new(wo_format::Timestamp::from_unix(1_800_000_000));
        let path = sidecar_path(&dir.path().join("llm.json"));
        for plant in 0..3 {
            match plant {
                0 => symlink("/dev/zero", &path).unwrap(),
                1 => symlink(&outside, &path).unwrap(),
                _ => {
                    let ok = std::process::Command::new("mkfifo")
                        .arg(&path)
                        .status()
                        .unwrap();
                    assert!(ok.success());
                }
            }
            let (mut index, loaded) = load(&path, &state);
            assert!(matches!(loaded, Loaded::Rebuilt(Rebuilt::Unreadable(_))));
            let saved = save(&path, &mut index, &state, &loaded);
            let note = refused_note(&saved).expect("a refusal");
            assert!(note.contains(".llm.json.recall"), "{note}");
            assert_eq!(refused_sidecar(&path), Some(note));
            assert!(!std::fs::symlink_metadata(&path).unwrap().is_file());
            std::fs::remove_file(&path).unwrap();
        }
        assert_eq!(std::fs::read(&outside).unwrap(), b"outside");
        // A read-only folder or any other failure is no refusal: no note.
        let other: std::io::Result<bool> = Err(std::io::ErrorKind::PermissionDenied.into());
        assert_eq!(refused_note(&other), None);
        assert_eq!(refused_sidecar(&path), None);
    }
}
