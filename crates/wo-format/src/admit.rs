//! The one gate for state data arriving from outside: imports, merges of
//! exports (`wo merge`, `wo import`, the startup auto-merge), `POST
//! /api/merge` and the server's state patches.
//!
//! [`admit_bytes`] parses with the same parser and nesting limit as every
//! reader of `llm.json`; [`admit_state`] takes a state built in memory (an
//! importer's). Both then hold the state to exactly what `wo validate`
//! checks in a file — the structural rules, nesting no reader refuses, and
//! XHTML content that is well-formed and allowlisted — so whatever passes can
//! be merged and written and the file still opens and validates. Content that
//! breaks the XHTML rules is sanitised (and reported); anything else that
//! breaks a rule refuses the whole input with the JSON pointer of each
//! problem, and nothing is written.

use crate::codec::{self, ParseError};
use crate::model::{Extra, Message, State};
use crate::rawjson::MAX_DEPTH;
use crate::validate::{self, Issue};
use crate::xhtml;

/// A state fit to merge, with what had to be cleaned on the way in.
#[derive(Clone, Debug)]
pub struct Admitted {
    pub state: State,
    /// JSON pointers (into the input) of XHTML content that broke the
    /// content rules and was replaced by its sanitised form.
    pub sanitised: Vec<String>,
}

/// Parses, validates and sanitises a state file's bytes; see the module docs.
pub fn admit_bytes(bytes: &[u8]) -> Result<Admitted, Vec<Issue>> {
    let state = codec::parse(bytes).map_err(|ParseError { issues }| issues)?;
    admit_state(state)
}

/// Validates and sanitises a state built in memory; see the module docs.
/// Derives missing ids and restores canonical order first.
pub fn admit_state(mut state: State) -> Result<Admitted, Vec<Issue>> {
    state.normalize();
    // Depth first: the structural report serialises the state, which a
    // too-deep value would make unreadable.
    let mut issues = Vec::new();
    depth_issues(&state, &mut issues);
    if issues.is_empty() {
        issues = structural_issues(&state);
    }
    if !issues.is_empty() {
        return Err(issues);
    }
    let mut sanitised = Vec::new();
    if let Some(clean) = cleaned(&state.context) {
        check_clean(&clean, "/context", &mut issues);
        state.context = clean;
        sanitised.push("/context".to_owned());
    }
    let bad_messages = failing_contents(state.messages());
    if !bad_messages.is_empty() {
        let list = state.messages_mut();
        for i in bad_messages {
            let pointer = format!("/messages/{i}/content");
            let clean = xhtml::sanitize_html(&list[i].content);
            check_clean(&clean, &pointer, &mut issues);
            list[i].content = clean;
            sanitised.push(pointer);
        }
    }
    for (i, t) in state.truth.trust.iter_mut().enumerate() {
        if let Some(clean) = cleaned(&t.content) {
            let pointer = format!("/truth/trust/{i}/content");
            check_clean(&clean, &pointer, &mut issues);
            t.content = clean;
            sanitised.push(pointer);
        }
    }
    if issues.is_empty() {
        Ok(Admitted { state, sanitised })
    } else {
        Err(issues)
    }
}

/// The sanitised form of a fragment that breaks the content rules.
fn cleaned(fragment: &str) -> Option<String> {
    xhtml::check_fragment(fragment)
        .is_err()
        .then(|| xhtml::sanitize_html(fragment))
}

/// Sanitised content must pass the rules itself; if it ever did not, the
/// input is refused rather than written invalid.
fn check_clean(clean: &str, pointer: &str, issues: &mut Vec<Issue>) {
    if let Err(p) = xhtml::check_fragment(clean) {
        issues.push(Issue {
            pointer: pointer.to_owned(),
            rule: p.rule,
            message: format!("cannot be sanitised into valid XHTML: {}", p.detail),
        });
    }
}

/// Indices of messages whose content breaks the XHTML rules, checked on all
/// cores (a large export has hundreds of thousands).
fn failing_contents(messages: &[Message]) -> Vec<usize> {
    let check = |offset: usize, chunk: &[Message]| -> Vec<usize> {
        chunk
            .iter()
            .enumerate()
            .filter(|(_, m)| xhtml::check_fragment(&m.content).is_err())
            .map(|(i, _)| offset + i)
            .collect()
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads < 2 || messages.len() < 2048 {
        return check(0, messages);
    }
    let per = messages.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = messages
            .chunks(per)
            .enumerate()
            .map(|(k, chunk)| scope.spawn(move || check(k * per, chunk)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

/// The rules the typed model cannot hold by its types (the parser checks the
/// same ones), reported the way `wo validate` reports them.
fn structural_issues(state: &State) -> Vec<Issue> {
    if codec::semantic_ok(state) {
        return Vec::new();
    }
    // Rare: ask the validator, over the canonical form, for the pointers.
    let doc: serde_json::Value = match serde_json::from_slice(&codec::to_canonical_vec(state)) {
        Ok(v) => v,
        Err(e) => {
            return vec![Issue {
                pointer: String::new(),
                rule: "json-syntax",
                message: format!("the state does not serialise to readable JSON: {e}"),
            }];
        }
    };
    let issues = validate::validate_structure(&doc);
    if issues.is_empty() {
        vec![Issue {
            pointer: String::new(),
            rule: "type",
            message: "the state breaks a rule of the model".to_owned(),
        }]
    } else {
        issues
    }
}

/// Extension values nested deeper than a reader accepts where they sit (a
/// state built from another format can hold any depth).
fn depth_issues(state: &State, issues: &mut Vec<Issue>) {
    use crate::model_de::{
        ENTRY_DEPTH, MESSAGE_DEPTH, PREFS_DEPTH, PROVENANCE_DEPTH, STATE_DEPTH, TOMBSTONE_DEPTH,
        TRUTH_DEPTH, USAGE_DEPTH,
    };
    let mut check = |extra: &Extra, depth: usize, at: &str| {
        for (k, v) in extra {
            if depth + v.depth() > MAX_DEPTH {
                issues.push(Issue {
                    pointer: format!("{at}/{}", validate::pointer_token(k)),
                    rule: "depth",
                    message: format!(
                        "nested {} levels deep in the file, more than the {MAX_DEPTH} any reader accepts",
                        depth + v.depth()
                    ),
                });
            }
        }
    };
    check(&state.extra, STATE_DEPTH, "");
    check(&state.truth.extra, TRUTH_DEPTH, "/truth");
    check(
        &state.truth.retrieval_prefs.extra,
        PREFS_DEPTH,
        "/truth/retrieval_prefs",
    );
    for (i, m) in state.messages().iter().enumerate() {
        check(&m.extra, MESSAGE_DEPTH, &format!("/messages/{i}"));
        if let Some(u) = &m.usage {
            check(&u.extra, USAGE_DEPTH, &format!("/messages/{i}/usage"));
        }
    }
    for (i, t) in state.truth.trust.iter().enumerate() {
        check(&t.extra, ENTRY_DEPTH, &format!("/truth/trust/{i}"));
        if let Some(p) = &t.provenance {
            check(
                &p.extra,
                PROVENANCE_DEPTH,
                &format!("/truth/trust/{i}/provenance"),
            );
        }
    }
    for (i, d) in state.truth.deleted.iter().enumerate() {
        check(&d.extra, TOMBSTONE_DEPTH, &format!("/truth/deleted/{i}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(levels: usize) -> String {
        format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn too_deep_input_is_refused_with_a_pointer() {
        // 3 levels (root, messages, the message) + 125 = 128: one too many.
        let text = format!(
            r#"{{"version":1,"schema":"wikioracle.llm_state","date":"2026-01-01T00:00:00Z",
            "messages":[{{"title":"t","username":"u","timestamp":"2026-01-01T00:00:00Z",
            "content":"<p>a</p>","x_deep":{}}}]}}"#,
            nested(125)
        );
        let issues = admit_bytes(text.as_bytes()).unwrap_err();
        assert_eq!(issues[0].pointer, "/messages/0/x_deep", "{issues:?}");
        // One level less is the deepest a reader accepts, and is admitted.
        let ok = text.replace(&nested(125), &nested(124));
        let admitted = admit_bytes(ok.as_bytes()).unwrap();
        let bytes = codec::to_canonical_vec(&admitted.state);
        let (issues, _) = codec::validate_bytes(&bytes);
        assert!(issues.is_empty(), "{issues:?}");
    }

    #[test]
    fn hostile_content_is_sanitised_and_reported() {
        let text = r#"{"version":1,"schema":"wikioracle.llm_state","date":"2026-01-01T00:00:00Z",
            "context":"<p onclick=\"x()\">ctx</p>",
            "messages":[{"id":"m_1","title":"t","username":"u","timestamp":"2026-01-01T00:00:00Z",
            "content":"<p>hi<script>alert(1)</script></p><img src=x onerror=alert(1)>"}],
            "truth":{"trust":[{"id":"t_1","title":"t","timestamp":"2026-01-01T00:00:00Z",
            "certainty":0.5,"content":"<p>open"}]}}"#;
        let (before, _) = codec::validate_bytes(text.as_bytes());
        assert!(!before.is_empty());
        let admitted = admit_bytes(text.as_bytes()).unwrap();
        assert_eq!(
            admitted.sanitised,
            vec![
                "/context".to_owned(),
                "/messages/0/content".to_owned(),
                "/truth/trust/0/content".to_owned()
            ]
        );
        let m = &admitted.state.messages()[0];
        assert_eq!(m.id, "m_1", "an id in the input is kept");
        assert!(!m.content.contains("script") && !m.content.contains("onerror"));
        let (after, _) = codec::validate_bytes(&codec::to_canonical_vec(&admitted.state));
        assert!(after.is_empty(), "{after:?}");
    }

    #[test]
    fn a_state_built_in_memory_is_held_to_the_same_rules() {
        let ts = crate::Timestamp::parse("2026-01-01T00:00:00Z").unwrap();
        let mut s = State::new(ts.clone());
        s.push_message(Message::new(" ", ts.clone(), "t", "<p>a</p>"));
        let issues = admit_state(s).unwrap_err();
        assert_eq!(issues[0].pointer, "/messages/0/username", "{issues:?}");

        let mut s = State::new(ts.clone());
        let mut m = Message::new("u", ts.clone(), "t", "<p>a</p>");
        let deep = crate::RawJson::parse(&nested(MAX_DEPTH)).unwrap();
        m.extra.insert("x/y".into(), deep);
        s.push_message(m);
        let issues = admit_state(s).unwrap_err();
        assert_eq!(issues[0].pointer, "/messages/0/x~1y", "{issues:?}");
        assert_eq!(issues[0].rule, "depth");
    }
}
