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

use std::cell::Cell;

use crate::codec::{self, ParseError};
pub use crate::known::KnownMessages;
use crate::known::failing_contents;
use crate::model::Extra;
use crate::model_de::StateSeed;
use crate::rawjson::MAX_DEPTH;
use crate::state::State;
use crate::validate::{self, Issue};
use crate::xhtml;

/// A state fit to merge, with what had to be cleaned on the way in.
#[derive(Clone, Debug)]
pub struct Admitted {
    /// The state, sanitised where it had to be and ready to merge.
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

/// An export admitted against the messages a state already holds.
#[derive(Clone, Debug)]
pub struct AdmittedExport {
    /// The export without the messages byte-identical to known ones.
    pub admitted: Admitted,
    /// How many messages were left out as known.
    pub known: usize,
}

/// [`admit_bytes`] for an export to merge into a state whose messages are
/// `known`: exactly the same verdict, issues and sanitised pointers, but the
/// messages repeated byte for byte from `known` are only counted. Merging
/// them would change nothing (a merge is idempotent), so merging
/// `admitted.state` is merging the whole export, with `known` more messages
/// skipped.
///
/// Acceptance is unchanged because a left-out element parses to a message
/// that already passed every rule where it sits (the same depth in the same
/// structure), and each rule is checked per message. Whenever the shortcut
/// finds anything to report or sanitise, the whole input goes through
/// [`admit_bytes`], so what is reported is what it reports.
pub fn admit_export(bytes: &[u8], known: &KnownMessages) -> Result<AdmittedExport, Vec<Issue>> {
    let full = || admit_bytes(bytes).map(|admitted| AdmittedExport { admitted, known: 0 });
    let skipped = Cell::new(0);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = serde::de::DeserializeSeed::deserialize(
        StateSeed {
            known,
            skipped: &skipped,
        },
        &mut de,
    )
    .and_then(|state| de.end().map(|()| state));
    let Ok(state) = parsed else {
        return full();
    };
    match admit_state(state) {
        Ok(admitted) if admitted.sanitised.is_empty() => Ok(AdmittedExport {
            admitted,
            known: skipped.get(),
        }),
        _ => full(),
    }
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
    let sanitised = sanitise_contents(&mut state)?;
    Ok(Admitted { state, sanitised })
}

/// Replaces every XHTML content of `state` (context, messages, truth) that
/// breaks the content rules by its sanitised form, and returns the JSON
/// pointers of those replaced; the rest of the state is taken as it is (a
/// state a reader parsed already meets the structural rules). What a
/// reader that serves content to a browser does with a file that anyone
/// may have edited: `wo serve` on open and on every re-read.
pub fn sanitise_contents(state: &mut State) -> Result<Vec<String>, Vec<Issue>> {
    let mut issues = Vec::new();
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
        Ok(sanitised)
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

/// The rules the typed model cannot hold by its types (the parser checks the
/// same ones), reported the way `wo validate` reports them.
fn structural_issues(state: &State) -> Vec<Issue> {
    if codec::semantic_ok(state) {
        return Vec::new();
    }
    // Rare: ask the validator, over the canonical form, for the pointers.
    let doc: serde_json::Value = match codec::document_value(&codec::to_canonical_vec(state)) {
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
    use crate::model::Message;

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

    fn base_state() -> State {
        let text = r#"{"version":1,"schema":"wikioracle.llm_state","date":"2026-01-01T00:00:00Z",
            "messages":[
              {"title":"a","username":"u","timestamp":"2026-01-01T00:00:01Z","content":"<p>one</p>","x_n":1e400},
              {"title":"b","username":"v","timestamp":"2026-01-01T00:00:02Z","content":"<p>two</p>",
               "usage":{"input_tokens":3,"x":[1,{"y":null}]}},
              {"title":"c","username":"w","timestamp":"2026-01-01T00:00:03Z","content":"<p>bad<script>x()</script></p>"}
            ]}"#;
        codec::parse(text.as_bytes()).unwrap()
    }

    /// The export shortcut's verdict, issues and sanitised pointers are
    /// admit_bytes' own, and merging what it admits (plus the counted
    /// repeats) gives the same state and report as merging the whole file.
    fn assert_same_as_full(base: &State, export: &[u8]) {
        let known = KnownMessages::of(base);
        let full = admit_bytes(export);
        let fast = admit_export(export, &known);
        match (full, fast) {
            (Err(a), Err(b)) => assert_eq!(a, b),
            (Ok(a), Ok(b)) => {
                assert_eq!(a.sanitised, b.admitted.sanitised);
                let (mut x, mut y) = (base.clone(), base.clone());
                let rx = crate::merge::merge_into(&mut x, &a.state);
                let mut ry = crate::merge::merge_into(&mut y, &b.admitted.state);
                ry.messages_skipped += b.known;
                assert_eq!(rx, ry);
                assert_eq!(codec::to_canonical_vec(&x), codec::to_canonical_vec(&y));
            }
            (a, b) => panic!("verdicts differ: {a:?} vs {b:?}"),
        }
    }

    #[test]
    fn an_export_repeating_the_state_is_recognised_without_parsing() {
        let base = base_state();
        let known = KnownMessages::of(&base);
        // The message whose content breaks the XHTML rules is not known: a
        // copy of it must still be sanitised on the way in.
        assert_eq!(known.len(), 2);
        let mut export = base.clone();
        export.push_message(Message::new(
            "phone",
            crate::Timestamp::parse("2026-02-01T00:00:00Z").unwrap(),
            "new",
            "<p>new</p>",
        ));
        let bytes = codec::to_canonical_vec(&export);
        let out = admit_export(&bytes, &known).unwrap();
        // The state's good messages are only counted; the bad one and the new
        // one are parsed (the bad one sanitised, so admit_bytes reports it).
        assert_eq!(
            out.admitted.sanitised,
            vec!["/messages/2/content".to_owned()]
        );
        assert_same_as_full(&base, &bytes);
        // Without the bad message, the shortcut itself is taken.
        let mut clean = export.clone();
        clean.messages_mut().remove(2);
        let bytes = codec::to_canonical_vec(&clean);
        let out = admit_export(&bytes, &known).unwrap();
        assert_eq!(out.known, 2);
        assert_eq!(out.admitted.state.messages().len(), 1);
        assert_eq!(out.admitted.state.messages()[0].title, "new");
        assert_same_as_full(&base, &bytes);
    }

    #[test]
    fn the_export_shortcut_is_exactly_as_strict_as_admit_bytes() {
        let base = base_state();
        let canonical = String::from_utf8(codec::to_canonical_vec(&base)).unwrap();
        let deep = format!(
            r#"{{"version":1,"schema":"wikioracle.llm_state","date":"2026-01-01T00:00:00Z",
            "messages":[{{"title":"t","username":"u","timestamp":"2026-01-01T00:00:00Z",
            "content":"<p>a</p>","x_deep":{}}}]}}"#,
            nested(125)
        );
        let cases = [
            canonical.clone(),
            // A known message followed by garbage, a broken one, a bad id.
            canonical.replacen("\"messages\": [", "\"messages\": [ 1,", 1),
            canonical.replacen("\"messages\": [", "\"messages\": [{\"title\":\"x\"},", 1),
            canonical.replacen("\"title\": \"a\"", "\"title\": \"a\", \"id\": \"bad id\"", 1),
            // Same message, other whitespace: parsed, same result.
            canonical.replacen("\"title\": \"a\",", "\"title\":\"a\",", 1),
            // A message repeated (duplicate id) and a known key twice.
            canonical.replacen("\"messages\": [", "\"messages\": [{\"id\":\"m_x\",\"title\":\"t\",\"username\":\"u\",\"timestamp\":\"2026-01-01T00:00:00Z\",\"content\":\"<p>x</p>\"},{\"id\":\"m_x\",\"title\":\"t2\",\"username\":\"u\",\"timestamp\":\"2026-01-01T00:00:00Z\",\"content\":\"<p>x</p>\"},", 1),
            canonical.replacen("\"title\": \"b\",", "\"title\": \"b\", \"title\": \"b\",", 1),
            // Trailing bytes after the state, and a hostile new message.
            format!("{canonical} x"),
            canonical.replacen("\"messages\": [", "\"messages\": [{\"title\":\"t\",\"username\":\"u\",\"timestamp\":\"2026-01-01T00:00:00Z\",\"content\":\"<img src=x onerror=y()>\"},", 1),
            deep.clone(),
            deep.replace(&nested(125), &nested(124)),
        ];
        for (i, case) in cases.iter().enumerate() {
            eprintln!("case {i}");
            assert_same_as_full(&base, case.as_bytes());
        }
    }
}
