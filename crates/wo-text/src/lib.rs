//! Retrieval text shared by every search in WikiOracle: chat retrieval
//! (`wo-engine`: truth entries, earlier messages) and the directory index
//! (`wo-index`: file chunks) tokenise and score with the same code, so a
//! query means the same thing to both.
//!
//! * [`terms`] — the one tokenizer: words, identifier parts (camelCase,
//!   snake_case, letter/digit), the Snowball English stopword list and
//!   Porter 2 stems.
//! * [`bm25`] — the one BM25 formula (Okapi, k1 = 1.2, b = 0.75), and a
//!   one-pass scorer of one query over many documents for callers that keep
//!   no inverted index.
//! * [`postings`] — an inverted index extended as documents arrive, scoring
//!   exactly as [`bm25::scores_docs`] does (for a long-lived server).
//!
//! No I/O and no knowledge of `llm.json`: text in, terms and scores out.

pub mod bm25;
pub mod postings;
pub mod terms;
