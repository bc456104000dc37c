//! Round trips through the one canonical serializer: parse → serialise →
//! parse is the identity, the bytes are stable, nothing in a file is lost
//! (unknown fields at every level included), and the output for a fixed
//! state matches the golden files byte for byte.
//!
//! To regenerate the golden files after an intended format change:
//! `WO_BLESS=1 cargo test -p wo-format --test roundtrip`, then review the diff.

mod common;

use std::path::PathBuf;

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use wo_format::{
    Expires, Message, RetrievalPrefs, Role, State, Timestamp, TruthEntry, TruthKind, Usage, ids,
    parse, to_canonical_vec, validate_bytes,
};

fn ts(s: &str) -> Timestamp {
    Timestamp::parse(s).unwrap()
}

/// Checks the layout product §1 asks of canonical bytes.
fn assert_canonical_layout(name: &str, bytes: &[u8]) {
    let text = std::str::from_utf8(bytes).unwrap_or_else(|_| panic!("{name}: not UTF-8"));
    assert!(
        text.starts_with("{\n  \"version\": 1,\n  \"schema\": "),
        "{name}"
    );
    assert!(
        text.ends_with("\n}\n") && !text.ends_with("\n\n"),
        "{name}: trailing newline"
    );
    assert!(
        !text.contains('\r') && !text.contains('\t'),
        "{name}: raw CR/tab"
    );
    for line in text.lines() {
        let indent = line.len() - line.trim_start_matches(' ').len();
        assert_eq!(indent % 2, 0, "{name}: odd indent in {line:?}");
        assert!(!line.ends_with(' '), "{name}: trailing space in {line:?}");
    }
}

#[test]
fn valid_fixtures_round_trip_to_stable_canonical_bytes() {
    for f in common::load("valid", false) {
        let state = parse(&f.bytes).unwrap();
        let once = to_canonical_vec(&state);
        assert_canonical_layout(&f.name, &once);
        let again = parse(&once).unwrap_or_else(|e| panic!("{}: {e}", f.name));
        assert_eq!(
            again, state,
            "{}: parse ∘ serialise is not the identity",
            f.name
        );
        assert_eq!(
            to_canonical_vec(&again),
            once,
            "{}: bytes not stable",
            f.name
        );
        assert_eq!(
            to_canonical_vec(&state),
            once,
            "{}: serialising twice differs",
            f.name
        );
        let (issues, _) = validate_bytes(&once);
        assert_eq!(issues, vec![], "{}: canonical output invalid", f.name);
        assert!(
            again
                .messages()
                .is_sorted_by(|a, b| a.order_key() <= b.order_key()),
            "{}: messages not in (timestamp, id) order",
            f.name
        );
    }
}

/// The input document with exactly the changes the format documents:
/// missing ids derived, messages ordered by (timestamp, id), defaults
/// written for `context`, `truth.trust` and `truth.retrieval_prefs`, an
/// empty `truth.deleted` left out, and [0, 1] numbers written as floats.
fn expected_after_round_trip(input: &Value) -> Value {
    let mut v = input.clone();
    let root = v.as_object_mut().unwrap();
    root.entry("context").or_insert(json!(""));
    let truth = root
        .entry("truth")
        .or_insert(json!({}))
        .as_object_mut()
        .unwrap();
    truth.entry("trust").or_insert(json!([]));
    truth.entry("retrieval_prefs").or_insert(json!({}));
    if truth.get("deleted") == Some(&json!([])) {
        truth.remove("deleted");
    }
    let as_float = |m: &mut Map<String, Value>, key: &str| {
        if let Some(x) = m.get(key).and_then(Value::as_f64) {
            m.insert(key.to_owned(), json!(x));
        }
    };
    for t in truth["trust"].as_array_mut().unwrap() {
        let t = t.as_object_mut().unwrap();
        as_float(t, "certainty");
        if !t.contains_key("id") {
            let id = ids::truth_id(
                t["title"].as_str().unwrap(),
                t["timestamp"].as_str().unwrap(),
                t["content"].as_str().unwrap(),
            );
            t.insert("id".into(), id.into());
        }
    }
    let prefs = truth["retrieval_prefs"].as_object_mut().unwrap();
    for key in ["min_certainty", "certainty_weight", "recency_weight"] {
        as_float(prefs, key);
    }
    let messages = root["messages"].as_array_mut().unwrap();
    for m in messages.iter_mut() {
        let m = m.as_object_mut().unwrap();
        if !m.contains_key("id") {
            let id = ids::message_id(
                m["username"].as_str().unwrap(),
                m["timestamp"].as_str().unwrap(),
                m["content"].as_str().unwrap(),
            );
            m.insert("id".into(), id.into());
        }
    }
    let key = |m: &Value| {
        (
            ts(m["timestamp"].as_str().unwrap()),
            m["id"].as_str().unwrap().to_owned(),
        )
    };
    messages.sort_by_key(key);
    v
}

#[test]
fn nothing_in_a_valid_file_is_lost_or_changed_beyond_documented_defaults() {
    for f in common::load("valid", false) {
        let input: Value = serde_json::from_slice(&f.bytes).unwrap();
        let output: Value =
            serde_json::from_slice(&to_canonical_vec(&parse(&f.bytes).unwrap())).unwrap();
        assert_eq!(output, expected_after_round_trip(&input), "{}", f.name);
    }
}

#[test]
fn unknown_fields_survive_at_every_level() {
    let path = common::fixtures_dir("valid").join("unknown_fields_everywhere.json");
    let bytes = std::fs::read(path).unwrap();
    let input: Value = serde_json::from_slice(&bytes).unwrap();
    // Read, modify (append a turn, add and delete truth), write, read again.
    let mut state = parse(&bytes).unwrap();
    state.push_message(Message::new(
        "bot",
        ts("2026-03-01T00:00:00Z"),
        "t",
        "<p>new</p>",
    ));
    let extra_entry = TruthEntry::new("New", ts("2026-03-01T00:00:00Z"), 0.5, "<p>n</p>");
    let extra_id = extra_entry.id.clone();
    state.truth.trust.push(extra_entry);
    state.delete_truth(&extra_id, ts("2026-03-02T00:00:00Z"));
    let output: Value = serde_json::from_slice(&to_canonical_vec(&state)).unwrap();
    for pointer in [
        "/x_future_root",
        "/aaa_first",
        "/messages/0/x_reactions",
        "/messages/0/usage/cached_tokens",
        "/messages/0/usage/x",
        "/truth/x_truth_notes",
        "/truth/trust/0/x_embedding",
        "/truth/trust/0/x_flag",
        "/truth/retrieval_prefs/url_fetch",
    ] {
        let before = input
            .pointer(pointer)
            .unwrap_or_else(|| panic!("fixture lacks {pointer}"));
        assert_eq!(
            output.pointer(pointer),
            Some(before),
            "{pointer} was not preserved"
        );
    }
    let tombstone = output["truth"]["deleted"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == "t_dead00000000beef")
        .unwrap();
    assert_eq!(tombstone["by"], input["truth"]["deleted"][0]["by"]);
    assert_eq!(output["truth"]["deleted"].as_array().unwrap().len(), 2);
    // Large and tiny numbers keep their value exactly.
    assert_eq!(output["x_future_root"]["n"], json!(u64::MAX));
    assert_eq!(
        output["truth"]["trust"][0]["x_embedding"],
        json!([0.25, -1e-9, 3e300, 7.507272382804316e-72])
    );
}

#[test]
fn top_level_keys_in_model_order_then_unknown_keys_sorted() {
    let path = common::fixtures_dir("valid").join("unknown_fields_everywhere.json");
    let state = parse(&std::fs::read(path).unwrap()).unwrap();
    let text = String::from_utf8(to_canonical_vec(&state)).unwrap();
    let top: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("  \"") && !l.starts_with("   "))
        .map(|l| l.trim_start().split('"').nth(1).unwrap())
        .collect();
    assert_eq!(
        top,
        [
            "version",
            "schema",
            "date",
            "context",
            "messages",
            "truth",
            "aaa_first",
            "x_future_root"
        ]
    );
}

// ------------------------------------------------------------------------
// Golden files.

fn golden(name: &str, bytes: &[u8]) {
    let path: PathBuf = common::crate_dir().join("tests/golden").join(name);
    if std::env::var_os("WO_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
    }
    let want = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if want != bytes {
        panic!(
            "{} differs from the serializer's output:\n{}",
            path.display(),
            String::from_utf8_lossy(bytes)
        );
    }
}

/// A state touching every field, built in code (messages added out of
/// order, escapes, unknown fields, a tombstone).
fn golden_state() -> State {
    let mut s = State::new(ts("2026-02-22T21:10:00Z"));
    s.context = "<div><p>Operating context for this directory…</p></div>".into();

    let mut fact = TruthEntry::new(
        "Server is stateless",
        ts("2026-02-22T19:30:00Z"),
        0.85,
        "<div><p>No user data on servers.</p><p><a href=\"https://example.org\">source</a></p></div>",
    );
    fact.kind = Some(TruthKind::Fact);
    fact.tags = Some(vec!["server".into(), "storage".into()]);
    fact.refs = Some(3);
    fact.updated = Some(ts("2026-02-23T08:00:00.5Z"));
    fact.expires = Some(Expires::At(ts("2027-01-01T00:00:00Z")));
    fact.extra
        .insert("x_embedding".into(), json!([0.5, -0.25]).into());
    let mut effort = TruthEntry::new(
        "Ship v1",
        ts("2026-02-22T19:31:00Z"),
        1.0,
        "<p>Ship it.</p>",
    );
    effort.kind = Some(wo_format::TruthKind::Effort);
    effort.status = Some(wo_format::EffortStatus::Resolved);
    effort.resolution = Some("Shipped.".into());
    effort.supersedes = Some(fact.id.clone());
    effort.expires = Some(Expires::Flag(false));
    let doomed = TruthEntry::new("Obsolete", ts("2026-02-20T00:00:00Z"), 0.1, "<p>old</p>");
    let doomed_id = doomed.id.clone();

    let mut question = Message::new(
        "alec",
        ts("2026-02-22T20:11:05Z"),
        "Persistence model",
        "<p>Summarize…</p>",
    );
    question.role = Some(Role::User);
    let mut answer = Message::new(
        "claude-sonnet-4.5",
        ts("2026-02-22T20:11:09.25Z"),
        "Answer",
        "<p>Plain files, \"owned\" by you &amp; nobody else.</p>\n<pre>a\tb</pre>",
    );
    answer.role = Some(Role::Assistant);
    answer.parent = Some(question.id.clone());
    answer.provider = Some("anthropic".into());
    answer.model = Some("claude-sonnet-4.5".into());
    answer.usage = Some(Usage {
        prompt_tokens: Some(1200),
        completion_tokens: Some(85),
        extra: [("cache_read_tokens".to_owned(), json!(7).into())]
            .into_iter()
            .collect(),
    });
    answer.sources = Some(vec![fact.id.clone(), question.id.clone()]);
    answer.extra.insert("x_rating".into(), json!(5).into());
    assert!(s.push_message(answer));
    assert!(s.push_message(question));

    s.truth.trust = vec![fact, effort, doomed];
    s.delete_truth(&doomed_id, ts("2026-02-22T21:00:00Z"))
        .unwrap();
    let mut prefs = RetrievalPrefs::spec_defaults();
    prefs
        .extra
        .insert("url_fetch".into(), json!({"enabled": false}).into());
    s.truth.retrieval_prefs = prefs;
    s.truth.extra.insert("x_notes".into(), json!("kept").into());
    s.extra
        .insert("zz_future".into(), json!({"b": [1, 2], "a": null}).into());
    s.extra.insert(
        "aa_future".into(),
        json!("first of the unknown keys").into(),
    );
    s
}

#[test]
fn serializer_output_matches_the_golden_files() {
    let state = golden_state();
    let bytes = to_canonical_vec(&state);
    golden("state.json", &bytes);
    assert_eq!(parse(&bytes).unwrap(), state);

    let empty = State::new(ts("2026-01-01T00:00:00Z"));
    golden("empty.json", &to_canonical_vec(&empty));

    let path = common::fixtures_dir("valid").join("unknown_fields_everywhere.json");
    let parsed = parse(&std::fs::read(path).unwrap()).unwrap();
    golden("unknown_fields_everywhere.json", &to_canonical_vec(&parsed));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(128), ..ProptestConfig::default() })]

    /// Generated states (unknown fields, fractional and colliding
    /// timestamps, missing ids) round-trip too.
    #[test]
    fn generated_states_round_trip(state in common::strategies::state()) {
        let once = to_canonical_vec(&state);
        let again = parse(&once).unwrap();
        prop_assert_eq!(&again, &state);
        prop_assert_eq!(to_canonical_vec(&again), once);
    }
}

/// Unknown fields keep their numbers byte for byte (`1.10`, integers past
/// u64, `1e400`), at every level, through parse → canonical write, and a
/// merge keeps them too.
#[test]
fn unknown_field_numbers_survive_byte_exact() {
    let text = r#"{
  "version": 1,
  "schema": "https://raw.githubusercontent.com/arborrhythms/WikiOracle/main/spec/llm_state_v1.json",
  "date": "2026-01-01T00:00:00Z",
  "context": "",
  "messages": [
    {
      "id": "m_1",
      "title": "t",
      "username": "u",
      "timestamp": "2026-01-01T00:00:00Z",
      "content": "<p>a</p>",
      "usage": {
        "prompt_tokens": 1,
        "x_cost": 0.10
      },
      "x_big": 123456789012345678901234,
      "x_nested": {
        "a": [
          1.10,
          1e400,
          -0.0
        ]
      }
    }
  ],
  "truth": {
    "trust": [
      {
        "id": "t_1",
        "title": "T",
        "timestamp": "2026-01-01T00:00:00Z",
        "certainty": 0.5,
        "content": "<p>x</p>",
        "x_weight": 1.10
      }
    ],
    "retrieval_prefs": {
      "x_knob": 2.50
    },
    "deleted": [
      {
        "id": "t_2",
        "date": "2026-01-01T00:00:00Z",
        "x_n": 1E+2
      }
    ],
    "x_truth": 99999999999999999999
  },
  "x_top": 1e400
}
"#;
    let s = wo_format::parse(text.as_bytes()).unwrap();
    assert_eq!(String::from_utf8(to_canonical_vec(&s)).unwrap(), text);
    // Merging a copy that lacks the extension fields loses none of them.
    let mut bare = s.clone();
    bare.messages_mut()[0].extra.clear();
    bare.truth.trust[0].extra.clear();
    let (merged, _) = wo_format::merge::merge_all(&bare, [&s]);
    assert_eq!(merged.messages()[0], s.messages()[0]);
    assert_eq!(merged.truth.trust[0], s.truth.trust[0]);
    // `wo validate` accepts such a file (its validator once read the file
    // into a `Value`, which refuses `1e400` as "number out of range")...
    let (issues, _) = validate_bytes(text.as_bytes());
    assert_eq!(issues, vec![], "an unknown field's 1e400 is valid");
    // ... and admission (merge, import) keeps the numbers byte for byte.
    let admitted = wo_format::admit::admit_bytes(text.as_bytes()).unwrap();
    assert_eq!(
        String::from_utf8(to_canonical_vec(&admitted.state)).unwrap(),
        text
    );
    // A known number field out of range is still an error, named by pointer,
    // and a syntax error after such a number is still reported as one.
    let known = text.replacen("\"certainty\": 0.5", "\"certainty\": 1e400", 1);
    let (issues, _) = validate_bytes(known.as_bytes());
    assert!(
        issues
            .iter()
            .any(|i| i.pointer == "/truth/trust/0/certainty"),
        "{issues:?}"
    );
    let broken = text.replacen("\"x_truth\": 99999999999999999999", "\"x_truth\": 9,", 1);
    let (issues, _) = validate_bytes(broken.as_bytes());
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].rule, "json-syntax", "{issues:?}");
}
