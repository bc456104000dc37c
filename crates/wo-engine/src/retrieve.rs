//! Ranking what the state knows against a query (product §4 steps 3–4).
//!
//! Truth entries: score = relevance × prior, where relevance is BM25 of the
//! query over title + text normalised to [0, 1] by the best score, and prior =
//! certainty_weight·certainty + recency_weight·recency, recency = 2^(−age /
//! half-life). Only what relates to the query is a candidate: an entry
//! whose BM25 score covers less than the relevance floor of the query's
//! ideal score ([`query_share`]) is excluded with its share, and when no
//! entry relates, none is sent (the prior alone never sends an entry).
//! Entries the person did not write (the interpreter's, an MCP client's:
//! [`noted_automatically`]) rank at [`AUTOMATIC_RANK_WEIGHT`] of their score
//! and with certainty at most [`AUTOMATIC_CERTAINTY_CEILING`], so they never
//! outrank the person's own at equal relevance; a pending suggestion to
//! replace the person's entry is never sent. Earlier messages: BM25 over
//! the transcript outside the recent window (long-term recall instead of
//! truncation), each message scored on its speaker (`username`) and text —
//! not its title, which is derived from the text's first line and would
//! count those words twice.

use std::collections::HashSet;

use wo_format::{EffectivePrefs, Expires, Message, Timestamp, TruthEntry};

use wo_text::bm25::{self, QueryStats};

/// Age at which recency halves (30 days).
pub const RECENCY_HALF_LIFE_SECS: f64 = 30.0 * 86_400.0;

/// How much of a question a message or entry must match to be sent, as a
/// share of the question's ideal BM25 score ([`query_share`]). Measured on
/// the LoCoMo development split's tuning half (`bench/locomo`,
/// BENCHMARKS.md), checked on its other half and on questions about
/// nothing in the conversations.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RelevanceFloor {
    /// A part below this share is left out: it shares a common word or two
    /// with the question and no more. Low on purpose: evidence is often a
    /// weak match, and the budget decides among the rest.
    pub part: f64,
    /// When even the best match is below this share the question relates
    /// to nothing here, and nothing is sent for relevance.
    pub question: f64,
}

/// The measured floor (see [`RelevanceFloor`]).
pub const RELEVANCE_FLOOR: RelevanceFloor = RelevanceFloor {
    part: 0.05,
    question: 0.10,
};

impl Default for RelevanceFloor {
    fn default() -> Self {
        RELEVANCE_FLOOR
    }
}

impl RelevanceFloor {
    /// No floor: whatever shares a word is a candidate.
    pub const NONE: RelevanceFloor = RelevanceFloor {
        part: 0.0,
        question: 0.0,
    };

    /// Why a candidate of `share` is left out when the best of its kind
    /// reached `best`; `None` when it may be sent.
    pub fn refuses(&self, share: f64, best: f64) -> Option<String> {
        if best < self.question {
            Some(format!(
                "relevance {share:.3}: the question relates to nothing here (the best match, \
                 {best:.3}, is below the relevance floor {:.3})",
                self.question
            ))
        } else if share < self.part {
            Some(format!(
                "relevance {share:.3} is below the relevance floor {:.3} \
                 (it shares only common words with the question)",
                self.part
            ))
        } else {
            None
        }
    }
}

/// The relevance of truth entries is judged as in a collection of at least
/// this many (see [`rank_truth`]): the message collections the floor was
/// measured on hold hundreds to thousands of messages.
const TRUTH_SHARE_MIN_DOCS: usize = 100;

/// Certainty an entry noted automatically (by the interpreter) is created
/// with at most, whatever the model asked for: below what a person's own
/// entries usually carry, so a model cannot make its notes look certain.
pub const AUTOMATIC_CERTAINTY_CEILING: f64 = 0.7;

/// An entry noted automatically ranks at this fraction of its score: at
/// equal relevance the person's own entries come first.
pub const AUTOMATIC_RANK_WEIGHT: f64 = 0.5;

/// Extension field of an entry the interpreter proposed as the
/// replacement of an entry the person wrote: the id it would supersede. It
/// waits for the person ([`crate::memory::accept_suggestion`]) and is never
/// sent meanwhile.
pub const SUGGESTED_SUPERSEDE_KEY: &str = "x_suggests_superseding";

/// True when `e` was not written by the person: the interpreter made it
/// (typed `provenance`) or a client wrote it through MCP (`x_provenance`).
pub fn noted_automatically(e: &TruthEntry) -> bool {
    e.provenance.is_some() || e.extra.contains_key("x_provenance")
}

/// The id of the person's entry `e` proposes to replace, when `e` is a
/// pending suggestion.
pub fn suggested_supersede(e: &TruthEntry) -> Option<String> {
    match e.extra.get(SUGGESTED_SUPERSEDE_KEY)?.to_value() {
        serde_json::Value::String(id) => Some(id),
        _ => None,
    }
}

/// The share of `stats`' ideal score that `score` reaches (0 when the query
/// has no terms): how much of the question a document matches.
pub fn query_share(score: f64, stats: &QueryStats) -> f64 {
    let ideal = stats.ideal();
    if ideal > 0.0 { score / ideal } else { 0.0 }
}

/// One ranked truth entry.
#[derive(Clone, Debug, PartialEq)]
pub struct RankedTruth<'a> {
    /// The truth entry, borrowed from the state.
    pub entry: &'a TruthEntry,
    /// BM25 score over title and content, divided by the best entry's (0 to
    /// 1).
    pub relevance: f64,
    /// The share of the query's ideal score the entry reaches
    /// ([`query_share`]); at least the floor.
    pub share: f64,
    /// `certainty_weight × certainty + recency_weight × recency`, recency
    /// halving every [`RECENCY_HALF_LIFE_SECS`].
    pub prior: f64,
    /// `relevance × prior` (× [`AUTOMATIC_RANK_WEIGHT`] for an entry
    /// [`noted_automatically`]): the order of `ranked`.
    pub score: f64,
}

/// Why a truth entry was left out of retrieval.
#[derive(Clone, Debug, PartialEq)]
pub struct Excluded<'a> {
    /// The truth entry, borrowed from the state.
    pub entry: &'a TruthEntry,
    /// Why, in words (below `min_certainty`, superseded, expired, below the
    /// relevance floor, a suggestion awaiting the person).
    pub reason: String,
}

/// The outcome of ranking truth: candidates best first, and exclusions.
#[derive(Clone, Debug, Default)]
pub struct TruthRanking<'a> {
    /// Entries that may be sent, best first (an entry below the relevance
    /// floor is excluded).
    pub ranked: Vec<RankedTruth<'a>>,
    /// Entries that may not be sent, with the reason.
    pub excluded: Vec<Excluded<'a>>,
}

/// 2^(−age/half-life), in (0, 1]; future timestamps count as new.
pub fn recency(at: &Timestamp, now: &Timestamp) -> f64 {
    let age = (now.unix_seconds() - at.unix_seconds()).max(0) as f64;
    (-age / RECENCY_HALF_LIFE_SECS * std::f64::consts::LN_2).exp()
}

/// The certainty an entry counts with: an entry [`noted_automatically`]
/// at most [`AUTOMATIC_CERTAINTY_CEILING`] (one written before the ceiling,
/// or edited into the file, is held to it too).
pub fn effective_certainty(e: &TruthEntry) -> f64 {
    if noted_automatically(e) {
        e.certainty.min(AUTOMATIC_CERTAINTY_CEILING)
    } else {
        e.certainty
    }
}

/// Ranks truth entries for `query` under `prefs`. Entries below
/// `min_certainty`, expired, superseded by another entry, pending as a
/// suggestion, or relating to the query less than `floor` allows
/// ([`query_share`]) are excluded (with the reason); `max_entries` is
/// applied by the assembler.
pub fn rank_truth<'a>(
    entries: &'a [TruthEntry],
    query: &str,
    prefs: &EffectivePrefs,
    now: &Timestamp,
    floor: RelevanceFloor,
) -> TruthRanking<'a> {
    let superseded: HashSet<&str> = entries
        .iter()
        .filter(|e| suggested_supersede(e).is_none())
        .filter_map(|e| e.supersedes.as_deref())
        .collect();
    let mut out = TruthRanking::default();
    let mut candidates = Vec::new();
    for e in entries {
        let reason = if let Some(id) = suggested_supersede(e) {
            Some(format!(
                "a suggested replacement of your entry {id}, waiting for you to accept it \
                 (`wo memory accept {}`)",
                e.id
            ))
        } else if e.certainty < prefs.min_certainty {
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
    let (raw, stats) = bm25::scores_docs_stats(&docs, query);
    let best = raw.iter().copied().fold(0.0_f64, f64::max);
    // Relevance is judged as in a collection of at least
    // `TRUTH_SHARE_MIN_DOCS` entries: in a memory of a few entries every
    // word they hold looks common and the question's missing words
    // dominate, so a matching entry would read as unrelated.
    let judged = stats.at_least(TRUTH_SHARE_MIN_DOCS, docs.len());
    let shares: Vec<f64> = docs
        .iter()
        .zip(&raw)
        .map(|(d, &r)| {
            if r > 0.0 {
                query_share(bm25::rescore(*d, query, &judged), &judged)
            } else {
                0.0
            }
        })
        .collect();
    let best_share = shares.iter().copied().fold(0.0_f64, f64::max);
    for ((e, r), share) in candidates.into_iter().zip(raw).zip(shares) {
        if r <= 0.0 {
            out.excluded.push(Excluded {
                entry: e,
                reason: "shares no term with the question".to_owned(),
            });
            continue;
        }
        if let Some(reason) = floor.refuses(share, best_share) {
            out.excluded.push(Excluded { entry: e, reason });
            continue;
        }
        let relevance = r / best;
        let prior = prefs.certainty_weight * effective_certainty(e)
            + prefs.recency_weight * recency(e.effective_update(), now);
        let weight = if noted_automatically(e) {
            AUTOMATIC_RANK_WEIGHT
        } else {
            1.0
        };
        out.ranked.push(RankedTruth {
            entry: e,
            relevance,
            share,
            prior,
            score: relevance * prior * weight,
        });
    }
    out.ranked.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            // At an equal score the person's own entry first.
            .then_with(|| noted_automatically(a.entry).cmp(&noted_automatically(b.entry)))
            .then_with(|| {
                if prefs.prefer_higher_certainty {
                    effective_certainty(b.entry).total_cmp(&effective_certainty(a.entry))
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
    let (mut hits, _) = scan_hits(messages, query, skip);
    sort_recalled(&mut hits);
    hits.truncate(limit);
    hits
}

/// Every message sharing a term with `query`, except those in `skip`, with
/// its score, in transcript order (unranked), and the statistics they were
/// scored with.
pub(crate) fn scan_hits<'a>(
    messages: &'a [Message],
    query: &str,
    skip: &HashSet<&str>,
) -> (Vec<Recalled<'a>>, QueryStats) {
    let pool: Vec<(usize, &Message)> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| !skip.contains(m.id.as_str()))
        .collect();
    let docs: Vec<bm25::Doc> = pool.iter().map(|(_, m)| doc_of(m)).collect();
    let (scores, stats) = bm25::scores_docs_stats(&docs, query);
    let hits = pool
        .into_iter()
        .zip(scores)
        .filter(|(_, s)| *s > 0.0)
        .map(|((index, message), score)| Recalled {
            message,
            index,
            score,
        })
        .collect();
    (hits, stats)
}

/// Recall's order: best score first, ties newer first.
pub(crate) fn sort_recalled(hits: &mut [Recalled<'_>]) {
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| b.message.order_key().cmp(&a.message.order_key()))
    });
}

/// What a message is scored on: its speaker and its text (not its title: see the module docs).
pub(crate) fn doc_of(m: &Message) -> bm25::Doc<'_> {
    bm25::Doc {
        plain: &m.username,
        xhtml: &m.content,
    }
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
            RELEVANCE_FLOOR,
        );
        let titles: Vec<&str> = r.ranked.iter().map(|x| x.entry.title.as_str()).collect();
        assert_eq!(titles, ["Deploy day", "Deploy rumour"]);
        assert_eq!(r.excluded.len(), 1);
        assert!(r.excluded[0].reason.contains("no term"));
    }

    #[test]
    fn nothing_is_sent_when_nothing_matches_and_filters_apply() {
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
        let r = rank_truth(
            &entries,
            "quantum",
            &prefs,
            &Timestamp::from_unix(NOW),
            RELEVANCE_FLOOR,
        );
        // The prior alone sends nothing: an unrelated question gets no entry.
        assert!(r.ranked.is_empty(), "{:?}", r.ranked);
        let reasons: Vec<String> = r
            .excluded
            .iter()
            .map(|e| format!("{}: {}", e.entry.title, e.reason))
            .collect();
        assert_eq!(reasons.len(), 5, "{reasons:?}");
        assert!(reasons.iter().any(|r| r.starts_with("Old: shares no term")));
        assert!(
            reasons
                .iter()
                .any(|r| r.starts_with("Newer: shares no term"))
        );
        assert!(
            reasons
                .iter()
                .any(|r| r.starts_with("Replaced: superseded"))
        );
        assert!(reasons.iter().any(|r| r.starts_with("Expiring: expired")));
        assert!(reasons.iter().any(|r| r.starts_with("Low: certainty 0.10")));
    }

    #[test]
    fn a_common_word_alone_is_below_the_floor() {
        // Many entries say "use"; one is about the kiln. "How do I use the
        // kiln?" relates to the kiln entry; "How do I use git rebase?"
        // relates to nothing here, though "use" is in most entries.
        let mut entries: Vec<TruthEntry> = (0..12)
            .map(|i| {
                t(
                    &format!("Note {i}"),
                    &format!("we use topic{i} daily"),
                    0.9,
                    1,
                )
            })
            .collect();
        entries.push(t("Kiln", "we use the kiln at 1200 degrees", 0.9, 1));
        let prefs = RetrievalPrefs::default().effective();
        let now = Timestamp::from_unix(NOW);
        let related = rank_truth(
            &entries,
            "How do I use the kiln?",
            &prefs,
            &now,
            RELEVANCE_FLOOR,
        );
        let titles: Vec<&str> = related
            .ranked
            .iter()
            .map(|x| x.entry.title.as_str())
            .collect();
        assert_eq!(titles.first(), Some(&"Kiln"), "{titles:?}");
        let unrelated = rank_truth(
            &entries,
            "How do I use git rebase?",
            &prefs,
            &now,
            RELEVANCE_FLOOR,
        );
        assert!(unrelated.ranked.is_empty(), "{:?}", unrelated.ranked);
        assert!(
            unrelated
                .excluded
                .iter()
                .any(|e| e.reason.contains("below the relevance floor")),
            "{:?}",
            unrelated.excluded
        );
        // With no floor, the common word alone would have sent them all.
        let all = rank_truth(
            &entries,
            "How do I use git rebase?",
            &prefs,
            &now,
            RelevanceFloor::NONE,
        );
        assert_eq!(all.ranked.len(), 13);
    }

    #[test]
    fn automatic_entries_rank_below_the_persons_own() {
        let own = t("Allergy", "allergic to penicillin", 0.6, 1);
        let mut noted = t("Allergy", "allergic to penicillin", 1.0, 0);
        noted.id = "t_noted".into();
        noted.provenance = Some(wo_format::Provenance {
            messages: vec!["m_1".into()],
            by: "local/model".into(),
            at: Timestamp::from_unix(NOW),
            exchange: Some("m_2".into()),
            extra: Default::default(),
        });
        let mut mcp = t("Allergy", "allergic to penicillin", 1.0, 0);
        mcp.id = "t_mcp".into();
        mcp.extra.insert(
            "x_provenance".into(),
            wo_format::RawJson::from(serde_json::json!({"by": "agent", "via": "mcp"})),
        );
        let entries = vec![noted, mcp, own];
        let prefs = RetrievalPrefs::default().effective();
        let r = rank_truth(
            &entries,
            "penicillin allergy",
            &prefs,
            &Timestamp::from_unix(NOW),
            RELEVANCE_FLOOR,
        );
        let order: Vec<(&str, bool)> = r
            .ranked
            .iter()
            .map(|x| (x.entry.title.as_str(), noted_automatically(x.entry)))
            .collect();
        assert_eq!(order.len(), 3);
        assert!(!order[0].1, "the person's entry first: {order:?}");
        assert!(effective_certainty(r.ranked[1].entry) <= AUTOMATIC_CERTAINTY_CEILING);
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
