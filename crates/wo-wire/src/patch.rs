//! How a client applies the `state_patch` of a stateless turn's `done`
//! event to its own copy of `llm.json` (the browser does the same in
//! `app.js`; the `wikioracle` provider's users call [`apply_state_patch`]).

use serde_json::{Map, Value};

/// Apply an RFC 7396 JSON Merge Patch: objects merge recursively, `null`
/// deletes a member, anything else replaces the target.
pub fn apply_merge_patch(target: &mut Value, patch: &Value) {
    patch_value(target, patch, false);
}

/// Apply a [`crate::DoneEvent::state_patch`] to a copy of `llm.json`: RFC 7396,
/// except that an array whose patch elements are all records with an `id`
/// (`messages`, `truth.trust`, `truth.deleted`) is merged record by record
/// — a known id is merge-patched in place, a new one appended — because a
/// plain merge patch would replace the whole transcript with the two new
/// messages (product §3's union by id, applied to a patch). A partial truth
/// record (no string `title` or `content`: the `{id, refs}` a turn sends for
/// the entries it used) for an entry the client no longer has is ignored:
/// appended, it would be an invalid truth entry. The web client (`app.js`'s
/// `applyStatePatch`) follows the same rule, held to it by the golden
/// vectors.
pub fn apply_state_patch(target: &mut Value, patch: &Value) {
    patch_value(target, patch, true);
}

fn patch_value(target: &mut Value, patch: &Value, records_by_id: bool) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target_map) = target else {
        unreachable!("made an object above")
    };
    for (k, v) in patch_map {
        match v {
            Value::Null => {
                target_map.remove(k);
            }
            Value::Array(records) if records_by_id && is_record_list(records) => {
                let slot = target_map
                    .entry(k.clone())
                    .or_insert_with(|| Value::Array(Vec::new()));
                if !slot.is_array() {
                    *slot = Value::Array(Vec::new());
                }
                let Value::Array(existing) = slot else {
                    unreachable!("made an array above")
                };
                for record in records {
                    let id = &record["id"];
                    match existing.iter_mut().find(|r| &r["id"] == id) {
                        Some(r) => apply_merge_patch(r, record),
                        None if k == "trust" && !is_whole_truth_entry(record) => {}
                        None => existing.push(record.clone()),
                    }
                }
            }
            _ => patch_value(
                target_map.entry(k.clone()).or_insert(Value::Null),
                v,
                records_by_id,
            ),
        }
    }
}

/// A truth record that can stand as an entry on its own.
fn is_whole_truth_entry(record: &Value) -> bool {
    record.get("title").is_some_and(Value::is_string)
        && record.get("content").is_some_and(Value::is_string)
}

fn is_record_list(items: &[Value]) -> bool {
    !items.is_empty()
        && items
            .iter()
            .all(|r| r.get("id").is_some_and(Value::is_string))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_rfc7396_examples() {
        // The examples from RFC 7396 appendix A.
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (
                json!({"a":"b","b":"c"}),
                json!({"a":null}),
                json!({"b":"c"}),
            ),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (
                json!({"a":{"b":"c"}}),
                json!({"a":{"b":"d","c":null}}),
                json!({"a":{"b":"d"}}),
            ),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"a":"foo"}), json!("bar"), json!("bar")),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (
                json!({}),
                json!({"a":{"bb":{"ccc":null}}}),
                json!({"a":{"bb":{}}}),
            ),
        ];
        for (mut target, patch, want) in cases {
            apply_merge_patch(&mut target, &patch);
            assert_eq!(target, want, "patch {patch}");
        }
    }

    #[test]
    fn state_patch_appends_records_by_id_and_merges_the_rest() {
        let mut state = json!({
            "date": "2026-01-01T00:00:00Z",
            "messages": [{"id": "m_1", "content": "a"}],
            "truth": {"trust": [{"id": "t_1", "refs": 1, "title": "T"}]},
            "context": "<p>c</p>"
        });
        let patch = json!({
            "date": "2026-01-02T00:00:00Z",
            "messages": [{"id": "m_2", "content": "b"}, {"id": "m_3", "content": "c"}],
            "truth": {"trust": [{"id": "t_1", "refs": 2}]},
            "tags": ["x"]
        });
        apply_state_patch(&mut state, &patch);
        assert_eq!(state["date"], "2026-01-02T00:00:00Z");
        let ids: Vec<&str> = state["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            ids,
            ["m_1", "m_2", "m_3"],
            "the transcript is kept, not replaced"
        );
        assert_eq!(
            state["truth"]["trust"][0],
            json!({"id": "t_1", "refs": 2, "title": "T"})
        );
        assert_eq!(state["context"], "<p>c</p>");
        // Arrays of non-records follow RFC 7396: replaced.
        assert_eq!(state["tags"], json!(["x"]));
        // Applying the same patch twice changes nothing more.
        let once = state.clone();
        apply_state_patch(&mut state, &patch);
        assert_eq!(state, once);
    }

    #[test]
    fn refs_for_a_truth_entry_the_client_no_longer_has_are_ignored() {
        let mut state = json!({"truth": {"trust": [{"id": "t_1", "title": "T", "content": "<p>T</p>", "refs": 1}]}});
        let patch = json!({"truth": {"trust": [
            {"id": "t_gone", "refs": 3},
            {"id": "t_1", "refs": 2},
            {"id": "t_new", "title": "N", "content": "<p>N</p>", "certainty": 0.5}
        ]}});
        apply_state_patch(&mut state, &patch);
        let ids: Vec<&str> = state["truth"]["trust"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["t_1", "t_new"], "a refs-only record made no entry");
        assert_eq!(state["truth"]["trust"][0]["refs"], 2);
        // Other record lists append whatever they get.
        let mut state = json!({"messages": []});
        apply_state_patch(&mut state, &json!({"messages": [{"id": "m_1"}]}));
        assert_eq!(state["messages"], json!([{"id": "m_1"}]));
    }
}
