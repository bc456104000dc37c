//! `context_used` on an answer: what its prompt was made of and what was
//! left out, kept compactly in the file so that every face can show it
//! after a reload exactly as it showed it live (spec §1, Message).
//!
//! Compact by design: parts that name a message or a memory entry keep the
//! id (a reader finds the title in the file), the turns of the recent
//! window are one part with a count (they are the turns before the
//! question on its branch), candidates left out for one reason are one part
//! with their ids, and at most [`MAX_LEFT_OUT`] left-out ids are listed (the
//! rest counted). A reader that cannot read the field ignores it, like
//! any unknown field.

use serde::{Deserialize, Serialize};

use crate::model::Message;
use crate::rawjson::RawJson;

/// The message field that holds the record.
pub const CONTEXT_USED_KEY: &str = "context_used";

/// How many left-out candidates are listed one by one; beyond, counted in
/// [`ContextUsed::left_out_more`] (a memory of thousands of entries below
/// `min_certainty` would otherwise be copied into every answer).
pub const MAX_LEFT_OUT: usize = 50;

/// The kind of the grouped recent-window turns.
pub const RECENT_TURNS: &str = "recent turns";

/// What an answer's prompt was made of.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ContextUsed {
    /// Estimated prompt tokens.
    pub tokens: u64,
    /// The budget they had to fit.
    pub budget: u64,
    /// Each part sent, in the order it was placed.
    pub sent: Vec<UsedPart>,
    /// Candidates left out, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<UsedPart>,
    /// Left-out candidates beyond those listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub left_out_more: u64,
}

/// One part sent, or candidates of one kind left out for one reason.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UsedPart {
    /// What the part is, in the product's words (`instruction`, `context`,
    /// `memory`, `recalled message`, `recent turns`, `chunk`, `query`).
    pub kind: String,
    /// The message or memory entry id, or an index chunk's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// How many turns a `recent turns` part stands for; left out, how many
    /// candidates the part stands for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// What a person reads, kept only where the file cannot name the part
    /// (a chunk's path and lines, a fetched page's address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Tokens of a part sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// For a part sent for its relevance: the share of the question it
    /// matched, 0 to 1, to three decimals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Why a candidate was left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Left out: the ids of the candidates this part stands for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
    /// Left out: the labels of those with no id a reader resolves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ContextUsed {
    /// Adds a sent part; consecutive recent turns become one part.
    pub fn push_sent(&mut self, part: UsedPart) {
        if part.kind == RECENT_TURNS
            && let Some(last) = self.sent.last_mut()
            && last.kind == RECENT_TURNS
        {
            last.count = Some(last.count.unwrap_or(1) + part.count.unwrap_or(1));
            last.tokens = Some(last.tokens.unwrap_or(0) + part.tokens.unwrap_or(0));
            return;
        }
        let window = part.kind == RECENT_TURNS;
        self.sent.push(UsedPart {
            score: part.score.map(|s| (s * 1000.0).round() / 1000.0),
            // The window's turns are the question's ancestors: no ids.
            id: if window { None } else { part.id },
            count: if window {
                Some(part.count.unwrap_or(1))
            } else {
                None
            },
            ..part
        });
    }

    /// Adds a left-out candidate. Candidates of one kind left out for the
    /// same reason share one part (their ids in `ids`, their number in
    /// `count`); beyond [`MAX_LEFT_OUT`] ids listed in all, the rest are
    /// only counted.
    pub fn push_left_out(
        &mut self,
        kind: &str,
        id: Option<&str>,
        label: Option<&str>,
        reason: &str,
    ) {
        let listed: usize = self
            .left_out
            .iter()
            .map(|p| p.ids.len() + p.labels.len())
            .sum();
        let named = id.is_some() || label.is_some();
        if named && listed >= MAX_LEFT_OUT {
            self.left_out_more += 1;
            return;
        }
        let pos = self
            .left_out
            .iter()
            .position(|p| p.kind == kind && p.reason.as_deref() == Some(reason));
        let part = match pos {
            Some(i) => &mut self.left_out[i],
            None => {
                self.left_out.push(UsedPart {
                    kind: kind.to_owned(),
                    reason: Some(reason.to_owned()),
                    count: Some(0),
                    ..UsedPart::default()
                });
                self.left_out.last_mut().expect("just pushed")
            }
        };
        part.count = Some(part.count.unwrap_or(0) + 1);
        match (id, label) {
            (Some(id), _) => part.ids.push(id.to_owned()),
            (None, Some(label)) => part.labels.push(label.to_owned()),
            (None, None) => {}
        }
    }
}

impl Message {
    /// The answer's [`ContextUsed`] record; `None` when absent or not
    /// readable (a hand edit, a newer writer's shape).
    pub fn context_used(&self) -> Option<ContextUsed> {
        let raw = self.extra.get(CONTEXT_USED_KEY)?;
        serde_json::from_str(raw.as_str()).ok()
    }

    /// Records what this answer's prompt was made of.
    pub fn set_context_used(&mut self, used: &ContextUsed) {
        if let Ok(v) = serde_json::to_value(used) {
            self.extra
                .insert(CONTEXT_USED_KEY.to_owned(), RawJson::from(v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Timestamp;

    fn part(kind: &str, id: Option<&str>, tokens: u64) -> UsedPart {
        UsedPart {
            kind: kind.into(),
            id: id.map(str::to_owned),
            tokens: Some(tokens),
            count: Some(1),
            ..UsedPart::default()
        }
    }

    #[test]
    fn recent_turns_are_grouped_and_other_parts_kept_in_order() {
        let mut u = ContextUsed::default();
        u.push_sent(part("instruction", None, 10));
        u.push_sent(part(RECENT_TURNS, Some("m_1"), 5));
        u.push_sent(part(RECENT_TURNS, Some("m_2"), 7));
        u.push_sent(UsedPart {
            score: Some(0.123_456),
            ..part("memory", Some("t_1"), 3)
        });
        u.push_sent(part("query", None, 2));
        let kinds: Vec<_> = u.sent.iter().map(|p| p.kind.as_str()).collect();
        assert_eq!(kinds, ["instruction", RECENT_TURNS, "memory", "query"]);
        assert_eq!((u.sent[1].count, u.sent[1].id.as_deref()), (Some(2), None));
        assert_eq!(u.sent[1].tokens, Some(12));
        assert_eq!(u.sent[2].score, Some(0.123));
    }

    #[test]
    fn left_out_candidates_are_grouped_by_reason_and_counted_beyond_the_cap() {
        let mut u = ContextUsed::default();
        for i in 0..MAX_LEFT_OUT + 7 {
            let reason = if i % 2 == 0 {
                "over budget"
            } else {
                "below floor"
            };
            u.push_left_out("memory", Some(&format!("t_{i}")), None, reason);
        }
        for _ in 0..30 {
            u.push_left_out(RECENT_TURNS, None, None, "older than what fits");
        }
        u.push_left_out("chunk", None, Some("src/a.rs:1-9"), "over budget");
        let listed: usize = u.left_out.iter().map(|p| p.ids.len()).sum();
        assert_eq!(listed, MAX_LEFT_OUT);
        assert_eq!(u.left_out_more, 7 + 1);
        let kinds: Vec<_> = u
            .left_out
            .iter()
            .map(|p| {
                (
                    p.kind.as_str(),
                    p.reason.as_deref().unwrap(),
                    p.count.unwrap(),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("memory", "over budget", 25),
                ("memory", "below floor", 25),
                (RECENT_TURNS, "older than what fits", 30)
            ]
        );
    }

    #[test]
    fn the_record_round_trips_through_a_message_and_bad_shapes_read_as_none() {
        let mut m = Message::new(
            "model",
            Timestamp::parse("2026-01-01T00:00:00Z").unwrap(),
            "t",
            "<p>a</p>",
        );
        assert_eq!(m.context_used(), None);
        let mut u = ContextUsed {
            tokens: 30,
            budget: 100,
            ..ContextUsed::default()
        };
        u.push_sent(part("query", None, 2));
        m.set_context_used(&u);
        assert_eq!(m.context_used(), Some(u));
        m.extra.insert(
            CONTEXT_USED_KEY.into(),
            RawJson::from(serde_json::json!({"tokens": "many"})),
        );
        assert_eq!(m.context_used(), None);
    }
}
