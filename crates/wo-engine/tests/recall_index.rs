//! The recall index sends exactly what the scan sends:
//! on random transcripts, queries, budgets and histories of changes
//! (appends, merges, insertions before the end, edits in place, duplicate
//! ids), the context assembled with the index kept beside the state equals
//! the one assembled from scratch — every part, id, token count and drop
//! reason — whether the index was synced after the change or not, with or
//! without a cap on the hits recalled. (Both paths take recall's
//! candidates lazily; `recall.rs`' unit tests hold that to sorting them
//! all.)
//!
//! Both paths also read the recent window lazily (`State::branch_walk`:
//! the turns that fit and the 50 listed past the cut, the rest counted from
//! the links cache), so every assembly's recent turns are held to their
//! definition over `State::branch_uncached`: the newest turns of the branch
//! not recalled, as many as fit, then the next 50 listed, then one entry
//! counting the rest back to the oldest — on long branches with forks, new
//! conversations, any leaf, and the changes that make the walk eager
//! (repeated ids).

use std::collections::HashSet;

use proptest::prelude::*;
use wo_engine::assemble::estimate_tokens;
use wo_engine::assemble::{DROPPED_TURNS_LISTED, SourceKind};
use wo_engine::recall::Synced;
use wo_engine::{Assembled, AssemblyOptions, RecallIndex, assemble, assemble_indexed};
use wo_format::{Message, State, Timestamp, TruthEntry};

const NOW: i64 = 1_800_000_000;
const WORDS: &[&str] = &[
    "kiln",
    "glaze",
    "firing",
    "fired",
    "cone",
    "porcelain",
    "clay",
    "garden",
    "tomato",
    "deploy",
    "release",
    "Paintings",
    "painted",
    "support",
    "group",
    "the",
    "and",
    "of",
    "HTTPServer",
    "retrievalPrefs",
    "zebra",
    "étude",
    "日本",
];
const NAMES: &[&str] = &["Caroline", "Melanie", "smollm2", "ann"];

fn message(name: usize, words: &[usize], at: i64) -> Message {
    let text: Vec<&str> = words.iter().map(|&w| WORDS[w % WORDS.len()]).collect();
    let text = text.join(" ");
    Message::new(
        NAMES[name % NAMES.len()],
        Timestamp::from_unix(NOW - 1_000_000 + at),
        text.clone(),
        format!("<p>{text}</p>"),
    )
}

type Spec = (usize, Vec<usize>);

fn spec() -> impl Strategy<Value = Spec> {
    (
        0..NAMES.len(),
        proptest::collection::vec(0..WORDS.len(), 0..14),
    )
}

/// A change made to the state between two turns.
#[derive(Clone, Debug)]
enum Change {
    /// New messages after the last one (a turn, an appending merge).
    Append(Vec<Spec>),
    /// A message dated before others (a merge of another device's turn).
    InsertEarly(Spec, i64),
    /// A message's text edited in place (a hand edit taken in on refresh).
    Edit(usize, Vec<usize>),
    /// A message's title changed (a conversation renamed).
    Rename(usize, Vec<usize>),
    /// A second message with an existing id (a hand-edited file).
    Duplicate(usize),
    /// The whole transcript replaced by an equal copy read from bytes.
    Reread,
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        4 => proptest::collection::vec(spec(), 1..4).prop_map(Change::Append),
        1 => (spec(), 0i64..2_000).prop_map(|(s, at)| Change::InsertEarly(s, at)),
        1 => (0usize..1000, proptest::collection::vec(0..WORDS.len(), 0..8))
            .prop_map(|(i, w)| Change::Edit(i, w)),
        1 => (0usize..1000, proptest::collection::vec(0..WORDS.len(), 1..4))
            .prop_map(|(i, w)| Change::Rename(i, w)),
        1 => (0usize..1000).prop_map(Change::Duplicate),
        1 => Just(Change::Reread),
    ]
}

fn apply(state: &mut State, change: &Change, clock: &mut i64) {
    match change {
        Change::Append(specs) => {
            for (name, words) in specs {
                *clock += 10;
                state.push_message(message(*name, words, *clock));
            }
        }
        Change::InsertEarly((name, words), at) => {
            state.push_message(message(*name, words, *at));
        }
        Change::Edit(i, words) => {
            let n = state.messages().len();
            if n > 0 {
                let text: Vec<&str> = words.iter().map(|&w| WORDS[w]).collect();
                state.messages_mut()[i % n].content = format!("<p>{}</p>", text.join(" "));
            }
        }
        Change::Rename(i, words) => {
            let n = state.messages().len();
            if n > 0 {
                let id = state.messages()[i % n].id.clone();
                let title: Vec<&str> = words.iter().map(|&w| WORDS[w]).collect();
                state.set_message_title(
                    &id,
                    title.join(" "),
                    wo_format::Timestamp::from_unix(1_900_000_000),
                );
            }
        }
        Change::Duplicate(i) => {
            let n = state.messages().len();
            if n > 0 {
                let mut copy = state.messages()[i % n].clone();
                copy.content = "<p>kiln duplicate</p>".into();
                *clock += 10;
                copy.timestamp = Timestamp::from_unix(NOW - 1_000_000 + *clock);
                let list = state.messages_mut();
                list.push(copy);
            }
        }
        Change::Reread => {
            *state = wo_format::parse(&wo_format::to_canonical_vec(state)).unwrap();
        }
    }
}

fn same(a: &Assembled, b: &Assembled) -> Result<(), TestCaseError> {
    prop_assert_eq!(&a.system, &b.system);
    prop_assert_eq!(&a.turns, &b.turns);
    prop_assert_eq!(&a.sources, &b.sources);
    prop_assert_eq!(&a.included, &b.included);
    prop_assert_eq!(&a.dropped, &b.dropped);
    prop_assert_eq!(a.tokens, b.tokens);
    Ok(())
}

/// The recent turns of `a` are their definition: over the branch to the
/// leaf from scratch, newest first, less the recalled messages, a prefix is
/// sent (oldest first, empty answers left out), the next
/// [`DROPPED_TURNS_LISTED`] are listed as dropped, and one entry counts the
/// rest, naming the oldest.
fn window_is_the_definition(
    state: &State,
    opts: &AssemblyOptions,
    a: &Assembled,
) -> Result<(), TestCaseError> {
    let leaf = if opts.new_conversation {
        None
    } else {
        opts.leaf
            .clone()
            .or(state.messages().last().map(|m| m.id.clone()))
    };
    let recalled: HashSet<&str> = a
        .included
        .iter()
        .filter(|p| p.kind == SourceKind::EarlierMessage)
        .filter_map(|p| p.id.as_deref())
        .collect();
    let rest: Vec<&Message> = leaf
        .map(|leaf| state.branch_uncached(&leaf))
        .unwrap_or_default()
        .into_iter()
        .rev()
        .filter(|m| !recalled.contains(m.id.as_str()))
        .collect();
    let dropped: Vec<_> = a
        .dropped
        .iter()
        .filter(|d| d.kind == SourceKind::RecentTurn)
        .collect();
    // Where the cut is: past the listed drops, one entry counts the rest.
    let counted: usize = if dropped.len() > DROPPED_TURNS_LISTED {
        let label = &dropped[dropped.len() - 1].label;
        label
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| TestCaseError::fail(format!("no count in {label:?}")))?
    } else {
        0
    };
    let listed_drops = dropped.len().min(DROPPED_TURNS_LISTED);
    prop_assert!(
        listed_drops + counted <= rest.len(),
        "more dropped than the branch holds"
    );
    let taken = rest.len() - listed_drops - counted;
    let listed = (rest.len() - taken).min(DROPPED_TURNS_LISTED);
    let want_listed: Vec<Option<&str>> = rest[taken..taken + listed]
        .iter()
        .map(|m| Some(m.id.as_str()))
        .collect();
    let got_listed: Vec<Option<&str>> = dropped
        .iter()
        .take(listed)
        .map(|d| d.id.as_deref())
        .collect();
    prop_assert_eq!(got_listed, want_listed);
    let unlisted = rest.len() - taken - listed;
    if unlisted > 0 {
        prop_assert_eq!(dropped.len(), listed + 1);
        let last = dropped[listed];
        prop_assert_eq!(last.id.as_deref(), rest.last().map(|m| m.id.as_str()));
        prop_assert!(
            last.label
                .starts_with(&format!("{unlisted} older messages")),
            "{}",
            last.label
        );
    } else {
        prop_assert_eq!(dropped.len(), listed);
    }
    let want_sent: Vec<&str> = rest[..taken]
        .iter()
        .rev()
        .filter(|m| {
            !wo_format::xhtml::to_plain_text(&m.content)
                .trim()
                .is_empty()
        })
        .map(|m| m.id.as_str())
        .collect();
    let got_sent: Vec<&str> = a
        .included
        .iter()
        .filter(|p| p.kind == SourceKind::RecentTurn)
        .filter_map(|p| p.id.as_deref())
        .collect();
    prop_assert_eq!(got_sent, want_sent);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]
    #[test]
    fn indexed_assembly_equals_the_scan(
        start in proptest::collection::vec(spec(), 0..40),
        changes in proptest::collection::vec((change(), any::<bool>()), 0..6),
        query in proptest::collection::vec(0..WORDS.len(), 1..5),
        asker in 0..NAMES.len(),
        window in 120usize..900,
        truth_from in proptest::option::of(0usize..40),
        new_conversation in any::<bool>(),
        recall_limit in proptest::option::of(0usize..12),
    ) {
        let mut state = State::new(Timestamp::from_unix(NOW));
        let mut clock = 0i64;
        for (name, words) in &start {
            clock += 10;
            state.push_message(message(*name, words, clock));
        }
        if let Some(i) = truth_from.filter(|&i| i < state.messages().len()) {
            // A truth entry distilled from a message: recall skips it.
            let mut t = TruthEntry::new(
                "kiln fact",
                Timestamp::from_unix(NOW - 10),
                0.9,
                "<p>the kiln glaze fact</p>",
            );
            t.source = Some(state.messages()[i].id.clone());
            state.truth.trust.push(t);
        }
        let q: Vec<&str> = query.iter().map(|&w| WORDS[w]).collect();
        let query = format!("{} {}?", NAMES[asker], q.join(" "));
        let mut index = RecallIndex::new();
        index.sync(&state);
        let check = |state: &State, index: &RecallIndex| -> Result<(), TestCaseError> {
            let mut opts = AssemblyOptions::new(state, window, 64);
            opts.now = Timestamp::from_unix(NOW);
            opts.new_conversation = new_conversation;
            opts.recall_limit = recall_limit;
            let scan = assemble(state, &query, &opts, &estimate_tokens, &[]);
            let indexed = assemble_indexed(state, Some(index), &query, &opts, &estimate_tokens, &[]);
            match (scan, indexed) {
                (Ok(a), Ok(b)) => {
                    window_is_the_definition(state, &opts, &a)?;
                    same(&a, &b)
                }
                (Err(a), Err(b)) => {
                    prop_assert_eq!(a, b);
                    Ok(())
                }
                (a, b) => Err(TestCaseError::fail(format!("{a:?} vs {b:?}"))),
            }
        };
        check(&state, &index)?;
        for (c, sync) in &changes {
            apply(&mut state, c, &mut clock);
            // An index not synced since the change is never used for it.
            if *sync {
                let before = index.len();
                match index.sync(&state) {
                    Synced::Appended(n) => prop_assert_eq!(before + n, state.messages().len()),
                    Synced::Resumed { kept, added } => {
                        prop_assert!(kept < before);
                        prop_assert_eq!(kept + added, state.messages().len());
                    }
                    Synced::Rebuilt | Synced::Current => {}
                }
                prop_assert_eq!(index.len(), state.messages().len());
                prop_assert!(index.is_current(&state));
            }
            check(&state, &index)?;
        }
    }
}

/// The server's common case is incremental: appending turns and merging
/// appended messages never rebuilds, while an edit or a re-read does.
#[test]
fn appends_are_incremental_and_other_changes_rebuild() {
    let mut state = State::new(Timestamp::from_unix(NOW));
    let mut clock = 0;
    for i in 0..20 {
        clock += 10;
        state.push_message(message(i % 3, &[i % 7, 3, 9], clock));
    }
    let mut index = RecallIndex::new();
    assert_eq!(index.sync(&state), Synced::Rebuilt);
    assert_eq!(index.sync(&state), Synced::Current);
    apply(
        &mut state,
        &Change::Append(vec![(0, vec![0, 1]), (1, vec![2])]),
        &mut clock,
    );
    assert_eq!(index.sync(&state), Synced::Appended(2));
    let mut other = state.clone();
    apply(&mut other, &Change::Append(vec![(2, vec![4])]), &mut clock);
    wo_format::merge::merge_into(&mut state, &other);
    assert_eq!(index.sync(&state), Synced::Appended(1));
    // Concurrent turns: a question dated before answers already written
    // keeps the postings before it and indexes the rest again, twice over
    // without a sync between; the recall answers as the scan does.
    apply(
        &mut state,
        &Change::InsertEarly((0, vec![1, 5]), 105),
        &mut clock,
    );
    apply(
        &mut state,
        &Change::InsertEarly((1, vec![2]), 155),
        &mut clock,
    );
    apply(&mut state, &Change::Append(vec![(2, vec![5])]), &mut clock);
    assert_eq!(
        index.sync(&state),
        Synced::Resumed {
            kept: 10,
            added: 16
        }
    );
    let none = std::collections::HashSet::new();
    for q in ["kiln", WORDS[5], WORDS[2]] {
        assert_eq!(
            index.recall(&state, q, &none, 50).expect("current"),
            wo_engine::retrieve::recall_messages(state.messages(), q, &none, 50),
            "{q}"
        );
    }
    apply(&mut state, &Change::Edit(3, vec![0]), &mut clock);
    assert!(!index.is_current(&state));
    assert_eq!(index.sync(&state), Synced::Rebuilt);
    apply(&mut state, &Change::Reread, &mut clock);
    assert_eq!(index.sync(&state), Synced::Rebuilt);
    assert_eq!(index.len(), 26);
    // An index synced with one state is not used for a diverging copy.
    let mut copy = state.clone();
    apply(&mut copy, &Change::Append(vec![(1, vec![0])]), &mut clock);
    apply(&mut state, &Change::Append(vec![(2, vec![1])]), &mut clock);
    index.sync(&state);
    assert!(!index.is_current(&copy));
    let none = std::collections::HashSet::new();
    assert!(index.recall(&copy, "kiln", &none, 10).is_none());
    let hits = index.recall(&state, "kiln", &none, 10).expect("current");
    let scan = wo_engine::retrieve::recall_messages(state.messages(), "kiln", &none, 10);
    assert!(!hits.is_empty());
    assert_eq!(hits, scan);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]
    /// Branches longer than the listed drops (the lazy window counts the
    /// rest from the links cache): explicit parents with forks and new
    /// conversations, any leaf, the cache built early and extended by the
    /// appends after it, then changes (a repeated id makes the walk eager).
    #[test]
    fn long_branches_send_and_count_the_window_exactly(
        n in 60usize..400,
        forks in proptest::collection::vec((0usize..400, 0usize..400, any::<bool>()), 0..8),
        leaf_at in proptest::option::of(0usize..400),
        changes in proptest::collection::vec(change(), 0..3),
        window in 150usize..1200,
        query in proptest::collection::vec(0..WORDS.len(), 1..4),
    ) {
        let mut state = State::new(Timestamp::from_unix(NOW));
        let mut clock = 0i64;
        let mut ids: Vec<String> = Vec::new();
        for i in 0..n {
            clock += 10;
            let mut m = message(i % NAMES.len(), &[i % WORDS.len(), (i * 7) % WORDS.len()], clock);
            m.parent = ids.last().cloned();
            for &(at, to, new_conversation) in &forks {
                if i > 0 && at % n == i {
                    if new_conversation {
                        m.parent = None;
                        m.mark_new_conversation();
                    } else {
                        m.parent = Some(ids[to % i].clone());
                    }
                }
            }
            m.id = wo_format::ids::message_id(&m.username, m.timestamp.as_str(), &m.content);
            ids.push(m.id.clone());
            state.push_message(m);
            if i == 5 {
                state.branch(&ids[0]); // the cache, extended from here on
            }
        }
        let q: Vec<&str> = query.iter().map(|&w| WORDS[w]).collect();
        let query = q.join(" ");
        let mut index = RecallIndex::new();
        let check = |state: &State, index: &RecallIndex| -> Result<(), TestCaseError> {
            let mut opts = AssemblyOptions::new(state, window, 64);
            opts.now = Timestamp::from_unix(NOW);
            opts.leaf = leaf_at.map(|i| state.messages()[i % state.messages().len()].id.clone());
            let scan = assemble(state, &query, &opts, &estimate_tokens, &[]).expect("fits");
            let indexed = assemble_indexed(state, Some(index), &query, &opts, &estimate_tokens, &[])
                .expect("fits");
            window_is_the_definition(state, &opts, &scan)?;
            same(&scan, &indexed)
        };
        index.sync(&state);
        check(&state, &index)?;
        for c in &changes {
            apply(&mut state, c, &mut clock);
            index.sync(&state);
            check(&state, &index)?;
        }
    }
}
