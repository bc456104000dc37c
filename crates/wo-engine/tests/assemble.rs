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
    let know = a.system.find("## Memory").unwrap();
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
    assert!(!a.system.contains("## Memory"));
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

#[test]
fn messages_written_by_models_in_other_tools_are_sent_as_the_assistants() {
    // An imported transcript: no `role`, no provider metadata, the model's
    // name as username (as other tools write it).
    let mut s = State::new(Timestamp::from_unix(NOW));
    let mut parent: Option<String> = None;
    for (i, (user, role)) in [
        ("alec", None),
        ("gpt-4o", None),
        ("alec", None),
        ("claude-sonnet-4.5", None),
        ("alec", None),
        ("llama3.1:8b", None),
        ("alec", None),
        ("SmolLM2", None),
        ("alec", None),
        ("kiln-helper", None),
        ("gpt-4o", Some(Role::User)),
    ]
    .into_iter()
    .enumerate()
    {
        let mut m = Message::new(
            user,
            Timestamp::from_unix(NOW - 1_000 + i as i64 * 10),
            format!("t{i}"),
            format!("<p>line {i} from {user}</p>"),
        );
        m.role = role;
        m.parent = parent.clone();
        parent = Some(m.id.clone());
        s.push_message(m);
    }
    let mut o = opts(&s, 4_000);
    o.known_models = vec!["kiln-helper".into()];
    let a = assemble(&s, "next?", &o, &estimate_tokens, &[]).unwrap();
    let roles: Vec<(Role, &str)> = a
        .turns
        .iter()
        .map(|(r, t)| (*r, t.split(" from ").nth(1).unwrap_or(t)))
        .collect();
    assert_eq!(
        roles,
        [
            (Role::User, "alec"),
            (Role::Assistant, "gpt-4o"),
            (Role::User, "alec"),
            (Role::Assistant, "claude-sonnet-4.5"),
            (Role::User, "alec"),
            (Role::Assistant, "llama3.1:8b"),
            (Role::User, "alec"),
            (Role::Assistant, "SmolLM2"),
            (Role::User, "alec"),
            // Known from the config.
            (Role::Assistant, "kiln-helper"),
            // An explicit role wins over the name.
            (Role::User, "gpt-4o"),
            (Role::User, "next?"),
        ]
    );
}

#[test]
fn a_legacy_transcript_stays_whole_when_new_turns_have_parents() {
    let mut s = State::new(Timestamp::from_unix(NOW));
    for i in 0..8 {
        s.push_message(Message::new(
            if i % 2 == 0 { "alec" } else { "gpt-4o" },
            Timestamp::from_unix(NOW - 10_000 + i * 10),
            format!("t{i}"),
            format!("<p>legacy {i}</p>"),
        ));
    }
    // A turn appended by wo: its question's parent is the latest message.
    let last = s.messages().last().unwrap().id.clone();
    let mut q = Message::new("alec", Timestamp::from_unix(NOW - 100), "q", "<p>new q</p>");
    q.parent = Some(last);
    q.role = Some(Role::User);
    let mut a = Message::new(
        "smollm2",
        Timestamp::from_unix(NOW - 90),
        "a",
        "<p>new a</p>",
    );
    a.parent = Some(q.id.clone());
    a.role = Some(Role::Assistant);
    s.push_message(q);
    s.push_message(a);
    let a = assemble(&s, "and now?", &opts(&s, 4_000), &estimate_tokens, &[]).unwrap();
    let texts: Vec<&str> = a.turns.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        texts,
        [
            "legacy 0", "legacy 1", "legacy 2", "legacy 3", "legacy 4", "legacy 5", "legacy 6",
            "legacy 7", "new q", "new a", "and now?"
        ]
    );
}

#[test]
fn stored_sources_name_what_retrieval_added_not_the_whole_conversation() {
    // Each answer stored the ids of every recent turn sent (~5 KB on a long
    // conversation). `sources` now holds the truth entries, recalled
    // messages and chunks; the recent turns (the answer's own history) and
    // all detail stay in `included`.
    let s = state();
    let chunks = vec![
        ChunkCandidate {
            id: "chunk:ab12".into(),
            label: "src/kiln.rs:1-20".into(),
            text: "fn fire() {}".into(),
        },
        ChunkCandidate {
            id: "url:https://example.org/kiln?x=1".into(),
            label: "https://example.org/kiln".into(),
            text: "a fetched page about the kiln".into(),
        },
    ];
    let a = assemble(
        &s,
        "what firing schedule for the kiln?",
        &opts(&s, 4096),
        &estimate_tokens,
        &chunks,
    )
    .unwrap();
    let recent: Vec<&str> = a
        .included
        .iter()
        .filter(|i| i.kind == SourceKind::RecentTurn)
        .filter_map(|i| i.id.as_deref())
        .collect();
    assert!(recent.len() > 10, "{recent:?}");
    for id in &recent {
        assert!(
            !a.sources.iter().any(|s| s == id),
            "recent turn {id} stored"
        );
    }
    assert!(a.sources.contains(&s.truth.trust[0].id));
    for i in &a.included {
        if matches!(i.kind, SourceKind::EarlierMessage | SourceKind::Truth) {
            assert!(a.sources.contains(i.id.as_ref().unwrap()), "{i:?}");
        }
    }
    assert!(a.sources.contains(&"chunk:ab12".to_string()));
    // The fetched page was sent and is reported, but its URL is no id.
    assert!(
        a.included
            .iter()
            .any(|i| i.id.as_deref() == Some("url:https://example.org/kiln?x=1"))
    );
    assert!(
        a.sources
            .iter()
            .all(|id| wo_format::validate::is_valid_id(id))
    );
    // Stored, the answer's sources stay small and the file stays valid.
    let mut state = s.clone();
    let turn = wo_engine::turn::CompletedTurn {
        sources: a.sources.clone(),
        context_used: None,
        ..wo_engine::turn::CompletedTurn::new(
            "alec",
            "what firing schedule for the kiln?",
            "Slowly.",
            ("p", "smollm2"),
            (Timestamp::from_unix(NOW), Timestamp::from_unix(NOW + 1)),
        )
    };
    let (_, answer) = wo_engine::turn::apply_turn(&mut state, &turn);
    let stored = state.message(&answer).unwrap().sources.clone().unwrap();
    assert!(serde_json_len(&stored) < 200, "{stored:?}");
    let bytes = wo_format::to_canonical_vec(&state);
    wo_format::parse(&bytes).expect("the file stays valid");
}

fn serde_json_len(ids: &[String]) -> usize {
    ids.iter().map(|i| i.len() + 3).sum::<usize>() + 2
}

/// An OpenAI-compatible client owns its conversation: its turns replace the
/// stored branch's recent turns, the memory (context, truth, recalled
/// messages) is still added, and recall does not repeat what it sends.
#[test]
fn a_client_conversation_replaces_the_stored_window_but_keeps_the_memory() {
    let s = state();
    let mut o = opts(&s, 2000);
    o.conversation = Some(vec![
        (Role::User, "hello there".into()),
        (Role::Assistant, "Hi! How can I help?".into()),
        // The client resends a stored message: recall must not repeat it.
        (Role::User, "the cone 10 firing schedule is slow".into()),
        (Role::Assistant, "Indeed it is.".into()),
    ]);
    let a = assemble(
        &s,
        "what firing schedule for the kiln?",
        &o,
        &estimate_tokens,
        &[],
    )
    .unwrap();
    assert_eq!(
        a.turns,
        vec![
            (Role::User, "hello there".to_string()),
            (Role::Assistant, "Hi! How can I help?".to_string()),
            (
                Role::User,
                "the cone 10 firing schedule is slow".to_string()
            ),
            (Role::Assistant, "Indeed it is.".to_string()),
            (Role::User, "what firing schedule for the kiln?".to_string()),
        ],
        "the client's turns, then the question; no stored turn"
    );
    assert!(a.system.contains("## Context"), "{}", a.system);
    assert!(
        a.system.contains("Kiln max (certainty 0.90)"),
        "{}",
        a.system
    );
    assert!(
        !a.system.contains("cone 10 firing schedule"),
        "the client sends that message itself: {}",
        a.system
    );
    assert!(!a.sources.contains(&s.messages()[4].id));
    // The client's turns are reported without ids (they are not stored).
    let client_turns: Vec<_> = a
        .included
        .iter()
        .filter(|i| i.kind == SourceKind::RecentTurn)
        .collect();
    assert_eq!(client_turns.len(), 4);
    assert!(client_turns.iter().all(|i| i.id.is_none()));
    assert!(
        client_turns[0].label.contains("#1"),
        "{:?}",
        client_turns[0]
    );

    // Without the resent message, recall finds the stored one again.
    o.conversation = Some(vec![(Role::User, "hello there".into())]);
    let a = assemble(&s, "what firing schedule?", &o, &estimate_tokens, &[]).unwrap();
    assert!(a.system.contains("cone 10 firing schedule"), "{}", a.system);
    assert!(a.sources.contains(&s.messages()[4].id));
}

/// A client conversation too long for the budget loses its oldest turns,
/// each reported.
#[test]
fn a_long_client_conversation_drops_its_oldest_turns_and_says_so() {
    let s = state();
    let turns: Vec<(Role, String)> = (0..200)
        .map(|i| {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            (role, format!("client turn {i} with some words to count"))
        })
        .collect();
    let mut o = opts(&s, 400);
    o.conversation = Some(turns);
    let a = assemble(&s, "hello", &o, &estimate_tokens, &[]).unwrap();
    assert!(a.tokens <= a.budget, "{} > {}", a.tokens, a.budget);
    let sent = a.turns.len() - 1;
    assert!(sent > 0 && sent < 200, "{sent}");
    assert_eq!(
        a.turns[sent - 1].1,
        "client turn 199 with some words to count",
        "the newest turns are kept"
    );
    let dropped: Vec<_> = a
        .dropped
        .iter()
        .filter(|d| d.kind == SourceKind::RecentTurn)
        .collect();
    assert!(!dropped.is_empty());
    assert!(dropped.iter().all(|d| d.id.is_none()));
    assert!(
        dropped
            .last()
            .unwrap()
            .label
            .contains("older messages the client sent"),
        "{:?}",
        dropped.last()
    );
}

/// `conversations` threads of `turns` turns each, ~90 words a turn, the
/// newest turn `age` seconds before [`NOW`]; every fourth conversation is
/// about celadon glaze, the others about kiln shelves.
fn kiln_history(conversations: usize, turns: usize, age: i64) -> State {
    let mut s = State::new(Timestamp::from_unix(NOW));
    let total = (conversations * turns) as i64;
    let mut n = 0i64;
    for c in 0..conversations {
        let mut parent: Option<String> = None;
        for t in 0..turns {
            let (user, role) = if t % 2 == 0 {
                ("alec", Role::User)
            } else {
                ("smollm2", Role::Assistant)
            };
            let filler = (0..80)
                .map(|w| format!("w{c}x{t}x{w}"))
                .collect::<Vec<_>>()
                .join(" ");
            let mut m = Message::new(
                user,
                Timestamp::from_unix(NOW - age - (total - n) * 60),
                format!("kiln talk {c}.{t}"),
                format!(
                    "<p>the {} in session {c} turn {t}: {filler}</p>",
                    if c % 4 == 0 {
                        "celadon glaze"
                    } else {
                        "kiln shelf"
                    }
                ),
            );
            m.role = Some(role);
            m.parent = parent.clone();
            parent = Some(m.id.clone());
            s.push_message(m);
            n += 1;
        }
    }
    s
}

fn tokens_of(a: &wo_engine::Assembled, kind: SourceKind) -> usize {
    a.included
        .iter()
        .filter(|p| p.kind == kind)
        .map(|p| p.tokens)
        .sum()
}

#[test]
fn a_large_window_sends_memory_within_recall_tokens_and_says_what_was_left_out() {
    // 20 conversations of 20 turns, ~120 tokens a turn, of which five
    // (12,000 tokens) relate to the question, in a 128,000-token window.
    let s = kiln_history(20, 20, 3 * 86_400);
    let mut o = opts(&s, 128_000);
    o.new_conversation = true;
    let ask = |o: &AssemblyOptions| {
        assemble(
            &s,
            "which celadon glaze did we use?",
            o,
            &estimate_tokens,
            &[],
        )
        .unwrap()
    };
    let a = ask(&o);
    let recalled = tokens_of(&a, SourceKind::EarlierMessage);
    assert!(
        recalled > 3_000 && recalled <= wo_engine::assemble::DEFAULT_RECALL_TOKENS,
        "recalled {recalled} tokens"
    );
    assert!(
        a.dropped
            .iter()
            .any(|d| d.kind == SourceKind::EarlierMessage
                && d.reason.starts_with("over the recall budget")
                && d.reason.contains("recall_tokens under [memory]")),
        "the reason names the setting: {:?}",
        a.dropped.iter().map(|d| &d.reason).collect::<Vec<_>>()
    );
    // Where the window is what binds, the setting is not blamed.
    let small = ask(&opts(&s, 2_000));
    let reasons: Vec<&String> = small
        .dropped
        .iter()
        .filter(|d| d.kind == SourceKind::EarlierMessage)
        .map(|d| &d.reason)
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("over the recall budget"))
            && !reasons.iter().any(|r| r.contains("recall_tokens")),
        "{reasons:?}"
    );
    // Raised, the same question sends much more of what relates.
    o.recall_tokens = 100_000;
    let more = ask(&o);
    assert!(tokens_of(&more, SourceKind::EarlierMessage) > 10_000);
}

#[test]
fn a_conversation_in_progress_fills_the_window_beyond_recall_tokens() {
    // One thread of 100 turns (~12,000 tokens), its last turn a minute ago.
    let s = kiln_history(1, 100, 60);
    let leaf = s.messages().last().unwrap().id.clone();
    let mut o = opts(&s, 128_000);
    o.leaf = Some(leaf);
    let a = assemble(&s, "and then?", &o, &estimate_tokens, &[]).unwrap();
    let turns = a
        .included
        .iter()
        .filter(|p| p.kind == SourceKind::RecentTurn)
        .count();
    assert_eq!(turns, 100, "the whole conversation is sent");
    assert!(tokens_of(&a, SourceKind::RecentTurn) > 10_000);
}

#[test]
fn the_last_turns_of_a_conversation_resumed_after_a_pause_count_as_memory() {
    // The same thread, its last turn two days old: a question after that
    // pause ranks those turns with the rest, within recall_tokens.
    let s = kiln_history(1, 100, 2 * 86_400);
    let o = opts(&s, 128_000);
    let a = assemble(
        &s,
        "what is a good name for a cat?",
        &o,
        &estimate_tokens,
        &[],
    )
    .unwrap();
    let sent = tokens_of(&a, SourceKind::RecentTurn) + tokens_of(&a, SourceKind::EarlierMessage);
    assert!(
        sent > 3_000 && sent <= wo_engine::assemble::DEFAULT_RECALL_TOKENS,
        "sent {sent} tokens"
    );
    let reason = &a
        .dropped
        .iter()
        .find(|d| d.kind == SourceKind::RecentTurn)
        .expect("older turns left out")
        .reason;
    assert!(
        reason.contains("recall_tokens") && reason.contains("new sitting"),
        "{reason}"
    );
}
