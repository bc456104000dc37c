//! Context assembly on realistic states: what is sent, in what order, and
//! that everything left out is reported.

use wo_engine::assemble::{ChunkCandidate, estimate_tokens};
use wo_engine::{AssemblyOptions, SourceKind, assemble};
use wo_format::{Message, Role, State, Timestamp, TruthEntry};

const NOW: i64 = 1_800_000_000;

fn state() -> State {
    let mut s = State::new(Timestamp::from_unix(NOW));
    s.context = "<div><p>This directory holds the kiln project.</p></div>".into();
    for (i, (title, body, c)) in [
        ("Kiln max", "The kiln reaches 1300 C at most", 0.9),
        ("Glaze", "Celadon glaze needs reduction firing", 0.7),
        ("Rumour", "The kiln might explode at 1000 C", 0.1),
    ]
    .iter()
    .enumerate()
    {
        s.truth.trust.push(TruthEntry::new(
            *title,
            Timestamp::from_unix(NOW - 86_400 * i as i64),
            *c,
            format!("<p>{body}</p>"),
        ));
    }
    let mut parent: Option<String> = None;
    for i in 0..40 {
        let (user, role) = if i % 2 == 0 {
            ("alec", Role::User)
        } else {
            ("smollm2", Role::Assistant)
        };
        let body = if i == 4 {
            "the cone 10 firing schedule is slow".to_owned()
        } else {
            format!("chat line {i} about nothing much")
        };
        let mut m = Message::new(
            user,
            Timestamp::from_unix(NOW - 10_000 + i * 10),
            format!("t{i}"),
            format!("<p>{body}</p>"),
        );
        m.role = Some(role);
        m.parent = parent.clone();
        parent = Some(m.id.clone());
        s.push_message(m);
    }
    s
}

fn opts(s: &State, window: usize) -> AssemblyOptions {
    let mut o = AssemblyOptions::new(s, window, 64);
    o.now = Timestamp::from_unix(NOW);
    o.prefs.min_certainty = 0.2;
    o
}

#[test]
fn sends_context_truth_recall_and_recent_turns_in_order() {
    let s = state();
    let a = assemble(
        &s,
        "what firing schedule for the kiln?",
        &opts(&s, 600),
        &estimate_tokens,
        &[],
    )
    .unwrap();
    let ctx = a.system.find("## Context").unwrap();
    let know = a.system.find("## Knowledge").unwrap();
    let earlier = a.system.find("## Earlier messages").unwrap();
    assert!(ctx < know && know < earlier, "{}", a.system);
    assert!(a.system.contains("Kiln max (certainty 0.90)"));
    assert!(!a.system.contains("explode"), "below min_certainty");
    assert!(
        a.system.contains("cone 10 firing schedule"),
        "recalled earlier message"
    );
    assert_eq!(
        a.turns.last().unwrap(),
        &(Role::User, "what firing schedule for the kiln?".to_string())
    );
    assert!(a.turns.len() > 2);
    // Turns alternate and end with the newest stored message before the query.
    assert_eq!(
        a.turns[a.turns.len() - 2].1,
        "chat line 39 about nothing much"
    );
    assert!(a.tokens <= a.budget);
    // Every truth entry is either included or dropped with a reason.
    for t in &s.truth.trust {
        let inc = a.included.iter().any(|i| i.id.as_deref() == Some(&t.id));
        let drop = a.dropped.iter().any(|d| d.id.as_deref() == Some(&t.id));
        assert!(inc ^ drop, "{}", t.title);
    }
    let rumour = a
        .dropped
        .iter()
        .find(|d| d.label == "Rumour")
        .unwrap_or_else(|| panic!("{:#?}", a.dropped));
    assert!(rumour.reason.contains("min_certainty"));
    // Sources name what was sent.
    assert!(a.sources.contains(&s.truth.trust[0].id));
    assert!(a.sources.contains(&s.messages()[4].id));
}

#[test]
fn small_budgets_drop_oldest_turns_and_say_so() {
    let s = state();
    let a = assemble(&s, "hello", &opts(&s, 300), &estimate_tokens, &[]).unwrap();
    assert!(a.tokens <= a.budget, "{} > {}", a.tokens, a.budget);
    let dropped_turns = a
        .dropped
        .iter()
        .filter(|d| d.kind == SourceKind::RecentTurn)
        .count();
    let sent_turns = a.turns.len() - 1;
    assert!(dropped_turns > 0 && sent_turns > 0);
    assert_eq!(dropped_turns + sent_turns, 40);
    // The sent ones are the newest.
    assert_eq!(
        a.turns[a.turns.len() - 2].1,
        "chat line 39 about nothing much"
    );
}

#[test]
fn a_message_too_long_for_the_model_is_an_error() {
    let s = state();
    let long = "word ".repeat(2000);
    let err = assemble(&s, &long, &opts(&s, 512), &estimate_tokens, &[]).unwrap_err();
    assert!(
        err.0.contains("do not fit") && err.0.contains("hint"),
        "{err}"
    );
}

#[test]
fn huge_context_is_cut_and_reported() {
    let mut s = state();
    s.context = format!("<p>{}</p>", "rules ".repeat(3000));
    let a = assemble(&s, "hi", &opts(&s, 1024), &estimate_tokens, &[]).unwrap();
    let d = a
        .dropped
        .iter()
        .find(|d| d.kind == SourceKind::Context)
        .unwrap();
    assert!(d.reason.contains("cut to"));
    assert!(a.tokens <= a.budget);
}

#[test]
fn branches_follow_parent_links() {
    let mut s = state();
    // Branch from message 10: a new child that is not on the main line.
    let fork_parent = s.messages()[10].id.clone();
    let mut alt = Message::new(
        "alec",
        Timestamp::from_unix(NOW),
        "alt",
        "<p>alternative branch turn</p>",
    );
    alt.parent = Some(fork_parent);
    alt.role = Some(Role::User);
    let alt_id = alt.id.clone();
    s.push_message(alt);
    let mut o = opts(&s, 4096);
    o.leaf = Some(alt_id);
    let a = assemble(&s, "continue", &o, &estimate_tokens, &[]).unwrap();
    let texts: Vec<&str> = a.turns.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts[texts.len() - 2], "alternative branch turn");
    assert!(
        !texts.contains(&"chat line 39 about nothing much"),
        "other branch excluded"
    );
    assert!(texts.contains(&"chat line 10 about nothing much"));
}

#[test]
fn rag_off_and_chunks() {
    let s = state();
    let mut o = opts(&s, 2048);
    o.rag = false;
    let chunks = vec![ChunkCandidate {
        id: "chunk_1".into(),
        label: "src/kiln.rs:1-20".into(),
        text: "fn fire() {}".into(),
    }];
    let a = assemble(&s, "kiln", &o, &estimate_tokens, &chunks).unwrap();
    assert!(!a.system.contains("## Knowledge"));
    assert!(a.dropped.iter().any(|d| d.reason == "the rag tool is off"));
    assert!(a.system.contains("### src/kiln.rs:1-20\nfn fire() {}"));
    assert!(a.sources.contains(&"chunk_1".to_string()));
}

#[test]
fn a_long_branch_lists_the_nearest_dropped_turns_and_counts_the_rest() {
    let mut s = State::new(Timestamp::from_unix(1_700_000_000));
    let mut parent: Option<String> = None;
    for i in 0..300 {
        let mut m = Message::new(
            "ann",
            Timestamp::from_unix(1_700_000_000 + i),
            format!("line {i}"),
            format!("<p>chat line {i} about nothing much at all</p>"),
        );
        m.parent = parent.clone();
        parent = Some(m.id.clone());
        s.push_message(m);
    }
    let a = assemble(&s, "hello", &opts(&s, 300), &estimate_tokens, &[]).unwrap();
    let turns: Vec<_> = a
        .dropped
        .iter()
        .filter(|d| d.kind == SourceKind::RecentTurn)
        .collect();
    assert_eq!(turns.len(), wo_engine::assemble::DROPPED_TURNS_LISTED + 1);
    let summary = turns.last().unwrap();
    let sent = a.turns.len() - 1;
    let counted: usize = summary.label.split(' ').next().unwrap().parse().unwrap();
    assert_eq!(
        sent + wo_engine::assemble::DROPPED_TURNS_LISTED + counted,
        300
    );
    assert_eq!(
        summary.id.as_deref(),
        Some(s.messages()[0].id.as_str()),
        "back to the oldest"
    );
}
