//! The rules every record a writer builds must meet before it is written:
//! a turn's messages, an agent's `log_exchange`, the server's API, `/v1`.
//!
//! [`message_issues`] and [`truth_entry_issues`] are exactly the rules the
//! file is read with ([`crate::parse`]; reported by the same checker as
//! `wo validate`), so no write can make `llm.json` unopenable. The store
//! applies them to what a process changed before every write; faces call
//! [`new_message_issues`] and [`new_truth_entry_issues`] before they take
//! the lock, which add the XHTML content rules and bounds on the fields a
//! client fills in (a file from elsewhere may hold more; it is read as it
//! is, but nothing new that large is written).

use crate::codec;
use crate::model::{Message, TruthEntry};
use crate::validate::{self, Issue};
use crate::xhtml;

/// Longest title of a new message or truth entry, in characters.
pub const MAX_TITLE_CHARS: usize = 1_000;
/// Longest username (a person's name, a model's name), provider or model
/// name of a new message, in characters.
pub const MAX_NAME_CHARS: usize = 200;
/// Most tags of a new truth entry.
pub const MAX_TAGS: usize = 64;
/// Longest tag, in characters.
pub const MAX_TAG_CHARS: usize = 64;
/// Longest resolution of an effort, in bytes.
pub const MAX_RESOLUTION_BYTES: usize = 64 * 1024;

/// Whether `m` meets the read rules ([`message_issues`] is empty): the
/// check alone, for a writer that builds the JSON pointer of the issues
/// only when there are some (it checks every message a batch touched).
pub fn message_ok(m: &Message) -> bool {
    codec::message_ok(m)
}

/// Whether `t` meets the read rules ([`truth_entry_issues`] is empty).
pub fn truth_entry_ok(t: &TruthEntry) -> bool {
    codec::truth_entry_ok(t)
}

/// The read rules for one message at `at` (its JSON pointer). Empty: a file
/// holding it opens.
pub fn message_issues(m: &Message, at: &str) -> Vec<Issue> {
    if codec::message_ok(m) {
        return Vec::new();
    }
    match serde_json::to_value(m) {
        Ok(v) => validate::message_value_issues(&v, at),
        Err(e) => vec![unserialisable(at, &e)],
    }
}

/// The read rules for one truth entry at `at`. Empty: a file holding it
/// opens.
pub fn truth_entry_issues(t: &TruthEntry, at: &str) -> Vec<Issue> {
    if codec::truth_entry_ok(t) {
        return Vec::new();
    }
    match serde_json::to_value(t) {
        Ok(v) => validate::truth_entry_value_issues(&v, at),
        Err(e) => vec![unserialisable(at, &e)],
    }
}

/// Everything a new message must meet: the read rules, well-formed and
/// allowlisted XHTML content, and the bounds of its names and title.
pub fn new_message_issues(m: &Message, at: &str) -> Vec<Issue> {
    let mut issues = message_issues(m, at);
    content_issue(&m.content, &format!("{at}/content"), &mut issues);
    too_long(
        &m.title,
        MAX_TITLE_CHARS,
        &format!("{at}/title"),
        &mut issues,
    );
    too_long(
        &m.username,
        MAX_NAME_CHARS,
        &format!("{at}/username"),
        &mut issues,
    );
    for (field, v) in [("provider", &m.provider), ("model", &m.model)] {
        if let Some(v) = v {
            too_long(v, MAX_NAME_CHARS, &format!("{at}/{field}"), &mut issues);
        }
    }
    issues
}

/// Everything a new or changed truth entry must meet: the read rules,
/// well-formed and allowlisted XHTML content, a title that is not blank,
/// and the bounds of its title, tags and resolution.
pub fn new_truth_entry_issues(t: &TruthEntry, at: &str) -> Vec<Issue> {
    let mut issues = truth_entry_issues(t, at);
    content_issue(&t.content, &format!("{at}/content"), &mut issues);
    if t.title.trim().is_empty() {
        issues.push(issue(
            &format!("{at}/title"),
            "pattern",
            "title must not be blank".into(),
        ));
    }
    too_long(
        &t.title,
        MAX_TITLE_CHARS,
        &format!("{at}/title"),
        &mut issues,
    );
    if let Some(tags) = &t.tags {
        if tags.len() > MAX_TAGS {
            issues.push(issue(
                &format!("{at}/tags"),
                "range",
                format!("{} tags, more than {MAX_TAGS}", tags.len()),
            ));
        } else {
            for (i, tag) in tags.iter().enumerate() {
                let p = format!("{at}/tags/{i}");
                if tag.trim().is_empty() {
                    issues.push(issue(&p, "pattern", "tag must not be blank".into()));
                }
                too_long(tag, MAX_TAG_CHARS, &p, &mut issues);
            }
        }
    }
    if let Some(r) = &t.resolution
        && r.len() > MAX_RESOLUTION_BYTES
    {
        issues.push(issue(
            &format!("{at}/resolution"),
            "range",
            format!(
                "{} bytes, over the limit of {MAX_RESOLUTION_BYTES}",
                r.len()
            ),
        ));
    }
    issues
}

/// One line for a person: the first issue, and how many more.
pub fn describe(issues: &[Issue]) -> String {
    match issues {
        [] => String::new(),
        [one] => one.to_string(),
        [first, rest @ ..] => format!("{first} (and {} more)", rest.len()),
    }
}

fn content_issue(content: &str, at: &str, issues: &mut Vec<Issue>) {
    if let Err(p) = xhtml::check_fragment(content) {
        issues.push(issue(at, p.rule, p.detail));
    }
}

fn too_long(s: &str, max: usize, at: &str, issues: &mut Vec<Issue>) {
    // Bytes bound characters from above: most strings need no count.
    if s.len() > max {
        let n = s.chars().count();
        if n > max {
            issues.push(issue(
                at,
                "range",
                format!("{n} characters, more than {max}"),
            ));
        }
    }
}

fn issue(at: &str, rule: &'static str, message: String) -> Issue {
    Issue {
        pointer: at.to_owned(),
        rule,
        message,
    }
}

fn unserialisable(at: &str, e: &serde_json::Error) -> Issue {
    issue(at, "json-syntax", format!("does not serialise: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Timestamp;

    fn message(username: &str) -> Message {
        Message::new(username, Timestamp::now(), "t", "<p>x</p>")
    }

    #[test]
    fn blank_usernames_break_the_read_rules() {
        for blank in [" ", "", "\u{a0}\u{3000}"] {
            let issues = message_issues(&message(blank), "/messages/1");
            assert_eq!(issues.len(), 1, "{blank:?}: {issues:?}");
            assert_eq!(issues[0].pointer, "/messages/1/username");
            assert_eq!(issues[0].message, "username must not be blank");
        }
        assert!(message_issues(&message("ann"), "/messages/0").is_empty());
    }

    #[test]
    fn new_records_are_bounded() {
        let mut m = message(&"n".repeat(MAX_NAME_CHARS + 1));
        m.title = "t".repeat(MAX_TITLE_CHARS + 1);
        m.content = "<script>x</script>".into();
        let pointers: Vec<String> = new_message_issues(&m, "")
            .into_iter()
            .map(|i| i.pointer)
            .collect();
        assert_eq!(pointers, ["/content", "/title", "/username"]);
        // Characters, not bytes: a long name of wide characters is fine.
        assert!(new_message_issues(&message(&"é".repeat(MAX_NAME_CHARS)), "").is_empty());

        let mut t = TruthEntry::new("  ", Timestamp::now(), 0.5, "<p>x</p>");
        t.tags = Some(vec![String::new(), "x".repeat(MAX_TAG_CHARS + 1)]);
        t.resolution = Some("r".repeat(MAX_RESOLUTION_BYTES + 1));
        let pointers: Vec<String> = new_truth_entry_issues(&t, "/e")
            .into_iter()
            .map(|i| i.pointer)
            .collect();
        assert_eq!(
            pointers,
            ["/e/title", "/e/tags/0", "/e/tags/1", "/e/resolution"]
        );
        t.tags = Some(vec!["a".into(); MAX_TAGS + 1]);
        assert!(
            new_truth_entry_issues(&t, "")
                .iter()
                .any(|i| i.pointer == "/tags" && i.rule == "range")
        );
    }
}
