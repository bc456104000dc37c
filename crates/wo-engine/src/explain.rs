//! What a prompt is made of, for people and tools: each part of an
//! [`Assembled`] prompt with its kind, its id, the ids it references (a
//! message's parent and sources; a memory entry's source message, the entry it
//! supersedes, the effort it resolves) and its tokens, plus what was left
//! out and why. One renderer serves `wo context explain`, `wo ask
//! --show-context` and `wo chat`'s `/context`, so they always agree.

use std::collections::HashMap;

use serde::Serialize;
use wo_format::context_used::RECENT_TURNS;
use wo_format::{ContextUsed, State, UsedPart};

use crate::assemble::{Assembled, Dropped, SourceKind};

/// The kind of a part, in the words of the product (product §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PartKind {
    /// The system instructions.
    Instruction,
    /// The state's `context`.
    Context,
    /// A truth entry (fact, event, effort, note…).
    Artifact,
    /// An earlier message recalled by relevance, or a turn next to one.
    RecalledMessage,
    /// A turn of the recent window.
    RecentTurn,
    /// A file chunk from the directory index.
    Chunk,
    /// The new message itself.
    Query,
}

impl PartKind {
    /// The part kind shown for an assembly's [`SourceKind`] (truth entries
    /// are memory entries).
    pub fn of(k: SourceKind) -> Self {
        match k {
            SourceKind::System => PartKind::Instruction,
            SourceKind::Context => PartKind::Context,
            SourceKind::Truth => PartKind::Artifact,
            SourceKind::EarlierMessage => PartKind::RecalledMessage,
            SourceKind::Chunk => PartKind::Chunk,
            SourceKind::RecentTurn => PartKind::RecentTurn,
            SourceKind::Query => PartKind::Query,
        }
    }

    /// The kind as printed by `wo context explain` and sent in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            PartKind::Instruction => "instruction",
            PartKind::Context => "context",
            PartKind::Artifact => "memory",
            PartKind::RecalledMessage => "recalled message",
            PartKind::RecentTurn => "recent turn",
            PartKind::Chunk => "chunk",
            PartKind::Query => "query",
        }
    }
}

/// One part of the prompt as sent.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Part {
    /// What the part is.
    pub kind: PartKind,
    /// Message, truth entry or chunk id (none for instructions, context and
    /// the query).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Ids this part points at.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<String>,
    /// The part's size in the model's tokens (or the chars/4 estimate).
    pub tokens: usize,
    /// For a part sent for its relevance (a recalled message, an
    /// artifact): the share of the question it matched, 0 to 1 (see
    /// [`crate::assemble::Included::score`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// For a part sent for its relevance: the order it was chosen in among
    /// the parts of its kind, from 1 — the order the budget was filled by
    /// (see [`crate::assemble::Included::rank`]), which neither the order
    /// parts are placed in nor `score` tells.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<usize>,
    /// What a person reads: a title, a path and lines, a URL.
    pub label: String,
}

/// A candidate left out.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LeftOut {
    /// What the candidate is.
    pub kind: PartKind,
    /// Its message, truth entry or chunk id, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What a person reads: a title, a path and lines, a URL.
    pub label: String,
    /// Why it was left out, in words.
    pub reason: String,
}

/// One turn of the conversation as sent.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SentTurn {
    /// `system`, `user` or `assistant`.
    pub role: &'static str,
    /// The turn's text exactly as sent.
    pub text: String,
}

/// Everything about one assembled prompt.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Explanation {
    /// Estimated prompt tokens, and the budget they had to fit.
    pub tokens: usize,
    /// The window less the answer's reserve.
    pub budget: usize,
    /// Every part sent, in the order it was placed.
    pub parts: Vec<Part>,
    /// Every candidate left out, with its reason.
    pub dropped: Vec<LeftOut>,
    /// The system message exactly as sent.
    pub system: String,
    /// The conversation turns exactly as sent; the last is the query.
    pub turns: Vec<SentTurn>,
}

/// Explains `a`, assembled from `state`.
pub fn explain(state: &State, a: &Assembled) -> Explanation {
    let wanted: HashMap<&str, ()> = a
        .included
        .iter()
        .filter_map(|i| i.id.as_deref().map(|id| (id, ())))
        .collect();
    let mut references: HashMap<&str, Vec<String>> = HashMap::new();
    for m in state.messages() {
        if wanted.contains_key(m.id.as_str()) {
            let mut r: Vec<String> = m.parent.iter().cloned().collect();
            r.extend(m.sources.iter().flatten().cloned());
            references.insert(m.id.as_str(), r);
        }
    }
    for t in &state.truth.trust {
        if wanted.contains_key(t.id.as_str()) {
            let r = [&t.source, &t.supersedes, &t.resolution]
                .into_iter()
                .flatten()
                .cloned()
                .collect();
            references.insert(t.id.as_str(), r);
        }
    }
    Explanation {
        tokens: a.tokens,
        budget: a.budget,
        parts: a
            .included
            .iter()
            .map(|i| Part {
                kind: PartKind::of(i.kind),
                id: i.id.clone(),
                references: i
                    .id
                    .as_deref()
                    .and_then(|id| references.get(id).cloned())
                    .unwrap_or_default(),
                tokens: i.tokens,
                score: i.score,
                rank: i.rank,
                label: i.label.clone(),
            })
            .collect(),
        dropped: a.dropped.iter().map(left_out).collect(),
        system: a.system.clone(),
        turns: a
            .turns
            .iter()
            .map(|(role, text)| SentTurn {
                role: role.as_str(),
                text: text.clone(),
            })
            .collect(),
    }
}

fn left_out(d: &Dropped) -> LeftOut {
    LeftOut {
        kind: PartKind::of(d.kind),
        id: d.id.clone(),
        label: d.label.clone(),
        reason: d.reason.clone(),
    }
}

/// The explanation as text: the prompt as sent, its parts, then what was
/// left out.
pub fn render_text(e: &Explanation) -> String {
    let mut out = format!(
        "── context sent ({} of {} tokens) ──\n[system]\n{}\n",
        e.tokens, e.budget, e.system
    );
    for t in &e.turns {
        out.push_str(&format!("[{}]\n{}\n", t.role, t.text));
    }
    out.push_str("── parts ──\n");
    for p in &e.parts {
        out.push_str(&format!(
            "  + {:<16} {:>5} tok  {}{}{}{}{}\n",
            p.kind.as_str(),
            p.tokens,
            p.rank.map(|r| format!("chosen #{r}  ")).unwrap_or_default(),
            p.score
                .map(|s| format!("relevance {s:.3}  "))
                .unwrap_or_default(),
            p.label,
            id_suffix(p.id.as_deref()),
            if p.references.is_empty() {
                String::new()
            } else {
                format!(" → {}", p.references.join(", "))
            }
        ));
    }
    if e.dropped.is_empty() {
        out.push_str("── nothing dropped ──\n");
    } else {
        out.push_str("── dropped ──\n");
        for d in &e.dropped {
            out.push_str(&format!(
                "  - {:<16} {}{}: {}\n",
                d.kind.as_str(),
                d.label,
                id_suffix(d.id.as_deref()),
                d.reason
            ));
        }
    }
    out
}

/// The compact record of `a` an answer keeps in the file
/// ([`wo_format::ContextUsed`]): each part's kind, id and tokens, a label
/// only where the file cannot name the part (chunks, fetched pages), the
/// recent window as one part. What every face shows after a reload, and
/// what the web app shows live too, so the two never differ.
pub fn context_used(a: &Assembled) -> ContextUsed {
    let mut used = ContextUsed {
        tokens: a.tokens as u64,
        budget: a.budget as u64,
        ..ContextUsed::default()
    };
    for i in &a.included {
        let kind = used_kind(PartKind::of(i.kind));
        let (id, label) = named(kind, i.id.as_deref(), &i.label);
        used.push_sent(UsedPart {
            kind: kind.to_owned(),
            id,
            count: (kind == RECENT_TURNS).then_some(1),
            label,
            tokens: Some(i.tokens as u64),
            score: i.score,
            ..UsedPart::default()
        });
    }
    for d in &a.dropped {
        let kind = used_kind(PartKind::of(d.kind));
        let (id, label) = if kind == RECENT_TURNS {
            (None, None)
        } else {
            named(kind, d.id.as_deref(), &d.label)
        };
        used.push_left_out(kind, id.as_deref(), label.as_deref(), &d.reason);
    }
    used
}

/// A part kind's word in the record: the recent window is kept as one
/// part, hence plural.
fn used_kind(k: PartKind) -> &'static str {
    match k {
        PartKind::RecentTurn => RECENT_TURNS,
        other => other.as_str(),
    }
}

/// The id and label a record keeps for a part: messages and memory entries
/// by id alone (the file names them); chunks by id and label; a fetched
/// page (`url:` id, no id a reader resolves) by its address alone.
fn named(kind: &str, id: Option<&str>, label: &str) -> (Option<String>, Option<String>) {
    match id {
        Some(url) if url.starts_with("url:") => (None, Some(label.to_owned())),
        Some(id) if kind == PartKind::Chunk.as_str() => {
            (Some(id.to_owned()), Some(label.to_owned()))
        }
        Some(id) => (Some(id.to_owned()), None),
        None => (None, None),
    }
}

/// The answer `prefix` names (its id or a unique prefix; a question's
/// names its latest answer) and the record of its context. The error says
/// what is missing: no such message, a question never answered, or an
/// answer written without a record (an import, an older wo) — then with the
/// `sources` it does list.
pub fn recorded_context<'s>(
    state: &'s State,
    prefix: &str,
) -> Result<(&'s wo_format::Message, ContextUsed), String> {
    let m = wo_format::query::find_by_prefix(state.messages(), |m| m.id.as_str(), prefix)
        .map_err(|e| e.replace("no entry has", "no message has"))?;
    let answer = if m.effective_role() == wo_format::Role::Assistant {
        m
    } else {
        state
            .messages()
            .iter()
            .rev()
            .find(|a| {
                a.parent.as_deref() == Some(m.id.as_str())
                    && a.effective_role() == wo_format::Role::Assistant
            })
            .ok_or_else(|| format!("{} is a question with no answer in the file", m.id))?
    };
    match answer.context_used() {
        Some(used) => Ok((answer, used)),
        None => Err(match answer.sources.as_deref() {
            Some(ids) if !ids.is_empty() => format!(
                "{} keeps no record of its context (written by an import or an older wo); it names its sources: {}",
                answer.id,
                ids.join(", ")
            ),
            _ => format!(
                "{} keeps no record of its context (written by an import or an older wo)",
                answer.id
            ),
        }),
    }
}

/// A [`ContextUsed`] record as text (`wo log --context`), parts named from
/// `state` (a message's or memory entry's title; "no longer in the file"
/// when it is gone).
pub fn render_context_used(state: &State, used: &ContextUsed) -> String {
    let name = |p: &UsedPart| -> String {
        if let Some(label) = &p.label {
            return label.clone();
        }
        let Some(id) = p.id.as_deref() else {
            return match p.count {
                Some(n) => format!(
                    "{n} turn{} of the conversation",
                    if n == 1 { "" } else { "s" }
                ),
                None => String::new(),
            };
        };
        let title = state.message(id).map(|m| m.title.clone()).or_else(|| {
            state
                .truth
                .trust
                .iter()
                .find(|t| t.id == id)
                .map(|t| t.title.clone())
        });
        format!(
            "{} [{id}]",
            title.as_deref().unwrap_or("(no longer in the file)")
        )
    };
    let mut out = format!(
        "── context sent ({} of {} tokens, {} part{}) ──\n",
        used.tokens,
        used.budget,
        used.sent.len(),
        if used.sent.len() == 1 { "" } else { "s" }
    );
    for p in &used.sent {
        out.push_str(&format!(
            "  + {:<16} {:>5} tok  {}{}\n",
            p.kind,
            p.tokens.unwrap_or(0),
            p.score
                .map(|s| format!("relevance {s:.3}  "))
                .unwrap_or_default(),
            name(p),
        ));
    }
    if used.left_out.is_empty() {
        out.push_str("── nothing left out ──\n");
    } else {
        out.push_str("── left out ──\n");
        for p in &used.left_out {
            let n = p.count.unwrap_or(1);
            out.push_str(&format!(
                "  - {:<16} {n} left out: {}\n",
                p.kind,
                p.reason.as_deref().unwrap_or("")
            ));
            for id in &p.ids {
                out.push_str(&format!(
                    "      {}\n",
                    name(&UsedPart {
                        id: Some(id.clone()),
                        ..UsedPart::default()
                    })
                ));
            }
            for label in &p.labels {
                out.push_str(&format!("      {label}\n"));
            }
        }
        if used.left_out_more > 0 {
            out.push_str(&format!("  … and {} more left out\n", used.left_out_more));
        }
    }
    out
}

/// ` [id]` after a part's label, or nothing for a part without an id.
fn id_suffix(id: Option<&str>) -> String {
    id.map(|id| format!(" [{id}]")).unwrap_or_default()
}
