//! The wasm exports, natively: every golden vector of
//! `tests/browser/golden.json` (written by wo-wire's `browser_golden` test
//! from wo-format and wo-wire) goes through the same functions the web
//! client calls, and bad arguments are refused with a message naming them.
//! The browser suite runs the same vectors through the compiled module.

use std::path::PathBuf;

use serde_json::{Value, json};
use wo_wasm::*;

fn golden() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/browser/golden.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn vectors(part: &str) -> Vec<Value> {
    let list = golden()[part].as_array().cloned().unwrap_or_default();
    assert!(!list.is_empty(), "golden.json has no {part} vectors");
    list
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap()
}

/// The `state` member of an export's answer, as canonical text again.
fn state_of(answer: &str) -> String {
    let v: Value = serde_json::from_str(answer).expect("an answer is JSON");
    canonical_state(&v["state"].to_string()).unwrap()
}

#[test]
fn ids_and_xhtml_match_the_golden_vectors() {
    for v in vectors("ids") {
        let id = if v["kind"] == "message" {
            message_id(s(&v["username"]), s(&v["timestamp"]), s(&v["content"]))
        } else {
            truth_id(s(&v["title"]), s(&v["timestamp"]), s(&v["content"]))
        };
        assert_eq!(id, s(&v["id"]), "{v}");
    }
    for v in vectors("text_to_xhtml") {
        assert_eq!(text_to_xhtml(s(&v["text"])), s(&v["xhtml"]), "{v}");
    }
    assert_eq!(
        canonical_xhtml("<P TITLE='t' class=\"c\">a<br></p><!-- x -->"),
        r#"<p class="c" title="t">a<br/></p>"#
    );
    assert_eq!(
        sanitize_html(r#"<p onclick="x()">a<script>alert(1)</script></p>"#),
        "<p>a</p>"
    );
}

#[test]
fn exports_merges_patches_and_truth_ops_match_the_golden_vectors() {
    for v in vectors("exports") {
        assert_eq!(canonical_state(s(&v["input"])).unwrap(), s(&v["canonical"]));
    }
    for v in vectors("merges") {
        let answer = merge_states(&v["base"].to_string(), &v["incoming"].to_string()).unwrap();
        assert_eq!(state_of(&answer), s(&v["merged"]), "{}", v["name"]);
    }
    for v in vectors("patches") {
        let got = apply_state_patch(&v["target"].to_string(), &v["patch"].to_string()).unwrap();
        let got: Value = serde_json::from_str(&got).unwrap();
        assert_eq!(got, v["patched"], "{}", v["name"]);
    }
    for v in vectors("truth_ops") {
        let (state, op) = (v["state"].to_string(), &v["op"]);
        let answer = if op["op"] == "delete" {
            delete_truth(&state, s(&op["id"]), s(&op["now"])).unwrap()
        } else {
            let mut edit = serde_json::Map::new();
            for k in ["title", "content", "certainty"] {
                if let Some(x) = op.get(k) {
                    edit.insert(k.to_owned(), x.clone());
                }
            }
            edit_truth(
                &state,
                s(&op["id"]),
                &Value::Object(edit).to_string(),
                s(&op["now"]),
            )
            .unwrap()
        };
        let found: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(found["found"], json!(op["id"] != "t_x"), "{}", v["name"]);
        assert_eq!(state_of(&answer), s(&v["after"]), "{}", v["name"]);
    }
}

/// Renames (stateless mode's conversation titles): the same cleaning,
/// refusals and stamped state as `wo serve`'s rename.
#[test]
fn renames_match_the_golden_vectors() {
    for v in vectors("renames") {
        let answer = rename_message(
            &v["state"].to_string(),
            s(&v["id"]),
            s(&v["title"]),
            s(&v["now"]),
        )
        .unwrap();
        let got: Value = serde_json::from_str(&answer).unwrap();
        match (v.get("error"), got.get("title_error")) {
            (Some(want), Some(err)) => assert_eq!(err, want, "{}", v["name"]),
            (Some(want), None) if got["found"] == json!(false) => {
                assert!(s(want).starts_with("no message"), "{}", v["name"]);
            }
            (None, None) => assert_eq!(state_of(&answer), s(&v["after"]), "{}", v["name"]),
            other => panic!("{}: {other:?}", v["name"]),
        }
    }
}

#[test]
fn the_state_handed_back_is_the_canonical_text_spliced_in() {
    let v = &vectors("merges")[0];
    let answer = merge_states(&v["base"].to_string(), &v["incoming"].to_string()).unwrap();
    let expected = s(&v["merged"]);
    assert!(
        answer.ends_with(&format!("\"state\":{}}}", expected.trim_end())),
        "{answer}"
    );
    let parsed: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(parsed["report"]["messages_added"], 1);
    assert_eq!(parsed["report"]["sanitised"], json!([]));
}

#[test]
fn admission_sanitises_and_refuses_with_pointers() {
    let file = r#"{"version":1,"schema":"wikioracle.llm_state","date":"2026-01-01T00:00:00Z","messages":[{"title":"t","username":"u","timestamp":"2026-01-01T00:00:00Z","content":"<p onclick=\"x()\">hi</p>"}]}"#;
    let answer: Value = serde_json::from_str(&admit_state(file).unwrap()).unwrap();
    assert_eq!(answer["sanitised"], json!(["/messages/0/content"]));
    assert_eq!(answer["state"]["messages"][0]["content"], "<p>hi</p>");
    let id = answer["state"]["messages"][0]["id"].as_str().unwrap();
    assert!(id.starts_with("m_"), "{id}");

    let bad = r#"{"version":1,"schema":"wikioracle.llm_state","date":"2026-01-01T00:00:00Z","messages":[{"title":"t","username":"u","timestamp":"yesterday","content":"<p>x</p>"}]}"#;
    let err = admit_state(bad).unwrap_err();
    assert!(err.contains("/messages/0/timestamp"), "{err}");
    let err = admit_state(r#"{"hello":"world"}"#).unwrap_err();
    assert!(err.starts_with("not a valid llm.json"), "{err}");
}

#[test]
fn bad_arguments_are_refused_naming_them() {
    let ok = s(&vectors("exports")[1]["input"]).to_owned();
    let err = merge_states(&ok, "{").unwrap_err();
    assert!(
        err.starts_with("`incoming` is not a valid llm.json state"),
        "{err}"
    );
    let err = merge_states("[]", &ok).unwrap_err();
    assert!(err.starts_with("`base`"), "{err}");
    let err = canonical_state(r#"{"version":2}"#).unwrap_err();
    assert!(
        err.starts_with("`state`") && err.contains("/version"),
        "{err}"
    );
    let err = apply_state_patch("{}", "nope").unwrap_err();
    assert!(err.starts_with("`patch` is not JSON"), "{err}");
    let err = delete_truth(&ok, "t_1", "soon").unwrap_err();
    assert!(
        err.starts_with("`now` is not a timestamp (\"soon\")"),
        "{err}"
    );
    let now = "2026-01-01T00:00:00Z";
    let err = edit_truth(&ok, "t_1", r#"{"title":3}"#, now).unwrap_err();
    assert_eq!(err, "`edit`: /title is not a string: 3");
    let err = edit_truth(&ok, "t_1", r#"{"certainty":"high"}"#, now).unwrap_err();
    assert_eq!(err, "`edit`: /certainty is not a number: \"high\"");
    let err = edit_truth(&ok, "t_1", r#"{"refs":1}"#, now).unwrap_err();
    assert_eq!(err, "`edit`: /refs is not a field an edit may change");
    let err = edit_truth(&ok, "t_1", "[]", now).unwrap_err();
    assert_eq!(err, "`edit` is not a JSON object");
}

#[test]
fn ordering_links_roles_lists_and_scores_match_the_golden_vectors() {
    let g = golden();
    for v in g["order"]["pairs"].as_array().unwrap() {
        let got = compare_timestamps(s(&v["a"]), s(&v["b"])).unwrap();
        assert_eq!(i64::from(got), v["order"].as_i64().unwrap(), "{v}");
    }
    let order = message_order(&g["order"]["keys"].to_string()).unwrap();
    let want: Vec<u32> = serde_json::from_value(g["order"]["order"].clone()).unwrap();
    assert_eq!(order, want);

    let state = &g["parents"]["state"];
    let parents = message_parents(&state["messages"].to_string(), true).unwrap();
    let parents: Value = serde_json::from_str(&parents).unwrap();
    assert_eq!(parents, g["parents"]["parents"]);

    for v in vectors("roles") {
        assert_eq!(
            message_role(&v["message"].to_string()).unwrap(),
            s(&v["role"]),
            "{v}"
        );
    }
    for v in vectors("conversations") {
        let got: Value = serde_json::from_str(
            &list_conversations(&v["state"]["messages"].to_string(), s(&v["filter"])).unwrap(),
        )
        .unwrap();
        assert_eq!(got, v["listed"], "filter {}", v["filter"]);
    }
    let t = &g["truth_updates"];
    let got: Value =
        serde_json::from_str(&truth_by_update(&t["entries"].to_string()).unwrap()).unwrap();
    assert_eq!(got, t["newest_first"]);
    assert_eq!(
        new_state(s(&t["new_state"]["now"])).unwrap(),
        s(&t["new_state"]["state"])
    );
    for v in vectors("bm25") {
        let got = bm25_scores(&v["docs"].to_string(), s(&v["query"])).unwrap();
        let want: Vec<f64> = serde_json::from_value(v["scores"].clone()).unwrap();
        assert_eq!(got, want, "{v}");
    }
}

/// Local mode loads pages: a parent that is not loaded makes a root there
/// (in a whole file the same message would follow the latest unlinked one).
#[test]
fn a_parent_not_loaded_makes_a_root_only_for_partial_loads() {
    let messages = json!([
        {"id": "m_a", "timestamp": "2026-01-01T00:00:00Z"},
        {"id": "m_b", "timestamp": "2026-01-01T00:00:01Z", "parent": "m_gone"},
        {"id": "m_c", "timestamp": "2026-01-01T00:00:02Z", "parent": "m_b"},
        {"id": "m_d", "timestamp": "2026-01-01T00:00:03Z", "new_conversation": true},
    ])
    .to_string();
    let whole: Value = serde_json::from_str(&message_parents(&messages, true).unwrap()).unwrap();
    assert_eq!(
        whole,
        json!([["m_a", null], ["m_b", "m_a"], ["m_c", "m_b"], ["m_d", null]])
    );
    let partial: Value = serde_json::from_str(&message_parents(&messages, false).unwrap()).unwrap();
    assert_eq!(
        partial,
        json!([["m_a", null], ["m_b", null], ["m_c", "m_b"], ["m_d", null]])
    );
}

#[test]
fn bad_arguments_of_the_new_exports_are_refused_naming_them() {
    let err = compare_timestamps("soon", "2026-01-01T00:00:00Z").unwrap_err();
    assert!(err.starts_with("`a` is not a timestamp"), "{err}");
    let err = message_order(r#"[["2026-01-01T00:00:00Z","m_a"],["later","m_b"]]"#).unwrap_err();
    assert!(err.contains("/1/0"), "{err}");
    let err = message_parents("{}", true).unwrap_err();
    assert_eq!(err, "`messages` is not a JSON array");
    let err = message_role(r#"{"username":"u","role":"robot"}"#).unwrap_err();
    assert!(
        err.starts_with("`message` is not a valid llm.json state"),
        "{err}"
    );
    let err = bm25_scores("[1]", "q").unwrap_err();
    assert!(err.starts_with("`docs`"), "{err}");
    let err = new_state("now").unwrap_err();
    assert!(err.starts_with("`now` is not a timestamp"), "{err}");
}
