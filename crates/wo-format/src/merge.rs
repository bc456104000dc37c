//! Deterministic merge of state files (product §3).
//!
//! Messages and truth entries are unions keyed by id, and two versions of
//! one id are joined field by field, so nothing either copy holds is lost:
//!
//! * a **message** has no edit time (its id hashes its author, time and
//!   content), so each field is the one copy's value or, when both set it
//!   differently, the value with the larger canonical JSON — except its
//!   title, which a person may rename: the title and its `retitled` stamp
//!   come together from the later rename;
//! * a **truth entry** is edited, and can be deleted: its own fields (title,
//!   content, certainty, `updated`, …) come together from the version with
//!   the later `updated` (else `timestamp`), ties going to the larger
//!   canonical JSON of those fields, so a later edit wins and what it removed
//!   stays removed; two copies of that same version (equal own fields) have
//!   their extension fields united key by key like a message's;
//! * a **tombstone** keeps the latest `date`, its extension fields united.
//!
//! Each rule is a join over an order read from the values themselves, so
//! the merge is commutative, associative and idempotent however the copies
//! are grouped. (Two natural-looking rules are not: ordering each field by
//! the `updated` of the copy it came from fails once a joined field no
//! longer says which copy that was, and uniting the extension fields of an
//! older edit into a newer one fails against a tombstone dated between the
//! two, which removes the older copy in one grouping and not in the other.)
//! Tombstones in `truth.deleted` remove every version of an entry not edited
//! after the deletion, so an older export cannot resurrect it. `context`,
//! retrieval preferences and other top-level fields are kept from the base.

use std::cmp::Ordering;
use std::collections::HashMap;

use serde::Serialize;

use crate::model::{ARCHIVE_KEY, Extra, Message, RETITLED_KEY, Tombstone, TruthEntry};
use crate::rawjson::RawJson;
use crate::state::State;

/// What a merge did, for `wo merge` and the server to print.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MergeReport {
    /// Ids of messages new to the base.
    pub messages_added: Vec<String>,
    /// Ids present in both whose incoming version won a conflict.
    pub messages_replaced: Vec<String>,
    /// Messages already present (identical or losing a conflict).
    pub messages_skipped: usize,
    /// Ids of truth entries new to the base.
    pub truth_added: Vec<String>,
    /// Ids of truth entries whose incoming version was newer and won.
    pub truth_updated: Vec<String>,
    /// Entries already present, older, or tombstoned.
    pub truth_skipped: usize,
    /// Entries removed by an incoming tombstone.
    pub truth_deleted: Vec<String>,
    /// Ids of tombstones new to the base.
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

/// Of two values of one field, the one with the larger canonical JSON.
fn larger<'a, T: Serialize>(a: &'a T, b: &'a T) -> &'a T {
    if canonical_json(b) > canonical_json(a) {
        b
    } else {
        a
    }
}

/// A field both copies may lack: the one that is there, else the larger.
fn join_opt<T: Serialize + Clone>(a: &Option<T>, b: &Option<T>) -> Option<T> {
    match (a, b) {
        (Some(x), Some(y)) => Some(larger(x, y).clone()),
        (Some(x), None) | (None, Some(x)) => Some(x.clone()),
        (None, None) => None,
    }
}

/// Extension fields: the union of the keys, each the larger canonical text.
fn join_extra(a: &Extra, b: &Extra) -> Extra {
    let mut out = a.clone();
    for (k, v) in b {
        match out.get_mut(k) {
            Some(mine) => {
                if v.as_str().as_bytes() > mine.as_str().as_bytes() {
                    *mine = v.clone();
                }
            }
            None => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

/// The field-wise join of two versions of one message (same id).
pub fn join_message(a: &Message, b: &Message) -> Message {
    if a == b {
        return a.clone();
    }
    let (title, retitled) = join_title(a, b);
    let mut extra = join_extra(&a.extra, &b.extra);
    match retitled {
        Some(stamp) => extra.insert(RETITLED_KEY.to_owned(), stamp),
        None => extra.remove(RETITLED_KEY),
    };
    // Archiving: the later say wins (then the larger text), as a rename.
    let archive_key = |m: &Message| {
        (
            m.archive_say().map(|(at, _)| at),
            m.extra
                .get(ARCHIVE_KEY)
                .map(|r| r.as_str().as_bytes().to_vec()),
        )
    };
    let archive = if archive_key(b) > archive_key(a) {
        b
    } else {
        a
    };
    match archive.extra.get(ARCHIVE_KEY) {
        Some(say) => extra.insert(ARCHIVE_KEY.to_owned(), say.clone()),
        None => extra.remove(ARCHIVE_KEY),
    };
    Message {
        id: a.id.clone(),
        title,
        username: larger(&a.username, &b.username).clone(),
        timestamp: larger(&a.timestamp, &b.timestamp).clone(),
        content: larger(&a.content, &b.content).clone(),
        role: join_opt(&a.role, &b.role),
        parent: join_opt(&a.parent, &b.parent),
        provider: join_opt(&a.provider, &b.provider),
        model: join_opt(&a.model, &b.model),
        usage: join_opt(&a.usage, &b.usage),
        sources: join_opt(&a.sources, &b.sources),
        extra,
    }
}

/// A message's title travels with its rename stamp ([`RETITLED_KEY`]) as
/// one value: the later rename wins (a copy never renamed, or whose stamp
/// is not a timestamp, is older than any rename), then the larger stamp
/// text, then the larger title. One total order over the pair, so the
/// join stays commutative, associative and idempotent.
fn join_title(a: &Message, b: &Message) -> (String, Option<RawJson>) {
    let key = |m: &Message| {
        let raw = m.extra.get(RETITLED_KEY);
        (
            m.retitled(),
            raw.map(|r| r.as_str().as_bytes().to_vec()),
            canonical_json(&m.title),
        )
    };
    let winner = if key(b) > key(a) { b } else { a };
    (
        winner.title.clone(),
        winner.extra.get(RETITLED_KEY).cloned(),
    )
}

/// The canonical JSON of a truth entry's own fields (without `extra`).
fn core_json(e: &TruthEntry) -> Vec<u8> {
    if e.extra.is_empty() {
        return canonical_json(e);
    }
    let mut core = e.clone();
    core.extra.clear();
    canonical_json(&core)
}

/// Which version's own fields win: the later edit, then the larger JSON.
fn core_order(a: &TruthEntry, b: &TruthEntry) -> Ordering {
    a.effective_update()
        .cmp(b.effective_update())
        .then_with(|| core_json(a).cmp(&core_json(b)))
}

/// The join of two versions of one truth entry (same id): the later edit as
/// a whole; of two copies of the same edit, their extension fields united.
pub fn join_truth(a: &TruthEntry, b: &TruthEntry) -> TruthEntry {
    match core_order(a, b) {
        Ordering::Greater => a.clone(),
        Ordering::Less => b.clone(),
        Ordering::Equal => {
            let mut out = a.clone();
            out.extra = join_extra(&a.extra, &b.extra);
            out
        }
    }
}

/// The join of two tombstones of one id: the latest date, extensions united.
fn join_tombstone(a: &Tombstone, b: &Tombstone) -> Tombstone {
    Tombstone {
        id: a.id.clone(),
        date: a.date.clone().max(b.date.clone()),
        extra: join_extra(&a.extra, &b.extra),
    }
}

/// Merges `incoming` into `base` and reports what changed. Both states must
/// be normalised (as [`crate::parse`] leaves them).
pub fn merge_into(base: &mut State, incoming: &State) -> MergeReport {
    dedupe_base(base);
    merge_into_unique(base, incoming)
}

/// [`merge_into`] for a `base` known to repeat no id within its messages,
/// truth entries or tombstones — as every state [`merge_into`] leaves — so
/// merging many files in a row need not look for repeats before each one.
/// (With repeats in `base` the result is unspecified; use [`merge_into`].)
pub fn merge_into_unique(base: &mut State, incoming: &State) -> MergeReport {
    let mut report = MergeReport::default();
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

/// Joins the versions of ids repeated within one list into the first
/// occurrence and drops the others; false when no id repeats.
fn collapse<T>(items: &mut Vec<T>, id: impl Fn(&T) -> &str, join: impl Fn(&T, &T) -> T) -> bool {
    let mut first: HashMap<&str, usize> = HashMap::with_capacity(items.len());
    let mut repeats: Vec<(usize, usize)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match first.get(id(item)) {
            Some(&j) => repeats.push((j, i)),
            None => {
                first.insert(id(item), i);
            }
        }
    }
    drop(first);
    if repeats.is_empty() {
        return false;
    }
    let mut drop_mark = vec![false; items.len()];
    for (j, i) in repeats {
        let joined = join(&items[j], &items[i]);
        items[j] = joined;
        drop_mark[i] = true;
    }
    let mut k = 0;
    items.retain(|_| {
        k += 1;
        !drop_mark[k - 1]
    });
    true
}

/// Collapses ids repeated within the base (hand edits; `wo validate` warns)
/// by the same joins that resolve them across files. Without this the base's
/// duplicates would survive while an incoming file's would not, and
/// merge(a, b) would differ from merge(b, a).
fn dedupe_base(base: &mut State) {
    let repeated = {
        let mut seen = std::collections::HashSet::with_capacity(base.messages().len());
        base.messages().iter().any(|m| !seen.insert(m.id.as_str()))
    };
    if repeated {
        let list = base.messages_mut();
        collapse(list, |m| &m.id, join_message);
        if !list.is_sorted_by(|a, b| a.order_key() <= b.order_key()) {
            list.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
        }
    }
    collapse(&mut base.truth.trust, |t| &t.id, join_truth);
    collapse(&mut base.truth.deleted, |d| &d.id, join_tombstone);
}

fn merge_messages(base: &mut State, incoming: &State, report: &mut MergeReport) {
    // Position in the base of each id, as far as lookups below need it: with
    // few incoming messages (an export whose repeats of the base were left
    // out on the way in) only their ids are kept, sparing a map of the whole
    // base per file. Of an id repeated in the base, the last position.
    let index: HashMap<&str, usize> = if incoming.messages().len() * 16 < base.messages().len() {
        let wanted: std::collections::HashSet<&str> =
            incoming.messages().iter().map(|m| m.id.as_str()).collect();
        base.messages()
            .iter()
            .enumerate()
            .filter(|(_, m)| wanted.contains(m.id.as_str()))
            .map(|(i, m)| (m.id.as_str(), i))
            .collect()
    } else {
        base.messages()
            .iter()
            .enumerate()
            .map(|(i, m)| (m.id.as_str(), i))
            .collect()
    };
    let mut added: Vec<Message> = Vec::new();
    // Index in the base → its joined version.
    let mut joined: HashMap<usize, Message> = HashMap::new();
    let mut added_ids: HashMap<&str, usize> = HashMap::new();
    for m in incoming.messages() {
        match index.get(m.id.as_str()) {
            Some(&i) => {
                let current = joined.get(&i).unwrap_or(&base.messages()[i]);
                if current == m {
                    report.messages_skipped += 1;
                    continue;
                }
                let j = join_message(current, m);
                if j == *current {
                    report.messages_skipped += 1;
                } else {
                    joined.insert(i, j);
                }
            }
            None => match added_ids.get(m.id.as_str()) {
                // The same id twice within the incoming file.
                Some(&k) => {
                    added[k] = join_message(&added[k], m);
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
    if !joined.is_empty() {
        let mut changed: Vec<(usize, Message)> = joined.into_iter().collect();
        changed.sort_by_key(|(i, _)| *i);
        let list = base.messages_mut();
        for (i, m) in changed {
            if list[i] != m {
                report.messages_replaced.push(m.id.clone());
                list[i] = m;
            }
        }
        // A joined version may carry another timestamp.
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
        // `push_message` without its search for the id (the ids are new,
        // checked above): that search made a large import into a small
        // state quadratic.
        for m in added {
            let pos = base
                .messages
                .partition_point(|x| x.order_key() <= m.order_key());
            base.insert_message_at(pos, m);
        }
    } else {
        let list = base.messages_mut();
        list.extend(added);
        list.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
    }
}

fn merge_truth(base: &mut State, incoming: &State, report: &mut MergeReport) {
    // Tombstones first: a union keeping the latest deletion of each id.
    let mut tomb_index: HashMap<String, usize> = base
        .truth
        .deleted
        .iter()
        .enumerate()
        .map(|(i, d)| (d.id.clone(), i))
        .collect();
    for t in &incoming.truth.deleted {
        match tomb_index.get(&t.id) {
            Some(&i) => {
                let d = &mut base.truth.deleted[i];
                if d != t {
                    *d = join_tombstone(d, t);
                }
            }
            None => {
                tomb_index.insert(t.id.clone(), base.truth.deleted.len());
                base.truth.deleted.push(t.clone());
                report.tombstones_added.push(t.id.clone());
            }
        }
    }
    drop(tomb_index);
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
    let base_len = trust.len();
    for e in &incoming.truth.trust {
        match index.get(&e.id) {
            Some(&i) if trust[i] == *e => report.truth_skipped += 1,
            Some(&i) => {
                let j = join_truth(&trust[i], e);
                if j == trust[i] {
                    report.truth_skipped += 1;
                } else {
                    if i < base_len && !report.truth_updated.contains(&e.id) {
                        report.truth_updated.push(e.id.clone());
                    }
                    trust[i] = j;
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
