//! The sanitiser and the content check are linear in the attributes of a
//! tag: anonymous clients of a hosted server send content that is
//! sanitised, so a tag with tens of thousands of attributes must cost what
//! its bytes cost, not their square.

use std::time::{Duration, Instant};

use wo_format::xhtml::{MAX_ATTRIBUTES, check_fragment, sanitize_html};

/// One `<p>` with `n` distinct `data-` attributes (40,000: about 550 KB).
fn attributes(n: usize) -> String {
    let mut s = String::from("<p");
    for i in 0..n {
        s.push_str(&format!(" data-a{i}=\"v\""));
    }
    s.push_str(">text</p>");
    s
}

/// Far above what linear work takes on any machine, in a debug build;
/// far below what the square of 40,000 took.
const BOUND: Duration = Duration::from_secs(2);

#[test]
fn forty_thousand_attributes_are_sanitised_in_linear_time() {
    let input = attributes(40_000);
    assert!(input.len() > 500_000, "{}", input.len());
    let start = Instant::now();
    let out = sanitize_html(&input);
    let took = start.elapsed();
    assert!(took < BOUND, "sanitising took {took:?}");
    assert!(out.starts_with("<p data-a0=\"v\""), "{}", &out[..40]);
    assert!(out.ends_with(">text</p>"));
    assert_eq!(out.matches(" data-").count(), MAX_ATTRIBUTES);
    // Its own fixpoint, and valid.
    assert_eq!(sanitize_html(&out), out);
    assert!(check_fragment(&out).is_ok());
}

#[test]
fn forty_thousand_attributes_are_checked_in_linear_time() {
    let input = attributes(40_000);
    let start = Instant::now();
    let verdict = check_fragment(&input);
    let took = start.elapsed();
    assert!(took < BOUND, "checking took {took:?}");
    assert!(verdict.is_ok(), "{verdict:?}");
    // Duplicates are still refused (XML well-formedness).
    let dup = "<p data-x=\"1\" data-y=\"2\" data-x=\"3\">t</p>";
    let e = check_fragment(dup).unwrap_err();
    assert_eq!(e.rule, "xhtml-well-formed");
    assert!(e.detail.contains("data-x"), "{}", e.detail);
}

#[test]
fn the_attribute_cap_follows_the_tokenizers_tag_states() {
    // Values holding `>`, spaces, quotes of the other kind and `=` are one
    // attribute each; a value-less attribute counts too.
    let mut tricky = String::from("<a href=\"https://x.example/?a=1&amp;b=>\"");
    for i in 0..MAX_ATTRIBUTES + 10 {
        match i % 4 {
            0 => tricky.push_str(&format!(" data-q{i}='say \"hi\" > there'")),
            1 => tricky.push_str(&format!(" data-u{i}=bare")),
            2 => tricky.push_str(&format!(" data-e{i}")),
            _ => tricky.push_str(&format!(" data-s{i} = \"a b\"")),
        }
    }
    tricky.push_str(">link</a> after");
    let out = sanitize_html(&tricky);
    assert!(
        out.starts_with("<a href=\"https://x.example/?a=1&amp;b=&gt;\""),
        "{out}"
    );
    assert!(out.ends_with(">link</a> after"), "{out}");
    // The href plus the first attributes up to the cap.
    assert_eq!(out.matches(" data-").count(), MAX_ATTRIBUTES - 1, "{out}");
    // Tags under the cap are untouched.
    let small = "<p data-a=\"1\" data-b=\"2\">x</p>";
    assert_eq!(sanitize_html(small), small);
}
