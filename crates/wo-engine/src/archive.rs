//! Archiving (product §7): an entry with `expires` that
//! no prompt has used for the configured age (`[memory]
//! archive_after_days`) leaves retrieval. It is marked (`archived`, the
//! time), never deleted, and stays listed and searchable on request
//! ([`search`] with [`Archived::Only`]).
//!
//! "Used" means sent in a prompt: each turn that sends an entry counts it
//! in `refs` and dates it in `used` (`turn::apply_turn`). The decision is
//! taken when a turn is recorded, with that turn's clock passed in — never
//! the wall clock — so the same history always archives the same entries.

use wo_format::{Expires, State, Timestamp, TruthEntry};
use wo_text::bm25;

/// Seconds in a day, for `archive_after_days`.
const DAY_SECS: i64 = 86_400;

/// True when `e` may be archived at all: it has `expires` (a flag set, or
/// an instant) and is not archived yet.
fn may_archive(e: &TruthEntry) -> bool {
    e.archived.is_none() && matches!(&e.expires, Some(Expires::At(_)) | Some(Expires::Flag(true)))
}

/// When `e` was last used, or, never used, last changed: the instant its
/// unused age counts from.
pub fn unused_since(e: &TruthEntry) -> &Timestamp {
    match &e.used {
        Some(used) if used > e.effective_update() => used,
        _ => e.effective_update(),
    }
}

/// Marks archived, at `now`, every entry with `expires` that has gone
/// unused for `after_days` days or more (the boundary included); returns
/// their ids. `updated` moves past its old value with the mark, so the
/// archived version wins a merge against the live one.
pub fn archive_unused(state: &mut State, now: &Timestamp, after_days: u32) -> Vec<String> {
    let limit = i64::from(after_days) * DAY_SECS;
    let mut archived = Vec::new();
    for e in &mut state.truth.trust {
        if !may_archive(e) || now.unix_seconds() - unused_since(e).unix_seconds() < limit {
            continue;
        }
        e.mark_changed(now.clone());
        e.archived = Some(now.clone());
        archived.push(e.id.clone());
    }
    archived
}

/// Which entries a listing or search covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Archived {
    /// Live entries only (the default).
    Exclude,
    /// Archived entries only (on request).
    Only,
}

impl Archived {
    /// Whether `e` is covered.
    pub fn covers(self, e: &TruthEntry) -> bool {
        match self {
            Archived::Exclude => e.archived.is_none(),
            Archived::Only => e.archived.is_some(),
        }
    }
}

/// Truth entries matching `query` (BM25 over title and content, the
/// retrieval's terms), best first (ties: newer first), among those
/// `which` covers: `wo memory search`.
pub fn search<'a>(state: &'a State, query: &str, which: Archived) -> Vec<(f64, &'a TruthEntry)> {
    let pool: Vec<&TruthEntry> = state
        .truth
        .trust
        .iter()
        .filter(|e| which.covers(e))
        .collect();
    let docs: Vec<bm25::Doc> = pool
        .iter()
        .map(|e| bm25::Doc {
            plain: &e.title,
            xhtml: &e.content,
        })
        .collect();
    let mut hits: Vec<(f64, &TruthEntry)> = bm25::scores_docs(&docs, query)
        .into_iter()
        .zip(pool)
        .filter(|(s, _)| *s > 0.0)
        .collect();
    hits.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then_with(|| b.1.timestamp.cmp(&a.1.timestamp))
            .then_with(|| a.1.id.cmp(&b.1.id))
    });
    hits
}
