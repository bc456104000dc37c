//! Golden vectors for the web client (`crates/wo-server/src/web/app.js`),
//! which computes ids, merges and exports in JavaScript: inputs and what
//! this crate makes of them, written to `tests/browser/golden.json` for the
//! browser suite to hold app.js to. The test fails when the checked-in file
//! no longer matches this crate; regenerate it with
//! `WO_BLESS=1 cargo test -p wo-format --test browser_golden` and review
//! the diff.

use std::path::PathBuf;

use serde_json::{Value, json};
use wo_format::merge::merge_into;
use wo_format::{ids, parse, to_canonical_vec};

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/browser/golden.json")
}

/// Id inputs chosen for a hand-written SHA-256: empty fields, non-ASCII
/// text, and hashed inputs of 55, 56, 63, 64 and 119 bytes (the padding
/// edges of one and two 64-byte blocks).
fn id_vectors() -> Vec<Value> {
    let ts = "2026-01-01T00:00:00Z";
    let mut out = Vec::new();
    let mut push = |kind: &str, a: &str, t: &str, content: &str| {
        let id = match kind {
            "message" => ids::message_id(a, t, content),
            _ => ids::truth_id(a, t, content),
        };
        let first = if kind == "message" {
            "username"
        } else {
            "title"
        };
        out.push(json!({"kind": kind, first: a, "timestamp": t, "content": content, "id": id}));
    };
    push("message", "", ts, "");
    push("message", "alec", ts, "<p>hello</p>");
    push("message", "zoë", ts, "<p>naïve — 日本語 🙂</p>");
    push("truth", "a fact", ts, "<p>a fact</p>");
    push(
        "truth",
        "ünïcode",
        "2026-01-01T00:00:00.123456Z",
        "<p>\"quoted\" \\ back</p>",
    );
    // `username|timestamp|content` is hashed: 1 + 20 + 1 = 22 bytes of
    // separators and time, so content of n - 22 bytes (username "")
    // gives an input of n bytes.
    for n in [55usize, 56, 63, 64, 119, 120, 128] {
        push("message", "", ts, &"x".repeat(n - 22));
    }
    out
}

fn state(text: &str) -> wo_format::State {
    parse(text.as_bytes()).unwrap_or_else(|e| panic!("golden input does not parse: {e}\n{text}"))
}

fn canonical(s: &wo_format::State) -> String {
    String::from_utf8(to_canonical_vec(s)).unwrap()
}

/// Merge cases: (name, base, incoming); the expected output is this crate's
/// canonical bytes of the merge.
fn merge_vectors() -> Vec<Value> {
    let head = r#""version":1,"schema":"wikioracle.llm_state","date":"2026-01-01T00:00:00Z""#;
    let cases = [
        (
            "disjoint messages are united and sorted",
            format!(
                r#"{{{head},"messages":[{{"title":"b","username":"u","timestamp":"2026-01-02T00:00:00Z","content":"<p>b</p>"}}]}}"#
            ),
            format!(
                r#"{{{head},"messages":[{{"title":"a","username":"u","timestamp":"2026-01-01T00:00:00Z","content":"<p>a</p>"}}]}}"#
            ),
        ),
        (
            "two versions of one message join field by field",
            format!(
                r#"{{{head},"messages":[{{"id":"m_1","title":"a","username":"u","timestamp":"2026-01-01T00:00:00Z","content":"<p>a</p>","model":"x"}}]}}"#
            ),
            format!(
                r#"{{{head},"messages":[{{"id":"m_1","title":"b","username":"u","timestamp":"2026-01-01T00:00:00Z","content":"<p>a</p>","provider":"p"}}]}}"#
            ),
        ),
        (
            "a later truth edit wins",
            format!(
                r#"{{{head},"messages":[],"truth":{{"trust":[{{"id":"t_1","title":"old","timestamp":"2026-01-01T00:00:00Z","certainty":0.5,"content":"<p>old</p>"}}]}}}}"#
            ),
            format!(
                r#"{{{head},"messages":[],"truth":{{"trust":[{{"id":"t_1","title":"new","timestamp":"2026-01-01T00:00:00Z","updated":"2026-02-01T00:00:00Z","certainty":0.9,"content":"<p>new</p>"}}]}}}}"#
            ),
        ),
        (
            "a tombstone buries a version not edited after it",
            format!(
                r#"{{{head},"messages":[],"truth":{{"trust":[{{"id":"t_1","title":"t","timestamp":"2026-01-01T00:00:00Z","certainty":0.5,"content":"<p>t</p>"}}]}}}}"#
            ),
            format!(
                r#"{{{head},"messages":[],"truth":{{"deleted":[{{"id":"t_1","date":"2026-01-05T00:00:00Z"}}]}}}}"#
            ),
        ),
        (
            "an edit after the deletion survives it",
            format!(
                r#"{{{head},"messages":[],"truth":{{"trust":[{{"id":"t_1","title":"t","timestamp":"2026-01-01T00:00:00Z","updated":"2026-01-09T00:00:00Z","certainty":0.5,"content":"<p>t</p>"}}]}}}}"#
            ),
            format!(
                r#"{{{head},"messages":[],"truth":{{"deleted":[{{"id":"t_1","date":"2026-01-05T00:00:00Z"}}]}}}}"#
            ),
        ),
    ];
    cases
        .iter()
        .map(|(name, base, incoming)| {
            let mut merged = state(base);
            merge_into(&mut merged, &state(incoming));
            json!({
                "name": name,
                "base": serde_json::from_str::<Value>(base).unwrap(),
                "incoming": serde_json::from_str::<Value>(incoming).unwrap(),
                "merged": canonical(&merged),
            })
        })
        .collect()
}

/// Export cases: a state as some tool wrote it and its canonical bytes
/// (what an export must be).
fn export_vectors() -> Vec<Value> {
    let inputs = [
        r#"{"messages":[{"username":"u","content":"<p>2</p>","title":"two","timestamp":"2026-01-02T00:00:00Z","x_b":1,"x_a":[true,null]},{"title":"one","username":"u","timestamp":"2026-01-01T00:00:00Z","content":"<p>1 — é</p>"}],"schema":"wikioracle.llm_state","version":1,"date":"2026-01-03T00:00:00Z","x_top":{"z":1,"a":"s"},"context":"<p>ctx</p>","truth":{"trust":[{"title":"f","timestamp":"2026-01-01T00:00:00Z","certainty":1,"content":"<p>f</p>"}]}}"#,
    ];
    inputs
        .iter()
        .map(|text| {
            json!({
                "input": text,
                "canonical": canonical(&state(text)),
            })
        })
        .collect()
}

/// Plain text as the web client and Rust turn it into XHTML (app.js's
/// `textToXhtml`): line ends, blank paragraphs, escapes, control characters.
fn text_to_xhtml_vectors() -> Vec<Value> {
    [
        "",
        " \n\n ",
        "hello",
        "a < b & \"c\" > d\ne",
        "para one\n\npara two",
        "\n\nlead\n\n\n\nnext\n",
        "x\r\ny\rz",
        "bell\u{7}!",
        "naïve — 日本語 🙂",
    ]
    .into_iter()
    .map(|text| json!({"text": text, "xhtml": wo_format::xhtml::text_to_xhtml(text)}))
    .collect()
}

#[test]
fn browser_golden_vectors_are_current() {
    let doc = json!({
        "about": "Generated by crates/wo-format/tests/browser_golden.rs; do not edit. Regenerate: WO_BLESS=1 cargo test -p wo-format --test browser_golden",
        "ids": id_vectors(),
        "merges": merge_vectors(),
        "exports": export_vectors(),
        "text_to_xhtml": text_to_xhtml_vectors(),
    });
    let text = serde_json::to_string_pretty(&doc).unwrap() + "\n";
    let path = golden_path();
    if std::env::var_os("WO_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == text,
        "{} is stale (or missing): the web client's golden vectors no longer match \
         wo-format. Regenerate with `WO_BLESS=1 cargo test -p wo-format --test browser_golden` \
         and review the diff.",
        path.display()
    );
}
