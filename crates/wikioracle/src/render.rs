//! Human-readable rendering shared by commands, and the one gate every
//! byte bound for the terminal passes through.
//!
//! Stored content, titles, usernames, file names, index chunks, parse
//! errors and model answers are all data other people (or models) wrote,
//! and a terminal obeys control sequences in what it prints: ESC/CSI can
//! rewrite the screen or hide text, OSC 52 writes the clipboard, OSC 8
//! plants links, DCS talks to the terminal itself, and the C1 characters
//! U+0080–U+009F are single-character forms of the same (issue 11.5).
//! So human-readable output is printed only with [`outln!`], [`out!`],
//! [`eoutln!`] and [`eout!`] (`clippy.toml` forbids `println!` & co. in
//! this crate), which pass the text through [`term`]: every control
//! character except newline and tab is shown as a visible `\u{1b}`-style
//! escape instead of being sent. `--json` output is the way to get the
//! data exactly: it is printed through [`json`], whose JSON escapes carry
//! the same characters safely.

use std::borrow::Cow;
use std::io::Write;

use wo_format::merge::MergeReport;
use wo_format::xhtml::to_plain_text;
use wo_format::{Message, TruthEntry};

/// First line of a message's text, shortened for one-line listings.
pub fn snippet(xhtml: &str, max_chars: usize) -> String {
    let text = to_plain_text(xhtml);
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if line.chars().count() > max_chars {
        let cut: String = line.chars().take(max_chars.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        line.to_owned()
    }
}

/// A message for `wo log`: a header line, the title, and the content as
/// Markdown (code stays in fenced blocks, links and lists stay readable;
/// plain text comes back as typed), indented two spaces.
pub fn message_block(m: &Message) -> String {
    let mut out = format!(
        "{}  {}  {}  [{}]\n",
        m.timestamp,
        m.id,
        m.username,
        m.effective_role().as_str()
    );
    if !m.title.is_empty() {
        out.push_str(&format!("  # {}\n", m.title));
    }
    for line in wo_interop::markdown::message_markdown(&m.content).lines() {
        if !line.is_empty() {
            out.push_str("  ");
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

pub fn truth_line(t: &TruthEntry) -> String {
    let kind = t
        .kind
        .map(|k| format!(" {k:?}").to_lowercase())
        .unwrap_or_default();
    format!(
        "{}  {:.2}{}  {}  — {}",
        t.id,
        t.certainty,
        kind,
        t.title,
        snippet(&t.content, 60)
    )
}

pub fn merge_report(r: &MergeReport) -> String {
    format!(
        "messages: {} added, {} replaced, {} already present; truth: {} added, {} updated, {} deleted, {} skipped",
        r.messages_added.len(),
        r.messages_replaced.len(),
        r.messages_skipped,
        r.truth_added.len(),
        r.truth_updated.len(),
        r.truth_deleted.len(),
        r.truth_skipped
    )
}

/// The notice for an answer cut short by the provider's answer caps
/// (`usage.truncated`, set by `wo_engine::chat::stream_answer`), if it was.
pub fn truncation_note(usage: Option<&wo_format::Usage>) -> Option<String> {
    let mark = usage?.extra.get(wo_providers::TRUNCATED_FIELD)?.to_value();
    let limit = mark.get("limit").and_then(|l| l.as_u64()).unwrap_or(0);
    let what = match mark.get("reason").and_then(|r| r.as_str()) {
        Some("time") => format!("it was still streaming after {limit} s (max_answer_secs)"),
        _ => format!("it passed {limit} bytes (max_answer_bytes)"),
    };
    Some(format!(
        "note: the answer was cut off because {what}; what arrived was kept and saved, \
         marked usage.truncated\nhint: raise max_answer_bytes / max_answer_secs in config.toml \
         if the model's answers are really that long"
    ))
}

/// Whether `c` must not reach a terminal as-is: C0 controls but newline
/// and tab (carriage return included: it overwrites the line), DEL, and
/// the C1 controls.
fn is_unsafe(c: char) -> bool {
    matches!(c, '\0'..='\x08' | '\x0b'..='\x1f' | '\x7f'..='\u{9f}')
}

/// `s` made safe for a terminal: each control character other than
/// newline and tab becomes its visible escape (`ESC` → `\u{1b}`). Works
/// on any slice of a stream independently — no state carries over — so
/// answer deltas split inside an escape sequence are safe too.
pub fn term(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_unsafe(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `value` as one line of JSON that is also safe on a terminal: serde_json
/// escapes C0 controls already; DEL and the C1 controls, which it leaves
/// raw, become `\u007f`-style escapes too (same data once parsed).
pub fn json(value: &impl serde::Serialize) -> serde_json::Result<String> {
    let text = serde_json::to_string(value)?;
    if !text.chars().any(is_unsafe) {
        return Ok(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        // Outside strings JSON has no such characters, so every one found
        // is inside a string, where `\uXXXX` means the same character.
        if is_unsafe(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// Writes `text` through [`term`] to `w`, flushing; errors (a closed pipe)
/// are returned for the caller to stop on.
pub fn write_safe(mut w: impl Write, text: &str) -> std::io::Result<()> {
    w.write_all(term(text).as_bytes())?;
    w.flush()
}

/// Standard output through [`term`]. A closed pipe (`wo log | head`) ends
/// the output quietly rather than panicking as `println!` would.
pub fn stdout_text(text: &str) {
    let _ = write_safe(std::io::stdout().lock(), text);
}

/// Standard error through [`term`].
pub fn stderr_text(text: &str) {
    let _ = write_safe(std::io::stderr().lock(), text);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_become_visible_and_text_stays() {
        assert_eq!(term("plain\ttext\nnext"), "plain\ttext\nnext");
        assert!(matches!(term("ünïcødé ✓"), Cow::Borrowed(_)));
        assert_eq!(term("\x1b[31mred"), "\\u{1b}[31mred");
        assert_eq!(
            term("\x1b]52;c;aGk=\x07 \u{9b}2J \u{90}q\u{9c} a\rb\x7f"),
            "\\u{1b}]52;c;aGk=\\u{7} \\u{9b}2J \\u{90}q\\u{9c} a\\u{d}b\\u{7f}"
        );
        // No raw control survives, whatever the input.
        let all: String = (0u32..0x200).filter_map(char::from_u32).collect();
        let safe = term(&all);
        assert!(!safe.chars().any(is_unsafe), "{safe:?}");
    }

    #[test]
    fn json_stays_valid_and_exact() {
        let v = serde_json::json!({"t": "a\x1b[0m\u{85}\u{9b}\x7fz"});
        let line = json(&v).unwrap();
        assert!(!line.chars().any(is_unsafe), "{line}");
        let back: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(back, v);
    }
}
