//! File chunks from the directory index (product §4 step 5, §8) as context
//! candidates: finding the index that covers a state file, and retrieving
//! the chunks relevant to a question. Shared by the CLI and the server.

use std::path::{Path, PathBuf};

use crate::assemble::ChunkCandidate;

/// Chunks offered per turn at most.
pub const CHUNKS_PER_TURN: usize = wo_index::CHUNKS_PER_TURN;

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
/// whose ids (`chunk:<short id>`) are recorded in a turn's `sources`
/// (`wo_index::Index::context_chunks`: the rule the browser's index follows too).
pub fn relevant_chunks(index: &wo_index::Index, query: &str) -> Vec<ChunkCandidate> {
    index
        .context_chunks(query)
        .into_iter()
        .map(ChunkCandidate::from)
        .collect()
}

/// The longest chunk text a client may send: an index's hard cap on a
/// chunk (`wo_index::ChunkingConfig::chunk_max_chars`, default 8,000
/// characters), so a browser's chunk is no larger than one of ours.
pub const CLIENT_CHUNK_MAX_CHARS: usize = 8_000;
/// The longest label a client may send.
pub const CLIENT_LABEL_MAX_CHARS: usize = 500;

/// What is wrong with a client's chunk: which (`index`), which field, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkError {
    /// Position in the list (`None`: the list itself).
    pub index: Option<usize>,
    /// `id`, `label` or `text` (empty for the list).
    pub field: &'static str,
    /// What is wrong.
    pub message: String,
}

impl ChunkError {
    /// The JSON pointer of the fault under `base` (e.g. `/chunks/2/text`).
    pub fn pointer(&self, base: &str) -> String {
        match self.index {
            Some(i) => format!("{base}/{i}/{}", self.field),
            None => base.to_string(),
        }
    }
}

/// Chunks a client retrieved from its own folder index (the ingestion
/// page's, in the browser: `wo_index::Index::context_chunks`, the rule
/// [`relevant_chunks`] follows), checked to be what such an index gives: at
/// most [`CHUNKS_PER_TURN`], each id `chunk:` and 12 hex digits, a label of
/// at most [`CLIENT_LABEL_MAX_CHARS`] and a text of at most
/// [`CLIENT_CHUNK_MAX_CHARS`] characters. They then go through assembly
/// exactly as the server's own chunks do (budget, `sources`).
pub fn client_chunks(
    given: Vec<wo_index::ContextChunk>,
) -> Result<Vec<ChunkCandidate>, ChunkError> {
    if given.len() > CHUNKS_PER_TURN {
        return Err(ChunkError {
            index: None,
            field: "",
            message: format!("more than {CHUNKS_PER_TURN} chunks"),
        });
    }
    for (i, c) in given.iter().enumerate() {
        let err = |field, message: String| ChunkError {
            index: Some(i),
            field,
            message,
        };
        let hex = c.id.strip_prefix("chunk:").unwrap_or("");
        if hex.len() != 12
            || !hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        {
            return Err(err(
                "id",
                format!("{:?} is not `chunk:` and 12 lowercase hex digits", c.id),
            ));
        }
        if c.label.chars().count() > CLIENT_LABEL_MAX_CHARS {
            return Err(err(
                "label",
                format!("longer than {CLIENT_LABEL_MAX_CHARS} characters"),
            ));
        }
        if c.text.chars().count() > CLIENT_CHUNK_MAX_CHARS {
            return Err(err(
                "text",
                format!("longer than {CLIENT_CHUNK_MAX_CHARS} characters"),
            ));
        }
    }
    Ok(given.into_iter().map(ChunkCandidate::from).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(id: &str, label: &str, text: &str) -> wo_index::ContextChunk {
        wo_index::ContextChunk {
            id: id.into(),
            label: label.into(),
            text: text.into(),
        }
    }

    #[test]
    fn client_chunks_are_checked_and_kept_in_order() {
        let ok = client_chunks(vec![
            chunk("chunk:0123456789ab", "a.md:1-2 A", "alpha"),
            chunk("chunk:ba9876543210", "b.md:1-1 B", "beta"),
        ])
        .unwrap();
        assert_eq!(ok[1].id, "chunk:ba9876543210");
        assert_eq!(ok[0].text, "alpha");

        let too_many = vec![chunk("chunk:0123456789ab", "", ""); CHUNKS_PER_TURN + 1];
        assert_eq!(
            client_chunks(too_many).unwrap_err().pointer("/chunks"),
            "/chunks"
        );
        for (c, pointer) in [
            (chunk("m_0123456789ab", "", ""), "/chunks/1/id"),
            (chunk("chunk:0123456789AB", "", ""), "/chunks/1/id"),
            (chunk("chunk:0123", "", ""), "/chunks/1/id"),
            (
                chunk("chunk:0123456789ab", &"l".repeat(501), ""),
                "/chunks/1/label",
            ),
            (
                chunk("chunk:0123456789ab", "", &"é".repeat(8_001)),
                "/chunks/1/text",
            ),
        ] {
            let e = client_chunks(vec![chunk("chunk:0123456789ab", "", ""), c]).unwrap_err();
            assert_eq!(e.pointer("/chunks"), pointer, "{e:?}");
        }
        // At the limits: accepted.
        client_chunks(vec![chunk(
            "chunk:0123456789ab",
            &"l".repeat(500),
            &"é".repeat(8_000),
        )])
        .unwrap();
    }
}
