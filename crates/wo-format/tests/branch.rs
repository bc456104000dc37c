//! Branches over mixed transcripts: parentless messages (legacy files,
//! imports) chain in (timestamp, id) order; explicit parents fork and
//! continue that chain.

use wo_format::{Message, State, Timestamp};

fn msg(user: &str, at: i64, text: &str, parent: Option<&str>) -> Message {
    let mut m = Message::new(
        user,
        Timestamp::from_unix(1_800_000_000 + at),
        text,
        format!("<p>{text}</p>"),
    );
    m.parent = parent.map(str::to_owned);
    m
}

fn titles(s: &State, leaf: &str) -> Vec<String> {
    s.branch(leaf).iter().map(|m| m.title.clone()).collect()
}

#[test]
fn a_parentless_transcript_is_one_branch() {
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    for i in 0..5 {
        s.push_message(msg("alec", i, &format!("l{i}"), None));
    }
    let leaf = s.messages()[4].id.clone();
    assert_eq!(titles(&s, &leaf), ["l0", "l1", "l2", "l3", "l4"]);
    let mid = s.messages()[2].id.clone();
    assert_eq!(titles(&s, &mid), ["l0", "l1", "l2"]);
    assert!(s.branch("m_nope").is_empty());
}

#[test]
fn new_turns_with_parents_continue_a_legacy_transcript() {
    // The bug: once any message had a parent, the legacy part was reduced
    // to its last message.
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    for i in 0..6 {
        s.push_message(msg("alec", i, &format!("legacy{i}"), None));
    }
    let last_legacy = s.messages()[5].id.clone();
    let q = msg("alec", 100, "q", Some(&last_legacy));
    let a = msg("gpt-4o", 101, "a", Some(&q.id));
    let a_id = a.id.clone();
    s.push_message(q);
    s.push_message(a);
    assert_eq!(
        titles(&s, &a_id),
        [
            "legacy0", "legacy1", "legacy2", "legacy3", "legacy4", "legacy5", "q", "a"
        ]
    );
}

#[test]
fn an_import_merged_into_a_tree_keeps_its_chain_and_forks_stay_apart() {
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    // A tree started by wo: root, then two forks from it.
    let root = msg("alec", 50, "root", None);
    let fork_a = msg("alec", 60, "fork-a", Some(&root.id));
    let fork_b = msg("alec", 70, "fork-b", Some(&root.id));
    let after_a = msg("smollm2", 80, "after-a", Some(&fork_a.id));
    let (root_id, fork_b_id, after_a_id) = (root.id.clone(), fork_b.id.clone(), after_a.id.clone());
    for m in [root, fork_a, fork_b, after_a] {
        s.push_message(m);
    }
    // Imported later, dated earlier, no parents: it chains in before root.
    for i in 0..3 {
        s.push_message(msg("claude-sonnet-4.5", i, &format!("imp{i}"), None));
    }
    assert_eq!(
        titles(&s, &after_a_id),
        ["imp0", "imp1", "imp2", "root", "fork-a", "after-a"]
    );
    assert_eq!(
        titles(&s, &fork_b_id),
        ["imp0", "imp1", "imp2", "root", "fork-b"]
    );
    assert_eq!(titles(&s, &root_id), ["imp0", "imp1", "imp2", "root"]);
    // A parentless message dated after the forks follows the chain of
    // parentless messages, not a fork.
    let late = msg("alec", 90, "late", None);
    let late_id = late.id.clone();
    s.push_message(late);
    assert_eq!(
        titles(&s, &late_id),
        ["imp0", "imp1", "imp2", "root", "late"]
    );
}

#[test]
fn dangling_parents_and_cycles() {
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    s.push_message(msg("alec", 0, "first", None));
    // Its parent was pruned: it continues the parentless chain.
    s.push_message(msg("alec", 10, "orphan", Some("m_0000000000000000")));
    let orphan = s.messages()[1].id.clone();
    assert_eq!(titles(&s, &orphan), ["first", "orphan"]);
    // Hand-edited parents pointing at each other end the walk.
    let mut x = msg("alec", 20, "x", None);
    let mut y = msg("alec", 30, "y", None);
    x.parent = Some(y.id.clone());
    y.parent = Some(x.id.clone());
    let y_id = y.id.clone();
    s.push_message(x);
    s.push_message(y);
    assert_eq!(titles(&s, &y_id), ["x", "y"]);
}

#[test]
fn a_new_conversation_is_a_root_of_its_own() {
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    let first = msg("alec", 0, "first", None);
    let answer = msg("smollm2", 1, "answer", Some(&first.id));
    let (first_id, answer_id) = (first.id.clone(), answer.id.clone());
    s.push_message(first);
    s.push_message(answer);
    // Without the mark a parentless question continues the chain…
    let plain = msg("alec", 10, "plain", None);
    let plain_id = plain.id.clone();
    s.push_message(plain);
    assert_eq!(titles(&s, &plain_id), ["first", "plain"]);
    // …with it, it starts a conversation: its branch begins with it.
    let mut root = msg("alec", 20, "root", None);
    root.mark_new_conversation();
    assert!(root.starts_conversation());
    let reply = msg("smollm2", 21, "reply", Some(&root.id));
    let (root_id, reply_id) = (root.id.clone(), reply.id.clone());
    s.push_message(root);
    s.push_message(reply);
    assert_eq!(titles(&s, &reply_id), ["root", "reply"]);
    assert_eq!(titles(&s, &root_id), ["root"]);
    assert_eq!(titles(&s, &answer_id), ["first", "answer"]);
    assert!(!s.message(&first_id).unwrap().starts_conversation());
    // The mark is ignored on a message that has a parent (the parent wins),
    // and `false` is no mark.
    let mut odd = msg("alec", 30, "odd", Some(&reply_id));
    odd.mark_new_conversation();
    assert!(!odd.starts_conversation());
    let odd_id = odd.id.clone();
    s.push_message(odd);
    assert_eq!(titles(&s, &odd_id), ["root", "reply", "odd"]);
    let mut no = msg("alec", 40, "no", None);
    no.extra.insert(
        wo_format::model::NEW_CONVERSATION_KEY.into(),
        wo_format::RawJson::from(serde_json::Value::Bool(false)),
    );
    assert!(!no.starts_conversation());
}

#[test]
fn the_mark_survives_a_save_and_a_parse() {
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    let mut root = msg("alec", 0, "root", None);
    root.mark_new_conversation();
    s.push_message(root);
    let bytes = wo_format::to_canonical_vec(&s);
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(text.contains("\"new_conversation\": true"), "{text}");
    let back = wo_format::parse(&bytes).unwrap();
    assert!(back.messages()[0].starts_conversation());
}
