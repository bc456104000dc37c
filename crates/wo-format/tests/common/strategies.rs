//! proptest strategies for valid states. Values come from small pools so
//! that ids, timestamps and payloads collide across generated states, which
//! is where merge has work to do.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use wo_format::{SCHEMA_URL, State};

/// Timestamps with collisions, a fractional second, and two spellings of one
/// instant (`…00Z` and `…00.000Z`), which are different timestamps.
pub const TIMESTAMPS: &[&str] = &[
    "2025-12-31T23:59:59Z",
    "2026-01-01T00:00:00Z",
    "2026-01-01T00:00:00.5Z",
    "2026-01-01T00:00:01Z",
    "2026-01-02T00:00:00Z",
    "2026-01-02T00:00:00.000Z",
    "2026-03-01T12:00:00Z",
];
pub const USERNAMES: &[&str] = &["alec", "bot", "claude-sonnet-4.5", "Zoë"];
pub const TITLES: &[&str] = &["", "Plan", "Question", "Persistence model"];
pub const CONTENTS: &[&str] = &[
    "",
    "<p>a</p>",
    "<p>b</p>",
    "<p>a &amp; b</p>",
    "<div><p>x</p><p><a href=\"https://example.org\">source</a></p></div>",
];
/// Explicit ids shared between generated states (same id, other payload).
pub const MESSAGE_IDS: &[&str] = &["m_dup1", "m_dup2"];
pub const TRUTH_IDS: &[&str] = &["t_dup1", "t_dup2", "t_dup3"];

fn pick(pool: &'static [&'static str]) -> impl Strategy<Value = String> + Clone {
    prop::sample::select(pool).prop_map(str::to_owned)
}

/// Numbers `serde_json::Value` would change (`1.10` → `1.1`, a 20-digit
/// integer → a float): generated as these placeholder strings and swapped
/// for the bare number in the document's text. (`1e400` survives read and
/// write too — see roundtrip.rs — but `wo validate`'s `Value` pass refuses
/// it, so generated states that must validate leave it out.)
pub const RAW_NUMBERS: &[&str] = &["1.10", "12345678901234567890123", "-0.0", "1E+2"];

fn raw_number(n: &str) -> Value {
    Value::String(format!("__raw__{n}"))
}

/// Replaces the placeholders of [`RAW_NUMBERS`] with the numbers.
pub fn with_raw_numbers(text: &str) -> String {
    let mut out = text.to_owned();
    for n in RAW_NUMBERS {
        out = out.replace(&format!("\"__raw__{n}\""), n);
    }
    out
}

/// Unknown fields a newer tool might have written: up to three, from a
/// small pool of names and values so that copies of one record disagree.
fn extra() -> impl Strategy<Value = Vec<(String, Value)>> {
    prop::collection::vec(
        (
            pick(&["x_future", "zz", "aa", "x_note"]),
            prop_oneof![
                Just(json!(1)),
                Just(json!("v")),
                Just(json!("w")),
                Just(json!({"nested": [true, null, 2.5]})),
                prop::sample::select(RAW_NUMBERS).prop_map(raw_number),
                prop::sample::select(RAW_NUMBERS).prop_map(|n| json!({"n": [raw_number(n)]})),
            ],
        ),
        0..3,
    )
}

fn object(pairs: Vec<(&str, Option<Value>)>, extra: Vec<(String, Value)>) -> Value {
    let mut m = Map::new();
    for (k, v) in pairs {
        if let Some(v) = v {
            m.insert(k.to_owned(), v);
        }
    }
    for (k, v) in extra {
        m.insert(k, v);
    }
    Value::Object(m)
}

pub fn message() -> impl Strategy<Value = Value> {
    (
        prop::option::weighted(0.25, pick(MESSAGE_IDS)),
        pick(TITLES),
        pick(USERNAMES),
        pick(TIMESTAMPS),
        pick(CONTENTS),
        prop::option::weighted(0.3, pick(&["user", "assistant", "system"])),
        prop::option::weighted(0.2, pick(MESSAGE_IDS)),
        // A rename's stamp: copies of one message renamed at different times.
        prop::option::weighted(0.3, pick(TIMESTAMPS)),
        extra(),
    )
        .prop_map(
            |(id, title, username, ts, content, role, parent, retitled, extra)| {
                object(
                    vec![
                        ("id", id.map(Value::from)),
                        ("title", Some(title.into())),
                        ("username", Some(username.into())),
                        ("timestamp", Some(ts.into())),
                        ("content", Some(content.into())),
                        ("role", role.map(Value::from)),
                        ("parent", parent.map(Value::from)),
                        ("retitled", retitled.map(Value::from)),
                    ],
                    extra,
                )
            },
        )
}

pub fn truth_entry() -> impl Strategy<Value = Value> {
    (
        prop::option::weighted(0.5, pick(TRUTH_IDS)),
        pick(TITLES),
        pick(TIMESTAMPS),
        prop::sample::select(&[0.0, 0.25, 0.5, 1.0][..]),
        pick(CONTENTS),
        prop::option::weighted(0.5, pick(TIMESTAMPS)),
        prop::option::weighted(0.3, pick(&["fact", "effort", "event", "note"])),
        prop::option::weighted(0.2, 0u64..4),
        extra(),
    )
        .prop_map(
            |(id, title, ts, certainty, content, updated, kind, refs, extra)| {
                object(
                    vec![
                        ("id", id.map(Value::from)),
                        ("title", Some(title.into())),
                        ("timestamp", Some(ts.into())),
                        ("certainty", Some(certainty.into())),
                        ("content", Some(content.into())),
                        ("updated", updated.map(Value::from)),
                        ("kind", kind.map(Value::from)),
                        ("refs", refs.map(Value::from)),
                    ],
                    extra,
                )
            },
        )
}

pub fn tombstone() -> impl Strategy<Value = Value> {
    (pick(TRUTH_IDS), pick(TIMESTAMPS), extra()).prop_map(|(id, date, extra)| {
        object(
            vec![("id", Some(id.into())), ("date", Some(date.into()))],
            extra,
        )
    })
}

/// A valid state document (as JSON).
pub fn state_value() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(message(), 0..6),
        prop::collection::vec(truth_entry(), 0..5),
        prop::collection::vec(tombstone(), 0..3),
        pick(&["", "<p>ctx A</p>", "<p>ctx B</p>"]),
        pick(TIMESTAMPS),
        prop::option::weighted(0.3, (0u64..10, prop::sample::select(&[0.1, 0.7][..]))),
        extra(),
    )
        .prop_map(|(messages, trust, deleted, context, date, prefs, extra)| {
            let mut truth = json!({ "trust": trust });
            if !deleted.is_empty() {
                truth["deleted"] = Value::Array(deleted);
            }
            if let Some((max, w)) = prefs {
                truth["retrieval_prefs"] = json!({"max_entries": max, "certainty_weight": w});
            }
            object(
                vec![
                    ("version", Some(json!(1))),
                    ("schema", Some(SCHEMA_URL.into())),
                    ("date", Some(date.into())),
                    ("context", Some(context.into())),
                    ("messages", Some(Value::Array(messages))),
                    ("truth", Some(truth)),
                ],
                extra,
            )
        })
}

/// A valid state, parsed (ids derived, messages in canonical order).
pub fn state() -> impl Strategy<Value = State> {
    state_value().prop_map(|v| {
        let text = with_raw_numbers(&serde_json::to_string(&v).unwrap());
        wo_format::parse(text.as_bytes())
            .unwrap_or_else(|e| panic!("generated state invalid: {e}\n{text}"))
    })
}
