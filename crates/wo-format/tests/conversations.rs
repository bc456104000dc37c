//! Which conversation a message belongs to is a function of the file, and
//! adding conversations — an import, a merge, New chat — never moves a
//! message already in the file into another (`llm_state_v1.md` §1.1).

use std::collections::HashMap;

use proptest::prelude::*;
use wo_format::conversation::roots;
use wo_format::merge::merge_into;
use wo_format::{Message, State, Timestamp};

fn msg(user: &str, at: i64, text: &str) -> Message {
    Message::new(
        user,
        Timestamp::from_unix(1_800_000_000 + at),
        text,
        format!("<p>{text}</p>"),
    )
}

/// Each message's conversation, as the id of its root.
fn conversation_of(s: &State) -> HashMap<String, String> {
    let messages = s.messages();
    roots(s)
        .into_iter()
        .enumerate()
        .map(|(i, r)| (messages[i].id.clone(), messages[r].id.clone()))
        .collect()
}

fn push(s: &mut State, m: Message) -> String {
    let id = m.id.clone();
    assert!(s.push_message(m));
    id
}

#[test]
fn a_first_question_keeps_its_conversation_when_older_history_is_imported() {
    // `wo ask` in an empty file: the question starts a conversation.
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    let mut q = msg("alec", 1_000, "what is a kiln");
    q.mark_new_conversation();
    let q = push(&mut s, q);
    let mut a = msg("smollm2", 1_001, "an oven for pottery");
    a.parent = Some(q.clone());
    let a = push(&mut s, a);
    let before = conversation_of(&s);

    // An import of an older conversation, linked as importers write it.
    let mut import = State::new(Timestamp::from_unix(1_800_000_000));
    let mut c1 = msg("alec", 10, "dunting after firing");
    c1.mark_new_conversation();
    let c1 = push(&mut import, c1);
    let mut c2 = msg("claude", 11, "cracks from cooling");
    c2.parent = Some(c1.clone());
    push(&mut import, c2);
    merge_into(&mut s, &import);

    let after = conversation_of(&s);
    assert_eq!(after[&q], q);
    assert_eq!(after[&a], q, "the answer stays in the kiln conversation");
    assert_eq!(s.branch(&a).len(), 2);
    for (id, root) in &before {
        assert_eq!(&after[id], root);
    }
    assert_eq!(after[&c1], c1);
}

#[test]
fn an_unlinked_transcript_is_not_captured_by_an_imported_conversation() {
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    let l1 = push(&mut s, msg("alec", 0, "l1"));
    let l2 = push(&mut s, msg("smollm2", 20, "l2"));
    let l3 = push(&mut s, msg("alec", 30, "l3"));
    // An imported conversation dated between l1 and l2.
    let mut c1 = msg("alec", 10, "c1");
    c1.mark_new_conversation();
    let c1 = push(&mut s, c1);
    let titles: Vec<_> = s.branch(&l3).iter().map(|m| m.title.clone()).collect();
    assert_eq!(titles, ["l1", "l2", "l3"]);
    let of = conversation_of(&s);
    assert_eq!(of[&l2], l1);
    assert_eq!(of[&l3], l1);
    assert_eq!(of[&c1], c1);
    // A message whose parent is not in the file follows the unlinked chain,
    // not the imported root either.
    let mut orphan = msg("alec", 40, "orphan");
    orphan.parent = Some("m_missing".into());
    let orphan = push(&mut s, orphan);
    assert_eq!(conversation_of(&s)[&orphan], l1);
}

/// How a generated message links: unlinked, a marked root, the child of an
/// earlier message of the same state, or the child of a missing message.
#[derive(Clone, Debug)]
enum Link {
    Unlinked,
    Root,
    Child(usize),
    Dangling,
}

fn link() -> impl Strategy<Value = Link> {
    prop_oneof![
        Just(Link::Unlinked),
        Just(Link::Root),
        (0usize..64).prop_map(Link::Child),
        Just(Link::Dangling),
    ]
}

/// A state from `(time, link)` pairs; `tag` keeps ids apart between states.
fn build(tag: &str, spec: &[(i64, Link)], links_allowed: bool) -> State {
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    let mut ids: Vec<String> = Vec::new();
    for (i, (at, l)) in spec.iter().enumerate() {
        let mut m = msg("u", *at, &format!("{tag}{i}"));
        match l {
            Link::Unlinked if links_allowed => {}
            Link::Root | Link::Unlinked => m.mark_new_conversation(),
            Link::Child(_) | Link::Dangling if ids.is_empty() => m.mark_new_conversation(),
            Link::Child(k) => m.parent = Some(ids[k % ids.len()].clone()),
            Link::Dangling if links_allowed => m.parent = Some(format!("m_gone{tag}{i}")),
            Link::Dangling => m.parent = Some(ids[ids.len() - 1].clone()),
        }
        ids.push(m.id.clone());
        s.push_message(m);
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any file (unlinked, linked, marked and dangling messages), then any
    /// imports written as writers write them (no unlinked message): every
    /// message already there keeps its conversation, and the imports'
    /// order does not matter.
    #[test]
    fn imports_never_move_a_message_and_commute(
        base in prop::collection::vec((0i64..500, link()), 0..40),
        one in prop::collection::vec((0i64..500, link()), 0..20),
        two in prop::collection::vec((0i64..500, link()), 0..20),
    ) {
        let s = build("b", &base, true);
        let before = conversation_of(&s);
        let (i1, i2) = (build("x", &one, false), build("y", &two, false));

        let mut a = s.clone();
        merge_into(&mut a, &i1);
        merge_into(&mut a, &i2);
        let mut b = s.clone();
        merge_into(&mut b, &i2);
        merge_into(&mut b, &i1);

        let (after_a, after_b) = (conversation_of(&a), conversation_of(&b));
        for (id, root) in &before {
            prop_assert_eq!(&after_a[id], root, "message {} moved", id);
        }
        prop_assert_eq!(after_a, after_b);
    }
}

#[test]
fn archiving_hides_a_conversation_keeps_its_messages_and_the_later_say_wins_a_merge() {
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    let mut r1 = msg("alec", 0, "kilns");
    r1.mark_new_conversation();
    let r1 = push(&mut s, r1);
    let mut r2 = msg("alec", 10, "glazes");
    r2.mark_new_conversation();
    let r2 = push(&mut s, r2);
    let mut phone = s.clone();
    let at = |t: i64| Timestamp::from_unix(1_800_000_100 + t);

    assert!(s.set_archived(&r1, true, at(0)).unwrap().archived());
    let listed: Vec<_> = wo_format::conversation::listed(&s, "")
        .iter()
        .map(|l| l.conversation.root.id.clone())
        .collect();
    assert_eq!(listed, std::slice::from_ref(&r2));
    let archived: Vec<_> = wo_format::conversation::listed_archived(&s, "")
        .iter()
        .map(|l| l.conversation.root.id.clone())
        .collect();
    assert_eq!(archived, std::slice::from_ref(&r1));
    assert_eq!(s.messages().len(), 2, "nothing is deleted");
    // It survives a save and a parse.
    let back = wo_format::parse(&wo_format::to_canonical_vec(&s)).unwrap();
    assert!(back.message(&r1).unwrap().archived());

    // Another device restores it later: the later say wins either way.
    phone.set_archived(&r1, true, at(1));
    phone.set_archived(&r1, false, at(5));
    let (mut a, mut b) = (s.clone(), phone.clone());
    merge_into(&mut a, &phone);
    merge_into(&mut b, &s);
    assert!(!a.message(&r1).unwrap().archived());
    assert!(!b.message(&r1).unwrap().archived());
    assert_eq!(
        wo_format::to_canonical_vec(&a),
        wo_format::to_canonical_vec(&b)
    );
    // A say on a slow clock still follows the last one.
    let mut c = a.clone();
    c.set_archived(&r1, true, at(-50));
    assert!(c.message(&r1).unwrap().archived());
    let (stamp, _) = c.message(&r1).unwrap().archive_say().unwrap();
    assert!(stamp > at(5));
}
