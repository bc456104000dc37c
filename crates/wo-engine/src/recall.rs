//! The recall index a long-lived face keeps beside its state (the local
//! server): the transcript's postings ([`wo_text::postings::Postings`]),
//! one document per message in transcript order, so recalling earlier
//! messages costs the query's postings instead of re-tokenising every
//! message on every turn.
//!
//! [`RecallIndex::sync`] brings it up to date with a state: when the
//! state's [`TranscriptVersion`] says the messages indexed are unchanged
//! (the server's own turns, merges that append), only the new messages are
//! added; after any other change (a re-read of an edited file, a merge that
//! inserts before the end) it is rebuilt. It is never the source of truth:
//! [`RecallIndex::recall`] answers only for the exact transcript it
//! reflects, and otherwise the caller scans as before
//! ([`crate::retrieve::recall_messages`]), with the same result — the same
//! hits, scores and order (a property test in `tests/recall_index.rs`
//! holds whole assembled contexts to the scan's).

use std::collections::{HashMap, HashSet};

use wo_format::{Message, State, TranscriptVersion};
use wo_text::bm25::Doc;
use wo_text::postings::Postings;

use crate::retrieve::{Recalled, sort_recalled};

/// What [`RecallIndex::sync`] had to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Synced {
    /// The index already reflected the transcript.
    Current,
    /// This many messages were appended to the index.
    Appended(usize),
    /// The index was rebuilt from the whole transcript.
    Rebuilt,
}

/// The postings of a state's transcript, kept up to date by [`Self::sync`].
#[derive(Debug, Default)]
pub struct RecallIndex {
    /// The transcript version indexed; `None` before the first sync.
    version: Option<TranscriptVersion>,
    postings: Postings,
    /// Message id → its position (= document number).
    positions: HashMap<Box<str>, u32>,
    /// Two messages share an id (a hand-edited file): positions are then
    /// ambiguous, and [`Self::recall`] leaves the work to the scan.
    duplicate_ids: bool,
}

impl RecallIndex {
    /// An empty index; the first [`Self::sync`] builds it.
    pub fn new() -> Self {
        RecallIndex::default()
    }

    /// Messages indexed.
    pub fn len(&self) -> usize {
        self.postings.len()
    }

    /// True when no message is indexed.
    pub fn is_empty(&self) -> bool {
        self.postings.is_empty()
    }

    /// Brings the index up to date with `state`'s transcript: adds the
    /// messages appended since the last sync, or rebuilds it when anything
    /// else may have changed.
    pub fn sync(&mut self, state: &State) -> Synced {
        let now = state.transcript_version();
        if self.version == Some(now) {
            return Synced::Current;
        }
        let messages = state.messages();
        let appended = match self.version {
            Some(v) if v.len == self.postings.len() && state.unchanged_since(&v) => {
                Some(messages.len() - v.len)
            }
            _ => None,
        };
        let outcome = match appended {
            Some(n) => Synced::Appended(n),
            None => {
                *self = RecallIndex::new();
                Synced::Rebuilt
            }
        };
        for m in &messages[self.postings.len()..] {
            let number = self.postings.push(doc_of(m));
            if self
                .positions
                .insert(m.id.as_str().into(), number)
                .is_some()
            {
                self.duplicate_ids = true;
            }
        }
        self.version = Some(now);
        outcome
    }

    /// True when the index reflects `state`'s transcript as it is now.
    pub fn is_current(&self, state: &State) -> bool {
        self.version == Some(state.transcript_version())
    }

    /// [`crate::retrieve::recall_messages`] over `state`'s transcript, from
    /// the index: the same hits, scores and order. `None` when the index
    /// does not reflect that transcript as it is now (never synced, synced
    /// with another state, changed since): the caller then scans.
    pub fn recall<'a>(
        &self,
        state: &'a State,
        query: &str,
        skip: &HashSet<&str>,
        limit: usize,
    ) -> Option<Vec<Recalled<'a>>> {
        if !self.is_current(state) || self.duplicate_ids {
            return None;
        }
        let messages = state.messages();
        debug_assert_eq!(self.postings.len(), messages.len());
        if limit == 0 {
            return Some(Vec::new());
        }
        let excluded: Vec<u32> = skip
            .iter()
            .filter_map(|id| self.positions.get(*id).copied())
            .collect();
        let mut hits: Vec<Recalled<'a>> = self
            .postings
            .scores(query, &excluded)
            .into_iter()
            .map(|(d, score)| Recalled {
                message: &messages[d as usize],
                index: d as usize,
                score,
            })
            .collect();
        sort_recalled(&mut hits);
        hits.truncate(limit);
        Some(hits)
    }
}

/// What a message is scored on: its speaker and its text (not its title,
/// see [`crate::retrieve`]).
pub(crate) fn doc_of(m: &Message) -> Doc<'_> {
    Doc {
        plain: &m.username,
        xhtml: &m.content,
    }
}
