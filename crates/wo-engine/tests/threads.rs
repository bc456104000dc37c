//! Where a turn goes: a client's own thread (`conversation::continued_by`),
//! a regenerated answer beside the earlier ones (`request::regenerating`,
//! `turn::apply_turn`), and never an unlinked question.

use wo_engine::conversation::continued_by;
use wo_engine::request::regenerating;
use wo_engine::turn::{CompletedTurn, apply_turn};
use wo_format::{Role, State, Timestamp};

fn at(s: i64) -> Timestamp {
    Timestamp::from_unix(1_800_000_000 + s)
}

/// Appends one exchange; returns (question id, answer id).
fn exchange(s: &mut State, t: i64, q: &str, a: &str, parent: Option<String>) -> (String, String) {
    let turn = CompletedTurn {
        parent,
        ..CompletedTurn::new("ann", q, a, ("p", "smollm2"), (at(t), at(t + 1)))
    };
    apply_turn(s, &turn)
}

fn turns(list: &[(Role, &str)]) -> Vec<(Role, String)> {
    list.iter().map(|(r, t)| (*r, (*t).to_owned())).collect()
}

#[test]
fn a_question_with_no_parent_starts_a_conversation() {
    let mut s = State::new(at(0));
    let (q, _) = exchange(&mut s, 0, "first", "one", None);
    let m = s.message(&q).unwrap();
    assert!(m.starts_conversation() && !m.is_unlinked());
}

#[test]
fn a_client_continues_the_branch_holding_exactly_its_turns() {
    let mut s = State::new(at(0));
    let (q1, a1) = exchange(
        &mut s,
        0,
        "How slow should I cool my kiln?",
        "About **100 °C** an hour — see [the guide](https://example.org).",
        None,
    );
    let (_, a2) = exchange(&mut s, 10, "Name a glaze", "Celadon.", None);
    let (_, a3) = exchange(
        &mut s,
        20,
        "And for stoneware?",
        "Slower.",
        Some(a1.clone()),
    );
    let known: [&str; 0] = [];
    // The client's copy of the answer is the Markdown it was sent.
    let kiln = turns(&[
        (Role::User, "How slow should I cool my kiln?"),
        (
            Role::Assistant,
            "About **100 °C** an hour — see [the guide](https://example.org).",
        ),
    ]);
    assert_eq!(continued_by(&s, &kiln, &known).unwrap().id, a1);
    let mut longer = kiln.clone();
    longer.push((Role::User, "And for stoneware?".into()));
    longer.push((Role::Assistant, "Slower.".into()));
    assert_eq!(continued_by(&s, &longer, &known).unwrap().id, a3);
    // Whitespace a client trims or adds does not matter.
    let glaze = turns(&[
        (Role::User, "  Name a glaze"),
        (Role::Assistant, "Celadon.\n"),
    ]);
    assert_eq!(continued_by(&s, &glaze, &known).unwrap().id, a2);
    // A suffix, another answer, a wrong role or no turns: a new conversation.
    assert!(continued_by(&s, &longer[2..], &known).is_none());
    let other = turns(&[(Role::User, "Name a glaze"), (Role::Assistant, "Tenmoku.")]);
    assert!(continued_by(&s, &other, &known).is_none());
    let roles = turns(&[
        (Role::Assistant, "Name a glaze"),
        (Role::Assistant, "Celadon."),
    ]);
    assert!(continued_by(&s, &roles, &known).is_none());
    assert!(continued_by(&s, &[], &known).is_none());
    let _ = q1;
}

#[test]
fn regenerating_answers_the_stored_question_again_beside_the_first_answer() {
    let mut s = State::new(at(0));
    let (q1, a1) = exchange(&mut s, 0, "what is a kiln", "An oven.", None);
    let (q2, a2) = exchange(&mut s, 10, "how hot?", "Very.", Some(a1.clone()));
    // From the answer or the question, by a prefix: the question, its text,
    // where it stands.
    let again = regenerating(&s, &a2[..10]).unwrap();
    assert_eq!(
        (
            again.question.as_str(),
            again.prompt.as_str(),
            again.parent.as_deref()
        ),
        (q2.as_str(), "how hot?", Some(a1.as_str()))
    );
    let first = regenerating(&s, &q1).unwrap();
    assert_eq!(
        first.parent, None,
        "a first question starts its conversation"
    );
    // The commit appends only the answer, a sibling of the first.
    let before = s.messages().len();
    let turn = CompletedTurn {
        question: Some(q1.clone()),
        ..CompletedTurn::new(
            "ann",
            "what is a kiln",
            "A furnace.",
            ("p", "smollm2"),
            (at(30), at(31)),
        )
    };
    let (q, a) = apply_turn(&mut s, &turn);
    assert_eq!(q, q1);
    assert_eq!(s.messages().len(), before + 1);
    assert_eq!(s.message(&a).unwrap().parent.as_deref(), Some(q1.as_str()));
    let roots = wo_format::conversation::list(&s);
    assert_eq!(roots.len(), 1, "still one conversation");
    // Nothing to ask again: an unknown id, a system message.
    let e = regenerating(&s, "m_nothing").unwrap_err();
    assert_eq!(e.field, wo_engine::request::Field::Regenerate);
    assert!(e.for_cli().starts_with("--regenerate: "), "{}", e.for_cli());
}
