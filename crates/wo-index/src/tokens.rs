//! Real BPE token counts (OpenAI `o200k_base` via tiktoken-rs), cached by content hash.
//!
//! Counting is the slowest part of an export, and chunk contents rarely change between runs,
//! so counts are kept in `<cache>/tokens.json` keyed by the chunk's content hash. The cache is
//! pruned to the hashes in use on every save so it cannot grow without bound.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use tiktoken_rs::CoreBPE;

use crate::error::{IndexError, Result};
use crate::ingest::write_atomic;
use crate::model::Chunk;

/// Name of the tokenizer, recorded in caches and manifests.
pub const TOKENIZER: &str = "o200k_base";
const CACHE_FILE: &str = "tokens.json";

fn bpe() -> Result<&'static CoreBPE> {
    static BPE: OnceLock<std::result::Result<CoreBPE, String>> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|reason| IndexError::Tokenizer {
            reason: reason.clone(),
        })
}

/// Number of `o200k_base` tokens in `text`.
pub fn count_tokens(text: &str) -> Result<usize> {
    Ok(bpe()?.encode_ordinary(text).len())
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct CacheFile {
    tokenizer: String,
    counts: BTreeMap<String, u32>,
}

/// Token counts for chunks, backed by an on-disk cache.
#[derive(Debug)]
pub struct TokenCounter {
    path: Option<PathBuf>,
    counts: BTreeMap<String, u32>,
    /// How many counts were computed (not found in the cache) since loading.
    pub computed: usize,
}

impl TokenCounter {
    /// A counter with no persistent cache.
    pub fn in_memory() -> Self {
        Self {
            path: None,
            counts: BTreeMap::new(),
            computed: 0,
        }
    }

    /// Loads the cache in `cache_dir` (a missing or unreadable cache starts empty).
    pub fn load(cache_dir: &Path) -> Self {
        let path = cache_dir.join(CACHE_FILE);
        let counts =
            crate::guard::read_in(cache_dir, CACHE_FILE, crate::guard::MAX_CACHE_FILE_BYTES)
                .ok()
                .and_then(|b| serde_json::from_slice::<CacheFile>(&b).ok())
                .filter(|c| c.tokenizer == TOKENIZER)
                .map(|c| c.counts)
                .unwrap_or_default();
        Self {
            path: Some(path),
            counts,
            computed: 0,
        }
    }

    /// Token count of every chunk, in order; missing counts are computed in parallel.
    pub fn count_chunks(&mut self, chunks: &[Chunk]) -> Result<Vec<u32>> {
        let missing: Vec<&Chunk> = {
            let mut seen = std::collections::HashSet::new();
            chunks
                .iter()
                .filter(|c| !self.counts.contains_key(&c.content_hash))
                .filter(|c| seen.insert(c.content_hash.as_str()))
                .collect()
        };
        if !missing.is_empty() {
            let bpe = bpe()?;
            let fresh: Vec<(String, u32)> = missing
                .par_iter()
                .map(|c| {
                    let n = bpe.encode_ordinary(&c.content).len();
                    (c.content_hash.clone(), u32::try_from(n).unwrap_or(u32::MAX))
                })
                .collect();
            self.computed += fresh.len();
            self.counts.extend(fresh);
        }
        Ok(chunks
            .iter()
            .map(|c| self.counts.get(&c.content_hash).copied().unwrap_or(0))
            .collect())
    }

    /// Writes the cache, keeping only the hashes of `chunks`.
    pub fn save(&mut self, chunks: &[Chunk]) -> Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let keep: std::collections::HashSet<&str> =
            chunks.iter().map(|c| c.content_hash.as_str()).collect();
        self.counts.retain(|k, _| keep.contains(k.as_str()));
        let file = CacheFile {
            tokenizer: TOKENIZER.to_string(),
            counts: std::mem::take(&mut self.counts),
        };
        let bytes = serde_json::to_vec(&file).unwrap_or_default();
        self.counts = file.counts;
        if let Some(dir) = path.parent() {
            crate::guard::ensure_dir(dir, "").map_err(|e| IndexError::io(dir, e))?;
        }
        write_atomic(path, &bytes)
    }
}
