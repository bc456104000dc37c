//! product §3: merge is commutative, associative and idempotent on the
//! collections (messages, truth entries, tombstones), agrees with a direct
//! statement of the rules (a field-wise union: no field of any copy is
//! lost), and never resurrects a deleted truth entry. Generated records
//! carry extension fields, with numbers `Value` cannot hold exactly.
//!
//! `context`, `retrieval_prefs` and unknown top-level fields are kept from
//! the base on purpose, and `date` becomes the latest; so these properties
//! compare the collections, not whole states.

mod common;

use std::collections::BTreeMap;

use common::strategies::state;
use proptest::prelude::*;
use wo_format::merge::{merge_all, merge_into, merge_into_unique};
use wo_format::{Message, State, Timestamp, Tombstone, TruthEntry};

/// The collections of a state: messages in file order, truth entries and
/// tombstones sorted by id (their order in the file carries no meaning).
#[derive(Debug, PartialEq)]
struct Collections {
    messages: Vec<Message>,
    trust: Vec<TruthEntry>,
    deleted: Vec<Tombstone>,
}

fn collections(s: &State) -> Collections {
    let mut trust = s.truth.trust.clone();
    trust.sort_by(|a, b| a.id.cmp(&b.id));
    let mut deleted = s.truth.deleted.clone();
    deleted.sort_by(|a, b| a.id.cmp(&b.id));
    Collections {
        messages: s.messages().to_vec(),
        trust,
        deleted,
    }
}

fn merged(base: &State, incoming: &[&State]) -> State {
    merge_all(base, incoming.iter().copied()).0
}

fn empty() -> State {
    State::new(Timestamp::parse("2020-01-01T00:00:00Z").unwrap())
}

fn json(v: &impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

/// A record as its fields' compact JSON texts, by name.
fn fields<T: serde::Serialize>(v: &T) -> BTreeMap<String, String> {
    let text = serde_json::to_string(v).unwrap();
    let raw: BTreeMap<String, Box<serde_json::value::RawValue>> =
        serde_json::from_str(&text).unwrap();
    raw.into_iter()
        .map(|(k, v)| (k, v.get().to_owned()))
        .collect()
}

/// The per-key maximum of two field maps (a missing field is the least).
fn join_fields(a: &mut BTreeMap<String, String>, b: &BTreeMap<String, String>) {
    for (k, v) in b {
        let e = a.entry(k.clone()).or_insert_with(|| v.clone());
        if v.as_bytes() > e.as_bytes() {
            *e = v.clone();
        }
    }
}

fn from_fields<T: serde::de::DeserializeOwned>(f: &BTreeMap<String, String>) -> T {
    let body: Vec<String> = f
        .iter()
        .map(|(k, v)| format!("{}:{v}", serde_json::to_string(k).unwrap()))
        .collect();
    serde_json::from_str(&format!("{{{}}}", body.join(","))).unwrap()
}

/// A truth entry's own fields (without extensions), as canonical JSON.
fn core(t: &TruthEntry) -> Vec<u8> {
    let mut c = t.clone();
    c.extra.clear();
    json(&c)
}

/// product §3 stated directly over all inputs at once: messages united by id,
/// each field of a repeated id the larger canonical JSON of its values (a
/// missing field is the least) but the title, which comes with its
/// `retitled` stamp from the copy renamed last, sorted by (timestamp, id); truth united by
/// id, the version with the later `updated` (else `timestamp`) winning, ties
/// to the larger canonical JSON of its own fields, and the extension fields
/// of every copy of that winning version united key by key; tombstones
/// united by id keeping the latest date, extensions united; an entry not
/// updated after its tombstone is gone.
fn oracle(states: &[&State]) -> Collections {
    let mut messages: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut trust: BTreeMap<String, (TruthEntry, BTreeMap<String, String>)> = BTreeMap::new();
    let mut deleted: BTreeMap<String, Tombstone> = BTreeMap::new();
    let extra_fields = |extra: &wo_format::Extra| -> BTreeMap<String, String> {
        extra
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().to_owned()))
            .collect()
    };
    // A message's title comes with its rename stamp, from the copy renamed
    // last (never renamed: the least; ties: stamp text, then title).
    let mut titles: BTreeMap<String, &Message> = BTreeMap::new();
    let title_key = |m: &Message| {
        let raw = m.extra.get(wo_format::model::RETITLED_KEY);
        (
            m.retitled(),
            raw.map(|r| r.as_str().to_owned()),
            json(&m.title),
        )
    };
    for s in states {
        for m in s.messages() {
            join_fields(messages.entry(m.id.clone()).or_default(), &fields(m));
            let best = titles.entry(m.id.clone()).or_insert(m);
            if title_key(m) > title_key(best) {
                *best = m;
            }
        }
        for t in &s.truth.trust {
            let e = trust
                .entry(t.id.clone())
                .or_insert_with(|| (t.clone(), BTreeMap::new()));
            let ord = (t.effective_update(), core(t)).cmp(&(e.0.effective_update(), core(&e.0)));
            if ord == std::cmp::Ordering::Greater {
                *e = (t.clone(), BTreeMap::new());
            }
            if ord != std::cmp::Ordering::Less {
                join_fields(&mut e.1, &extra_fields(&t.extra));
            }
        }
        for d in &s.truth.deleted {
            let e = deleted.entry(d.id.clone()).or_insert_with(|| d.clone());
            let mut ext = extra_fields(&e.extra);
            join_fields(&mut ext, &extra_fields(&d.extra));
            e.date = e.date.clone().max(d.date.clone());
            e.extra = ext
                .into_iter()
                .map(|(k, v)| (k, wo_format::RawJson::parse(&v).unwrap()))
                .collect();
        }
    }
    let mut trust: BTreeMap<String, TruthEntry> = trust
        .into_iter()
        .map(|(id, (mut t, ext))| {
            t.extra = ext
                .into_iter()
                .map(|(k, v)| (k, wo_format::RawJson::parse(&v).unwrap()))
                .collect();
            (id, t)
        })
        .collect();
    trust.retain(|id, t| {
        deleted
            .get(id)
            .is_none_or(|d| *t.effective_update() > d.date)
    });
    for (id, f) in &mut messages {
        let m = titles[id];
        f.insert("title".into(), String::from_utf8(json(&m.title)).unwrap());
        match m.extra.get(wo_format::model::RETITLED_KEY) {
            Some(raw) => f.insert("retitled".into(), raw.as_str().to_owned()),
            None => f.remove("retitled"),
        };
    }
    let mut messages: Vec<Message> = messages.values().map(from_fields).collect();
    messages.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
    Collections {
        messages,
        trust: trust.into_values().collect(),
        deleted: deleted.into_values().collect(),
    }
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: common::cases(256),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn merge_follows_the_rules_of_spec_3(a in state(), b in state(), c in state()) {
        prop_assert_eq!(collections(&merged(&a, &[&b, &c])), oracle(&[&a, &b, &c]));
    }

    #[test]
    fn merge_is_commutative(a in state(), b in state()) {
        prop_assert_eq!(collections(&merged(&a, &[&b])), collections(&merged(&b, &[&a])));
    }

    #[test]
    fn merge_is_associative(a in state(), b in state(), c in state()) {
        let left = merged(&merged(&a, &[&b]), &[&c]);
        let right = merged(&a, &[&merged(&b, &[&c])]);
        prop_assert_eq!(collections(&left), collections(&right));
        // And any order of the three gives the same collections.
        prop_assert_eq!(collections(&left), collections(&merged(&c, &[&a, &b])));
        prop_assert_eq!(collections(&left), collections(&merged(&b, &[&c, &a])));
    }

    /// `wo merge` merges a run of files with `merge_into` first and
    /// `merge_into_unique` after (the repeat check skipped), and with few
    /// incoming messages against a large base it indexes only their ids: both
    /// give what `merge_into` gives, reports included.
    #[test]
    fn merging_a_run_of_files_needs_the_repeat_check_only_once(
        a in state(), b in state(), c in state(), pick in any::<prop::sample::Index>()
    ) {
        let (mut x, mut y) = (a.clone(), a.clone());
        prop_assert_eq!(merge_into(&mut x, &b), merge_into(&mut y, &b));
        prop_assert_eq!(merge_into(&mut x, &c), merge_into_unique(&mut y, &c));
        prop_assert_eq!(wo_format::to_canonical_vec(&x), wo_format::to_canonical_vec(&y));

        // A large base and a small export holding another version of one
        // of its messages: commutativity pins the result.
        let mut big = x.clone();
        for n in 0..40 {
            big.push_message(Message::new(
                "pad",
                Timestamp::from_unix(1_900_000_000 + n),
                "pad",
                format!("<p>pad {n}</p>"),
            ));
        }
        let mut small = empty();
        let mut other = pick.get(big.messages()).clone();
        other.title.push_str(" (edited)");
        small.push_message(other);
        if let Some(m) = c.messages().first() {
            small.push_message(m.clone());
        }
        let mut sparse = big.clone();
        let _ = merge_into(&mut sparse, &small);
        let mut dense = small.clone();
        let _ = merge_into(&mut dense, &big);
        prop_assert_eq!(collections(&sparse), collections(&dense));
    }

    #[test]
    fn merge_is_idempotent(a in state(), b in state()) {
        // The merge of a state with itself is its normal form (a file
        // written by a tool is already in it: no duplicate ids, nothing
        // buried under a tombstone) ...
        let normal = merged(&empty(), &[&a]);
        prop_assert_eq!(collections(&merged(&a, &[&a])), collections(&normal));
        prop_assert_eq!(collections(&merged(&a, &[&empty()])), collections(&normal));
        prop_assert_eq!(collections(&merged(&normal, &[&normal])), collections(&normal));
        let clean = collections(&a) == collections(&normal);
        if clean {
            prop_assert_eq!(collections(&merged(&a, &[&a])), collections(&a));
        }
        // ... and merging the same file twice changes nothing, and says so.
        let mut m = merged(&a, &[&b]);
        let before = m.clone();
        let report = merge_into(&mut m, &b);
        prop_assert!(report.is_empty(), "second merge reported {:?}", report);
        prop_assert_eq!(&m, &before);
    }

    /// An older export can never bring back an entry deleted since.
    #[test]
    fn tombstones_are_never_resurrected_by_an_older_export(
        a in state(), b in state(), pick in any::<prop::sample::Index>()
    ) {
        let mut current = merged(&a, &[&b]);
        prop_assume!(!current.truth.trust.is_empty());
        let victim = current.truth.trust[pick.index(current.truth.trust.len())].id.clone();
        let now = Timestamp::parse("2030-01-01T00:00:00Z").unwrap();
        prop_assert!(current.delete_truth(&victim, now).is_some());
        prop_assert!(current.truth_entry(&victim).is_none());
        for old in [&a, &b] {
            let forward = merged(&current, &[old]);
            let backward = merged(old, &[&current]);
            prop_assert!(forward.truth_entry(&victim).is_none(), "{} came back", victim);
            prop_assert!(backward.truth_entry(&victim).is_none(), "{} came back", victim);
            prop_assert!(forward.truth.deleted.iter().any(|d| d.id == victim));
            prop_assert_eq!(collections(&forward), collections(&backward));
        }
    }
}

/// An edit made after the deletion wins over the tombstone (the tombstone
/// stays), and messages are never lost by any merge.
#[test]
fn an_entry_edited_after_its_deletion_survives_and_messages_are_a_union() {
    let ts = |s: &str| Timestamp::parse(s).unwrap();
    let mut phone = empty();
    let mut entry = TruthEntry::new("Plan", ts("2026-01-01T00:00:00Z"), 0.5, "<p>v1</p>");
    phone.truth.trust.push(entry.clone());
    phone.push_message(Message::new(
        "alec",
        ts("2026-01-01T00:00:00Z"),
        "q",
        "<p>q</p>",
    ));

    let mut laptop = phone.clone();
    laptop.delete_truth(&entry.id, ts("2026-01-02T00:00:00Z"));
    laptop.push_message(Message::new(
        "bot",
        ts("2026-01-01T00:00:05Z"),
        "a",
        "<p>a</p>",
    ));

    // Deleted on the laptop, untouched on the phone: stays deleted.
    for m in [merged(&laptop, &[&phone]), merged(&phone, &[&laptop])] {
        assert!(m.truth.trust.is_empty());
        assert_eq!(m.truth.deleted.len(), 1);
        assert_eq!(m.messages().len(), 2);
    }

    // Edited on the phone after the deletion: the edit survives.
    entry.updated = Some(ts("2026-01-03T00:00:00Z"));
    entry.content = "<p>v2</p>".into();
    phone.truth.trust = vec![entry.clone()];
    for m in [merged(&laptop, &[&phone]), merged(&phone, &[&laptop])] {
        assert_eq!(m.truth.trust, vec![entry.clone()]);
        assert_eq!(m.truth.deleted.len(), 1, "the tombstone is kept");
    }
}

/// Duplicate ids inside one file (hand edits; `wo validate` warns) are
/// resolved by the same rule as duplicates across files, so the base gets
/// no special treatment.
#[test]
fn duplicate_ids_within_the_base_resolve_like_duplicates_across_files() {
    let bytes = std::fs::read(common::fixtures_dir("valid").join("duplicate_ids.json")).unwrap();
    let dup = wo_format::parse(&bytes).unwrap();
    assert_eq!(dup.messages().len(), 2);
    assert_eq!(dup.truth.trust.len(), 2);
    let forward = merged(&dup, &[&empty()]);
    let backward = merged(&empty(), &[&dup]);
    assert_eq!(collections(&forward), collections(&backward));
    assert_eq!(forward.messages().len(), 1);
    assert_eq!(forward.truth.trust.len(), 1);
    assert_eq!(collections(&forward), oracle(&[&dup]));
}

/// Deleting writes a tombstone that buries the deleted version even when the
/// clock is behind its last edit, and moves an older tombstone forward.
#[test]
fn deletion_tombstones_bury_the_deleted_version() {
    let ts = |s: &str| Timestamp::parse(s).unwrap();
    let mut s = empty();
    let mut entry = TruthEntry::new("Plan", ts("2026-01-01T00:00:00Z"), 0.5, "<p>v</p>");
    entry.updated = Some(ts("2026-06-01T00:00:00Z"));
    let id = entry.id.clone();
    s.truth.trust.push(entry.clone());
    // An old tombstone of the same id, from before the last edit.
    s.truth.deleted.push(Tombstone {
        id: id.clone(),
        date: ts("2026-02-01T00:00:00Z"),
        extra: Default::default(),
    });
    // This device's clock is behind the edit.
    assert_eq!(
        s.delete_truth(&id, ts("2026-05-01T00:00:00Z")),
        Some(entry.clone())
    );
    assert_eq!(s.truth.deleted.len(), 1);
    assert_eq!(s.truth.deleted[0].date, ts("2026-06-01T00:00:00Z"));
    let mut old = empty();
    old.truth.trust.push(entry);
    assert!(merged(&s, &[&old]).truth.trust.is_empty());
    assert!(merged(&old, &[&s]).truth.trust.is_empty());
    // Deleting what is not there changes nothing.
    assert_eq!(s.delete_truth(&id, ts("2027-01-01T00:00:00Z")), None);
    assert_eq!(s.truth.deleted[0].date, ts("2026-06-01T00:00:00Z"));
}
