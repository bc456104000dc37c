//! Human-readable rendering shared by commands.

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
    for line in to_plain_text(&m.content).lines() {
        out.push_str("  ");
        out.push_str(line);
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
