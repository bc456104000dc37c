//! Filtering the transcript and truth for `wo log`, `wo truth list` and the
//! server: one definition of "matches", used by every face.

use crate::model::{Message, TruthEntry};
use crate::timestamp::Timestamp;
use crate::xhtml::to_plain_text;

/// Which messages to show. Empty fields match everything.
#[derive(Clone, Debug, Default)]
pub struct MessageFilter {
    /// Case-insensitive substring of the title or the visible text.
    pub text: Option<String>,
    /// Case-insensitive exact username.
    pub username: Option<String>,
    /// Inclusive lower bound.
    pub since: Option<Timestamp>,
    /// Exclusive upper bound.
    pub until: Option<Timestamp>,
}

impl MessageFilter {
    /// True when `m` passes every filter that is set.
    pub fn matches(&self, m: &Message) -> bool {
        if let Some(u) = &self.username
            && !m.username.eq_ignore_ascii_case(u)
        {
            return false;
        }
        if let Some(since) = &self.since
            && m.timestamp < *since
        {
            return false;
        }
        if let Some(until) = &self.until
            && m.timestamp >= *until
        {
            return false;
        }
        match &self.text {
            Some(needle) => {
                let needle = needle.to_lowercase();
                m.title.to_lowercase().contains(&needle)
                    || to_plain_text(&m.content).to_lowercase().contains(&needle)
            }
            None => true,
        }
    }

    /// The matching messages in transcript order.
    pub fn apply<'a>(&self, messages: &'a [Message]) -> Vec<&'a Message> {
        messages.iter().filter(|m| self.matches(m)).collect()
    }
}

/// Parses a date bound given by a user, relative to the clock now: see
/// [`parse_date_bound_at`].
pub fn parse_date_bound(text: &str) -> Option<Timestamp> {
    parse_date_bound_at(text, &Timestamp::now())
}

/// What the `--since`/`--until` flags accept: a full timestamp, a date
/// `YYYY-MM-DD` (midnight UTC), `today` or `yesterday` (midnight UTC), or a
/// time before `now` — a number and a unit, `30m`, `3h`, `2d`, `1w` (also
/// `2 days`, `3 hours ago`: `s`/`sec`, `m`/`min`, `h`/`hour`, `d`/`day`,
/// `w`/`week`, singular or plural).
pub fn parse_date_bound_at(text: &str, now: &Timestamp) -> Option<Timestamp> {
    let text = text.trim();
    if let Some(t) = Timestamp::parse(text)
        .ok()
        .or_else(|| Timestamp::parse(&format!("{text}T00:00:00Z")).ok())
    {
        return Some(t);
    }
    const DAY: i64 = 86_400;
    let midnight = now.unix_seconds().div_euclid(DAY) * DAY;
    let lower = text.to_ascii_lowercase();
    match lower.as_str() {
        "today" => return Some(Timestamp::from_unix(midnight)),
        "yesterday" => return Some(Timestamp::from_unix(midnight - DAY)),
        _ => {}
    }
    let rel = lower.strip_suffix("ago").unwrap_or(&lower).trim();
    let digits = rel.find(|c: char| !c.is_ascii_digit())?;
    let n: i64 = rel[..digits].parse().ok()?;
    let unit = match rel[digits..].trim() {
        "s" | "sec" | "secs" | "second" | "seconds" => 1,
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3_600,
        "d" | "day" | "days" => DAY,
        "w" | "week" | "weeks" => 7 * DAY,
        _ => return None,
    };
    let back = n.checked_mul(unit)?;
    Some(Timestamp::from_unix(now.unix_seconds().checked_sub(back)?))
}

/// Truth entries ordered for display: by certainty (highest first), then
/// newest first, then id.
pub fn truth_by_certainty(entries: &[TruthEntry]) -> Vec<&TruthEntry> {
    let mut v: Vec<&TruthEntry> = entries.iter().collect();
    v.sort_by(|a, b| {
        b.certainty
            .total_cmp(&a.certainty)
            .then_with(|| b.effective_update().cmp(a.effective_update()))
            .then_with(|| a.id.cmp(&b.id))
    });
    v
}

/// Finds the one entry whose id starts with `prefix` (ids may be
/// abbreviated like git hashes). Errors name the ambiguity.
pub fn find_by_prefix<'a, T>(
    items: &'a [T],
    id_of: impl Fn(&T) -> &str,
    prefix: &str,
) -> Result<&'a T, String> {
    if let Some(exact) = items.iter().find(|t| id_of(t) == prefix) {
        return Ok(exact);
    }
    let found: Vec<&T> = items
        .iter()
        .filter(|t| id_of(t).starts_with(prefix))
        .collect();
    match found.as_slice() {
        [one] => Ok(one),
        [] => Err(format!("no entry has an id starting with {prefix:?}")),
        many => Err(format!(
            "{prefix:?} is ambiguous: {} ids start with it ({}…)",
            many.len(),
            many.iter()
                .take(3)
                .map(|t| id_of(t))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_bounds_absolute_and_relative() {
        let now = Timestamp::parse("2026-03-10T15:30:00Z").unwrap();
        let at = |t: &str| parse_date_bound_at(t, &now).map(|t| t.as_str().to_owned());
        assert_eq!(at("2026-02-01").as_deref(), Some("2026-02-01T00:00:00Z"));
        assert_eq!(
            at("2026-02-01T10:00:00Z").as_deref(),
            Some("2026-02-01T10:00:00Z")
        );
        assert_eq!(at("2d").as_deref(), Some("2026-03-08T15:30:00Z"));
        assert_eq!(at("3h").as_deref(), Some("2026-03-10T12:30:00Z"));
        assert_eq!(at("45m").as_deref(), Some("2026-03-10T14:45:00Z"));
        assert_eq!(at("1w").as_deref(), Some("2026-03-03T15:30:00Z"));
        assert_eq!(at("2 days ago").as_deref(), Some("2026-03-08T15:30:00Z"));
        assert_eq!(at("Yesterday").as_deref(), Some("2026-03-09T00:00:00Z"));
        assert_eq!(at("today").as_deref(), Some("2026-03-10T00:00:00Z"));
        for bad in [
            "",
            "2",
            "d",
            "2x",
            "soon",
            "-2d",
            "99999999999999999999d",
            "2026-13-01",
        ] {
            assert_eq!(at(bad), None, "{bad:?}");
        }
    }

    fn m(user: &str, secs: i64, html: &str) -> Message {
        Message::new(
            user,
            Timestamp::from_unix(1_800_000_000 + secs),
            "title",
            html,
        )
    }

    #[test]
    fn filters_combine() {
        let ms = vec![
            m("alec", 0, "<p>Rust &amp; JSON</p>"),
            m("bot", 10, "<p>json!</p>"),
            m("alec", 20, "<p>other</p>"),
        ];
        let f = MessageFilter {
            text: Some("json".into()),
            ..Default::default()
        };
        assert_eq!(f.apply(&ms).len(), 2);
        let f = MessageFilter {
            text: Some("& json".into()),
            username: Some("ALEC".into()),
            ..Default::default()
        };
        assert_eq!(f.apply(&ms).len(), 1);
        let f = MessageFilter {
            since: Some(Timestamp::from_unix(1_800_000_010)),
            until: Some(Timestamp::from_unix(1_800_000_020)),
            ..Default::default()
        };
        let got = f.apply(&ms);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].username, "bot");
    }

    #[test]
    fn date_bounds_and_prefixes() {
        assert_eq!(
            parse_date_bound("2026-02-22").unwrap().as_str(),
            "2026-02-22T00:00:00Z"
        );
        assert!(parse_date_bound("22/02/2026").is_none());
        let items = ["t_abc1", "t_abd2", "t_x"];
        assert_eq!(*find_by_prefix(&items, |s| s, "t_abc").unwrap(), "t_abc1");
        assert!(
            find_by_prefix(&items, |s| s, "t_ab")
                .unwrap_err()
                .contains("ambiguous")
        );
        assert!(find_by_prefix(&items, |s| s, "t_zz").is_err());
    }
}
