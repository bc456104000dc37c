//! Hostile input never panics: parse → validate_bytes → merge → serialise →
//! parse over arbitrary bytes, over valid documents mutated at random
//! (fields deleted, types changed, huge strings, deep nesting) and over
//! corrupted canonical bytes; and the XHTML functions over arbitrary
//! strings, whose sanitised output always passes `check_fragment`.

mod common;

use std::sync::LazyLock;

use proptest::prelude::*;
use serde_json::{Map, Value};
use wo_format::merge::merge_all;
use wo_format::xhtml::{
    canonical_xhtml, check_fragment, markdown_to_xhtml, sanitize_html, text_to_xhtml, to_plain_text,
};
use wo_format::{State, Timestamp, parse, to_canonical_vec, validate_bytes};

/// Valid fixtures, as documents to mutate and as states to merge with.
static VALID: LazyLock<Vec<(Value, State)>> = LazyLock::new(|| {
    common::load("valid", false)
        .into_iter()
        .map(|f| {
            (
                serde_json::from_slice(&f.bytes).unwrap(),
                parse(&f.bytes).unwrap(),
            )
        })
        .collect()
});

/// The whole pipeline on one input. Besides not panicking, the pieces must
/// agree with each other.
fn pipeline(bytes: &[u8]) -> Result<(), TestCaseError> {
    let (issues, _lint) = validate_bytes(bytes);
    match parse(bytes) {
        Err(e) => {
            prop_assert!(!e.issues.is_empty(), "parse failed without an issue");
            prop_assert!(
                !issues.is_empty(),
                "parse failed ({}) but validate_bytes is silent",
                e
            );
        }
        Ok(state) => {
            prop_assert!(
                issues.iter().all(|i| i.rule.starts_with("xhtml-")),
                "parse accepted what validate_bytes rejects: {:?}",
                issues
            );
            let other = &VALID[bytes.len() % VALID.len()].1;
            for (base, incoming) in [(&state, other), (other, &state)] {
                let (merged, _report) = merge_all(base, [incoming, base]);
                let out = to_canonical_vec(&merged);
                let back = parse(&out);
                prop_assert!(
                    back.is_ok(),
                    "merge result does not parse: {:?}",
                    back.err()
                );
                let back = back.unwrap();
                prop_assert_eq!(&back, &merged);
                prop_assert_eq!(to_canonical_vec(&back), out);
            }
        }
    }
    Ok(())
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |x| x.is_finite())
            .prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
        prop::sample::select(
            &[
                "2026-01-01T00:00:00Z",
                "2026-01-01T00:00:00.5Z",
                "t_1",
                "user",
                "fact",
                "<p>x</p>",
                "<script>x</script>",
                "</wo-root>",
            ][..]
        )
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{0,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

#[derive(Clone, Debug)]
enum Mutation {
    Delete,
    Replace(Value),
    HugeString(usize),
    DeepNesting(usize),
    ChangeType,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => Just(Mutation::Delete),
        3 => arb_json().prop_map(Mutation::Replace),
        1 => (1_000usize..200_000).prop_map(Mutation::HugeString),
        1 => (1usize..300).prop_map(Mutation::DeepNesting),
        3 => Just(Mutation::ChangeType),
    ]
}

/// JSON pointers of every value in `v`.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                pointers(
                    child,
                    format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                pointers(child, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

fn mutate(doc: &mut Value, at: &str, m: &Mutation) {
    let Some(target) = doc.pointer_mut(at) else {
        return;
    };
    match m {
        Mutation::Delete => {
            let Some((parent, last)) = at.rsplit_once('/') else {
                *target = Value::Null;
                return;
            };
            let last = last.replace("~1", "/").replace("~0", "~");
            match doc.pointer_mut(parent) {
                Some(Value::Object(o)) => {
                    o.remove(&last);
                }
                Some(Value::Array(a)) => {
                    if let Ok(i) = last.parse::<usize>() {
                        a.remove(i);
                    }
                }
                _ => {}
            }
        }
        Mutation::Replace(v) => *target = v.clone(),
        Mutation::HugeString(n) => {
            let unit = "<p>big &amp; «ü» text</p>";
            *target = Value::from(unit.repeat(n / unit.len() + 1));
        }
        Mutation::DeepNesting(depth) => {
            let mut v = target.take();
            for i in 0..*depth {
                v = if i % 2 == 0 {
                    Value::Array(vec![v])
                } else {
                    Value::Object([("k".to_owned(), v)].into_iter().collect())
                };
            }
            *target = v;
        }
        Mutation::ChangeType => {
            *target = match target.take() {
                Value::String(s) => s
                    .parse::<f64>()
                    .map(Value::from)
                    .unwrap_or(Value::from(s.len())),
                Value::Number(n) => Value::from(n.to_string()),
                Value::Bool(b) => Value::from(u8::from(b)),
                Value::Null => Value::from(""),
                Value::Array(a) => Value::Object(
                    a.into_iter()
                        .enumerate()
                        .map(|(i, v)| (i.to_string(), v))
                        .collect(),
                ),
                Value::Object(o) => Value::Array(o.into_iter().map(|(_, v)| v).collect()),
            }
        }
    }
}

fn config(default: u32) -> ProptestConfig {
    ProptestConfig {
        cases: common::cases(default),
        ..ProptestConfig::default()
    }
}

/// Tag soup: fragments of markup a browser, a model or an attacker writes.
fn html_like() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        prop::sample::select(
            &[
                "<p>",
                "</p>",
                "<div class=\"c\">",
                "</div>",
                "<br>",
                "<br/>",
                "<hr>",
                "<a href=\"https://x.org/?a=1&b=2\">",
                "<a href=\"javascript:alert(1)\">",
                "</a>",
                "<script>",
                "</script>",
                "<style>",
                "<img src=x onerror=alert(1)>",
                "<table>",
                "<tr>",
                "<td>",
                "<ul>",
                "<li>",
                "<b>",
                "</i>",
                "<!--",
                "-->",
                "<![CDATA[",
                "]]>",
                "&nbsp;",
                "&amp;",
                "&#0;",
                "&#x1F600;",
                "&",
                "<",
                ">",
                "\"",
                "'",
                "<p data-x=\"1\" data-a\"b=2 title='t'>",
                "<p data-x<y=1>",
                "</wo-root>",
                "<wo-root>",
                "<svg><p>",
                "<math>",
                "<template>",
                "<noscript>",
                "<textarea>",
                "<pre>\n",
                "\u{0}",
                "\u{1}",
                "\u{b}",
                "\u{fffe}",
                "\u{ffff}",
                "\r\n",
                "<?xml ?>",
                "<!DOCTYPE html>",
                "<P ONCLICK=x>",
                "<a href=mailto:a@b>",
                "<a href=' http://x '>",
                "<h7>",
                "# h\n",
                "**b**",
                "`c`",
                "[l](javascript:x)",
                "[l](https://x)",
                "| a | b |\n|---|---|\n| 1 | 2 |\n",
                "    code\n",
                "> q\n",
                "- item\n",
                "\n\n",
            ][..]
        )
        .prop_map(str::to_owned),
        "\\PC{0,6}",
    ];
    prop::collection::vec(token, 0..24).prop_map(|t| t.concat())
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        pipeline(&bytes)?;
    }

    #[test]
    fn mutated_valid_documents_never_panic(
        pick in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), mutation()), 1..4),
    ) {
        let mut doc = VALID[pick.index(VALID.len())].0.clone();
        for (where_, m) in &edits {
            let mut all = Vec::new();
            pointers(&doc, String::new(), &mut all);
            let at = all[where_.index(all.len())].clone();
            mutate(&mut doc, &at, m);
        }
        pipeline(&serde_json::to_vec(&doc).unwrap())?;
    }

    #[test]
    fn corrupted_canonical_bytes_never_panic(
        pick in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..6),
    ) {
        let mut bytes = to_canonical_vec(&VALID[pick.index(VALID.len())].1);
        for (pos, byte, op) in &edits {
            let i = pos.index(bytes.len() + 1);
            match op {
                0 => bytes.insert(i, *byte),
                1 if i < bytes.len() => bytes[i] = *byte,
                _ => bytes.truncate(i),
            }
        }
        pipeline(&bytes)?;
    }

    #[test]
    fn generated_states_survive_the_pipeline(a in common::strategies::state()) {
        pipeline(&to_canonical_vec(&a))?;
    }

    #[test]
    fn xhtml_functions_never_panic_and_sanitised_output_passes_the_check(
        s in prop_oneof![html_like(), "\\PC{0,64}", any::<String>()]
    ) {
        let _ = check_fragment(&s);
        let _ = canonical_xhtml(&s);
        let _ = to_plain_text(&s);
        let _ = Timestamp::parse(&s);
        let _ = wo_format::ids::message_id(&s, &s, &s);
        for (what, out) in [
            ("sanitize_html", sanitize_html(&s)),
            ("markdown_to_xhtml", markdown_to_xhtml(&s)),
            ("text_to_xhtml", text_to_xhtml(&s)),
        ] {
            prop_assert!(check_fragment(&out).is_ok(), "{} output fails the check: {:?} -> {:?}: {:?}", what, s, out, check_fragment(&out));
            // Sanitising what was sanitised changes nothing.
            prop_assert_eq!(sanitize_html(&out), out.clone(), "{} output is not a sanitiser fixpoint", what);
        }
    }
}

#[test]
fn huge_and_deep_inputs_are_errors_not_crashes() {
    // Nesting far beyond serde_json's recursion limit.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(parse(deep.as_bytes()).is_err());
    assert!(!validate_bytes(deep.as_bytes()).0.is_empty());
    let deep_obj = "{\"a\":".repeat(50_000);
    assert!(parse(deep_obj.as_bytes()).is_err());
    // Markup nested deeper than any parser stack.
    let nested = "<div>".repeat(20_000);
    assert!(check_fragment(&nested).is_err());
    assert!(check_fragment(&sanitize_html(&nested)).is_ok());
    let _ = canonical_xhtml(&nested);
    let _ = markdown_to_xhtml(&">".repeat(5_000));
}
