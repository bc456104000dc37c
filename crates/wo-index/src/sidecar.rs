//! The search sidecar (`<root>/.wo-index/search.bin`): what a one-shot search reads instead of
//! loading the whole `index.json`.
//!
//! `index.json` holds every chunk's text, so loading it costs seconds on a large tree while a
//! query needs only the postings of its terms, one record per chunk those postings touch, and
//! the text of the few chunks it returns. The sidecar is a compact binary derived from
//! `index.json` — never the source of truth — holding:
//!
//! - a header: format version, `INDEX_VERSION`, N, avgdl, and the key of the `index.json` it
//!   was built from (size, mtime, ctime, inode, device, and a CRC of its first 4 KiB);
//! - the term dictionary in hash buckets (FNV-1a), each bucket checksummed, each term's
//!   postings (the exact `u32`s of `inverted_index`, as LEB128 varints) checksummed;
//! - `doc_lens`;
//! - one record per chunk (ref, id, path, kind, lines, label, headings, symbols, and where its
//!   text lies in `index.json`), in blocks of [`META_BLOCK`], each block checksummed.
//!
//! Every byte a query uses is covered by a CRC-32 that is checked when it is read, so a damaged
//! or truncated sidecar is noticed, never believed: the search then answers from `index.json`
//! and rewrites the sidecar. A chunk's text is read from `index.json` itself (its byte range,
//! with a CRC of those bytes), so the sidecar never copies the text and a stale range cannot
//! pass. A sidecar whose key differs from the `index.json` opened (a new index was written:
//! atomic writes give it a new inode and mtime) is rebuilt the same way.
//!
//! Plain positioned reads (`pread`), not `mmap`: a query touches a few small ranges, which
//! reads fetch as cheaply, and a sidecar truncated by someone else while mapped would kill the
//! process with SIGBUS instead of being refused as damaged.
//!
//! Ranking is `search::run`, the same code as [`Index::search`]; only the reads differ.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::Read as _;
use std::os::unix::fs::{FileExt as _, MetadataExt as _};
use std::path::Path;
use std::rc::Rc;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{IndexError, Result};
use crate::ingest::{INDEX_FILE, cache_dir, parse_index_file, write_atomic};
use crate::model::{FileMeta, INDEX_VERSION, Kind, Stats, Warning};
use crate::options::ChunkingConfig;
use crate::search::{Corpus, Hit, Index, MaskOf, Query, label_of, passes_fields, run, snippet};

/// File name of the sidecar inside the cache directory (ignored by the cache's `.gitignore`,
/// `*`, like everything there).
pub const SIDECAR_FILE: &str = "search.bin";
/// Version of the sidecar's layout; a sidecar of another version is rebuilt.
pub const SIDECAR_VERSION: u32 = 1;
const MAGIC: &[u8; 8] = b"WOSRCH\r\n";
/// Chunk records per checksummed block.
const META_BLOCK: usize = 64;
/// Terms per hash bucket, on average.
const TERMS_PER_BUCKET: usize = 32;
/// How much of `index.json`'s start the key covers (version, id and chunking caps live there).
const HEAD_BYTES: usize = 4096;
const HEADER_LEN: usize = 8 + 4 + 4 + KEY_LEN + 8 * 5 + 3 * 20 + 4;
const KEY_LEN: usize = 8 + 8 + 4 + 8 + 4 + 8 + 8 + 4;

/// What a one-shot search did with the sidecar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SidecarUse {
    /// The sidecar answered.
    Used,
    /// It was rebuilt from `index.json` (the reason: missing, stale, damaged…) and written.
    Rebuilt {
        /// Why the existing one could not answer.
        reason: String,
    },
    /// It was rebuilt in memory and answered, but could not be written.
    NotWritten {
        /// Why the existing one could not answer.
        reason: String,
        /// Why writing failed.
        error: String,
    },
    /// `index.json` was answered from directly (its chunks could not be located for a
    /// sidecar); nothing was written.
    FullLoad {
        /// Why.
        reason: String,
    },
}

/// Searches the index of `root` as [`Index::open`] + [`Index::search`] would — the same hits,
/// order, scores and snippets — reading through the sidecar, built or rebuilt first when it is
/// missing, stale or damaged. Errors are those of [`Index::open`].
pub fn search_root(root: &Path, query: &Query) -> Result<(Vec<Hit>, SidecarUse)> {
    let index_path = cache_dir(root).join(INDEX_FILE);
    let index = match crate::guard::open_in(
        &cache_dir(root),
        INDEX_FILE,
        crate::guard::MAX_CACHE_FILE_BYTES,
    ) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(IndexError::NoIndex { path: index_path });
        }
        Err(e) => return Err(IndexError::io(index_path, e)),
    };
    let key = Key::of(&index).map_err(|e| IndexError::io(&index_path, e))?;
    let sidecar_path = cache_dir(root).join(SIDECAR_FILE);
    let opened = Sidecar::open_file(&sidecar_path);
    let reason = match opened
        .as_ref()
        .map_err(|Damaged(why)| why.clone())
        .and_then(|(file, len)| {
            Sidecar::open(Blob::File(file), *len, &key, Blob::File(&index))
                .map_err(|Damaged(why)| why)
        }) {
        Ok(sidecar) => match run(&sidecar, query) {
            Ok(hits) => return Ok((hits, SidecarUse::Used)),
            Err(Damaged(why)) => format!("damaged: {why}"),
        },
        Err(why) => why,
    };
    let mut bytes = Vec::with_capacity(usize::try_from(key.len).unwrap_or(0));
    (&index)
        .read_to_end(&mut bytes)
        .map_err(|e| IndexError::io(&index_path, e))?;
    let built = match build(&bytes, &key) {
        Ok(built) => built,
        Err(BuildError::Refused) => {
            // The full load names what is wrong, exactly as `Index::open` would.
            let file = parse_index_file(&bytes, &index_path)?;
            let hits = Index::from_file(root, file).search(query);
            return Ok((hits, SidecarUse::FullLoad { reason }));
        }
        Err(BuildError::Unplaceable(why)) => {
            let file = parse_index_file(&bytes, &index_path)?;
            let hits = Index::from_file(root, file).search(query);
            return Ok((
                hits,
                SidecarUse::FullLoad {
                    reason: format!("{reason}; no sidecar: {why}"),
                },
            ));
        }
    };
    let answer = Sidecar::open(
        Blob::Bytes(&built),
        built.len() as u64,
        &key,
        Blob::Bytes(&bytes),
    )
    .and_then(|sidecar| run(&sidecar, query));
    let hits = match answer {
        Ok(hits) => hits,
        // A sidecar this build just made cannot answer: a bug, never the user's loss — answer
        // from the full load and write nothing.
        Err(Damaged(why)) => {
            let file = parse_index_file(&bytes, &index_path)?;
            let hits = Index::from_file(root, file).search(query);
            return Ok((
                hits,
                SidecarUse::FullLoad {
                    reason: format!("{reason}; fresh sidecar unreadable: {why}"),
                },
            ));
        }
    };
    let used = match write_atomic(&sidecar_path, &built) {
        Ok(()) => SidecarUse::Rebuilt { reason },
        Err(e) => SidecarUse::NotWritten {
            reason,
            error: e.to_string(),
        },
    };
    Ok((hits, used))
}

/// Why a sidecar cannot answer: missing, stale, or damaged (what and where).
#[derive(Debug)]
pub(crate) struct Damaged(String);

fn damaged(what: impl Into<String>) -> Damaged {
    Damaged(what.into())
}

/// The `index.json` a sidecar belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    len: u64,
    mtime: i64,
    mtime_ns: u32,
    ctime: i64,
    ctime_ns: u32,
    ino: u64,
    dev: u64,
    head_crc: u32,
}

impl Key {
    /// The key of the open `index.json` (its metadata, and a CRC of its start).
    fn of(file: &File) -> std::io::Result<Self> {
        let meta = file.metadata()?;
        let mut head = vec![0u8; HEAD_BYTES.min(usize::try_from(meta.len()).unwrap_or(HEAD_BYTES))];
        file.read_exact_at(&mut head, 0)?;
        Ok(Self {
            len: meta.len(),
            mtime: meta.mtime(),
            mtime_ns: u32::try_from(meta.mtime_nsec()).unwrap_or(0),
            ctime: meta.ctime(),
            ctime_ns: u32::try_from(meta.ctime_nsec()).unwrap_or(0),
            ino: meta.ino(),
            dev: meta.dev(),
            head_crc: crc32fast::hash(&head),
        })
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.mtime.to_le_bytes());
        out.extend_from_slice(&self.mtime_ns.to_le_bytes());
        out.extend_from_slice(&self.ctime.to_le_bytes());
        out.extend_from_slice(&self.ctime_ns.to_le_bytes());
        out.extend_from_slice(&self.ino.to_le_bytes());
        out.extend_from_slice(&self.dev.to_le_bytes());
        out.extend_from_slice(&self.head_crc.to_le_bytes());
    }

    fn read(c: &mut Cursor<'_>) -> std::result::Result<Self, Damaged> {
        Ok(Self {
            len: c.u64()?,
            mtime: c.u64()? as i64,
            mtime_ns: c.u32()?,
            ctime: c.u64()? as i64,
            ctime_ns: c.u32()?,
            ino: c.u64()?,
            dev: c.u64()?,
            head_crc: c.u32()?,
        })
    }
}

/// Bytes read at an offset: a file (the query path) or memory (a sidecar just built).
#[derive(Clone, Copy)]
enum Blob<'a> {
    File(&'a File),
    Bytes(&'a [u8]),
}

impl Blob<'_> {
    fn read(&self, off: u64, len: u64, what: &str) -> std::result::Result<Cow<'_, [u8]>, Damaged> {
        let fail = || damaged(format!("{what}: bytes {off}+{len} out of range"));
        let end = off.checked_add(len).ok_or_else(fail)?;
        match self {
            Blob::Bytes(b) => {
                let (s, e) = (usize::try_from(off), usize::try_from(end));
                match (s, e) {
                    (Ok(s), Ok(e)) if e <= b.len() => Ok(Cow::Borrowed(&b[s..e])),
                    _ => Err(fail()),
                }
            }
            Blob::File(f) => {
                let len = usize::try_from(len).map_err(|_| fail())?;
                // Never trust a length to size an allocation beyond the file.
                let size = f
                    .metadata()
                    .map_err(|e| damaged(format!("{what}: {e}")))?
                    .len();
                if end > size {
                    return Err(fail());
                }
                let mut buf = vec![0u8; len];
                f.read_exact_at(&mut buf, off)
                    .map_err(|e| damaged(format!("{what}: {e}")))?;
                Ok(Cow::Owned(buf))
            }
        }
    }
}

/// A checked reader over bytes: every read is bounds-checked, so damage is an error.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    what: &'static str,
}

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8], what: &'static str) -> Self {
        Self { bytes, at: 0, what }
    }

    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], Damaged> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| damaged(format!("{}: truncated at byte {}", self.what, self.at)))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u8(&mut self) -> std::result::Result<u8, Damaged> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> std::result::Result<u32, Damaged> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> std::result::Result<u64, Damaged> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn usize(&mut self) -> std::result::Result<usize, Damaged> {
        let v = self.u64()?;
        usize::try_from(v).map_err(|_| damaged(format!("{}: {v} is out of range", self.what)))
    }

    fn str(&mut self) -> std::result::Result<&'a str, Damaged> {
        let n = self.u32()? as usize;
        let b = self.take(n)?;
        std::str::from_utf8(b).map_err(|_| damaged(format!("{}: text is not UTF-8", self.what)))
    }

    fn list(&mut self) -> std::result::Result<StrList<'a>, Damaged> {
        let n = self.u32()?;
        let start = self.at;
        for _ in 0..n {
            self.str()?;
        }
        Ok(StrList {
            n,
            bytes: &self.bytes[start..self.at],
        })
    }
}

/// A list of strings in a record, already checked (bounds, UTF-8) when the record was read.
#[derive(Clone, Copy)]
struct StrList<'a> {
    n: u32,
    bytes: &'a [u8],
}

impl<'a> StrList<'a> {
    fn iter(self) -> impl Iterator<Item = &'a str> {
        let mut c = Cursor::new(self.bytes, "list");
        (0..self.n).map_while(move |_| c.str().ok())
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_list<'a>(out: &mut Vec<u8>, items: impl ExactSizeIterator<Item = &'a str>) {
    out.extend_from_slice(&(items.len() as u32).to_le_bytes());
    for s in items {
        put_str(out, s);
    }
}

/// Appends `v` as LEB128: postings are gaps and term counts, mostly under 128, so most take
/// one byte instead of four.
fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads exactly `count` LEB128 `u32`s filling `bytes`; anything else is damage.
fn read_varints(bytes: &[u8], count: usize) -> std::result::Result<Vec<u32>, Damaged> {
    let bad = || damaged("postings: malformed numbers");
    let mut out = Vec::with_capacity(count.min(bytes.len()));
    let mut v: u32 = 0;
    let mut shift = 0u32;
    for &b in bytes {
        if shift == 28 && b > 0x0f {
            return Err(bad());
        }
        v |= u32::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            out.push(v);
            v = 0;
            shift = 0;
        } else {
            shift += 7;
        }
    }
    if shift != 0 || out.len() != count {
        return Err(bad());
    }
    Ok(out)
}

/// FNV-1a: a fixed hash, so the bucket of a term is the same in every build.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A section's place: offset, length and CRC-32 of its bytes.
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    off: u64,
    len: u64,
    crc: u32,
}

impl Span {
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.off.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.crc.to_le_bytes());
    }

    fn read(c: &mut Cursor<'_>) -> std::result::Result<Self, Damaged> {
        Ok(Self {
            off: c.u64()?,
            len: c.u64()?,
            crc: c.u32()?,
        })
    }
}

/// What ranking reads of every chunk a query touches (filters and boosts), first in each record
/// so the rest need not be read for them.
struct RecordHead<'a> {
    kind: Kind,
    path: &'a str,
    headings: StrList<'a>,
    symbols: StrList<'a>,
}

impl<'a> RecordHead<'a> {
    fn read(c: &mut Cursor<'a>) -> std::result::Result<Self, Damaged> {
        let kind = c.u8()?;
        let kind = *Kind::ALL
            .get(usize::from(kind))
            .ok_or_else(|| damaged(format!("chunk record: kind {kind}")))?;
        Ok(Self {
            kind,
            path: c.str()?,
            headings: c.list()?,
            symbols: c.list()?,
        })
    }
}

/// One record's fields as the sidecar stores them (`index.json`'s chunk, reduced to what a
/// search reads).
struct Record<'a> {
    head: RecordHead<'a>,
    start_line: usize,
    end_line: usize,
    content_off: u64,
    content_len: u64,
    content_crc: u32,
    chunk_ref: &'a str,
    id: &'a str,
    label: &'a str,
}

impl<'a> Record<'a> {
    fn read(bytes: &'a [u8]) -> std::result::Result<Self, Damaged> {
        let mut c = Cursor::new(bytes, "chunk record");
        Ok(Self {
            head: RecordHead::read(&mut c)?,
            start_line: c.usize()?,
            end_line: c.usize()?,
            content_off: c.u64()?,
            content_len: c.u64()?,
            content_crc: c.u32()?,
            chunk_ref: c.str()?,
            id: c.str()?,
            label: c.str()?,
        })
    }
}

/// An opened sidecar: the small tables read and checked; buckets, postings and record blocks
/// read (and checked) when a query needs them.
struct Sidecar<'a> {
    file: Blob<'a>,
    index: Blob<'a>,
    docs: usize,
    avgdl: f64,
    buckets: Vec<Span>,
    doc_lens: Vec<u32>,
    blocks: Vec<Span>,
    block_cache: RefCell<HashMap<usize, Rc<[u8]>>>,
}

fn read_spans(
    bytes: &[u8],
    n: usize,
    what: &'static str,
) -> std::result::Result<Vec<Span>, Damaged> {
    let mut c = Cursor::new(bytes, what);
    let mut out = Vec::with_capacity(n.min(bytes.len() / 12));
    for _ in 0..n {
        out.push(Span {
            off: c.u64()?,
            len: u64::from(c.u32()?),
            crc: c.u32()?,
        });
    }
    Ok(out)
}

fn checked<'b>(
    blob: &'b Blob<'_>,
    span: Span,
    what: &'static str,
) -> std::result::Result<Cow<'b, [u8]>, Damaged> {
    let bytes = blob.read(span.off, span.len, what)?;
    if crc32fast::hash(&bytes) != span.crc {
        return Err(damaged(format!("{what}: checksum mismatch")));
    }
    Ok(bytes)
}

impl<'a> Sidecar<'a> {
    /// Opens the sidecar file at `path`, with its length.
    fn open_file(path: &Path) -> std::result::Result<(File, u64), Damaged> {
        let (dir, name) = (
            crate::guard::parent_of(path),
            path.file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default(),
        );
        let file = match crate::guard::open_in(&dir, name, crate::guard::MAX_CACHE_FILE_BYTES) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(damaged("missing"));
            }
            Err(e) => return Err(damaged(format!("unreadable: {e}"))),
        };
        let len = file
            .metadata()
            .map_err(|e| damaged(format!("unreadable: {e}")))?
            .len();
        Ok((file, len))
    }

    fn open(
        file: Blob<'a>,
        len: u64,
        key: &Key,
        index: Blob<'a>,
    ) -> std::result::Result<Self, Damaged> {
        if len < HEADER_LEN as u64 {
            return Err(damaged("damaged: shorter than its header"));
        }
        let head = file.read(0, HEADER_LEN as u64, "header")?;
        let (body, crc) = head.split_at(HEADER_LEN - 4);
        if crc32fast::hash(body) != u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]) {
            return Err(damaged("damaged: header checksum mismatch"));
        }
        let mut c = Cursor::new(body, "header");
        if c.take(8)? != MAGIC {
            return Err(damaged("damaged: not a search sidecar"));
        }
        let version = c.u32()?;
        let index_version = c.u32()?;
        if version != SIDECAR_VERSION || index_version != INDEX_VERSION {
            return Err(damaged(format!(
                "stale: format {version}/{index_version} (this build: {SIDECAR_VERSION}/{INDEX_VERSION})"
            )));
        }
        if Key::read(&mut c)? != *key {
            return Err(damaged("stale: index.json changed since it was built"));
        }
        let docs = c.usize()?;
        let avgdl = f64::from_bits(c.u64()?);
        let n_lens = c.usize()?;
        let n_buckets = c.usize()?;
        let n_blocks = c.usize()?;
        let bucket_table = Span::read(&mut c)?;
        let lens = Span::read(&mut c)?;
        let block_table = Span::read(&mut c)?;
        if n_blocks != docs.div_ceil(META_BLOCK)
            || bucket_table.len != (n_buckets as u64) * 16
            || block_table.len != (n_blocks as u64) * 16
            || lens.len != (n_lens as u64) * 4
            || n_buckets == 0
        {
            return Err(damaged("damaged: header sizes disagree"));
        }
        let buckets = read_spans(
            &checked(&file, bucket_table, "bucket table")?,
            n_buckets,
            "bucket table",
        )?;
        let blocks = read_spans(
            &checked(&file, block_table, "record table")?,
            n_blocks,
            "record table",
        )?;
        let doc_lens = checked(&file, lens, "doc_lens")?
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Ok(Self {
            file,
            index,
            docs,
            avgdl,
            buckets,
            doc_lens,
            blocks,
            block_cache: RefCell::new(HashMap::new()),
        })
    }

    fn block(&self, b: usize) -> std::result::Result<Rc<[u8]>, Damaged> {
        if let Some(block) = self.block_cache.borrow().get(&b) {
            return Ok(Rc::clone(block));
        }
        let span = *self
            .blocks
            .get(b)
            .ok_or_else(|| damaged(format!("record block {b} missing")))?;
        let block: Rc<[u8]> = Rc::from(checked(&self.file, span, "record block")?.as_ref());
        self.block_cache.borrow_mut().insert(b, Rc::clone(&block));
        Ok(block)
    }

    /// Where chunk `doc`'s record lies: its block, and the range within it.
    fn locate(&self, doc: usize) -> std::result::Result<(Rc<[u8]>, usize, usize), Damaged> {
        let block = self.block(doc / META_BLOCK)?;
        let mut c = Cursor::new(&block, "record block");
        let count = c.u32()? as usize;
        let j = doc % META_BLOCK;
        if j >= count {
            return Err(damaged(format!("record {doc} missing")));
        }
        c.take(j * 4)?;
        let start = c.u32()? as usize;
        let end = if j + 1 < count {
            c.u32()? as usize
        } else {
            block.len()
        };
        Ok((block, start, end))
    }

    /// Calls `f` with chunk `doc`'s record.
    fn with_record<R>(
        &self,
        doc: usize,
        f: impl FnOnce(&Record<'_>) -> R,
    ) -> std::result::Result<R, Damaged> {
        let (block, start, end) = self.locate(doc)?;
        let bytes = block
            .get(start..end)
            .ok_or_else(|| damaged(format!("record {doc} out of its block")))?;
        Ok(f(&Record::read(bytes)?))
    }

    /// Calls `f` with the head of chunk `doc`'s record (what filters and boosts read).
    fn with_head<R>(
        &self,
        doc: usize,
        f: impl FnOnce(&RecordHead<'_>) -> R,
    ) -> std::result::Result<R, Damaged> {
        let (block, start, end) = self.locate(doc)?;
        let bytes = block
            .get(start..end)
            .ok_or_else(|| damaged(format!("record {doc} out of its block")))?;
        Ok(f(&RecordHead::read(&mut Cursor::new(
            bytes,
            "chunk record",
        ))?))
    }
}

impl Corpus for Sidecar<'_> {
    type Error = Damaged;

    fn doc_count(&self) -> usize {
        self.docs
    }

    fn avg_doc_len(&self) -> f64 {
        self.avgdl
    }

    fn postings(&self, term: &str) -> std::result::Result<Option<Cow<'_, [u32]>>, Damaged> {
        let b = (fnv1a(term.as_bytes()) % self.buckets.len() as u64) as usize;
        let bucket = checked(&self.file, self.buckets[b], "term bucket")?;
        let mut c = Cursor::new(&bucket, "term bucket");
        while c.at < bucket.len() {
            let t = c.str()?;
            let span = Span {
                off: c.u64()?,
                len: u64::from(c.u32()?),
                crc: c.u32()?,
            };
            let count = c.u32()? as usize;
            if t == term {
                let raw = checked(&self.file, span, "postings")?;
                return Ok(Some(Cow::Owned(read_varints(&raw, count)?)));
            }
        }
        Ok(None)
    }

    fn doc_len(&self, doc: usize) -> u32 {
        self.doc_lens.get(doc).copied().unwrap_or(0)
    }

    fn passes(&self, doc: usize, q: &Query) -> std::result::Result<bool, Damaged> {
        self.with_head(doc, |r| {
            passes_fields(r.path, r.kind, r.headings.iter(), r.symbols.iter(), q)
        })
    }

    fn boost_masks(
        &self,
        doc: usize,
        mask_of: &MaskOf<'_>,
    ) -> std::result::Result<(u64, u64), Damaged> {
        self.with_head(doc, |r| {
            (
                mask_of(&mut r.symbols.iter()),
                mask_of(&mut r.headings.iter()),
            )
        })
    }

    fn hit(
        &self,
        doc: usize,
        score: f64,
        query_terms: &HashSet<&str>,
    ) -> std::result::Result<Hit, Damaged> {
        self.with_record(doc, |r| {
            let raw = self
                .index
                .read(r.content_off, r.content_len, "chunk text in index.json")?;
            if crc32fast::hash(&raw) != r.content_crc {
                return Err(damaged("stale: a chunk's text moved in index.json"));
            }
            let content: String = serde_json::from_slice(&raw)
                .map_err(|e| damaged(format!("chunk text in index.json: {e}")))?;
            Ok(Hit {
                chunk_ref: r.chunk_ref.to_string(),
                id: r.id.to_string(),
                path: r.head.path.to_string(),
                kind: r.head.kind,
                start_line: r.start_line,
                end_line: r.end_line,
                label: r.label.to_string(),
                score,
                snippet: snippet(&content, query_terms),
            })
        })?
    }
}

/// `index.json` as [`crate::IndexFile`] reads it, field for field and type for type (so it
/// accepts exactly what the full load accepts), except that each chunk's text stays where it
/// lies in the file.
#[derive(Deserialize)]
#[allow(dead_code)] // Read to refuse what the full load refuses; not used after.
struct RawIndex<'a> {
    version: u32,
    index_id: String,
    chunking: ChunkingConfig,
    files: Vec<FileMeta>,
    #[serde(borrow)]
    chunks: Vec<RawChunk<'a>>,
    chunk_refs: BTreeMap<String, String>,
    doc_lens: Vec<u32>,
    inverted_index: BTreeMap<String, Vec<u32>>,
    stats: Stats,
    warnings: Vec<Warning>,
}

/// [`crate::Chunk`] with its `content` left in place.
#[derive(Deserialize)]
#[allow(dead_code)] // Read to refuse what the full load refuses; not used after.
struct RawChunk<'a> {
    id: String,
    short_id: String,
    slug: String,
    path: String,
    kind: Kind,
    chunk_index: usize,
    start_line: usize,
    end_line: usize,
    #[serde(borrow)]
    content: &'a RawValue,
    content_hash: String,
    token_estimate: usize,
    #[serde(default)]
    heading_path: Vec<String>,
    #[serde(default)]
    symbol: Option<String>,
    #[serde(default)]
    symbols: Vec<String>,
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    asset_path: Option<String>,
}

enum BuildError {
    /// Not an index the full load reads: it names the problem.
    Refused,
    /// Readable, but a chunk's text could not be placed (e.g. not a string).
    Unplaceable(String),
}

/// The sidecar of the `index.json` `bytes`, whose key is `key`.
fn build(bytes: &[u8], key: &Key) -> std::result::Result<Vec<u8>, BuildError> {
    let raw: RawIndex<'_> = serde_json::from_slice(bytes).map_err(|_| BuildError::Refused)?;
    if raw.version != INDEX_VERSION {
        return Err(BuildError::Refused);
    }
    let base = bytes.as_ptr() as usize;
    let mut out = vec![0u8; HEADER_LEN];

    // Postings, then the term buckets that point at them.
    let n_terms = raw.inverted_index.len();
    let n_buckets = n_terms.div_ceil(TERMS_PER_BUCKET).max(1);
    let mut bucket_bytes: Vec<Vec<u8>> = vec![Vec::new(); n_buckets];
    for (term, list) in &raw.inverted_index {
        let off = out.len() as u64;
        let start = out.len();
        for &v in list {
            put_varint(&mut out, v);
        }
        let crc = crc32fast::hash(&out[start..]);
        let too_long = || BuildError::Unplaceable(format!("postings of {term:?} too long"));
        let len = u32::try_from(out.len() - start).map_err(|_| too_long())?;
        let count = u32::try_from(list.len()).map_err(|_| too_long())?;
        let b = &mut bucket_bytes[(fnv1a(term.as_bytes()) % n_buckets as u64) as usize];
        put_str(b, term);
        b.extend_from_slice(&off.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&crc.to_le_bytes());
        b.extend_from_slice(&count.to_le_bytes());
    }
    let mut bucket_table = Vec::with_capacity(n_buckets * 16);
    for b in &bucket_bytes {
        put_span_entry(&mut bucket_table, &mut out, b)?;
    }

    // Chunk records in blocks.
    let mut block_table = Vec::new();
    let mut record = Vec::new();
    for block in raw.chunks.chunks(META_BLOCK) {
        let mut data = Vec::new();
        data.extend_from_slice(&(block.len() as u32).to_le_bytes());
        let mut records = Vec::new();
        let mut offsets = Vec::with_capacity(block.len());
        let header = 4 + 4 * block.len();
        for c in block {
            offsets.push(header + records.len());
            record.clear();
            let text = c.content.get();
            if !text.starts_with('"') {
                return Err(BuildError::Refused);
            }
            let off = (text.as_ptr() as usize)
                .checked_sub(base)
                .filter(|o| o + text.len() <= bytes.len())
                .ok_or_else(|| BuildError::Unplaceable("chunk text outside the file".into()))?;
            let kind = Kind::ALL.iter().position(|k| *k == c.kind).unwrap_or(0) as u8;
            // The head (what filters and boosts read), then what only a hit needs.
            record.push(kind);
            put_str(&mut record, &c.path);
            put_list(&mut record, c.heading_path.iter().map(String::as_str));
            let symbols: Vec<&str> = c
                .symbol
                .iter()
                .chain(&c.symbols)
                .map(String::as_str)
                .collect();
            put_list(&mut record, symbols.into_iter());
            record.extend_from_slice(&(c.start_line as u64).to_le_bytes());
            record.extend_from_slice(&(c.end_line as u64).to_le_bytes());
            record.extend_from_slice(&(off as u64).to_le_bytes());
            record.extend_from_slice(&(text.len() as u64).to_le_bytes());
            record.extend_from_slice(&crc32fast::hash(text.as_bytes()).to_le_bytes());
            put_str(
                &mut record,
                raw.chunk_refs.get(&c.id).map_or("", String::as_str),
            );
            put_str(&mut record, &c.id);
            put_str(
                &mut record,
                &label_of(
                    c.symbol.as_deref(),
                    &c.heading_path,
                    c.address.as_deref(),
                    &c.slug,
                ),
            );
            records.extend_from_slice(&record);
        }
        for o in offsets {
            let o = u32::try_from(o)
                .map_err(|_| BuildError::Unplaceable("a record block over 4 GiB".into()))?;
            data.extend_from_slice(&o.to_le_bytes());
        }
        data.extend_from_slice(&records);
        put_span_entry(&mut block_table, &mut out, &data)?;
    }

    let mut lens = Vec::with_capacity(raw.doc_lens.len() * 4);
    for l in &raw.doc_lens {
        lens.extend_from_slice(&l.to_le_bytes());
    }
    let lens_span = append(&mut out, &lens);
    let bucket_span = append(&mut out, &bucket_table);
    let block_span = append(&mut out, &block_table);

    let mut head = Vec::with_capacity(HEADER_LEN);
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&SIDECAR_VERSION.to_le_bytes());
    head.extend_from_slice(&INDEX_VERSION.to_le_bytes());
    key.write(&mut head);
    head.extend_from_slice(&(raw.chunks.len() as u64).to_le_bytes());
    head.extend_from_slice(&raw.stats.avg_doc_len.to_bits().to_le_bytes());
    head.extend_from_slice(&(raw.doc_lens.len() as u64).to_le_bytes());
    head.extend_from_slice(&(n_buckets as u64).to_le_bytes());
    head.extend_from_slice(&(raw.chunks.len().div_ceil(META_BLOCK) as u64).to_le_bytes());
    bucket_span.write(&mut head);
    lens_span.write(&mut head);
    block_span.write(&mut head);
    let crc = crc32fast::hash(&head);
    head.extend_from_slice(&crc.to_le_bytes());
    debug_assert_eq!(head.len(), HEADER_LEN);
    out[..HEADER_LEN].copy_from_slice(&head);
    Ok(out)
}

/// Appends `data` to `out` and returns where it lies.
fn append(out: &mut Vec<u8>, data: &[u8]) -> Span {
    let off = out.len() as u64;
    out.extend_from_slice(data);
    Span {
        off,
        len: data.len() as u64,
        crc: crc32fast::hash(data),
    }
}

/// Appends `data` to `out` and its table entry (offset u64, length u32, CRC u32) to `table`.
fn put_span_entry(
    table: &mut Vec<u8>,
    out: &mut Vec<u8>,
    data: &[u8],
) -> std::result::Result<(), BuildError> {
    let span = append(out, data);
    let len = u32::try_from(span.len)
        .map_err(|_| BuildError::Unplaceable("a sidecar block over 4 GiB".into()))?;
    table.extend_from_slice(&span.off.to_le_bytes());
    table.extend_from_slice(&len.to_le_bytes());
    table.extend_from_slice(&span.crc.to_le_bytes());
    Ok(())
}
