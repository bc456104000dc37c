//! The recall index a long-lived face keeps beside its state (the local
//! server): the transcript's postings ([`wo_text::postings::Postings`]),
//! one document per message in transcript order, so recalling earlier
//! messages costs the query's postings instead of re-tokenising every
//! message on every turn.
//!
//! [`RecallIndex::sync`] brings it up to date with a state: when the
//! state's [`TranscriptVersion`] says the messages indexed are unchanged
//! (the server's own turns, merges that append), only the new messages are
//! added; when messages were inserted before the end (concurrent turns, a
//! merge of another device's turns) the postings of the messages before the
//! first insertion are kept and the rest indexed again; after any other
//! change (an edit, a re-read of an edited file) it is rebuilt. It is never the source of truth:
//! [`RecallIndex::recall`] answers only for the exact transcript it
//! reflects, and otherwise the caller scans as before
//! ([`crate::retrieve::recall_messages`]), with the same result — the same
//! hits, scores and order (a property test in `tests/recall_index.rs`
//! holds whole assembled contexts to the scan's).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};

use wo_format::{Message, State, TranscriptVersion};
use wo_text::bm25::QueryStats;
use wo_text::postings::Postings;

use crate::retrieve::{Recalled, doc_of, sort_recalled};

/// What [`RecallIndex::sync`] had to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Synced {
    /// The index already reflected the transcript.
    Current,
    /// This many messages were appended to the index.
    Appended(usize),
    /// Messages were inserted before the end: the index kept its first
    /// `kept` messages (those before the first insertion) and indexed the
    /// `added` after them again.
    Resumed {
        /// Messages whose postings were kept.
        kept: usize,
        /// Messages indexed (again) after them.
        added: usize,
    },
    /// The index was rebuilt from the whole transcript.
    Rebuilt,
}

/// The postings of a state's transcript, kept up to date by [`Self::sync`].
#[derive(Debug, Default)]
pub struct RecallIndex {
    /// The transcript version indexed; `None` before the first sync.
    version: Option<TranscriptVersion>,
    /// One document per message, numbered by the message's position. (Ids
    /// are looked up through the state's own map of them,
    /// [`State::position_if_ids_unique`]; when a hand-edited file repeats
    /// an id, [`Self::recall`] leaves the work to the scan.)
    postings: Postings,
    /// The first `unverified` documents' postings were read from a file
    /// (the recall sidecar), which anyone who can write beside `llm.json`
    /// can forge: a hit among them is used only once its score is checked
    /// against the message's own text ([`Self::verify`]).
    unverified: usize,
    /// A hit's claim failed that check: the postings are not this
    /// transcript's. The index then answers nothing until rebuilt (the
    /// next [`Self::sync`] rebuilds it).
    untrusted: AtomicBool,
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
        if self.is_untrusted() {
            *self = RecallIndex::new();
        }
        if self.version == Some(now) {
            return Synced::Current;
        }
        let messages = state.messages();
        let kept = match self.version {
            Some(v) if v.len == self.postings.len() => state.unchanged_prefix_since(&v),
            _ => None,
        };
        let outcome = match kept {
            Some(kept) if kept == self.postings.len() => Synced::Appended(messages.len() - kept),
            Some(kept) => {
                // Concurrent turns commit questions dated before answers
                // already written: the common case on a busy server. The
                // messages after the first insertion are all still here,
                // moved; index them again.
                self.postings.truncate(kept);
                self.unverified = self.unverified.min(kept);
                Synced::Resumed {
                    kept,
                    added: messages.len() - kept,
                }
            }
            None => {
                *self = RecallIndex::new();
                Synced::Rebuilt
            }
        };
        self.add_from(messages);
        self.version = Some(now);
        outcome
    }

    /// The index of `state` from `postings` read back for its first
    /// messages (the caller checked they index exactly those: the recall
    /// sidecar's keys), the messages after them added.
    pub(crate) fn adopt(postings: Postings, state: &State) -> RecallIndex {
        let mut index = RecallIndex {
            version: None,
            unverified: postings.len(),
            postings,
            untrusted: AtomicBool::new(false),
        };
        index.add_from(state.messages());
        index.version = Some(state.transcript_version());
        index
    }

    /// Adds `messages` after those indexed.
    fn add_from(&mut self, messages: &[Message]) {
        for m in &messages[self.postings.len()..] {
            self.postings.push(doc_of(m));
        }
    }

    /// The postings, to write them out ([`crate::recall_file`]).
    pub(crate) fn postings(&self) -> &Postings {
        &self.postings
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
        if limit == 0 {
            return self.is_usable(state).then(Vec::new);
        }
        let (mut hits, stats) = self.hits(state, query, skip)?;
        sort_recalled(&mut hits);
        hits.truncate(limit);
        hits.iter()
            .all(|h| self.verify(h, query, &stats))
            .then_some(hits)
    }

    /// Whether [`Self::hits`] answers for `state`.
    fn is_usable(&self, state: &State) -> bool {
        self.is_current(state) && !self.is_untrusted() && state.ids_unique()
    }

    /// True when a hit's claim failed [`Self::verify`]: the postings read
    /// from the file are not this transcript's. [`Self::sync`] rebuilds.
    pub fn is_untrusted(&self) -> bool {
        self.untrusted.load(AtomicOrdering::Relaxed)
    }

    /// Whether `hit`, found by [`Self::hits`] with `stats`, is what the
    /// message's own text scores (bit for bit: [`wo_text::bm25::rescore`]).
    /// A hit among the postings read from a file is checked; one indexed
    /// here is trusted. A failed check marks the index untrusted.
    pub(crate) fn verify(&self, hit: &Recalled<'_>, query: &str, stats: &QueryStats) -> bool {
        if hit.index >= self.unverified {
            return true;
        }
        let own = wo_text::bm25::rescore(doc_of(hit.message), query, stats);
        let same = own.to_bits() == hit.score.to_bits();
        if !same {
            self.untrusted.store(true, AtomicOrdering::Relaxed);
        }
        same
    }

    /// Every message of `state` sharing a term with `query`, except those
    /// in `skip`, with its score, in transcript order (unranked: see
    /// [`RankedHits`]), and the statistics they were scored with; `None`
    /// when the index does not answer for `state`.
    ///
    /// The postings may have been read from a file anyone could write
    /// ([`crate::recall_file`]); callers check each hit they use against
    /// the message's own text ([`wo_text::bm25::rescore`]) before trusting
    /// it.
    pub(crate) fn hits<'a>(
        &self,
        state: &'a State,
        query: &str,
        skip: &HashSet<&str>,
    ) -> Option<(Vec<Recalled<'a>>, QueryStats)> {
        if !self.is_usable(state) {
            return None;
        }
        let messages = state.messages();
        debug_assert_eq!(self.postings.len(), messages.len());
        let excluded: Vec<u32> = skip
            .iter()
            .filter_map(|id| state.position_if_ids_unique(id).flatten())
            .map(|p| p as u32)
            .collect();
        // A list of a sidecar read lazily that turns out malformed: scan.
        let (scores, stats) = self.postings.scores_stats(query, &excluded).ok()?;
        let hits = scores
            .into_iter()
            .map(|(d, score)| Recalled {
                message: &messages[d as usize],
                index: d as usize,
                score,
            })
            .collect();
        Some((hits, stats))
    }
}

/// The hits of one query handed out in recall's order — best score first,
/// ties earlier in the transcript first — one at a time, as the assembler
/// takes them. A long transcript can match tens of thousands of messages
/// of which the budget takes a few hundred: a heap built in linear time
/// and popped for those few replaces sorting every hit (and every hit's
/// neighbours), and what was never looked at is counted, not listed.
pub(crate) struct RankedHits<'a, 'i> {
    /// The hits considered (at most the limit best), in transcript order.
    hits: Vec<Recalled<'a>>,
    /// Slots of `hits` not handed out yet, best on top.
    heap: BinaryHeap<HitKey>,
    /// Which slots were handed out.
    popped: Vec<bool>,
    /// The state, when the hits came from the recall index (its ids are
    /// then unique): lets [`Self::count_outside`] look up the few ids it is
    /// given instead of checking every hit never handed out.
    unique_ids: Option<&'i State>,
}

/// A slot of [`RankedHits::hits`] in the heap: higher score first, then
/// the earlier slot (the earlier message).
#[derive(Clone, Copy, Debug)]
struct HitKey {
    score: f64,
    slot: u32,
}

impl PartialEq for HitKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for HitKey {}

impl PartialOrd for HitKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for HitKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.slot.cmp(&self.slot))
    }
}

impl<'a, 'i> RankedHits<'a, 'i> {
    /// `hits` in transcript order (as [`RecallIndex::hits`] and the scan
    /// give them); only the `limit` best in recall's order
    /// ([`sort_recalled`]) are kept.
    pub(crate) fn new(
        mut hits: Vec<Recalled<'a>>,
        limit: usize,
        unique_ids: Option<&'i State>,
    ) -> Self {
        debug_assert!(hits.is_sorted_by_key(|h| h.index));
        if limit < hits.len() {
            sort_recalled(&mut hits);
            hits.truncate(limit);
            hits.sort_unstable_by_key(|h| h.index);
        }
        let heap: Vec<HitKey> = hits
            .iter()
            .enumerate()
            .map(|(slot, h)| HitKey {
                score: h.score,
                slot: slot as u32,
            })
            .collect();
        RankedHits {
            popped: vec![false; hits.len()],
            heap: BinaryHeap::from(heap),
            hits,
            unique_ids,
        }
    }

    /// The score of the next hit, if any is left.
    pub(crate) fn peek_score(&self) -> Option<f64> {
        self.heap.peek().map(|k| k.score)
    }

    /// The next hit.
    pub(crate) fn pop(&mut self) -> Option<Recalled<'a>> {
        let k = self.heap.pop()?;
        self.popped[k.slot as usize] = true;
        Some(self.hits[k.slot as usize].clone())
    }

    /// How many hits (handed out or not) have an id outside `ids`.
    pub(crate) fn count_outside(&self, ids: &HashSet<&str>) -> usize {
        let outside = |h: &Recalled<'_>| !ids.contains(h.message.id.as_str());
        let handed_out = self
            .hits
            .iter()
            .zip(&self.popped)
            .filter(|(h, p)| **p && outside(h))
            .count();
        let left = self.heap.len();
        let left_outside = match self.unique_ids {
            // Ids are unique: of the hits never handed out, those inside
            // `ids` are found from `ids` itself.
            Some(state) => {
                let inside = ids
                    .iter()
                    .filter_map(|id| state.position_if_ids_unique(id).flatten())
                    .filter_map(|p| self.hits.binary_search_by_key(&p, |h| h.index).ok())
                    .filter(|&slot| !self.popped[slot])
                    .count();
                left - inside
            }
            None => self
                .hits
                .iter()
                .zip(&self.popped)
                .filter(|(h, p)| !**p && outside(h))
                .count(),
        };
        handed_out + left_outside
    }
}

/// Recall's candidates in the order the assembler takes them: every hit at
/// its score and the turns before and after it at `weight` × that score;
/// higher score first, at an equal score hits before neighbours, then the
/// earlier turn, then (one turn next to two hits of the same score) the
/// neighbour of the hit [`sort_recalled`] ranks first. Each item is a
/// transcript position and, for a neighbour, the hit it is next to.
///
/// Lazy: hits come from [`RankedHits`]' heap, a hit's neighbours enter a
/// second heap when the hit is handed out — a neighbour ranks below its hit
/// (`weight` < 1, scores > 0), so none is handed out late. The unit tests
/// hold it to sorting every candidate at once.
pub(crate) struct Candidates<'a, 'i> {
    hits: RankedHits<'a, 'i>,
    neighbours: BinaryHeap<Neighbour<'a>>,
    /// Messages in the transcript (the last one has no turn after it).
    len: usize,
    weight: f64,
}

/// A hit's neighbouring turn waiting in [`Candidates`]: greater = first.
struct Neighbour<'a> {
    score: f64,
    /// Its position in the transcript.
    index: usize,
    /// The hit it neighbours, and that hit's position.
    of: &'a Message,
    of_index: usize,
}

impl PartialEq for Neighbour<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Neighbour<'_> {}

impl PartialOrd for Neighbour<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Neighbour<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.index.cmp(&self.index))
            // Recall's rank of the hit: newer first, then earlier position.
            .then_with(|| self.of.order_key().cmp(&other.of.order_key()))
            .then_with(|| other.of_index.cmp(&self.of_index))
    }
}

impl<'a, 'i> Candidates<'a, 'i> {
    /// The candidates of `hits` in a transcript of `len` messages, each
    /// neighbour at `weight` (below 1) of its hit's score.
    pub(crate) fn new(hits: RankedHits<'a, 'i>, len: usize, weight: f64) -> Self {
        debug_assert!(weight > 0.0 && weight < 1.0);
        Candidates {
            hits,
            neighbours: BinaryHeap::new(),
            len,
            weight,
        }
    }

    /// The hits, to count those never taken.
    pub(crate) fn hits(&self) -> &RankedHits<'a, 'i> {
        &self.hits
    }
}

impl<'a> Iterator for Candidates<'a, '_> {
    /// A transcript position, the hit it neighbours (`None` for a hit), and
    /// its rank score.
    type Item = (usize, Option<&'a Message>, f64);

    fn next(&mut self) -> Option<Self::Item> {
        // At an equal score a hit comes before a neighbour.
        let neighbour_first = match (self.hits.peek_score(), self.neighbours.peek()) {
            (None, None) => return None,
            (None, Some(_)) => true,
            (Some(_), None) => false,
            (Some(hit), Some(n)) => n.score.total_cmp(&hit).is_gt(),
        };
        if neighbour_first {
            let n = self.neighbours.pop()?;
            return Some((n.index, Some(n.of), n.score));
        }
        let hit = self.hits.pop()?;
        let score = hit.score * self.weight;
        let around = [
            hit.index.checked_sub(1),
            Some(hit.index + 1).filter(|&i| i < self.len),
        ];
        for index in around.into_iter().flatten() {
            self.neighbours.push(Neighbour {
                score,
                index,
                of: hit.message,
                of_index: hit.index,
            });
        }
        Some((hit.index, None, hit.score))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use wo_format::Timestamp;

    /// Messages whose order keys tie often: few distinct times, and ids
    /// that repeat when the time and text do.
    fn transcript(times: &[i64]) -> Vec<Message> {
        times
            .iter()
            .enumerate()
            .map(|(i, &t)| {
                Message::new(
                    "ann",
                    Timestamp::from_unix(1_700_000_000 + t),
                    "t",
                    format!("<p>{}</p>", i % 3),
                )
            })
            .collect()
    }

    fn position(messages: &[Message], m: &Message) -> usize {
        messages
            .iter()
            .position(|x| std::ptr::eq(x, m))
            .expect("a message of the transcript")
    }

    /// The definition: every hit (the `limit` best by [`sort_recalled`])
    /// and its two neighbours, all sorted at once (a stable sort, as the
    /// assembler did before it took them lazily).
    fn eager(
        hits: &[Recalled<'_>],
        len: usize,
        weight: f64,
        limit: usize,
    ) -> Vec<(usize, Option<usize>)> {
        let mut hits = hits.to_vec();
        sort_recalled(&mut hits);
        hits.truncate(limit);
        let mut candidates: Vec<(f64, usize, Option<usize>)> = Vec::new();
        for (rank, hit) in hits.iter().enumerate() {
            candidates.push((hit.score, hit.index, None));
            let w = hit.score * weight;
            if let Some(before) = hit.index.checked_sub(1) {
                candidates.push((w, before, Some(rank)));
            }
            if hit.index + 1 < len {
                candidates.push((w, hit.index + 1, Some(rank)));
            }
        }
        candidates.sort_by(|x, y| {
            y.0.total_cmp(&x.0)
                .then_with(|| x.2.is_some().cmp(&y.2.is_some()))
                .then_with(|| x.1.cmp(&y.1))
        });
        candidates
            .into_iter()
            .map(|(_, i, r)| (i, r.map(|r| hits[r].index)))
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        /// The lazy order is the eager one, item for item — ties of score
        /// (a neighbour's score equal to another hit's), of time and of id
        /// included — and the count of hits left equals a plain filter.
        #[test]
        fn candidates_come_in_the_eager_order(
            times in proptest::collection::vec(0i64..4, 1..60),
            scored in proptest::collection::vec((any::<bool>(), 0usize..5), 60),
            limit in prop_oneof![Just(usize::MAX), 0usize..20],
            taken in proptest::collection::vec(0usize..60, 0..10),
        ) {
            let messages = transcript(&times);
            // Scores from a small set where one is half another: a
            // neighbour's score then ties with hits' scores.
            const SCORES: [f64; 5] = [0.5, 1.0, 2.0, 4.0, 3.0];
            let hits: Vec<Recalled<'_>> = messages
                .iter()
                .enumerate()
                .filter(|(i, _)| scored[*i].0)
                .map(|(index, message)| Recalled { message, index, score: SCORES[scored[index].1] })
                .collect();
            let want = eager(&hits, messages.len(), 0.5, limit);
            let mut lazy = Candidates::new(RankedHits::new(hits.clone(), limit, None), messages.len(), 0.5);
            let got: Vec<(usize, Option<usize>)> = lazy
                .by_ref()
                .map(|(i, of, _)| (i, of.map(|m| position(&messages, m))))
                .collect();
            prop_assert_eq!(got, want);

            // Counting what was not taken, with part of the hits handed out.
            let mut partly = Candidates::new(RankedHits::new(hits.clone(), limit, None), messages.len(), 0.5);
            for _ in 0..taken.len() {
                partly.next();
            }
            let ids: HashSet<&str> = taken
                .iter()
                .filter_map(|&i| messages.get(i))
                .map(|m| m.id.as_str())
                .collect();
            let mut kept = hits.clone();
            sort_recalled(&mut kept);
            kept.truncate(limit);
            let plain = kept.iter().filter(|h| !ids.contains(h.message.id.as_str())).count();
            prop_assert_eq!(partly.hits().count_outside(&ids), plain);
        }
    }
}
