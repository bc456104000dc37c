//! The web client's copy of the file format is this crate compiled to
//! WebAssembly (`scripts/build-wasm.sh`): the stateless client's ids,
//! XHTML conversions, merge, state patches, truth edits and canonical
//! export are wo-format's and wo-wire's own functions, so the browser and
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
use wo_format::{State, Timestamp, TruthEdit, ids, merge, parse, to_canonical_vec, xhtml};

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
