//! File chunks from the directory index (product §4 step 5, §8) as context
//! candidates: finding the index that covers a state file, and retrieving
//! the chunks relevant to a question. Shared by the CLI and the server.

use std::path::{Path, PathBuf};

use crate::assemble::ChunkCandidate;

/// Chunks offered per turn at most.
pub const CHUNKS_PER_TURN: usize = 5;

/// The nearest directory at or above `start` that has an index.
pub fn find_index_root(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .find(|d| wo_index::cache_dir(d).join(wo_index::INDEX_FILE).is_file())
        .map(Path::to_path_buf)
}

/// The directory index for a state file: `explicit` when given, else the
/// nearest indexed directory above the state file.
pub fn index_root_for(state_file: &Path, explicit: Option<&Path>) -> Option<PathBuf> {
    match explicit {
        Some(dir) => Some(dir.to_path_buf()),
        None => state_file.parent().and_then(find_index_root),
    }
}

/// The chunks of `index` most relevant to `query`, as context candidates
/// whose ids (`chunk:<short id>`) are recorded in a turn's `sources`.
pub fn relevant_chunks(index: &wo_index::Index, query: &str) -> Vec<ChunkCandidate> {
    let mut q = wo_index::Query::new(query);
    q.limit = CHUNKS_PER_TURN;
    index
        .search(&q)
        .into_iter()
        .filter_map(|hit| {
            let rec = index.get_chunk(&hit.chunk_ref)?;
            Some(ChunkCandidate {
                id: format!("chunk:{}", rec.chunk.short_id),
                label: format!(
                    "{}:{}-{} {}",
                    hit.path, hit.start_line, hit.end_line, hit.label
                ),
                text: rec.chunk.content.clone(),
            })
        })
        .collect()
}
