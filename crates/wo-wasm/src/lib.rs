//! The web client's copy of the file format is this crate compiled to
//! WebAssembly (`scripts/build-wasm.sh`): the client's ids, XHTML
//! conversions, merge, state patches, truth edits, canonical export,
//! ordering, branch links, roles, conversation list and search scores are
//! wo-format's, wo-wire's and wo-text's own functions, so the browser and
//! `wo` cannot disagree.
//!
//! A thin face: each export parses its arguments, calls one library
//! function and renders the result. States cross as JSON text (the page
//! keeps them as parsed objects); a state handed back is wo-format's
//! canonical text, so `JSON.parse` of it is the state the page keeps and
//! the text itself is an export. Errors are thrown as a string that names
//! the argument and, for a state, the JSON pointer of each problem. There
//! is no clock in here: the page passes `now`.
//!
//! Every function is an ordinary Rust function on other targets, which is
//! how `tests/exports.rs` checks them natively.

use serde_json::Value;
use wasm_bindgen::prelude::wasm_bindgen;
use wo_format::title::given_title;
use wo_format::{
    State, Timestamp, TruthEdit, conversation, ids, merge, parse, to_canonical_vec, xhtml,
};

/// What a failed call throws: a message naming the argument at fault.
pub type Failure = String;

/// `m_…`: the content id of a message (`wo_format::ids::message_id`).
#[wasm_bindgen(js_name = messageId)]
pub fn message_id(username: &str, timestamp: &str, content: &str) -> String {
    ids::message_id(username, timestamp, content)
}

/// `t_…`: the content id of a truth entry (`wo_format::ids::truth_id`).
#[wasm_bindgen(js_name = truthId)]
pub fn truth_id(title: &str, timestamp: &str, content: &str) -> String {
    ids::truth_id(title, timestamp, content)
}

/// The canonical XHTML a content id hashes (`wo_format::xhtml::canonical_xhtml`).
#[wasm_bindgen(js_name = canonicalXhtml)]
pub fn canonical_xhtml(fragment: &str) -> String {
    xhtml::canonical_xhtml(fragment)
}

/// Plain text → `<p>` paragraphs with `<br/>` (`wo_format::xhtml::text_to_xhtml`).
#[wasm_bindgen(js_name = textToXhtml)]
pub fn text_to_xhtml(text: &str) -> String {
    xhtml::text_to_xhtml(text)
}

/// Untrusted HTML → allowlisted XHTML (`wo_format::xhtml::sanitize_html`).
#[wasm_bindgen(js_name = sanitizeHtml)]
pub fn sanitize_html(html: &str) -> String {
    xhtml::sanitize_html(html)
}

/// A state's canonical text (`wo_format::parse` then `to_canonical_vec`):
/// missing ids derived, messages in order — what `wo export` writes for
/// the same state.
#[wasm_bindgen(js_name = canonicalState)]
pub fn canonical_state(state: &str) -> Result<String, Failure> {
    Ok(canonical(&state_arg("state", state)?))
}

/// An outside file through the one gate (`wo_format::admit::admit_bytes`):
/// `{"sanitised": [pointers], "state": <canonical state>}`, or the
/// problems with their JSON pointers.
#[wasm_bindgen(js_name = admitState)]
pub fn admit_state(text: &str) -> Result<String, Failure> {
    let admitted = wo_format::admit::admit_bytes(text.as_bytes()).map_err(|issues| {
        let list: Vec<String> = issues.iter().map(ToString::to_string).collect();
        format!("not a valid llm.json: {}", list.join("; "))
    })?;
    Ok(with_state(
        &[("sanitised", serde_json::json!(admitted.sanitised))],
        &admitted.state,
    ))
}

/// The product §3 merge of `incoming` into `base`
/// (`wo_format::merge::merge_into`): `{"report": <wo_wire::MergeReport>,
/// "state": <canonical merged state>}`.
#[wasm_bindgen(js_name = mergeStates)]
pub fn merge_states(base: &str, incoming: &str) -> Result<String, Failure> {
    let mut merged = state_arg("base", base)?;
    let incoming = state_arg("incoming", incoming)?;
    let report = merge::merge_into(&mut merged, &incoming);
    let report = wo_wire::api::MergeReport::of(&report, Vec::new());
    let report = serde_json::to_value(&report).unwrap_or(Value::Null);
    Ok(with_state(&[("report", report)], &merged))
}

/// A stateless turn's or memory step's `state_patch` applied to a state
/// (`wo_wire::apply_state_patch`); any JSON value in, JSON text out.
#[wasm_bindgen(js_name = applyStatePatch)]
pub fn apply_state_patch(target: &str, patch: &str) -> Result<String, Failure> {
    let mut target = json_arg("target", target)?;
    wo_wire::apply_state_patch(&mut target, &json_arg("patch", patch)?);
    Ok(target.to_string())
}

/// Edits the truth entry `id` (`State::edit_truth`; `edit`: `{"title"?,
/// "content"? (XHTML), "certainty"?}`) at `now`: `{"found": bool, "state":
/// <canonical state>}`.
#[wasm_bindgen(js_name = editTruth)]
pub fn edit_truth(state: &str, id: &str, edit: &str, now: &str) -> Result<String, Failure> {
    let mut st = state_arg("state", state)?;
    let edit = edit_arg(edit)?;
    let found = st.edit_truth(id, edit, now_arg(now)?).is_some();
    Ok(with_state(&[("found", Value::Bool(found))], &st))
}

/// Deletes the truth entry `id`, leaving a tombstone (`State::delete_truth`)
/// dated `now` or later: `{"found": bool, "state": <canonical state>}`.
#[wasm_bindgen(js_name = deleteTruth)]
pub fn delete_truth(state: &str, id: &str, now: &str) -> Result<String, Failure> {
    let mut st = state_arg("state", state)?;
    let found = st.delete_truth(id, now_arg(now)?).is_some();
    Ok(with_state(&[("found", Value::Bool(found))], &st))
}

/// Renames the message `id` (a conversation's root, in stateless mode) as
/// `wo serve`'s `PATCH /api/messages/{id}` does: the title `raw` cleaned by
/// `wo_format::title::given_title`, then `State::set_message_title` at
/// `now`. `{"found": bool, "state": <canonical state>}`, or, when the title
/// is refused, `{"title_error": <the reason, for the person>}`.
#[wasm_bindgen(js_name = renameMessage)]
pub fn rename_message(state: &str, id: &str, raw: &str, now: &str) -> Result<String, Failure> {
    let mut st = state_arg("state", state)?;
    let now = now_arg(now)?;
    let title = match given_title(raw) {
        Ok(title) => title,
        Err(e) => {
            return Ok(serde_json::json!({ "title_error": e.to_string() }).to_string());
        }
    };
    let found = st.set_message_title(id, title, now).is_some();
    Ok(with_state(&[("found", Value::Bool(found))], &st))
}

/// A new, empty state dated `now` with the SPEC's defaults (its
/// `retrieval_prefs` included): `State::new`, canonical.
#[wasm_bindgen(js_name = newState)]
pub fn new_state(now: &str) -> Result<String, Failure> {
    Ok(canonical(&State::new(now_arg(now)?)))
}

/// wo-format's order of timestamps (`Timestamp`'s `Ord`: by instant,
/// fractions of a second included, then by text): -1, 0 or 1.
#[wasm_bindgen(js_name = compareTimestamps)]
pub fn compare_timestamps(a: &str, b: &str) -> Result<i32, Failure> {
    let a = Timestamp::parse(a).map_err(|e| format!("`a` is not a timestamp ({a:?}): {e}"))?;
    let b = Timestamp::parse(b).map_err(|e| format!("`b` is not a timestamp ({b:?}): {e}"))?;
    Ok(a.cmp(&b) as i32)
}

/// The transcript's order (`Message::order_key`: timestamp, then id by
/// its UTF-8 bytes) of `keys`, a JSON array of `[timestamp, id]`: the
/// indexes of `keys`, first to last.
#[wasm_bindgen(js_name = messageOrder)]
pub fn message_order(keys: &str) -> Result<Vec<u32>, Failure> {
    let keys: Vec<(String, String)> = serde_json::from_str(keys)
        .map_err(|e| format!("`keys` is not a list of [timestamp, id]: {e}"))?;
    let mut parsed = Vec::with_capacity(keys.len());
    for (i, (ts, id)) in keys.into_iter().enumerate() {
        let ts = Timestamp::parse(&ts)
            .map_err(|e| format!("`keys`: /{i}/0 is not a timestamp ({ts:?}): {e}"))?;
        parsed.push((ts, id, u32::try_from(i).unwrap_or(u32::MAX)));
    }
    parsed.sort_by(|a, b| (&a.0, a.1.as_str()).cmp(&(&b.0, b.1.as_str())));
    Ok(parsed.into_iter().map(|(_, _, i)| i).collect())
}

/// Each message's parent by the rule `State::branch` follows (its
/// `parent`; none for a conversation's root; the latest earlier unlinked
/// message for a legacy transcript or a parent not in the file), as
/// `[[id, parent or null], …]` in transcript order. `messages`: a JSON
/// array of `{id, timestamp, parent?, new_conversation?}` (other fields are
/// not read). `whole`: they are the whole file; otherwise (the local
/// client's loaded pages) a parent not among them makes a root, since it
/// is only not loaded.
#[wasm_bindgen(js_name = messageParents)]
pub fn message_parents(messages: &str, whole: bool) -> Result<String, Failure> {
    let Value::Array(list) = json_arg("messages", messages)? else {
        return Err("`messages` is not a JSON array".to_owned());
    };
    let ids: std::collections::HashSet<String> = list
        .iter()
        .filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_owned))
        .collect();
    let links: Vec<Value> = list
        .iter()
        .map(|m| {
            let mut link = serde_json::json!({
                "id": m.get("id").cloned().unwrap_or(Value::Null),
                "title": "",
                // Not read by the rule; the parser wants one.
                "username": "u",
                "timestamp": m.get("timestamp").cloned().unwrap_or(Value::Null),
                "content": "",
            });
            match m.get("parent").and_then(Value::as_str) {
                Some(p) if whole || ids.contains(p) => link["parent"] = Value::from(p),
                Some(_) => link["new_conversation"] = Value::Bool(true),
                None => {
                    if let Some(mark) = m.get("new_conversation") {
                        link["new_conversation"] = mark.clone();
                    }
                }
            }
            link
        })
        .collect();
    let st = messages_state("messages", links)?;
    let out: Vec<Value> = st
        .messages()
        .iter()
        .map(|m| {
            let parent = st.branch_walk(&m.id).nth(1).map(|p| p.id.clone());
            serde_json::json!([m.id, parent])
        })
        .collect();
    Ok(Value::Array(out).to_string())
}

/// A message's role, inferred where the file has none
/// (`Message::effective_role`): `user`, `assistant` or `system`.
/// `message`: a JSON object with its `role`, `username`, `provider` and
/// `model` (other fields are not read).
#[wasm_bindgen(js_name = messageRole)]
pub fn message_role(message: &str) -> Result<String, Failure> {
    let m = json_arg("message", message)?;
    let mut one = serde_json::json!({
        "id": "m_role",
        "title": "",
        "username": m.get("username").cloned().unwrap_or(Value::from("")),
        "timestamp": "1970-01-01T00:00:00Z",
        "content": "",
    });
    for key in ["role", "provider", "model"] {
        if let Some(v) = m.get(key).filter(|v| !v.is_null()) {
            one[key] = v.clone();
        }
    }
    let st = messages_state("message", vec![one])?;
    Ok(st.messages()[0].effective_role().as_str().to_owned())
}

/// The conversations of `messages` (a JSON array of messages: a whole
/// file's) as a person's list shows them (`wo_format::conversation::listed`,
/// the server's `GET /api/conversations`): newest first, titled, filtered
/// with snippets, archived ones left out. `[{root, latest, title, updated,
/// count, snippet}]`.
#[wasm_bindgen(js_name = listConversations)]
pub fn list_conversations(messages: &str, filter: &str) -> Result<String, Failure> {
    let Value::Array(list) = json_arg("messages", messages)? else {
        return Err("`messages` is not a JSON array".to_owned());
    };
    let st = messages_state("messages", list)?;
    let rows: Vec<Value> = conversation::listed(&st, filter)
        .into_iter()
        .map(|l| {
            serde_json::json!({
                "root": l.conversation.root.id,
                "latest": l.conversation.latest.id,
                "title": l.title,
                "updated": l.conversation.updated().as_str(),
                "count": l.conversation.count,
                "snippet": l.snippet,
            })
        })
        .collect();
    Ok(Value::Array(rows).to_string())
}

/// Truth entries newest first by when each last changed
/// (`TruthEntry::effective_update`: `updated`, else `timestamp`):
/// `[[id, effective update], …]`. `entries`: a JSON array of truth entries.
#[wasm_bindgen(js_name = truthByUpdate)]
pub fn truth_by_update(entries: &str) -> Result<String, Failure> {
    let entries = json_arg("entries", entries)?;
    let text = serde_json::json!({
        "version": 1, "schema": "wikioracle.llm_state", "date": "1970-01-01T00:00:00Z",
        "messages": [], "truth": {"trust": entries},
    });
    let st = state_arg("entries", &text.to_string())?;
    let mut trust: Vec<_> = st.truth.trust.iter().collect();
    trust.sort_by(|a, b| b.effective_update().cmp(a.effective_update()));
    let out: Vec<Value> = trust
        .into_iter()
        .map(|t| serde_json::json!([t.id, t.effective_update().as_str()]))
        .collect();
    Ok(Value::Array(out).to_string())
}

/// BM25 scores of `docs` (a JSON array of `[plain text, XHTML]`, as a
/// message's title and content) for `query`, by `wo_text::bm25` — what
/// the server's search and the engine's retrieval score with. 0: no term
/// shared.
#[wasm_bindgen(js_name = bm25Scores)]
pub fn bm25_scores(docs: &str, query: &str) -> Result<Vec<f64>, Failure> {
    let docs: Vec<(String, String)> = serde_json::from_str(docs)
        .map_err(|e| format!("`docs` is not a list of [text, XHTML]: {e}"))?;
    let docs: Vec<wo_text::bm25::Doc> = docs
        .iter()
        .map(|(plain, xhtml)| wo_text::bm25::Doc { plain, xhtml })
        .collect();
    Ok(wo_text::bm25::scores_docs(&docs, query))
}

/// A state of `messages` alone, parsed by wo-format (`name`: the argument,
/// for errors).
fn messages_state(name: &str, messages: Vec<Value>) -> Result<State, Failure> {
    let text = serde_json::json!({
        "version": 1, "schema": "wikioracle.llm_state", "date": "1970-01-01T00:00:00Z",
        "messages": messages,
    });
    state_arg(name, &text.to_string())
}

fn canonical(state: &State) -> String {
    // The canonical writer emits JSON, which is UTF-8.
    String::from_utf8_lossy(&to_canonical_vec(state)).into_owned()
}

/// `{"<name>": <value>, …, "state": <canonical text>}`: the state's bytes
/// are spliced in as written, so the page parses them once and they stay
/// canonical.
fn with_state(fields: &[(&str, Value)], state: &State) -> String {
    let mut out = String::from("{");
    for (name, value) in fields {
        out.push_str(&Value::String((*name).to_owned()).to_string());
        out.push(':');
        out.push_str(&value.to_string());
        out.push(',');
    }
    out.push_str("\"state\":");
    out.push_str(canonical(state).trim_end());
    out.push('}');
    out
}

fn state_arg(name: &str, text: &str) -> Result<State, Failure> {
    parse(text.as_bytes()).map_err(|e| format!("`{name}` is not a valid llm.json state: {e}"))
}

fn json_arg(name: &str, text: &str) -> Result<Value, Failure> {
    serde_json::from_str(text).map_err(|e| format!("`{name}` is not JSON: {e}"))
}

fn now_arg(now: &str) -> Result<Timestamp, Failure> {
    Timestamp::parse(now).map_err(|e| format!("`now` is not a timestamp ({now:?}): {e}"))
}

fn edit_arg(text: &str) -> Result<TruthEdit, Failure> {
    let v = json_arg("edit", text)?;
    let Value::Object(map) = v else {
        return Err("`edit` is not a JSON object".to_owned());
    };
    let text_field = |key: &str| -> Result<Option<String>, Failure> {
        match map.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(format!("`edit`: /{key} is not a string: {other}")),
        }
    };
    let certainty = match map.get("certainty") {
        None => None,
        Some(Value::Number(n)) => n.as_f64(),
        Some(other) => return Err(format!("`edit`: /certainty is not a number: {other}")),
    };
    if let Some(key) = map
        .keys()
        .find(|k| !["title", "content", "certainty"].contains(&k.as_str()))
    {
        return Err(format!("`edit`: /{key} is not a field an edit may change"));
    }
    Ok(TruthEdit {
        title: text_field("title")?,
        content: text_field("content")?,
        certainty,
    })
}
