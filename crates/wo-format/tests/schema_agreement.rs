//! The published JSON Schema (`spec/llm_state_v1.json`) and the code agree:
//! every valid fixture passes both, every invalid one fails both at the
//! pointer and rule its `.expect` names, and on generated documents the
//! schema accepts exactly what `validate_structure` and `parse` accept.

mod common;

use std::collections::BTreeSet;
use std::sync::LazyLock;

use common::{load, pairs};
use proptest::prelude::*;
use serde_json::{Value, json};
use wo_format::{SCHEMA_URL, Timestamp, parse, validate, validate_bytes};

static SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    let path = common::crate_dir().join("../../spec/llm_state_v1.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("spec/llm_state_v1.json is JSON")
});

/// The schema as published (formats are annotations in 2020-12).
static VALIDATOR: LazyLock<jsonschema::Validator> = LazyLock::new(|| {
    jsonschema::draft202012::options()
        .build(&SCHEMA)
        .expect("the schema compiles")
});

/// The same schema with `format` asserted, as some validators do: it must
/// not change any verdict.
static FORMAT_VALIDATOR: LazyLock<jsonschema::Validator> = LazyLock::new(|| {
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&SCHEMA)
        .expect("the schema compiles")
});

/// Instance paths of every schema error, or `None` when the schema accepts.
fn schema_errors(doc: &Value) -> Option<BTreeSet<String>> {
    let formats = FORMAT_VALIDATOR.is_valid(doc);
    let errors: BTreeSet<String> = VALIDATOR
        .iter_errors(doc)
        .map(|e| e.instance_path().as_str().to_owned())
        .collect();
    assert_eq!(
        errors.is_empty(),
        formats,
        "asserting `format` changed the verdict on {doc}"
    );
    (!errors.is_empty()).then_some(errors)
}

#[test]
fn schema_is_valid_draft_2020_12_with_the_canonical_id() {
    jsonschema::draft202012::meta::validate(&SCHEMA)
        .expect("valid against the 2020-12 meta-schema");
    assert_eq!(
        SCHEMA["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(SCHEMA["$id"], SCHEMA_URL);
    assert!(SCHEMA_URL.ends_with("/spec/llm_state_v1.json"));
    // The human spec sits beside it.
    assert!(
        common::crate_dir()
            .join("../../spec/llm_state_v1.md")
            .is_file()
    );
    // A broken copy is caught by the meta-schema (the check can fail).
    let mut broken = SCHEMA.clone();
    broken["properties"]["version"]["type"] = json!("int");
    assert!(jsonschema::draft202012::meta::validate(&broken).is_err());
}

#[test]
fn valid_fixtures_pass_the_schema_and_the_code() {
    let fixtures = load("valid", false);
    assert!(
        fixtures.len() >= 12,
        "only {} valid fixtures",
        fixtures.len()
    );
    for f in &fixtures {
        let doc: Value = serde_json::from_slice(&f.bytes).unwrap();
        assert_eq!(schema_errors(&doc), None, "{}: schema rejects", f.name);
        assert_eq!(validate::validate_structure(&doc), vec![], "{}", f.name);
        if let Err(e) = parse(&f.bytes) {
            panic!("{}: parse failed: {e}", f.name);
        }
        let (issues, _lint) = validate_bytes(&f.bytes);
        assert_eq!(issues, vec![], "{}: validate_bytes", f.name);
    }
}

#[test]
fn invalid_fixtures_fail_the_schema_and_the_code_at_the_expected_pointer() {
    let fixtures = load("invalid", true);
    assert!(
        fixtures.len() >= 25,
        "only {} invalid fixtures",
        fixtures.len()
    );
    let mut rules = BTreeSet::new();
    for f in &fixtures {
        let expected = f.expect.clone().unwrap();
        rules.insert(expected.1.clone());
        let err = match parse(&f.bytes) {
            Ok(_) => panic!("{}: parse accepted it", f.name),
            Err(e) => e,
        };
        assert_eq!(
            pairs(&err.issues),
            vec![expected.clone()],
            "{}: parse",
            f.name
        );
        let (issues, _) = validate_bytes(&f.bytes);
        assert_eq!(
            pairs(&issues),
            vec![expected.clone()],
            "{}: validate_bytes",
            f.name
        );
        let Ok(doc) = serde_json::from_slice::<Value>(&f.bytes) else {
            // Not JSON at all: no schema can accept it.
            assert_eq!(expected.1, "json-syntax", "{}", f.name);
            continue;
        };
        assert_eq!(
            pairs(&validate::validate_structure(&doc)),
            vec![expected.clone()],
            "{}: validate_structure",
            f.name
        );
        let Some(paths) = schema_errors(&doc) else {
            panic!("{}: the schema accepts it", f.name);
        };
        assert!(
            paths.contains(&expected.0),
            "{}: schema errors at {paths:?}, none at {:?}",
            f.name,
            expected.0
        );
    }
    for rule in [
        "json-syntax",
        "type",
        "required",
        "const",
        "enum",
        "format",
        "pattern",
        "range",
    ] {
        assert!(rules.contains(rule), "no invalid fixture breaks `{rule}`");
    }
}

#[test]
fn content_invalid_fixtures_pass_the_schema_but_fail_xhtml_rules() {
    let fixtures = load("content_invalid", true);
    assert!(fixtures.len() >= 10);
    for f in &fixtures {
        let expected = f.expect.clone().unwrap();
        assert!(expected.1.starts_with("xhtml-"), "{}", f.name);
        let doc: Value = serde_json::from_slice(&f.bytes).unwrap();
        assert_eq!(schema_errors(&doc), None, "{}: schema rejects", f.name);
        assert_eq!(validate::validate_structure(&doc), vec![], "{}", f.name);
        // The loader's fast path checks structure only; `wo validate` and
        // the store check content.
        assert!(parse(&f.bytes).is_ok(), "{}", f.name);
        let (issues, _) = validate_bytes(&f.bytes);
        assert_eq!(pairs(&issues), vec![expected], "{}", f.name);
        assert_eq!(pairs(&validate::validate_content(&doc)), pairs(&issues));
    }
}

/// What JSON Schema cannot see: `1.0` and `1e20` are integers to it (JSON
/// numbers are compared by value), and a key written twice is gone before a
/// schema validator looks. The code rejects them; llm_state_v1.md says so.
#[test]
fn schema_gaps_pass_the_schema_and_fail_the_code() {
    let fixtures = load("schema_gaps", true);
    assert!(!fixtures.is_empty());
    for f in &fixtures {
        let expected = f.expect.clone().unwrap();
        let doc: Value = serde_json::from_slice(&f.bytes).unwrap();
        assert_eq!(schema_errors(&doc), None, "{}: no longer a gap?", f.name);
        assert!(parse(&f.bytes).is_err(), "{}", f.name);
        let (issues, _) = validate_bytes(&f.bytes);
        assert_eq!(pairs(&issues), vec![expected], "{}", f.name);
    }
}

#[test]
fn duplicate_ids_are_lint_warnings_not_errors() {
    let bytes = std::fs::read(common::fixtures_dir("valid").join("duplicate_ids.json")).unwrap();
    let (issues, lint) = validate_bytes(&bytes);
    assert_eq!(issues, vec![]);
    assert_eq!(
        pairs(&lint),
        vec![
            ("/messages/1/id".to_owned(), "unique".to_owned()),
            ("/truth/trust/1/id".to_owned(), "unique".to_owned()),
        ]
    );
}

// ------------------------------------------------------------------------
// Pattern by pattern: the schema's regular expressions against the code.

fn string_validator(pattern_node: &Value) -> jsonschema::Validator {
    let pattern = pattern_node["pattern"].as_str().expect("a pattern");
    jsonschema::draft202012::new(&json!({"type": "string", "pattern": pattern})).unwrap()
}

static TIMESTAMP_RE: LazyLock<jsonschema::Validator> =
    LazyLock::new(|| string_validator(&SCHEMA["$defs"]["timestamp"]));
static ID_RE: LazyLock<jsonschema::Validator> =
    LazyLock::new(|| string_validator(&SCHEMA["$defs"]["id"]));
static USERNAME_RE: LazyLock<jsonschema::Validator> =
    LazyLock::new(|| string_validator(&SCHEMA["$defs"]["message"]["properties"]["username"]));
static SCHEMA_NAME_RE: LazyLock<jsonschema::Validator> =
    LazyLock::new(|| string_validator(&SCHEMA["properties"]["schema"]));

fn pad(n: u32, width: usize) -> String {
    format!("{n:0width$}")
}

/// Timestamps near every boundary the rules have: month lengths, leap years
/// (including centuries), field ranges, fraction length, separators.
fn timestamp_like() -> impl Strategy<Value = String> {
    let year = prop_oneof![
        Just(0u32),
        Just(4),
        Just(100),
        Just(400),
        Just(1900),
        Just(2000),
        Just(2023),
        Just(2024),
        Just(2100),
        Just(9996),
        Just(9999),
        0u32..10000,
    ];
    let sep = |good: &'static str, bad: &'static str| prop_oneof![20 => Just(good), 1 => Just(bad)];
    (
        year,
        prop_oneof![prop::sample::select(&[0u32, 1, 2, 4, 12, 13][..]), 0u32..14],
        prop_oneof![
            prop::sample::select(&[0u32, 1, 28, 29, 30, 31, 32][..]),
            0u32..33
        ],
        prop_oneof![prop::sample::select(&[0u32, 23, 24][..]), 0u32..26],
        prop_oneof![prop::sample::select(&[0u32, 59, 60][..]), 0u32..62],
        prop_oneof![prop::sample::select(&[0u32, 59, 60][..]), 0u32..62],
        prop_oneof![4 => Just(None), 1 => (0usize..12).prop_map(Some)],
        (
            sep("-", "/"),
            sep("T", " "),
            sep(":", "."),
            sep("Z", "+00:00"),
        ),
    )
        .prop_map(|(y, mo, d, h, mi, s, frac, (dash, t, colon, z))| {
            let mut out = format!(
                "{}{dash}{}-{}{t}{}{colon}{}:{}",
                pad(y, 4),
                pad(mo, 2),
                pad(d, 2),
                pad(h, 2),
                pad(mi, 2),
                pad(s, 2)
            );
            if let Some(n) = frac {
                out.push('.');
                out.push_str(&"7".repeat(n));
            }
            out.push_str(z);
            out
        })
}

const WHITE_SPACE: &[char] = &[
    '\t', '\n', '\u{b}', '\u{c}', '\r', ' ', '\u{85}', '\u{a0}', '\u{1680}', '\u{2000}',
    '\u{2005}', '\u{200a}', '\u{2028}', '\u{2029}', '\u{202f}', '\u{205f}', '\u{3000}',
];

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(512), ..ProptestConfig::default() })]

    #[test]
    fn timestamp_pattern_matches_timestamp_parse(s in prop_oneof![4 => timestamp_like(), 1 => "\\PC{0,32}"]) {
        let code = Timestamp::parse(&s).is_ok();
        prop_assert_eq!(TIMESTAMP_RE.is_valid(&json!(s)), code, "{:?}", s);
    }

    #[test]
    fn id_pattern_matches_is_valid_id(
        s in prop_oneof![
            "[A-Za-z0-9_.:~-]{0,3}",
            "[A-Za-z0-9_.:~-]{126,130}",
            "[A-Za-z0-9_.:~ /é\u{0}-]{0,20}",
        ]
    ) {
        prop_assert_eq!(ID_RE.is_valid(&json!(s)), validate::is_valid_id(&s), "{:?}", s);
    }

    #[test]
    fn username_pattern_matches_non_blank(
        chars in prop::collection::vec(
            prop_oneof![
                8 => prop::sample::select(WHITE_SPACE),
                1 => prop::sample::select(&['a', '\u{200b}', '\u{feff}', '\u{180e}', '\u{0}'][..]),
            ],
            0..5,
        )
    ) {
        let s: String = chars.into_iter().collect();
        prop_assert_eq!(USERNAME_RE.is_valid(&json!(s)), !s.trim().is_empty(), "{:?}", s);
    }

    #[test]
    fn schema_pattern_matches_is_accepted_schema(
        prefix in prop::sample::select(&["", "https://x.org/", "a/b/", "x", "/", "\n/", "wikioracle."][..]),
        middle in prop::sample::select(&["llm_state_v1.json", "wikioracle.llm_state", "llm_state", "llm_state_v1.jsonx", "LLM_STATE_V1.JSON", "llm_state_v1.json/", "llm_state_v1_json"][..]),
        suffix in prop::sample::select(&["", "\n", " ", "/", "#x"][..]),
    ) {
        let s = format!("{prefix}{middle}{suffix}");
        prop_assert_eq!(SCHEMA_NAME_RE.is_valid(&json!(s)), validate::is_accepted_schema(&s), "{:?}", s);
    }
}

// ------------------------------------------------------------------------
// Whole documents: a valid state mutated at random paths.

fn base_doc() -> Value {
    json!({
        "version": 1,
        "schema": SCHEMA_URL,
        "date": "2026-02-22T21:10:00Z",
        "context": "<p>c</p>",
        "messages": [{
            "id": "m_6a1f2c9e4b1d7a02", "title": "t", "username": "alec",
            "timestamp": "2026-02-22T20:11:05Z", "content": "<p>a</p>",
            "role": "assistant", "parent": "m_0", "provider": "p", "model": "m",
            "usage": {"prompt_tokens": 1, "completion_tokens": 2}, "sources": ["t_1"]
        }],
        "truth": {
            "trust": [{
                "id": "t_1", "title": "t", "timestamp": "2026-02-22T19:30:00Z", "certainty": 0.5,
                "content": "<p>b</p>", "kind": "effort", "status": "open", "resolution": "r",
                "supersedes": "t_0", "tags": ["a"], "expires": true, "refs": 2,
                "updated": "2026-02-23T00:00:00Z", "source": "m_6a1f2c9e4b1d7a02"
            }],
            "retrieval_prefs": {"max_entries": 8, "min_certainty": 0.0, "prefer_higher_certainty": true,
                                "certainty_weight": 0.7, "recency_weight": 0.3},
            "deleted": [{"id": "t_9", "date": "2026-02-21T00:00:00Z"}]
        }
    })
}

const PATHS: &[&str] = &[
    "",
    "/version",
    "/schema",
    "/date",
    "/context",
    "/x_unknown",
    "/messages",
    "/messages/0",
    "/messages/0/id",
    "/messages/0/title",
    "/messages/0/username",
    "/messages/0/timestamp",
    "/messages/0/content",
    "/messages/0/role",
    "/messages/0/parent",
    "/messages/0/provider",
    "/messages/0/model",
    "/messages/0/usage",
    "/messages/0/usage/prompt_tokens",
    "/messages/0/usage/completion_tokens",
    "/messages/0/sources",
    "/messages/0/sources/0",
    "/messages/0/x_unknown",
    "/truth",
    "/truth/trust",
    "/truth/trust/0",
    "/truth/trust/0/id",
    "/truth/trust/0/title",
    "/truth/trust/0/timestamp",
    "/truth/trust/0/certainty",
    "/truth/trust/0/content",
    "/truth/trust/0/kind",
    "/truth/trust/0/status",
    "/truth/trust/0/resolution",
    "/truth/trust/0/supersedes",
    "/truth/trust/0/tags",
    "/truth/trust/0/tags/0",
    "/truth/trust/0/expires",
    "/truth/trust/0/refs",
    "/truth/trust/0/updated",
    "/truth/trust/0/source",
    "/truth/retrieval_prefs",
    "/truth/retrieval_prefs/max_entries",
    "/truth/retrieval_prefs/min_certainty",
    "/truth/retrieval_prefs/prefer_higher_certainty",
    "/truth/retrieval_prefs/certainty_weight",
    "/truth/retrieval_prefs/recency_weight",
    "/truth/deleted",
    "/truth/deleted/0",
    "/truth/deleted/0/id",
    "/truth/deleted/0/date",
];

fn pool() -> Vec<Value> {
    vec![
        json!(null),
        json!(true),
        json!(false),
        json!(0),
        json!(1),
        json!(2),
        json!(-1),
        json!(0.5),
        json!(1.5),
        json!(-0.5),
        json!(""),
        json!(" \u{3000}"),
        json!("x"),
        json!("bad id"),
        json!("t_1"),
        json!("user"),
        json!("fact"),
        json!("resolved"),
        json!("2026-01-01T00:00:00Z"),
        json!("2026-01-01T00:00:00.5Z"),
        json!("2026-02-30T00:00:00Z"),
        json!("wikioracle.llm_state"),
        json!("x/llm_state_v2.json"),
        json!([]),
        json!(["t_1"]),
        json!(["bad id"]),
        json!([1]),
        json!({}),
        json!({"prompt_tokens": 1}),
        json!({"a": 1}),
        json!({"id": "t_2", "date": "2026-01-01T00:00:00Z"}),
        json!({"title": "t", "username": "u", "timestamp": "2026-01-01T00:00:00Z", "content": ""}),
        json!({"title": "t", "timestamp": "2026-01-01T00:00:00Z", "certainty": 1, "content": ""}),
    ]
}

#[derive(Clone, Debug)]
enum Edit {
    Delete(&'static str),
    Set(&'static str, Value),
}

fn edit() -> impl Strategy<Value = Edit> {
    let path = prop::sample::select(PATHS);
    prop_oneof![
        1 => path.clone().prop_map(Edit::Delete),
        3 => (path, prop::sample::select(pool())).prop_map(|(p, v)| Edit::Set(p, v)),
    ]
}

fn apply(doc: &mut Value, edit: &Edit) {
    let (path, value) = match edit {
        Edit::Delete(p) => (*p, None),
        Edit::Set(p, v) => (*p, Some(v.clone())),
    };
    if path.is_empty() {
        if let Some(v) = value {
            *doc = v;
        }
        return;
    }
    let (parent, last) = path.rsplit_once('/').unwrap();
    let Some(parent) = doc.pointer_mut(parent) else {
        return;
    };
    match (parent, value) {
        (Value::Object(m), None) => {
            m.remove(last);
        }
        (Value::Object(m), Some(v)) => {
            m.insert(last.to_owned(), v);
        }
        (Value::Array(a), None) => {
            if let Ok(i) = last.parse::<usize>()
                && i < a.len()
            {
                a.remove(i);
            }
        }
        (Value::Array(a), Some(v)) => {
            if let Ok(i) = last.parse::<usize>()
                && i < a.len()
            {
                a[i] = v;
            }
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(1024), ..ProptestConfig::default() })]

    /// The schema, the structural validator and the typed parser give the
    /// same verdict, and the schema flags every pointer the code names.
    #[test]
    fn schema_validator_and_parser_agree_on_mutated_documents(
        edits in prop::collection::vec(edit(), 1..4)
    ) {
        let mut doc = base_doc();
        for e in &edits {
            apply(&mut doc, e);
        }
        let bytes = serde_json::to_vec(&doc).unwrap();
        let code = validate::validate_structure(&doc);
        let schema = schema_errors(&doc);
        prop_assert_eq!(schema.is_none(), code.is_empty(), "schema {:?} vs code {:?} on {}", schema, code, doc);
        prop_assert_eq!(parse(&bytes).is_ok(), code.is_empty(), "parse vs code {:?} on {}", code, doc);
        if let Some(paths) = schema {
            for issue in &code {
                prop_assert!(paths.contains(&issue.pointer), "code {} not among schema errors {:?}", issue, paths);
            }
        }
    }
}
