//! Golden vectors for the web client (`crates/wo-server/src/web/app.js`),
//! which computes ids, merges, state patches, truth edits, tombstones and
//! exports by calling this crate and wo-format compiled to wasm
//! (`crates/wo-wasm`), renames included, and orders timestamps and
//! messages, links branches, infers roles, lists conversations
//! (`wo_format::conversation::listed`), orders truth by update and scores
//! search (`wo_text::bm25`) by the same calls: inputs and what the native build makes of them,
//! written to `tests/browser/golden.json`; the browser suite
//! (`tests/browser/run.mjs`, scenario "stateless: app.js agrees with the Rust
//! golden vectors") runs every vector through app.js's calls into the wasm
//! module, and `crates/wo-wasm/tests/exports.rs` through the same exports
//! natively. It lives here, not in wo-format, because the
//! patch rule is this crate's ([`wo_wire::apply_state_patch`]). The test
//! fails when the checked-in file no longer matches; regenerate it with
//! `WO_BLESS=1 cargo test -p wo-wire --test browser_golden` and review the
//! diff.

use std::path::PathBuf;

use serde_json::{Value, json};
use wo_format::merge::merge_into;
use wo_format::{Timestamp, TruthEdit, ids, parse, to_canonical_vec};

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/browser/golden.json")
}

/// Id inputs: empty fields, non-ASCII text, and hashed inputs of 55, 56,
/// 63, 64 and 119 bytes (the padding edges of one and two 64-byte blocks,
/// kept from when the page hashed in JavaScript).
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
    // Content is hashed in canonical form: equivalent spellings of valid
    // XHTML (quotes, attribute order, references, self-closing, entities
    // for characters that need none, whitespace in attributes) give the id
    // of the canonical spelling.
    for content in [
        "<p title='t' class=\"c\">a &#38; b &gt; c &quot;d&quot; &apos;e&apos;</p>",
        "<p>line<br></br>next<br/><br /></p><hr/><p/>",
        "<a href=\"https://x.org/?a=1&amp;b=2\" title=\"say &quot;hi&quot;\">l</a>",
        "<p data-k=\"tab\there\nline\">x</p>",
        "<p>cr\r\nlf\rcr</p>",
        "<!-- a comment --><p>after</p>",
        "plain text & more < less",
        "<p>&#x1F642; &#233;</p>",
    ] {
        push("truth", "canonical", ts, content);
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
            "a message's fields join: the larger canonical JSON of each",
            format!(
                r#"{{{head},"messages":[{{"id":"m_1","title":"zeta","username":"u","timestamp":"2026-01-01T00:00:00Z","content":"<p>a</p>","sources":["t_b"],"usage":{{"prompt_tokens":5}},"x_k":{{"b":1,"a":2}}}}]}}"#
            ),
            format!(
                r#"{{{head},"messages":[{{"id":"m_1","title":"alpha","username":"u","timestamp":"2026-01-01T00:00:00Z","content":"<p>a</p>","sources":["t_a","t_c"],"usage":{{"completion_tokens":9}},"x_k":"s","x_new":[1]}}]}}"#
            ),
        ),
        (
            "a joined message with another timestamp moves; equal times sort by id",
            format!(
                r#"{{{head},"messages":[{{"id":"m_2","title":"t","username":"u","timestamp":"2026-01-01T00:00:00Z","content":"<p>x</p>"}},{{"id":"m_1","title":"t","username":"u","timestamp":"2026-01-01T00:00:00.5Z","content":"<p>y</p>"}}]}}"#
            ),
            format!(
                r#"{{{head},"messages":[{{"id":"m_2","title":"t","username":"u","timestamp":"2026-01-03T00:00:00Z","content":"<p>x</p>"}},{{"id":"m_0","title":"t","username":"u","timestamp":"2026-01-01T00:00:00.5Z","content":"<p>z</p>"}}]}}"#
            ),
        ),
        (
            "truth edits of one instant tie-break on the entry's JSON; copies of one edit unite extensions",
            format!(
                r#"{{{head},"messages":[],"truth":{{"trust":[{{"id":"t_1","title":"a","timestamp":"2026-01-01T00:00:00Z","updated":"2026-01-02T00:00:00Z","certainty":0.25,"content":"<p>a</p>"}},{{"id":"t_2","title":"s","timestamp":"2026-01-01T00:00:00Z","certainty":0.5,"content":"<p>s</p>","x_a":1}}]}}}}"#
            ),
            format!(
                r#"{{{head},"messages":[],"truth":{{"trust":[{{"id":"t_1","title":"b","timestamp":"2026-01-01T00:00:00Z","updated":"2026-01-02T00:00:00.000Z","certainty":0.25,"content":"<p>b</p>"}},{{"id":"t_2","title":"s","timestamp":"2026-01-01T00:00:00Z","certainty":0.5,"content":"<p>s</p>","x_b":[true]}}]}}}}"#
            ),
        ),
        (
            "fractional seconds order by instant, not by text",
            format!(
                r#"{{{head},"messages":[],"truth":{{"trust":[{{"id":"t_1","title":"old","timestamp":"2026-01-01T00:00:00Z","updated":"2026-01-05T00:00:00.5Z","certainty":0.5,"content":"<p>x</p>"}}]}}}}"#
            ),
            r#"{"version":1,"schema":"wikioracle.llm_state","date":"2026-01-01T00:00:00.5Z","messages":[],"truth":{"trust":[{"id":"t_1","title":"new","timestamp":"2026-01-01T00:00:00Z","updated":"2026-01-05T00:00:00Z","certainty":0.5,"content":"<p>x</p>"}],"deleted":[{"id":"t_9","date":"2026-01-01T00:00:00.25Z"}]}}"#
            .to_owned(),
        ),
        (
            "tombstones keep the latest date and unite extensions; the base keeps its context and prefs",
            format!(
                r#"{{{head},"context":"<p>mine</p>","messages":[],"truth":{{"trust":[],"retrieval_prefs":{{"max_entries":3}},"deleted":[{{"id":"t_2","date":"2026-01-09T00:00:00Z","x_a":1}},{{"id":"t_1","date":"2026-01-01T00:00:00Z"}}]}},"x_top":"base"}}"#
            ),
            r#"{"version":1,"schema":"wikioracle.llm_state","date":"2026-02-01T00:00:00Z","context":"<p>theirs</p>","messages":[],"truth":{"trust":[],"retrieval_prefs":{"max_entries":9},"deleted":[{"id":"t_1","date":"2026-01-03T00:00:00Z","x_b":2},{"id":"t_2","date":"2026-01-02T00:00:00Z"}]},"x_top":"incoming","x_other":true}"#
            .to_owned(),
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
        // Ids derived from canonical XHTML, messages sorted by instant then
        // id, numbers as serde_json writes them, every optional field in
        // model order, unknown fields sorted, strings escaped alike.
        r#"{"version":1,"schema":"wikioracle.llm_state","date":"2026-01-03T00:00:00Z","messages":[{"username":"u","timestamp":"2026-01-01T00:00:01Z","content":"<p title='b' class='a'>x<br></p>","title":"t"},{"id":"m_b","username":"u","timestamp":"2026-01-01T00:00:00.5Z","content":"<p>b</p>","title":"b","x_z":{"b":[1,{"d":null,"c":"\u0001\"\\/"}],"a":-2},"sources":["t_1"],"usage":{"completion_tokens":3,"prompt_tokens":2},"model":"m","provider":"p","parent":"m_a","role":"assistant"},{"id":"m_a","username":"u","timestamp":"2026-01-01T00:00:00.5Z","content":"<p>a\tb</p>","title":"a \u2028 line\u00e9"}],"truth":{"retrieval_prefs":{"recency_weight":0.3,"certainty_weight":0.7,"prefer_higher_certainty":true,"min_certainty":0,"max_entries":8,"x_p":1},"trust":[{"title":"e","timestamp":"2026-01-01T00:00:00Z","certainty":0.1,"content":"<p>e</p>","provenance":{"exchange":"m_b","at":"2026-01-01T00:00:00Z","by":"interpreter","messages":["m_a"]},"source":"s","updated":"2026-01-02T00:00:00Z","refs":4,"expires":"2027-01-01T00:00:00Z","tags":["x","y"],"supersedes":"t_0","resolution":"r","status":"open","kind":"effort"},{"id":"t_z","title":"small","timestamp":"2026-01-01T00:00:00Z","certainty":0.000001,"content":"","expires":false}],"deleted":[{"id":"t_q","date":"2026-01-01T00:00:00Z"}],"x_t":"t"},"context":""}"#,
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

/// State patches of a stateless turn (`done`) and of the memory step,
/// applied by [`wo_wire::apply_state_patch`]: messages appended by id, truth
/// `refs` merged into known entries, members deleted by `null`, other
/// arrays replaced.
fn patch_vectors() -> Vec<Value> {
    let target = json!({
        "version": 1,
        "schema": "wikioracle.llm_state",
        "date": "2026-01-01T00:00:00Z",
        "context": "<p>c</p>",
        "messages": [{"id": "m_1", "title": "a", "username": "u", "timestamp": "2026-01-01T00:00:00Z", "content": "<p>a</p>"}],
        "truth": {"trust": [{"id": "t_1", "title": "T", "timestamp": "2026-01-01T00:00:00Z", "certainty": 0.5, "content": "<p>T</p>", "refs": 1, "tags": ["a"]}], "retrieval_prefs": {"max_entries": 8}},
        "x_list": [1, 2]
    });
    let patches = [
        (
            "a turn appends its two messages and counts refs",
            json!({
                "date": "2026-01-02T00:00:00Z",
                "messages": [
                    {"id": "m_2", "title": "q", "username": "u", "timestamp": "2026-01-02T00:00:00Z", "content": "<p>q</p>", "parent": "m_1"},
                    {"id": "m_3", "title": "r", "username": "smollm2", "timestamp": "2026-01-02T00:00:01Z", "content": "<p>r</p>", "parent": "m_2", "role": "assistant", "sources": ["t_1"]}
                ],
                "truth": {"trust": [{"id": "t_1", "refs": 2}]}
            }),
        ),
        (
            "a known record is merge-patched: null deletes a member, arrays inside it are replaced",
            json!({
                "messages": [{"id": "m_1", "title": "a2", "parent": null}],
                "truth": {"trust": [{"id": "t_1", "tags": ["b"], "refs": null, "certainty": 0.75}]}
            }),
        ),
        (
            "the memory step sends whole entries; a new one is appended",
            json!({
                "date": "2026-01-03T00:00:00Z",
                "truth": {"trust": [
                    {"id": "t_2", "title": "N", "timestamp": "2026-01-03T00:00:00Z", "certainty": 0.8, "content": "<p>N</p>", "kind": "fact", "provenance": {"messages": ["m_1"], "by": "interpreter", "at": "2026-01-03T00:00:00Z"}}
                ]}
            }),
        ),
        (
            "refs for an entry the client no longer has make no entry",
            json!({"truth": {"trust": [{"id": "t_gone", "refs": 5}, {"id": "t_1", "refs": 3}]}}),
        ),
        (
            "an empty list replaces, as RFC 7396 says",
            json!({"messages": []}),
        ),
        (
            "RFC 7396 elsewhere: objects merge, null deletes, other arrays and scalars replace",
            json!({"context": null, "x_list": [3], "x_new": {"a": {"b": 1, "c": null}}, "truth": {"retrieval_prefs": {"max_entries": null, "min_certainty": 0.5}}}),
        ),
    ];
    patches
        .into_iter()
        .map(|(name, patch)| {
            let mut patched = target.clone();
            wo_wire::apply_state_patch(&mut patched, &patch);
            json!({"name": name, "target": target, "patch": patch, "patched": patched})
        })
        .collect()
}

/// Truth edits and deletions in the browser's own state (stateless mode):
/// `State::edit_truth` stamps `updated` strictly after the version edited,
/// `State::delete_truth` leaves a tombstone that buries the version removed
/// (its date never before that version's `updated`) and moves an older
/// tombstone of the same id forward. Each case: the state, the operation
/// with the clock's `now`, and the canonical state after it.
fn truth_op_vectors() -> Vec<Value> {
    let head = r#""version":1,"schema":"wikioracle.llm_state","date":"2026-01-01T00:00:00Z","messages":[]"#;
    let entry = |updated: &str| {
        format!(
            r#"{{"id":"t_1","title":"T","timestamp":"2026-01-01T00:00:00Z",{updated}"certainty":0.5,"content":"<p>T</p>"}}"#
        )
    };
    let plain = entry("");
    let edited = entry(r#""updated":"2026-03-01T00:00:00Z","#);
    let cases: Vec<(&str, String, Value)> = vec![
        (
            "delete: the tombstone is dated now",
            format!(r#"{{{head},"truth":{{"trust":[{plain}]}}}}"#),
            json!({"op": "delete", "id": "t_1", "now": "2026-02-01T00:00:00Z"}),
        ),
        (
            "delete with the clock behind the last edit: dated at the edit",
            format!(r#"{{{head},"truth":{{"trust":[{edited}]}}}}"#),
            json!({"op": "delete", "id": "t_1", "now": "2026-02-01T00:00:00Z"}),
        ),
        (
            "delete moves an older tombstone of the id forward, keeps its extensions, sorts by id",
            format!(
                r#"{{{head},"truth":{{"trust":[{plain}],"deleted":[{{"id":"t_2","date":"2026-01-01T00:00:00Z"}},{{"id":"t_1","date":"2025-01-01T00:00:00Z","x":1}}]}}}}"#
            ),
            json!({"op": "delete", "id": "t_1", "now": "2026-02-01T00:00:00Z"}),
        ),
        (
            "delete keeps a later tombstone of the id as it is",
            format!(
                r#"{{{head},"truth":{{"trust":[{plain}],"deleted":[{{"id":"t_1","date":"2027-01-01T00:00:00Z"}}]}}}}"#
            ),
            json!({"op": "delete", "id": "t_1", "now": "2026-02-01T00:00:00Z"}),
        ),
        (
            "delete of an unknown id changes nothing",
            format!(r#"{{{head},"truth":{{"trust":[{plain}]}}}}"#),
            json!({"op": "delete", "id": "t_x", "now": "2026-02-01T00:00:00Z"}),
        ),
        (
            "edit: updated is now, certainty clamped",
            format!(r#"{{{head},"truth":{{"trust":[{plain}]}}}}"#),
            json!({"op": "edit", "id": "t_1", "now": "2026-02-01T00:00:00Z", "title": "T2", "content": "<p>new</p>", "certainty": 1.5}),
        ),
        (
            "edit with the clock behind the last edit: a microsecond after it",
            format!(r#"{{{head},"truth":{{"trust":[{edited}]}}}}"#),
            json!({"op": "edit", "id": "t_1", "now": "2026-02-01T00:00:00Z", "certainty": -1}),
        ),
        (
            "edit with the clock at the last edit: a microsecond after it",
            format!(r#"{{{head},"truth":{{"trust":[{edited}]}}}}"#),
            json!({"op": "edit", "id": "t_1", "now": "2026-03-01T00:00:00Z", "title": "same"}),
        ),
    ];
    cases
        .into_iter()
        .map(|(name, before, op)| {
            let mut st = state(&before);
            let now = Timestamp::parse(op["now"].as_str().unwrap()).unwrap();
            let id = op["id"].as_str().unwrap();
            if op["op"] == "delete" {
                st.delete_truth(id, now);
            } else {
                let edit = TruthEdit {
                    title: op["title"].as_str().map(str::to_owned),
                    content: op["content"].as_str().map(str::to_owned),
                    certainty: op["certainty"].as_f64(),
                };
                st.edit_truth(id, edit, now);
            }
            json!({
                "name": name,
                "state": serde_json::from_str::<Value>(&before).unwrap(),
                "op": op,
                "after": canonical(&st),
            })
        })
        .collect()
}

/// A person's title for a message (renaming a conversation in stateless
/// mode: wo-wasm's `renameMessage`): `wo_format::title::given_title`'s
/// cleaning and refusals, then `State::set_message_title` at `now`. Each
/// case: the raw title and the canonical state after it, or the refusal.
fn rename_vectors() -> Vec<Value> {
    let before = r#"{"version":1,"schema":"wikioracle.llm_state","date":"2026-01-01T00:00:00Z","messages":[{"id":"m_1","title":"Old","username":"alec","timestamp":"2026-01-01T00:00:00Z","content":"<p>hi</p>","new_conversation":true},{"id":"m_2","title":"Answer","username":"model","timestamp":"2026-01-01T00:00:01Z","content":"<p>yo</p>","parent":"m_1"}],"truth":{"trust":[]}}"#;
    let long = "é".repeat(wo_format::title::MAX_GIVEN_TITLE_CHARS);
    let cases: Vec<(&str, &str, String)> = vec![
        (
            "m_1",
            "whitespace runs become one space",
            "  Kiln\n\t temps \r\n".to_owned(),
        ),
        (
            "m_1",
            "unicode whitespace and controls",
            "a\u{3000}\u{2028}b\u{0}c\u{7f}\u{85}d\u{9f}e\u{feff}".to_owned(),
        ),
        (
            "m_1",
            "markup is text",
            "<img src=x onerror=alert(1)> & \"q\"".to_owned(),
        ),
        ("m_1", "exactly the longest title", long.clone()),
        ("m_1", "one character too long", format!("{long}x")),
        ("m_1", "empty after cleaning", " \n\u{1} ".to_owned()),
        ("m_9", "an unknown id", "x".to_owned()),
        (
            "m_2",
            "any message, not only a root",
            "Renamed answer".to_owned(),
        ),
    ];
    cases
        .into_iter()
        .map(|(id, name, raw)| {
            let mut st = state(before);
            let now = "2026-03-01T12:00:00Z";
            let mut out = json!({"name": name, "state": serde_json::from_str::<Value>(before).unwrap(), "id": id, "title": raw, "now": now});
            match wo_format::title::given_title(&raw) {
                Err(e) => out["error"] = json!(e.to_string()),
                Ok(title) => match st.set_message_title(id, title, Timestamp::parse(now).unwrap()) {
                    None => out["error"] = json!(format!("no message {id:?}")),
                    Some(_) => out["after"] = json!(canonical(&st)),
                },
            }
            out
        })
        .collect()
}

/// The conversation list (`wo_format::conversation::listed`, what the
/// local server's `GET /api/conversations` answers) for states and filters:
/// app.js's `listConversations` must list a stateless state alike (roots by
/// the same links, newest first, the same titles, the same filter and
/// snippets).
fn conversation_vectors() -> Vec<Value> {
    let head = r#""version":1,"schema":"wikioracle.llm_state","date":"2026-01-09T00:00:00Z""#;
    let m = |id: &str, t: &str, title: &str, content: &str, extra: &str| {
        format!(
            r#"{{"id":"{id}","title":"{title}","username":"u","timestamp":"2026-01-0{t}","content":"{content}"{extra}}}"#
        )
    };
    let messages = [
        // A legacy transcript: parentless messages chain into one conversation.
        m(
            "m_l1",
            "1T00:00:00Z",
            "legacy start",
            "<p>old words</p>",
            "",
        ),
        m(
            "m_l2",
            "1T00:00:01Z",
            "legacy next",
            "<p>more old words</p>",
            "",
        ),
        // A marked root with a branch, blocks and inline markup.
        m(
            "m_a",
            "2T00:00:00Z",
            "Kilns",
            "<p>Firing ends here.</p><p>Start again</p><ul><li>one</li><li>two</li></ul>",
            r#","new_conversation":true"#,
        ),
        m(
            "m_a1",
            "2T00:00:01Z",
            "answer",
            "<p>An <strong>ob</strong>sidian stone 🙂 and a longer sentence that goes on well past sixty characters so that the snippet has to cut it off.</p>",
            r#","parent":"m_a""#,
        ),
        m(
            "m_a2",
            "2T00:00:02Z",
            "branch",
            "<p>Other branch<br/>line</p>",
            r#","parent":"m_a""#,
        ),
        // An imported conversation: its own title wins; an empty root title.
        m(
            "m_i",
            "3T00:00:00Z",
            "",
            "<p>imported text</p>",
            r#","new_conversation":true,"x_import":{"from":"chatgpt","title":"From ChatGPT"}"#,
        ),
        m(
            "m_e",
            "4T00:00:00Z",
            " ",
            "<p>Ünïcode ΣΑΣ text</p>",
            r#","new_conversation":true"#,
        ),
        // A parent not in the file: it follows the latest parentless message.
        m(
            "m_d",
            "5T00:00:00Z",
            "dangling",
            "<p>lost parent</p>",
            r#","parent":"m_gone""#,
        ),
        // The legacy conversation is continued last: it is the newest.
        m(
            "m_l3",
            "6T00:00:00Z",
            "legacy again",
            "<p>back to it &amp; more</p>",
            r#","parent":"m_l2""#,
        ),
    ];
    let text = format!(r#"{{{head},"messages":[{}]}}"#, messages.join(","));
    let st = state(&text);
    [
        "",
        "   ",
        "KILN",
        "here. start",
        "obsidian",
        "🙂 AND",
        "two",
        "branch line",
        "chatgpt",
        "untitled",
        "σας",
        "&",
        "strong",
        "nothing at all",
    ]
    .into_iter()
    .map(|filter| {
        let listed: Vec<Value> = wo_format::conversation::listed(&st, filter)
            .into_iter()
            .map(|l| {
                json!({
                    "root": l.conversation.root.id,
                    "latest": l.conversation.latest.id,
                    "title": l.title,
                    "updated": l.conversation.updated().as_str(),
                    "count": l.conversation.count,
                    "snippet": l.snippet,
                })
            })
            .collect();
        json!({"filter": filter, "state": serde_json::from_str::<Value>(&text).unwrap(), "listed": listed})
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

/// Timestamps and messages in wo-format's order (app.js's `compareTimestamps`
/// and `sortMessages`): instants with fractions of any length, one instant
/// written two ways, ids ordered by UTF-8 bytes (not UTF-16 units: an id
/// above U+FFFF sorts after one of U+FFFD here, before it in JavaScript).
fn order_vectors() -> Value {
    let stamps = [
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00.5Z",
        "2026-01-01T00:00:00.50Z",
        "2026-01-01T00:00:00.000000001Z",
        "2025-12-31T23:59:59.999Z",
        "2026-01-01T00:00:01Z",
    ];
    let mut pairs = Vec::new();
    for a in stamps {
        for b in stamps {
            let (x, y) = (Timestamp::parse(a).unwrap(), Timestamp::parse(b).unwrap());
            pairs.push(json!({"a": a, "b": b, "order": x.cmp(&y) as i32}));
        }
    }
    let keys = [
        ("2026-01-01T00:00:01Z", "m_b"),
        ("2026-01-01T00:00:00.5Z", "m_\u{fffd}"),
        ("2026-01-01T00:00:00.5Z", "m_\u{1f642}"),
        ("2026-01-01T00:00:00.50Z", "m_a"),
        ("2026-01-01T00:00:00Z", "m_z"),
        ("2026-01-01T00:00:00.5Z", "m_a"),
        ("2025-12-31T23:59:59.999Z", "m_y"),
    ];
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|&i, &j| {
        let a = (Timestamp::parse(keys[i].0).unwrap(), keys[i].1);
        let b = (Timestamp::parse(keys[j].0).unwrap(), keys[j].1);
        a.cmp(&b)
    });
    json!({"pairs": pairs, "keys": keys.iter().map(|(t, id)| json!([t, id])).collect::<Vec<_>>(), "order": order})
}

/// The state the link, role and update vectors read: the conversation
/// vectors' messages (a legacy chain, marked roots, a branch, a parent not
/// in the file, a continued chain) plus roles written and inferred.
fn link_state() -> (String, wo_format::State) {
    let conv = conversation_vectors();
    let text = conv[0]["state"].to_string();
    let st = state(&text);
    (text, st)
}

/// Each message's parent by the rule `State::branch` follows (app.js's
/// `buildTree` over a whole file).
fn parent_vectors() -> Value {
    let (text, st) = link_state();
    let parents: Vec<Value> = st
        .messages()
        .iter()
        .map(|m| {
            let branch = st.branch(&m.id);
            let parent = branch.len().checked_sub(2).map(|i| branch[i].id.clone());
            json!([m.id, parent])
        })
        .collect();
    json!({"state": serde_json::from_str::<Value>(&text).unwrap(), "parents": parents})
}

/// Roles as wo-format infers them (`Message::effective_role`; app.js's
/// `roleOf`): written, "system" by name, assistant by provider, model or a
/// model's name, else user.
fn role_vectors() -> Vec<Value> {
    let cases = [
        json!({"username": "alec"}),
        json!({"username": "alec", "role": "assistant"}),
        json!({"username": "SYSTEM"}),
        json!({"username": "bot", "provider": "openai"}),
        json!({"username": "bot", "model": "m"}),
        json!({"username": "gpt-4o"}),
        json!({"username": "llama3.1:8b"}),
        json!({"username": "system", "role": "user"}),
    ];
    cases
        .into_iter()
        .map(|m| {
            let mut one = json!({"id": "m_1", "title": "", "timestamp": "2026-01-01T00:00:00Z", "content": ""});
            for (k, v) in m.as_object().unwrap() {
                one[k] = v.clone();
            }
            let text = json!({"version": 1, "schema": "wikioracle.llm_state", "date": "2026-01-01T00:00:00Z", "messages": [one]});
            let role = state(&text.to_string()).messages()[0].effective_role().as_str();
            json!({"message": m, "role": role})
        })
        .collect()
}

/// Truth entries newest first by `TruthEntry::effective_update` (app.js's
/// efforts panel), and the SPEC's new state (`State::new`: app.js's
/// `freshState`, default `retrieval_prefs` included).
fn truth_update_vectors() -> Value {
    let entries = json!([
        {"id": "t_a", "title": "a", "timestamp": "2026-01-01T00:00:00Z", "certainty": 0.5, "content": "<p>a</p>"},
        {"id": "t_b", "title": "b", "timestamp": "2025-01-01T00:00:00Z", "updated": "2026-02-01T00:00:00Z", "certainty": 0.5, "content": "<p>b</p>"},
        {"id": "t_c", "title": "c", "timestamp": "2026-01-15T00:00:00.25Z", "certainty": 0.5, "content": "<p>c</p>"},
    ]);
    let text = json!({"version": 1, "schema": "wikioracle.llm_state", "date": "2026-01-01T00:00:00Z", "messages": [], "truth": {"trust": entries}});
    let st = state(&text.to_string());
    let mut trust: Vec<_> = st.truth.trust.iter().collect();
    trust.sort_by(|a, b| b.effective_update().cmp(a.effective_update()));
    let newest: Vec<Value> = trust
        .iter()
        .map(|t| json!([t.id, t.effective_update().as_str()]))
        .collect();
    let now = "2026-03-01T12:00:00Z";
    json!({
        "entries": entries,
        "newest_first": newest,
        "new_state": {"now": now, "state": canonical(&wo_format::State::new(Timestamp::parse(now).unwrap()))},
    })
}

/// BM25 scores (`wo_text::bm25::scores_docs`, the server's search and the
/// engine's retrieval): stemming, markup skipped, a term in no document.
fn bm25_vectors() -> Vec<Value> {
    let docs = [
        ("Kiln firing", "<p>The kiln fires at 1200 degrees.</p>"),
        ("kilnworks", "<p>kilnworkskilnworks kilnworks</p>"),
        (
            "Glazes",
            "<p>Firing <em>glazes</em> in a kiln; kilns vary.</p>",
        ),
        ("", "<p>nothing here</p>"),
    ];
    let d: Vec<wo_text::bm25::Doc> = docs
        .iter()
        .map(|(plain, xhtml)| wo_text::bm25::Doc { plain, xhtml })
        .collect();
    [
        "kiln firing temperature",
        "glaze",
        "KILNS",
        "absent words",
        "",
    ]
    .into_iter()
    .map(|q| {
        json!({
            "docs": docs.iter().map(|(p, x)| json!([p, x])).collect::<Vec<_>>(),
            "query": q,
            "scores": wo_text::bm25::scores_docs(&d, q),
        })
    })
    .collect()
}

#[test]
fn browser_golden_vectors_are_current() {
    let doc = json!({
        "about": "Generated by crates/wo-wire/tests/browser_golden.rs; do not edit. Regenerate: WO_BLESS=1 cargo test -p wo-wire --test browser_golden",
        "ids": id_vectors(),
        "merges": merge_vectors(),
        "exports": export_vectors(),
        "patches": patch_vectors(),
        "truth_ops": truth_op_vectors(),
        "renames": rename_vectors(),
        "conversations": conversation_vectors(),
        "text_to_xhtml": text_to_xhtml_vectors(),
        "order": order_vectors(),
        "parents": parent_vectors(),
        "roles": role_vectors(),
        "truth_updates": truth_update_vectors(),
        "bm25": bm25_vectors(),
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
         wo-format and wo-wire. Regenerate with `WO_BLESS=1 cargo test -p wo-wire --test browser_golden` \
         and review the diff.",
        path.display()
    );
}
