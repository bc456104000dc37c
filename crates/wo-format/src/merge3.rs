//! Three-way merge: a writer's own changes on top of the file as it is now.
//!
//! A process that loaded `llm.json` and later writes it must not write back
//! its whole copy: meanwhile an editor may have renamed an entry or deleted
//! a message, and a two-way union would revert the one and resurrect the
//! other. [`merge3`] compares three versions per record id — the **base**
//! (what this process last read or wrote, kept cheaply as a [`Baseline`]),
//! **mine** (the process's state now) and **theirs** (the file now) — and
//! applies only what *mine* changed since the base:
//!
//! | mine vs base | theirs vs base | result |
//! |---|---|---|
//! | unchanged | anything (even deleted) | theirs |
//! | added / changed | unchanged | mine |
//! | changed | changed | field-wise: each side's own changes; a field both changed takes the [`merge_into`] result |
//! | changed | deleted | mine (an acknowledged write is never dropped) |
//! | deleted (tombstone) | — | stays deleted (tombstone rules: a later edit survives) |
//! | deleted (no tombstone) | unchanged | deleted |
//!
//! `context`, `retrieval_prefs`, `version`, `schema` and unknown top-level
//! and `truth` fields follow the same rule (mine if I changed it, else theirs).
//!
//! The baseline keeps a 128-bit fingerprint per message instead of a copy
//! (a transcript can hold 100k messages); truth entries, tombstones and the
//! small top-level fields are kept whole so a record changed on both sides
//! can be merged field by field.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::merge::merge_into;
use crate::model::{Extra, Message, RetrievalPrefs, Tombstone, TruthEntry};
use crate::state::State;

/// A 128-bit content fingerprint of one record.
pub type Fingerprint = u128;

/// What this process last read or wrote, as far as [`merge3`] needs it.
#[derive(Clone, Debug, Default)]
pub struct Baseline {
    /// Fingerprint per message id; `None` in the light form, where the base's
    /// messages are only known as the unchanged prefix of the writer's state.
    messages: Option<HashMap<String, Fingerprint>>,
    /// Number of messages in the base (positions `0..message_count` of a
    /// state whose unchanged prefix covers them are exactly the base's).
    message_count: usize,
    trust: Vec<TruthEntry>,
    deleted: Vec<Tombstone>,
    version: u64,
    schema: String,
    context: String,
    retrieval_prefs: RetrievalPrefs,
    truth_extra: Extra,
    extra: Extra,
}

impl Baseline {
    /// The baseline of `state` as it is now.
    pub fn of(state: &State) -> Baseline {
        let mut b = Baseline::default();
        b.rebuild_messages(state);
        b.set_small(state);
        b
    }

    /// The light form: no message fingerprints, only the count. Exact as
    /// long as the writer's unchanged prefix (see [`merge3`]) still covers
    /// every base message — true for a change that only appends, which is
    /// what a read-modify-write under the lock nearly always is. If a change
    /// rewrote older messages, those are merged with theirs as in a two-way
    /// merge (nothing lost; a concurrent hand deletion of one of them is
    /// undone).
    pub fn light(state: &State) -> Baseline {
        let mut b = Baseline {
            message_count: state.messages().len(),
            ..Baseline::default()
        };
        b.set_small(state);
        b
    }

    /// True when every base message is fingerprinted (not the light form).
    pub fn is_exact(&self) -> bool {
        self.messages.is_some()
    }

    fn fingerprint(&self, id: &str) -> Option<&Fingerprint> {
        self.messages.as_ref().and_then(|m| m.get(id))
    }

    /// Number of messages in the base.
    pub fn message_count(&self) -> usize {
        self.message_count
    }

    /// Moves the baseline to `state` after it was written, where the first
    /// `unchanged` messages of `state` are known to be the base's own
    /// (see [`State::clean_prefix`]): a change that only added messages —
    /// at the end, or sorted in among the last ones, as concurrent turns
    /// dated when they were asked are — fingerprints only the messages
    /// from the first insertion on, not the whole transcript.
    pub fn advance(&mut self, state: &State, unchanged: usize) {
        let messages = state.messages();
        if self.messages.is_some() && !self.advance_tail(messages, unchanged) {
            self.rebuild_messages(state);
        }
        self.message_count = messages.len();
        self.set_small(state);
    }

    /// The fast path of [`Baseline::advance`]: fingerprints `messages`
    /// from `unchanged` on into the map. Exact when nothing of the base was
    /// removed, and that is what the count shows: the map then holds the
    /// base's ids and the state's, and those are one set exactly when it
    /// has as many ids as the state has messages (ids are unique). False
    /// (the map is then stale; the caller rebuilds it) when a base message
    /// is gone or `unchanged` does not hold.
    fn advance_tail(&mut self, messages: &[Message], unchanged: usize) -> bool {
        let Some(map) = &mut self.messages else {
            return false;
        };
        if unchanged > self.message_count || unchanged > messages.len() {
            return false;
        }
        for m in &messages[unchanged..] {
            map.insert(m.id.clone(), message_fingerprint(m));
        }
        map.len() == messages.len()
    }

    fn rebuild_messages(&mut self, state: &State) {
        self.messages = Some(
            state
                .messages()
                .iter()
                .map(|m| (m.id.clone(), message_fingerprint(m)))
                .collect(),
        );
        self.message_count = state.messages().len();
    }

    fn set_small(&mut self, state: &State) {
        self.trust.clone_from(&state.truth.trust);
        self.deleted.clone_from(&state.truth.deleted);
        self.version = state.version;
        self.schema.clone_from(&state.schema);
        self.context.clone_from(&state.context);
        self.retrieval_prefs
            .clone_from(&state.truth.retrieval_prefs);
        self.truth_extra.clone_from(&state.truth.extra);
        self.extra.clone_from(&state.extra);
    }
}

/// What [`merge3`] did with this process's changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Merge3Report {
    /// Records (messages, truth entries, tombstones) this process added or
    /// changed that were carried over onto theirs.
    pub mine_applied: usize,
    /// Ids both sides changed, merged field by field (or record by record).
    pub conflicts: Vec<String>,
    /// Records this process removed that were removed from theirs too.
    pub mine_removed: usize,
}

/// The merged state, the baseline of `theirs` (the new base: what is on
/// disk) and a report.
#[derive(Debug)]
pub struct Merged {
    /// The merged state: `theirs` with this writer's own changes on top.
    pub state: State,
    /// The baseline of `theirs` (what is on disk now): the base of the next merge.
    pub baseline: Baseline,
    /// What was applied and what conflicted.
    pub report: Merge3Report,
}

/// Applies the changes `mine` made since `base` onto `theirs` (the file as
/// it is now). `mine_unchanged`: how many leading messages of `mine` are
/// known to be the base's, untouched (0 if unknown: every message is then
/// compared by fingerprint). The result's [`State::clean_prefix`] counts the
/// leading messages unchanged relative to `theirs`.
pub fn merge3(base: &Baseline, mine: &State, mine_unchanged: usize, theirs: State) -> Merged {
    let baseline = Baseline::of(&theirs);
    let mut out = theirs;
    out.mark_saved();
    let mut report = Merge3Report::default();
    merge_messages(base, mine, mine_unchanged, &mut out, &mut report);
    merge_truth(base, mine, &mut out, &mut report);
    merge_small(base, mine, &mut out);
    Merged {
        state: out,
        baseline,
        report,
    }
}

fn merge_messages(
    base: &Baseline,
    mine: &State,
    mine_unchanged: usize,
    out: &mut State,
    report: &mut Merge3Report,
) {
    let k = mine_unchanged
        .min(mine.messages().len())
        .min(base.message_count);
    let changed: Vec<&Message> = mine.messages()[k..]
        .iter()
        .filter(|m| base.fingerprint(&m.id) != Some(&message_fingerprint(m)))
        .collect();
    // The first `k` messages are the base's; only when `k` falls short of
    // the base can a base message be missing from mine.
    let removed: Vec<&str> = match &base.messages {
        Some(map) if k < base.message_count => {
            let ids: HashSet<&str> = mine.messages().iter().map(|m| m.id.as_str()).collect();
            map.keys()
                .map(String::as_str)
                .filter(|id| !ids.contains(id))
                .collect()
        }
        _ => Vec::new(),
    };
    if changed.is_empty() && removed.is_empty() {
        return;
    }
    let index: HashMap<&str, usize> = out
        .messages()
        .iter()
        .enumerate()
        .map(|(i, m)| (m.id.as_str(), i))
        .collect();
    let mut replace: Vec<(usize, Message)> = Vec::new();
    let mut add: Vec<Message> = Vec::new();
    let mut drop_at: HashSet<usize> = HashSet::new();
    for m in changed {
        match index.get(m.id.as_str()) {
            Some(&i) => {
                let t = &out.messages()[i];
                let tf = message_fingerprint(t);
                if tf == message_fingerprint(m) {
                    continue;
                }
                report.mine_applied += 1;
                if base.fingerprint(&m.id) == Some(&tf) {
                    replace.push((i, m.clone()));
                } else {
                    report.conflicts.push(m.id.clone());
                    replace.push((i, merge_message(t, m)));
                }
            }
            // Added by me, or changed by me and deleted by them: keep mine.
            None => {
                report.mine_applied += 1;
                add.push(m.clone());
            }
        }
    }
    for id in removed {
        if let Some(&i) = index.get(id)
            && base.fingerprint(id) == Some(&message_fingerprint(&out.messages()[i]))
        {
            report.mine_removed += 1;
            drop_at.insert(i);
        }
    }
    drop(index);
    if replace.is_empty() && drop_at.is_empty() {
        // Appends keep the unchanged prefix (the writer's fast path).
        add.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
        for m in add {
            out.push_message(m);
        }
        return;
    }
    let list = out.messages_mut();
    for (i, m) in replace {
        list[i] = m;
    }
    if !drop_at.is_empty() {
        let mut i = 0;
        list.retain(|_| {
            i += 1;
            !drop_at.contains(&(i - 1))
        });
    }
    list.extend(add);
    if !list.is_sorted_by(|a, b| a.order_key() <= b.order_key()) {
        list.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
    }
}

fn merge_truth(base: &Baseline, mine: &State, out: &mut State, report: &mut Merge3Report) {
    // Tombstones first, so burial below sees the result's.
    let base_tombs: HashMap<&str, &Tombstone> =
        base.deleted.iter().map(|d| (d.id.as_str(), d)).collect();
    let mut my_tombs: Vec<&Tombstone> = Vec::new();
    for d in &mine.truth.deleted {
        if base_tombs.get(d.id.as_str()) == Some(&d) {
            continue;
        }
        my_tombs.push(d);
        report.mine_applied += 1;
        match out.truth.deleted.iter_mut().find(|t| t.id == d.id) {
            Some(t) if base_tombs.get(d.id.as_str()) == Some(&&*t) => *t = d.clone(),
            Some(t) => {
                if d.date > t.date {
                    *t = d.clone();
                }
            }
            None => out.truth.deleted.push(d.clone()),
        }
    }
    let mine_tomb_ids: HashSet<&str> = mine.truth.deleted.iter().map(|d| d.id.as_str()).collect();
    for b in &base.deleted {
        if !mine_tomb_ids.contains(b.id.as_str()) {
            out.truth.deleted.retain(|t| t != b);
        }
    }
    out.truth.deleted.sort_by(|a, b| a.id.cmp(&b.id));

    // Entries.
    let base_trust: HashMap<&str, &TruthEntry> =
        base.trust.iter().map(|t| (t.id.as_str(), t)).collect();
    let mine_ids: HashSet<&str> = mine.truth.trust.iter().map(|t| t.id.as_str()).collect();
    let mut mine_changed: HashSet<String> = HashSet::new();
    for e in &mine.truth.trust {
        let b = base_trust.get(e.id.as_str()).copied();
        if b == Some(e) {
            continue;
        }
        match out.truth.trust.iter().position(|t| t.id == e.id) {
            Some(i) => {
                let t = &out.truth.trust[i];
                if t == e {
                    continue;
                }
                report.mine_applied += 1;
                mine_changed.insert(e.id.clone());
                out.truth.trust[i] = match b {
                    Some(b) if b == t => e.clone(),
                    Some(b) => {
                        report.conflicts.push(e.id.clone());
                        merge_entry_fields(b, t, e)
                    }
                    None => {
                        report.conflicts.push(e.id.clone());
                        merge_entry(t, e)
                    }
                };
            }
            None => {
                report.mine_applied += 1;
                mine_changed.insert(e.id.clone());
                out.truth.trust.push(e.clone());
            }
        }
    }
    // Removed by me: gone from theirs too, unless they changed it.
    out.truth.trust.retain(|t| {
        if mine_ids.contains(t.id.as_str()) {
            return true;
        }
        match base_trust.get(t.id.as_str()) {
            Some(b) if *b == t => {
                report.mine_removed += 1;
                false
            }
            _ => true,
        }
    });
    // Tombstone rules between the sides: my deletion buries their version
    // unless edited after it; their deletion buries my change likewise.
    let tombs: HashMap<&str, &Tombstone> = out
        .truth
        .deleted
        .iter()
        .map(|d| (d.id.as_str(), d))
        .collect();
    let my_tomb_ids: HashSet<&str> = my_tombs.iter().map(|d| d.id.as_str()).collect();
    out.truth.trust.retain(|e| {
        let relevant = my_tomb_ids.contains(e.id.as_str()) || mine_changed.contains(&e.id);
        !(relevant
            && tombs
                .get(e.id.as_str())
                .is_some_and(|d| *e.effective_update() <= d.date))
    });
}

fn merge_small(base: &Baseline, mine: &State, out: &mut State) {
    if mine.version != base.version {
        out.version = mine.version;
    }
    if mine.schema != base.schema {
        out.schema.clone_from(&mine.schema);
    }
    if mine.context != base.context {
        out.context.clone_from(&mine.context);
    }
    if mine.truth.retrieval_prefs != base.retrieval_prefs {
        out.truth.retrieval_prefs = merge_prefs(
            &base.retrieval_prefs,
            &mine.truth.retrieval_prefs,
            &out.truth.retrieval_prefs,
        );
    }
    merge_map(&base.truth_extra, &mine.truth.extra, &mut out.truth.extra);
    merge_map(&base.extra, &mine.extra, &mut out.extra);
    if mine.date > out.date {
        out.date = mine.date.clone();
    }
}

/// Key by key: mine where mine changed it since the base, else theirs.
fn merge_map<V: PartialEq + Clone>(
    base: &BTreeMap<String, V>,
    mine: &BTreeMap<String, V>,
    out: &mut BTreeMap<String, V>,
) {
    for (k, v) in mine {
        if base.get(k) != Some(v) {
            out.insert(k.clone(), v.clone());
        }
    }
    for (k, v) in base {
        if !mine.contains_key(k) && out.get(k) == Some(v) {
            out.remove(k);
        }
    }
}

fn merge_prefs(
    base: &RetrievalPrefs,
    mine: &RetrievalPrefs,
    theirs: &RetrievalPrefs,
) -> RetrievalPrefs {
    let (Some(b), Some(m), Some(t)) = (as_object(base), as_object(mine), as_object(theirs)) else {
        return mine.clone();
    };
    let mut out = t;
    merge_map(&b, &m, &mut out);
    serde_json::from_value(Value::Object(out.into_iter().collect()))
        .unwrap_or_else(|_| mine.clone())
}

fn as_object<T: Serialize>(v: &T) -> Option<BTreeMap<String, Value>> {
    match serde_json::to_value(v) {
        Ok(Value::Object(m)) => Some(m.into_iter().collect()),
        _ => None,
    }
}

/// One message both sides changed: the ordinary merge of the two versions.
fn merge_message(theirs: &Message, mine: &Message) -> Message {
    let mut a = State::new(theirs.timestamp.clone());
    a.push_message(theirs.clone());
    let mut b = State::new(mine.timestamp.clone());
    b.push_message(mine.clone());
    merge_into(&mut a, &b);
    a.messages_mut().pop().unwrap_or_else(|| mine.clone())
}

/// One truth entry both sides changed, without a base: the ordinary merge.
fn merge_entry(theirs: &TruthEntry, mine: &TruthEntry) -> TruthEntry {
    let mut a = State::new(theirs.timestamp.clone());
    a.truth.trust.push(theirs.clone());
    let mut b = State::new(mine.timestamp.clone());
    b.truth.trust.push(mine.clone());
    merge_into(&mut a, &b);
    a.truth.trust.pop().unwrap_or_else(|| mine.clone())
}

/// One truth entry both sides changed: each side's own field changes; a
/// field both changed differently takes the ordinary merge's value.
fn merge_entry_fields(base: &TruthEntry, theirs: &TruthEntry, mine: &TruthEntry) -> TruthEntry {
    let plain = merge_entry(theirs, mine);
    let (Some(b), Some(t), Some(m), Some(p)) = (
        as_object(base),
        as_object(theirs),
        as_object(mine),
        as_object(&plain),
    ) else {
        return plain;
    };
    let keys: HashSet<&String> = b.keys().chain(t.keys()).chain(m.keys()).collect();
    let mut out = Map::new();
    for k in keys {
        let (bv, tv, mv) = (b.get(k), t.get(k), m.get(k));
        let v = if mv == bv {
            tv
        } else if tv == bv || tv == mv {
            mv
        } else {
            p.get(k)
        };
        if let Some(v) = v {
            out.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(Value::Object(out)).unwrap_or(plain)
}

/// The fingerprint of a message's content (every field, unknown ones too).
pub fn message_fingerprint(m: &Message) -> Fingerprint {
    // Exhaustive on purpose: a field added to `Message` must be hashed too,
    // or a change to it would look like no change.
    let Message {
        id,
        title,
        username,
        timestamp,
        content,
        role,
        parent,
        provider,
        model,
        usage,
        sources,
        extra,
    } = m;
    let mut h = FpHasher::new();
    h.feed(id.as_bytes());
    h.feed(title.as_bytes());
    h.feed(username.as_bytes());
    h.feed(timestamp.as_str().as_bytes());
    h.feed(content.as_bytes());
    h.feed(role.map_or("", |r| r.as_str()).as_bytes());
    h.opt(parent.as_deref());
    h.opt(provider.as_deref());
    h.opt(model.as_deref());
    match usage {
        Some(u) => h.json(u),
        None => h.word(0),
    }
    match sources {
        Some(list) => {
            h.word(list.len() as u64 + 1);
            for s in list {
                h.feed(s.as_bytes());
            }
        }
        None => h.word(0),
    }
    if extra.is_empty() {
        h.word(0);
    } else {
        h.json(extra);
    }
    h.finish()
}

/// A small, fast non-cryptographic 128-bit hash (two independent
/// multiply-rotate lanes). It only has to tell versions of one record apart
/// — nobody gains from a collision — and must be cheap enough to run over a
/// 50 MB transcript.
struct FpHasher {
    a: u64,
    b: u64,
}

impl FpHasher {
    fn new() -> Self {
        FpHasher {
            a: 0x243F_6A88_85A3_08D3,
            b: 0x1319_8A2E_0370_7344,
        }
    }

    #[inline]
    fn word(&mut self, w: u64) {
        self.a = (self.a ^ w)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(31);
        self.b = (self.b.rotate_left(23) ^ w).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    }

    fn feed(&mut self, bytes: &[u8]) {
        self.word(bytes.len() as u64);
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.word(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.word(u64::from_le_bytes(w));
        }
    }

    fn opt(&mut self, s: Option<&str>) {
        match s {
            Some(s) => {
                self.word(1);
                self.feed(s.as_bytes());
            }
            None => self.word(0),
        }
    }

    fn json<T: Serialize + ?Sized>(&mut self, v: &T) {
        let bytes = serde_json::to_vec(v).unwrap_or_default();
        self.word(2);
        self.feed(&bytes);
    }

    fn finish(&self) -> Fingerprint {
        fn mix(mut x: u64) -> u64 {
            x ^= x >> 33;
            x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
            x ^= x >> 33;
            x = x.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
            x ^ (x >> 33)
        }
        (u128::from(mix(self.a)) << 64) | u128::from(mix(self.b ^ self.a.rotate_left(17)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Timestamp;

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_unix(1_700_000_000 + s)
    }

    fn msg(i: i64, text: &str) -> Message {
        Message::new("alec", ts(i), format!("m{i}"), format!("<p>{text}</p>"))
    }

    fn base_state() -> State {
        let mut s = State::new(ts(0));
        for i in 0..5 {
            s.push_message(msg(i, "x"));
        }
        s.add_truth(TruthEntry::new("fact", ts(1), 0.5, "<p>f</p>"));
        s.add_truth(TruthEntry::new("other", ts(2), 0.5, "<p>o</p>"));
        s.mark_saved();
        s
    }

    #[test]
    fn their_rename_and_deletion_survive_my_append() {
        let base = base_state();
        let b = Baseline::of(&base);
        let mut mine = base.clone();
        mine.push_message(msg(10, "mine"));
        let mut theirs = base.clone();
        theirs.messages_mut()[1].title = "renamed".into();
        theirs.messages_mut().remove(3);
        theirs.truth.trust[0].title = "renamed fact".into();
        let gone = base.messages()[3].id.clone();
        let k = mine.clean_prefix();
        let merged = merge3(&b, &mine, k, theirs);
        let s = merged.state;
        assert_eq!(s.messages()[1].title, "renamed");
        assert!(s.message(&gone).is_none(), "hand deletion stays deleted");
        assert!(s.messages().iter().any(|m| m.title == "m10"));
        assert_eq!(s.truth.trust[0].title, "renamed fact");
        assert_eq!(s.messages().len(), 5);
        assert_eq!(merged.report.mine_applied, 1);
        assert!(merged.report.conflicts.is_empty());
    }

    #[test]
    fn both_change_one_entry_field_by_field() {
        let base = base_state();
        let b = Baseline::of(&base);
        let mut mine = base.clone();
        mine.truth.trust[0].refs = Some(3);
        let mut theirs = base.clone();
        theirs.truth.trust[0].title = "hand title".into();
        let merged = merge3(&b, &mine, mine.messages().len(), theirs);
        let e = &merged.state.truth.trust[0];
        assert_eq!(e.title, "hand title");
        assert_eq!(e.refs, Some(3));
    }

    #[test]
    fn my_deletion_stays_deleted_and_theirs_stays_too() {
        let base = base_state();
        let b = Baseline::of(&base);
        let mut mine = base.clone();
        let id = mine.truth.trust[1].id.clone();
        mine.delete_truth(&id, ts(100));
        let mut theirs = base.clone();
        // They renamed it by hand (no `updated`): my tombstone still buries it.
        theirs.truth.trust[1].title = "renamed".into();
        let other = theirs.truth.trust[0].id.clone();
        theirs.truth.trust.remove(0);
        let s = merge3(&b, &mine, mine.messages().len(), theirs).state;
        assert!(s.truth_entry(&id).is_none());
        assert!(s.truth.deleted.iter().any(|d| d.id == id));
        assert!(s.truth_entry(&other).is_none(), "their deletion kept");
    }

    #[test]
    fn my_change_to_what_they_deleted_is_kept() {
        let base = base_state();
        let b = Baseline::of(&base);
        let mut mine = base.clone();
        mine.messages_mut()[2].title = "edited by me".into();
        let mut theirs = base.clone();
        theirs.messages_mut().remove(2);
        let s = merge3(&b, &mine, 0, theirs).state;
        assert!(s.messages().iter().any(|m| m.title == "edited by me"));
        assert_eq!(s.messages().len(), 5);
    }

    #[test]
    fn small_fields_three_way() {
        let mut base = base_state();
        base.extra.insert("x_keep".into(), Value::from(1).into());
        let b = Baseline::of(&base);
        let mut mine = base.clone();
        mine.context = "<p>mine</p>".into();
        let mut theirs = base.clone();
        theirs.truth.retrieval_prefs.max_entries = Some(3);
        theirs
            .extra
            .insert("x_theirs".into(), Value::from(2).into());
        theirs.extra.remove("x_keep");
        let s = merge3(&b, &mine, 5, theirs).state;
        assert_eq!(s.context, "<p>mine</p>");
        assert_eq!(s.truth.retrieval_prefs.max_entries, Some(3));
        assert!(s.extra.contains_key("x_theirs"));
        assert!(!s.extra.contains_key("x_keep"), "their removal kept");
    }

    #[test]
    fn advance_after_append_equals_rebuild() {
        let base = base_state();
        let mut b = Baseline::of(&base);
        let mut s = base.clone();
        s.push_message(msg(20, "new"));
        b.advance(&s, s.clean_prefix());
        let fresh = Baseline::of(&s);
        assert_eq!(b.messages, fresh.messages);
        assert_eq!(b.message_count, 6);
    }

    /// Messages sorted in among the last ones (a concurrent turn dated
    /// before turns committed ahead of it): the advanced baseline is the
    /// rebuilt one, and so is it when an insertion comes with a removal or
    /// an edit of an older message.
    #[test]
    fn advance_after_insertions_equals_rebuild() {
        let base = base_state();
        let mut b = Baseline::of(&base);
        let mut s = base.clone();
        s.push_message(msg(20, "late"));
        s.push_message(msg(3, "sorted in before m3's successor"));
        assert!(s.clean_prefix() < base.messages().len(), "an insertion");
        b.advance(&s, s.clean_prefix());
        assert_eq!(b.messages, Baseline::of(&s).messages);
        assert_eq!(b.message_count, 7);

        // An insertion and a removal of a base message: the removed id
        // must leave the map.
        let mut b = Baseline::of(&base);
        let mut s = base.clone();
        s.push_message(msg(2, "in the middle"));
        let k = s.clean_prefix();
        let gone = s.messages()[4].id.clone();
        s.messages_mut().retain(|m| m.id != gone);
        b.advance(&s, k.min(s.clean_prefix()));
        assert_eq!(b.messages, Baseline::of(&s).messages);
        assert!(b.fingerprint(&gone).is_none());

        // An edit inside the unchanged prefix that the caller reports:
        // its new fingerprint is taken.
        let mut b = Baseline::of(&base);
        let mut s = base.clone();
        s.messages_mut()[1].title = "edited".into();
        s.push_message(msg(30, "new"));
        b.advance(&s, s.clean_prefix());
        assert_eq!(b.messages, Baseline::of(&s).messages);

        // A stale `unchanged` (past the base) falls back to a rebuild.
        let mut b = Baseline::of(&base);
        let mut s = base.clone();
        s.push_message(msg(40, "new"));
        b.advance(&s, 99);
        assert_eq!(b.messages, Baseline::of(&s).messages);
    }

    #[test]
    fn fingerprints_see_every_field() {
        let m = msg(1, "a");
        let mut n = m.clone();
        n.extra.insert("x_note".into(), Value::from("hi").into());
        assert_ne!(message_fingerprint(&m), message_fingerprint(&n));
        let mut n = m.clone();
        n.title.push('!');
        assert_ne!(message_fingerprint(&m), message_fingerprint(&n));
        let mut n = m.clone();
        n.parent = Some(String::new());
        assert_ne!(message_fingerprint(&m), message_fingerprint(&n));
        assert_eq!(message_fingerprint(&m), message_fingerprint(&m.clone()));
    }
}
