//! Human-readable rendering shared by commands, and the one gate every
//! byte bound for the terminal passes through.
//!
//! Stored content, titles, usernames, file names, index chunks, parse
//! errors and model answers are all data other people (or models) wrote,
//! and a terminal obeys control sequences in what it prints: ESC/CSI can
//! rewrite the screen or hide text, OSC 52 writes the clipboard, OSC 8
//! plants links, DCS talks to the terminal itself, and the C1 characters
//! U+0080–U+009F are single-character forms of the same.
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
    let role = m.effective_role().as_str();
    // The role is shown where the name does not already say it ("user").
    let mut out = if m.username.eq_ignore_ascii_case(role) {
        format!("{}  {}  {}\n", m.timestamp, m.id, m.username)
    } else {
        format!("{}  {}  {}  [{}]\n", m.timestamp, m.id, m.username, role)
    };
    let body = wo_interop::markdown::message_markdown(&m.content);
    // A title is shown only where it says something the text does not
    // begin with (an imported conversation's name, a rename): a derived
    // title is the text's first words, and repeating them is noise.
    if !m.title.is_empty() && !begins_with_title(&body, &m.title) {
        out.push_str(&format!("  # {}\n", m.title));
    }
    for line in body.lines() {
        if !line.is_empty() {
            out.push_str("  ");
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// Whether `text` starts with `title`'s words (a derived title may end in
/// an ellipsis where it was cut).
fn begins_with_title(text: &str, title: &str) -> bool {
    let words = |s: &str| -> Vec<String> {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let (t, b) = (words(title), words(text));
    !t.is_empty() && b.len() >= t.len() && b[..t.len()] == t[..]
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
        "messages: {} added, {} replaced, {} already present; memory: {} added, {} updated, {} deleted, {} skipped",
        r.messages_added.len(),
        r.messages_replaced.len(),
        r.messages_skipped,
        r.truth_added.len(),
        r.truth_updated.len(),
        r.truth_deleted.len(),
        r.truth_skipped
    )
}

/// What a stopped turn kept, for the notice after Ctrl-C: the question and
/// the answer so far, or the question alone when no word had arrived (its
/// answer is kept empty, marked incomplete).
pub fn stopped_note(outcome: &wo_engine::chat::TurnOutcome) -> &'static str {
    if outcome.answer.trim().is_empty() {
        "the question was saved, before any answer"
    } else {
        "the question and the answer so far were saved"
    }
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

/// The notice for a prompt fitted to a window smaller than the provider's
/// setting (`TurnOutcome::fitted_to_window`): the answer came, one request
/// later than it needed to, and one setting makes every prompt fit at once.
pub fn fitted_note(provider: &str, setting: usize, fitted: Option<usize>) -> Option<String> {
    let window = fitted?;
    Some(format!(
        "note: {provider}'s server holds {window} tokens, fewer than the {setting} of its \
         context_window setting, and refused the first prompt; this one was fitted to {window}\n\
         hint: set context_window = {window} under [providers.{provider}] in {} so that every \
         prompt fits at once",
        wo_providers::env::config_path_for_hints()
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

/// Writes text that is already safe for a terminal (made so by [`term`],
/// then styled by [`Markdown`]) as it is; errors (a closed pipe) are
/// returned for the caller to stop on.
pub fn write_raw(mut w: impl Write, text: &str) -> std::io::Result<()> {
    w.write_all(text.as_bytes())?;
    w.flush()
}

/// Whether what was printed so far left a line open (text after the last
/// newline), so that a failure or a stop ends it — and prints no empty line
/// when nothing was printed at all.
#[derive(Default)]
pub struct LineEnd {
    open: bool,
}

impl LineEnd {
    /// Notes `text` as printed.
    pub fn saw(&mut self, text: &str) {
        if let Some(last) = text.chars().last() {
            self.open = last != '\n';
        }
    }

    /// True when the last thing printed did not end its line.
    pub fn open(&self) -> bool {
        self.open
    }
}

/// A spinner on standard error while waiting for a model's first token
/// (indicatif draws only when standard error is a terminal; on a pipe it
/// stays silent). Started when the request is sent, stopped at the first
/// token, the end or a failure; stopping twice is harmless.
pub struct Spinner {
    bar: indicatif::ProgressBar,
    provider: String,
}

impl Spinner {
    /// A spinner naming `provider`, not yet drawn.
    pub fn new(provider: &str) -> Self {
        let bar = indicatif::ProgressBar::new_spinner();
        if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
            bar.set_style(style);
        }
        let provider = term(provider).into_owned();
        bar.set_message(format!("waiting for {provider}…"));
        Spinner { bar, provider }
    }

    /// Starts drawing (every 100 ms), saying how long the prompt sent is:
    /// a model reads all of it before its first word, which is most of the
    /// wait on a small machine.
    pub fn start(&self, prompt_tokens: usize) {
        if !self.bar.is_finished() {
            self.bar.set_message(format!(
                "waiting for {} (reading a {prompt_tokens}-token prompt)…",
                self.provider
            ));
            self.bar
                .enable_steady_tick(std::time::Duration::from_millis(100));
        }
    }

    /// Stops and erases it.
    pub fn stop(&self) {
        if !self.bar.is_finished() {
            self.bar.finish_and_clear();
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A model's Markdown answer rendered for a terminal as it streams: when
/// standard output is a terminal (and `NO_COLOR` is not set), each finished
/// line is styled — headings bold, `**bold**`, `*italic*`, `` `code` ``,
/// fenced code blocks in colour with their fences dimmed, bullets as `•`,
/// quotes behind a bar; otherwise the text passes through unchanged. Either
/// way the output has passed [`term`] first, so the only escape sequences
/// in it are the styles added here: print it with [`write_raw`].
///
/// Line by line, because a line is the smallest unit whose Markdown
/// meaning is known (a `*` may open emphasis that closes later on the line).
pub struct Markdown {
    styled: bool,
    pending: String,
    in_fence: Option<String>,
}

const BOLD: &str = "\x1b[1m";
const ITALIC: &str = "\x1b[3m";
const DIM: &str = "\x1b[2m";
const CODE: &str = "\x1b[36m";
const HEADING: &str = "\x1b[1;4m";
const RESET: &str = "\x1b[0m";

impl Markdown {
    /// Styled when standard output is a terminal and `NO_COLOR` is unset.
    pub fn for_stdout() -> Self {
        use std::io::IsTerminal;
        let styled = std::io::stdout().is_terminal()
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        Markdown::new(styled)
    }

    /// A renderer that styles (`true`) or passes text through.
    pub fn new(styled: bool) -> Self {
        Markdown {
            styled,
            pending: String::new(),
            in_fence: None,
        }
    }

    /// Takes the next piece of the answer; returns what can be printed now.
    pub fn push(&mut self, text: &str) -> String {
        if !self.styled {
            return term(text).into_owned();
        }
        self.pending.push_str(text);
        let Some(end) = self.pending.rfind('\n') else {
            return String::new();
        };
        let done: String = self.pending.drain(..=end).collect();
        let mut out = String::with_capacity(done.len() + 32);
        for line in done.split_inclusive('\n') {
            out.push_str(&self.line(line.trim_end_matches('\n')));
            out.push('\n');
        }
        out
    }

    /// The rest, at the end of the answer.
    pub fn finish(&mut self) -> String {
        if !self.styled || self.pending.is_empty() {
            return String::new();
        }
        let rest = std::mem::take(&mut self.pending);
        self.line(&rest)
    }

    /// One whole line, styled.
    fn line(&mut self, raw: &str) -> String {
        let safe = term(raw);
        let line: &str = &safe;
        let trimmed = line.trim_start();
        let fence: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        if fence.len() >= 3
            && fence
                .chars()
                .all(|c| c == fence.chars().next().unwrap_or('`'))
        {
            match &self.in_fence {
                Some(open)
                    if fence.starts_with(open.as_str())
                        && trimmed[fence.len()..].trim().is_empty() =>
                {
                    self.in_fence = None;
                }
                Some(_) => return format!("{CODE}{line}{RESET}"),
                None => self.in_fence = Some(fence),
            }
            return format!("{DIM}{line}{RESET}");
        }
        if self.in_fence.is_some() {
            return format!("{CODE}{line}{RESET}");
        }
        let indent = &line[..line.len() - trimmed.len()];
        let hashes = trimmed.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
            return format!(
                "{indent}{HEADING}{}{RESET}",
                inline(trimmed[hashes..].trim())
            );
        }
        if let Some(rest) = trimmed
            .strip_prefix("> ")
            .or_else(|| (trimmed == ">").then_some(""))
        {
            return format!("{indent}{DIM}│{RESET} {}", inline(rest));
        }
        for bullet in ["- ", "* ", "+ "] {
            if let Some(rest) = trimmed.strip_prefix(bullet) {
                return format!("{indent}• {}", inline(rest));
            }
        }
        format!("{indent}{}", inline(trimmed))
    }
}

/// Inline Markdown on one line: `code`, **bold**, *italic* (an `*` or `**`
/// without its closing pair stays as typed; `_` is left alone, as it is in
/// identifiers).
fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('`')
            && let Some(end) = after.find('`')
        {
            out.push_str(CODE);
            out.push_str(&after[..end]);
            out.push_str(RESET);
            rest = &after[end + 1..];
            continue;
        }
        if let Some(after) = rest.strip_prefix("**")
            && let Some(end) = after.find("**").filter(|&e| e > 0)
        {
            out.push_str(BOLD);
            out.push_str(&inline(&after[..end]));
            out.push_str(RESET);
            rest = &after[end + 2..];
            continue;
        }
        if let Some(after) = rest.strip_prefix('*')
            && !after.starts_with([' ', '*'])
            && let Some(end) = after.find('*').filter(|&e| e > 0)
        {
            out.push_str(ITALIC);
            out.push_str(&after[..end]);
            out.push_str(RESET);
            rest = &after[end + 1..];
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_is_styled_line_by_line_and_plain_text_passes() {
        let mut md = Markdown::new(true);
        let mut out = String::new();
        for piece in [
            "# Ti",
            "tle\nSome **bo",
            "ld** and `x` and *it*.\n- item\n```rust\nlet *a* = 1;\n```\nend",
        ] {
            out.push_str(&md.push(piece));
        }
        out.push_str(&md.finish());
        assert_eq!(
            out,
            "\x1b[1;4mTitle\x1b[0m\nSome \x1b[1mbold\x1b[0m and \x1b[36mx\x1b[0m and \x1b[3mit\x1b[0m.\n• item\n\
             \x1b[2m```rust\x1b[0m\n\x1b[36mlet *a* = 1;\x1b[0m\n\x1b[2m```\x1b[0m\nend"
        );
        // Control characters in the answer never reach the terminal raw,
        // styled or not.
        let mut md = Markdown::new(true);
        let got = md.push("evil \x1b]52;c;aGk=\x07 2 * 3 ** 4\n");
        assert_eq!(got, "evil \\u{1b}]52;c;aGk=\\u{7} 2 * 3 ** 4\n");
        let mut plain = Markdown::new(false);
        assert_eq!(plain.push("**x** \x1b[2J"), "**x** \\u{1b}[2J");
        assert_eq!(plain.finish(), "");
    }

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
