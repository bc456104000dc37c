//! Deterministic merge of state files (SPEC §3).
//!
//! Messages and truth entries are unions keyed by id; when two versions of
//! one id differ, the later `updated` (else `timestamp`) wins and the
//! lexicographically larger canonical JSON breaks ties, so the merge of the
//! collections is commutative, associative and idempotent. Tombstones in
//! `truth.deleted` remove every version of an entry not edited after the
//! deletion, so an older export cannot resurrect it. `context`, retrieval
//! preferences and other top-level fields are kept from the base.

use std::cmp::Ordering;
use std::collections::HashMap;

use serde::Serialize;

use crate::model::{Message, State, Tombstone, TruthEntry};

/// What a merge did, for `wo merge` and the server to print.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MergeReport {
    /// Ids of messages new to the base.
    pub messages_added: Vec<String>,
    /// Ids present in both whose incoming version won a conflict.
    pub messages_replaced: Vec<String>,
    /// Messages already present (identical or losing a conflict).
    pub messages_skipped: usize,
    pub truth_added: Vec<String>,
    pub truth_updated: Vec<String>,
    /// Entries already present, older, or tombstoned.
    pub truth_skipped: usize,
    /// Entries removed by an incoming tombstone.
    pub truth_deleted: Vec<String>,
    pub tombstones_added: Vec<String>,
}

impl MergeReport {
    /// True when the merge changed nothing.
    pub fn is_empty(&self) -> bool {
        self.messages_added.is_empty()
            && self.messages_replaced.is_empty()
            && self.truth_added.is_empty()
            && self.truth_updated.is_empty()
            && self.truth_deleted.is_empty()
            && self.tombstones_added.is_empty()
    }

    /// Adds another report's counts and ids to this one.
    pub fn absorb(&mut self, other: MergeReport) {
        self.messages_added.extend(other.messages_added);
        self.messages_replaced.extend(other.messages_replaced);
        self.messages_skipped += other.messages_skipped;
        self.truth_added.extend(other.truth_added);
        self.truth_updated.extend(other.truth_updated);
        self.truth_skipped += other.truth_skipped;
        self.truth_deleted.extend(other.truth_deleted);
        self.tombstones_added.extend(other.tombstones_added);
    }
}

fn canonical_json<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("in-memory JSON serialisation")
}

/// Total order deciding which version of one message id survives.
fn message_wins(incoming: &Message, current: &Message) -> bool {
    canonical_json(incoming) > canonical_json(current)
}

/// Total order deciding which version of one truth id survives.
fn truth_order(a: &TruthEntry, b: &TruthEntry) -> Ordering {
    a.effective_update()
        .cmp(b.effective_update())
        .then_with(|| canonical_json(a).cmp(&canonical_json(b)))
}

fn tombstone_order(a: &Tombstone, b: &Tombstone) -> Ordering {
    a.date
        .cmp(&b.date)
        .then_with(|| canonical_json(a).cmp(&canonical_json(b)))
}

/// Merges `incoming` into `base` and reports what changed. Both states must
/// be normalised (as [`crate::parse`] leaves them).
pub fn merge_into(base: &mut State, incoming: &State) -> MergeReport {
    let mut report = MergeReport::default();
    dedupe_base(base);
    merge_messages(base, incoming, &mut report);
    merge_truth(base, incoming, &mut report);
    if incoming.date > base.date {
        base.date = incoming.date.clone();
    }
    for (k, v) in &incoming.extra {
        base.extra.entry(k.clone()).or_insert_with(|| v.clone());
    }
    report
}

/// Indices of the versions that survive when one list repeats ids: for each
/// id, the greatest by `wins` (the first of equals); `None` if no id repeats.
fn survivors<T>(
    items: &[T],
    id: impl Fn(&T) -> &str,
    wins: impl Fn(&T, &T) -> bool,
) -> Option<Vec<bool>> {
    let mut best: HashMap<&str, usize> = HashMap::with_capacity(items.len());
    let mut repeated = false;
    for (i, item) in items.iter().enumerate() {
        match best.get(id(item)) {
            Some(&j) => {
                repeated = true;
                if wins(item, &items[j]) {
                    best.insert(id(item), i);
                }
            }
            None => {
                best.insert(id(item), i);
            }
        }
    }
    if !repeated {
        return None;
    }
    let mut keep = vec![false; items.len()];
    for i in best.into_values() {
        keep[i] = true;
    }
    Some(keep)
}

fn retain_marked<T>(items: &mut Vec<T>, keep: &[bool]) {
    let mut i = 0;
    items.retain(|_| {
        i += 1;
        keep[i - 1]
    });
}

/// Collapses ids repeated within the base (hand edits; `wo validate` warns)
/// by the same rules that resolve them across files. Without this the base's
/// duplicates would survive while an incoming file's would not, and
/// merge(a, b) would differ from merge(b, a).
fn dedupe_base(base: &mut State) {
    if let Some(keep) = survivors(base.messages(), |m| &m.id, message_wins) {
        retain_marked(base.messages_mut(), &keep);
    }
    let trust_wins = |a: &TruthEntry, b: &TruthEntry| truth_order(a, b) == Ordering::Greater;
    if let Some(keep) = survivors(&base.truth.trust, |t| &t.id, trust_wins) {
        retain_marked(&mut base.truth.trust, &keep);
    }
    let tomb_wins = |a: &Tombstone, b: &Tombstone| tombstone_order(a, b) == Ordering::Greater;
    if let Some(keep) = survivors(&base.truth.deleted, |d| &d.id, tomb_wins) {
        retain_marked(&mut base.truth.deleted, &keep);
    }
}

fn merge_messages(base: &mut State, incoming: &State, report: &mut MergeReport) {
    let index: HashMap<&str, usize> = base
        .messages()
        .iter()
        .enumerate()
        .map(|(i, m)| (m.id.as_str(), i))
        .collect();
    let mut added: Vec<Message> = Vec::new();
    let mut replaced: Vec<(usize, Message)> = Vec::new();
    let mut added_ids: HashMap<&str, usize> = HashMap::new();
    for m in incoming.messages() {
        match index.get(m.id.as_str()) {
            Some(&i) if base.messages()[i] == *m => report.messages_skipped += 1,
            Some(&i) => {
                let current = replaced
                    .iter()
                    .rev()
                    .find(|(j, _)| *j == i)
                    .map_or(&base.messages()[i], |(_, r)| r);
                if message_wins(m, current) {
                    replaced.push((i, m.clone()));
                } else {
                    report.messages_skipped += 1;
                }
            }
            None => match added_ids.get(m.id.as_str()) {
                // The same id twice within the incoming file.
                Some(&k) => {
                    if message_wins(m, &added[k]) {
                        added[k] = m.clone();
                    }
                    report.messages_skipped += 1;
                }
                None => {
                    added_ids.insert(m.id.as_str(), added.len());
                    added.push(m.clone());
                }
            },
        }
    }
    drop(index);
    report.messages_added = added.iter().map(|m| m.id.clone()).collect();
    if !replaced.is_empty() {
        let list = base.messages_mut();
        for (i, m) in replaced {
            if !report.messages_replaced.contains(&m.id) {
                report.messages_replaced.push(m.id.clone());
            }
            list[i] = m;
        }
        // The winning version of an id may carry another timestamp.
        if !list.is_sorted_by(|a, b| a.order_key() <= b.order_key()) {
            list.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
        }
    }
    let appends_at_end = match (base.messages().last(), added.first()) {
        (Some(last), Some(first)) => last.order_key() <= first.order_key(),
        _ => true,
    };
    added.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
    if appends_at_end {
        // Keeps the unchanged prefix for the writer's append fast path.
        for m in added {
            let inserted = base.push_message(m);
            debug_assert!(inserted);
        }
    } else {
        let list = base.messages_mut();
        list.extend(added);
        list.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
    }
}

fn merge_truth(base: &mut State, incoming: &State, report: &mut MergeReport) {
    // Tombstones first: a union keeping the latest deletion of each id.
    for t in &incoming.truth.deleted {
        match base.truth.deleted.iter_mut().find(|d| d.id == t.id) {
            Some(d) => {
                if tombstone_order(t, d) == Ordering::Greater {
                    *d = t.clone();
                }
            }
            None => {
                base.truth.deleted.push(t.clone());
                report.tombstones_added.push(t.id.clone());
            }
        }
    }
    base.truth.deleted.sort_by(|a, b| a.id.cmp(&b.id));
    let tombstones: HashMap<&str, &Tombstone> = base
        .truth
        .deleted
        .iter()
        .map(|d| (d.id.as_str(), d))
        .collect();
    let buried = |e: &TruthEntry| {
        tombstones
            .get(e.id.as_str())
            .is_some_and(|d| *e.effective_update() <= d.date)
    };

    let mut index: HashMap<String, usize> = base
        .truth
        .trust
        .iter()
        .enumerate()
        .map(|(i, t)| (t.id.clone(), i))
        .collect();
    let mut trust = std::mem::take(&mut base.truth.trust);
    for e in &incoming.truth.trust {
        match index.get(&e.id) {
            Some(&i) if trust[i] == *e => report.truth_skipped += 1,
            Some(&i) => {
                if truth_order(e, &trust[i]) == Ordering::Greater {
                    if !report.truth_updated.contains(&e.id) {
                        report.truth_updated.push(e.id.clone());
                    }
                    trust[i] = e.clone();
                } else {
                    report.truth_skipped += 1;
                }
            }
            None if buried(e) => report.truth_skipped += 1,
            None => {
                index.insert(e.id.clone(), trust.len());
                report.truth_added.push(e.id.clone());
                trust.push(e.clone());
            }
        }
    }
    trust.retain(|e| {
        if buried(e) {
            if !report.truth_added.contains(&e.id) {
                report.truth_deleted.push(e.id.clone());
            }
            false
        } else {
            true
        }
    });
    report
        .truth_updated
        .retain(|id| !report.truth_deleted.contains(id));
    drop(tombstones);
    base.truth.trust = trust;
}

/// Merges several states into a copy of `base` (left to right).
pub fn merge_all<'a>(
    base: &State,
    incoming: impl IntoIterator<Item = &'a State>,
) -> (State, MergeReport) {
    let mut out = base.clone();
    let mut report = MergeReport::default();
    for s in incoming {
        report.absorb(merge_into(&mut out, s));
    }
    (out, report)
}
