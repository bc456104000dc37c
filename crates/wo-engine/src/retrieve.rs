//! Ranking what the state knows against a query (product §4 steps 3–4).
//!
//! Truth entries: score = relevance × prior, where relevance is BM25 of the
//! query over title + text normalised to [0, 1] by the best score, and prior =
//! certainty_weight·certainty + recency_weight·recency, recency = 2^(−age /
//! half-life). When no entry shares a term with the query, the prior alone
//! ranks. Earlier messages: BM25 over the transcript outside the recent
//! window (long-term recall instead of truncation), each message scored on
//! its speaker (`username`) and text — not its title, which is derived from
//! the text's first line and would count those words twice.

use std::collections::HashSet;

use wo_format::{EffectivePrefs, Expires, Message, Timestamp, TruthEntry};

use wo_text::bm25;

use crate::recall::doc_of;

/// Age at which recency halves (30 days).
pub const RECENCY_HALF_LIFE_SECS: f64 = 30.0 * 86_400.0;

/// One ranked truth entry.
#[derive(Clone, Debug, PartialEq)]
pub struct RankedTruth<'a> {
    /// The truth entry, borrowed from the state.
    pub entry: &'a TruthEntry,
    /// BM25 score over title and content, divided by the best entry's (0 to
    /// 1); 1 for every entry when nothing matched.
    pub relevance: f64,
    /// `certainty_weight × certainty + recency_weight × recency`, recency
    /// halving every [`RECENCY_HALF_LIFE_SECS`].
    pub prior: f64,
    /// `relevance × prior`: the order of `ranked`.
    pub score: f64,
}

/// Why a truth entry was left out of retrieval.
#[derive(Clone, Debug, PartialEq)]
pub struct Excluded<'a> {
    /// The truth entry, borrowed from the state.
    pub entry: &'a TruthEntry,
    /// Why, in words (below `min_certainty`, superseded, expired, sharing no
    /// term with the query).
    pub reason: String,
}

/// The outcome of ranking truth: candidates best first, and exclusions.
#[derive(Clone, Debug, Default)]
pub struct TruthRanking<'a> {
    /// Entries that may be sent, best first (an entry sharing no term with
    /// the query is excluded, unless no entry shares one).
    pub ranked: Vec<RankedTruth<'a>>,
    /// Entries that may not be sent, with the reason.
    pub excluded: Vec<Excluded<'a>>,
    /// True when no entry matched the query and the prior alone ranked.
    pub prior_only: bool,
}

/// 2^(−age/half-life), in (0, 1]; future timestamps count as new.
pub fn recency(at: &Timestamp, now: &Timestamp) -> f64 {
    let age = (now.unix_seconds() - at.unix_seconds()).max(0) as f64;
    (-age / RECENCY_HALF_LIFE_SECS * std::f64::consts::LN_2).exp()
}

/// Ranks truth entries for `query` under `prefs`. Entries below
/// `min_certainty`, expired, or superseded by another entry are excluded
/// (with the reason); `max_entries` is applied by the assembler.
pub fn rank_truth<'a>(
    entries: &'a [TruthEntry],
    query: &str,
    prefs: &EffectivePrefs,
    now: &Timestamp,
) -> TruthRanking<'a> {
    let superseded: HashSet<&str> = entries
        .iter()
        .filter_map(|e| e.supersedes.as_deref())
        .collect();
    let mut out = TruthRanking::default();
    let mut candidates = Vec::new();
    for e in entries {
        let reason = if e.certainty < prefs.min_certainty {
            Some(format!(
                "certainty {:.2} is below min_certainty {:.2}",
                e.certainty, prefs.min_certainty
            ))
        } else if let Some(at) = &e.archived {
            Some(format!(
                "archived {at} (unused; `wo memory search --archived` finds it)"
            ))
        } else if superseded.contains(e.id.as_str()) {
            Some("superseded by a newer entry".to_owned())
        } else if is_expired(e, now) {
            Some("expired".to_owned())
        } else {
            None
        };
        match reason {
            Some(reason) => out.excluded.push(Excluded { entry: e, reason }),
            None => candidates.push(e),
        }
    }
    let docs: Vec<bm25::Doc> = candidates
        .iter()
        .map(|e| bm25::Doc {
            plain: &e.title,
            xhtml: &e.content,
        })
        .collect();
    let raw = bm25::scores_docs(&docs, query);
    let best = raw.iter().copied().fold(0.0_f64, f64::max);
    out.prior_only = best <= 0.0;
    for (e, r) in candidates.into_iter().zip(raw) {
        let relevance = if out.prior_only { 1.0 } else { r / best };
        let prior = prefs.certainty_weight * e.certainty
            + prefs.recency_weight * recency(e.effective_update(), now);
        let score = relevance * prior;
        if !out.prior_only && relevance <= 0.0 {
            out.excluded.push(Excluded {
                entry: e,
                reason: "shares no term with the query".to_owned(),
            });
            continue;
        }
        out.ranked.push(RankedTruth {
            entry: e,
            relevance,
            prior,
            score,
        });
    }
    out.ranked.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| {
                if prefs.prefer_higher_certainty {
                    b.entry.certainty.total_cmp(&a.entry.certainty)
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .then_with(|| a.entry.id.cmp(&b.entry.id))
    });
    out
}

fn is_expired(e: &TruthEntry, now: &Timestamp) -> bool {
    match &e.expires {
        Some(Expires::At(t)) => t <= now,
        // `expires: true` marks an entry that ages out when it goes unused:
        // never referenced and older than two half-lives.
        Some(Expires::Flag(true)) => {
            e.refs.unwrap_or(0) == 0 && recency(e.effective_update(), now) < 0.25
        }
        _ => false,
    }
}

/// One recalled earlier message.
#[derive(Clone, Debug, PartialEq)]
pub struct Recalled<'a> {
    /// The message, borrowed from the state.
    pub message: &'a Message,
    /// Position of the message in the transcript it was recalled from, so
    /// the assembler can add its neighbouring turns.
    pub index: usize,
    /// Its BM25 score against the query (speaker and content); higher first.
    pub score: f64,
}

/// The earlier messages relevant to `query`, excluding `skip` (the recent
/// window), best first (ties: newer first); only messages sharing a term,
/// at most `limit`. The assembler takes as many as its budget holds.
pub fn recall_messages<'a>(
    messages: &'a [Message],
    query: &str,
    skip: &HashSet<&str>,
    limit: usize,
) -> Vec<Recalled<'a>> {
    if limit == 0 {
        return Vec::new();
    }
    let mut hits = scan_hits(messages, query, skip);
    sort_recalled(&mut hits);
    hits.truncate(limit);
    hits
}

/// Every message sharing a term with `query`, except those in `skip`, with
/// its score, in transcript order (unranked).
pub(crate) fn scan_hits<'a>(
    messages: &'a [Message],
    query: &str,
    skip: &HashSet<&str>,
) -> Vec<Recalled<'a>> {
    let pool: Vec<(usize, &Message)> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| !skip.contains(m.id.as_str()))
        .collect();
    let docs: Vec<bm25::Doc> = pool.iter().map(|(_, m)| doc_of(m)).collect();
    let scores = bm25::scores_docs(&docs, query);
    pool.into_iter()
        .zip(scores)
        .filter(|(_, s)| *s > 0.0)
        .map(|((index, message), score)| Recalled {
            message,
            index,
            score,
        })
        .collect()
}

/// Recall's order: best score first, ties newer first.
pub(crate) fn sort_recalled(hits: &mut [Recalled<'_>]) {
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| b.message.order_key().cmp(&a.message.order_key()))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use wo_format::RetrievalPrefs;

    fn t(title: &str, body: &str, certainty: f64, days_old: i64) -> TruthEntry {
        TruthEntry::new(
            title,
            Timestamp::from_unix(NOW - days_old * 86_400),
            certainty,
            format!("<p>{body}</p>"),
        )
    }
    const NOW: i64 = 1_800_000_000;

    #[test]
    fn relevance_times_prior() {
        let entries = vec![
            t("Deploy day", "We deploy on fridays", 0.9, 1),
            t("Deploy rumour", "Someone said deploy on mondays", 0.2, 1),
            t("Garden", "Tomatoes need sun", 1.0, 0),
        ];
        let prefs = RetrievalPrefs::default().effective();
        let r = rank_truth(
            &entries,
            "when do we deploy?",
            &prefs,
            &Timestamp::from_unix(NOW),
        );
        assert!(!r.prior_only);
        let titles: Vec<&str> = r.ranked.iter().map(|x| x.entry.title.as_str()).collect();
        assert_eq!(titles, ["Deploy day", "Deploy rumour"]);
        assert_eq!(r.excluded.len(), 1);
        assert!(r.excluded[0].reason.contains("no term"));
    }

    #[test]
    fn prior_alone_when_nothing_matches_and_filters_apply() {
        let mut old = t("Old", "x", 0.9, 365);
        old.id = "t_old".into();
        let mut replaced = t("Replaced", "y", 0.9, 1);
        replaced.id = "t_replaced".into();
        let mut newer = t("Newer", "z", 0.8, 1);
        newer.supersedes = Some("t_replaced".into());
        let mut expiring = t("Expiring", "w", 0.9, 1);
        expiring.expires = Some(Expires::At(Timestamp::from_unix(NOW - 10)));
        let low = t("Low", "v", 0.1, 0);
        let entries = vec![old, replaced, newer, expiring, low];
        let prefs = RetrievalPrefs {
            min_certainty: Some(0.5),
            ..Default::default()
        }
        .effective();
        let r = rank_truth(&entries, "quantum", &prefs, &Timestamp::from_unix(NOW));
        assert!(r.prior_only);
        let titles: Vec<&str> = r.ranked.iter().map(|x| x.entry.title.as_str()).collect();
        assert_eq!(
            titles,
            ["Newer", "Old"],
            "recent beats old at similar certainty"
        );
        let reasons: Vec<String> = r
            .excluded
            .iter()
            .map(|e| format!("{}: {}", e.entry.title, e.reason))
            .collect();
        assert_eq!(reasons.len(), 3, "{reasons:?}");
        assert!(
            reasons
                .iter()
                .any(|r| r.starts_with("Replaced: superseded"))
        );
        assert!(reasons.iter().any(|r| r.starts_with("Expiring: expired")));
        assert!(reasons.iter().any(|r| r.starts_with("Low: certainty 0.10")));
    }

    #[test]
    fn recency_halves() {
        let now = Timestamp::from_unix(NOW);
        let then = Timestamp::from_unix(NOW - RECENCY_HALF_LIFE_SECS as i64);
        assert!((recency(&then, &now) - 0.5).abs() < 1e-9);
        assert_eq!(recency(&now, &now), 1.0);
    }

    #[test]
    fn recall_skips_the_window() {
        let ms: Vec<Message> = (0..5)
            .map(|i| {
                Message::new(
                    "u",
                    Timestamp::from_unix(NOW + i),
                    "t",
                    if i == 1 {
                        "<p>the kiln temperature is 1200</p>".to_owned()
                    } else {
                        format!("<p>chat {i}</p>")
                    },
                )
            })
            .collect();
        let skip: HashSet<&str> = ms[3..].iter().map(|m| m.id.as_str()).collect();
        let r = recall_messages(&ms, "kiln temperature?", &skip, 3);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].message.id, ms[1].id);
        assert!(recall_messages(&ms, "kiln", &skip, 0).is_empty());
    }

    fn said(who: &str, at: i64, text: &str) -> Message {
        // The title is the first line, as importers and turns derive it.
        Message::new(
            who,
            Timestamp::from_unix(NOW + at),
            text,
            format!("<p>{text}</p>"),
        )
    }

    #[test]
    fn recall_matches_speakers_and_stems_and_not_titles_twice() {
        let ms = vec![
            said("Caroline", 0, "I went to a support group yesterday"),
            said("Melanie", 1, "I painted a lake sunrise last year"),
            said("Melanie", 2, "glaze glaze glaze kiln"),
            said(
                "Caroline",
                3,
                "glaze kiln notes and a long list of other words here",
            ),
        ];
        let none = HashSet::new();
        // The speaker's name is searchable.
        let r = recall_messages(&ms, "What did Caroline do?", &none, usize::MAX);
        let ids: Vec<&str> = r.iter().map(|x| x.message.id.as_str()).collect();
        assert_eq!(ids.len(), 2, "{ids:?}");
        assert!(ids.contains(&ms[0].id.as_str()) && ids.contains(&ms[3].id.as_str()));
        // Stemming: "painting" finds "painted"; the index points back.
        let r = recall_messages(&ms, "Melanie's painting", &none, usize::MAX);
        assert_eq!(r[0].message.id, ms[1].id);
        assert_eq!(r[0].index, 1);
        // The title (the first line) is not counted on top of the text: a
        // message whose title repeats its text scores like one without.
        let mut untitled = ms.clone();
        for m in &mut untitled {
            m.title.clear();
        }
        let a = recall_messages(&ms, "kiln glaze", &none, usize::MAX);
        let b = recall_messages(&untitled, "kiln glaze", &none, usize::MAX);
        let sa: Vec<f64> = a.iter().map(|x| x.score).collect();
        let sb: Vec<f64> = b.iter().map(|x| x.score).collect();
        assert_eq!(sa, sb);
    }
}
