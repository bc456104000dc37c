//! Building the prompt for one turn within a token budget (product §4).
//!
//! Order of priority: system instructions and `context` (always), truth
//! entries (up to a share), the newest turns of the current branch (up to a
//! share), earlier messages recalled by relevance — each hit with the turns
//! before and after it — until the budget left after files is spent, file
//! chunks, then more recent turns with whatever is left; the new message
//! always goes last. Nothing is sent twice: recall skips the recent window
//! and the recent turns skip what recall sent. Every candidate that is left out
//! is recorded in [`Assembled::dropped`] with its reason — nothing is cut
//! silently.

use std::collections::HashSet;

use serde::Serialize;
use wo_format::xhtml::to_plain_text;
use wo_format::{EffectivePrefs, Message, Role, State, Timestamp};

use crate::retrieve::{rank_truth, recall_messages};

/// The system instructions used unless the caller gives others.
pub const DEFAULT_SYSTEM: &str = "You are WikiOracle, a helpful assistant. Use the context, \
knowledge and earlier messages below when they are relevant to the question; say so when \
you are unsure.";

/// Dropped turns listed one by one before the rest are counted in one entry.
pub const DROPPED_TURNS_LISTED: usize = 50;

/// Knobs of one assembly.
#[derive(Clone, Debug)]
pub struct AssemblyOptions {
    /// System instructions (default [`DEFAULT_SYSTEM`]).
    pub system: Option<String>,
    /// The message the new turn follows (default: the latest message).
    pub leaf: Option<String>,
    /// The model's context window, in tokens.
    pub context_window: usize,
    /// Tokens kept free for the answer.
    pub reserve_for_answer: usize,
    pub prefs: EffectivePrefs,
    /// Include truth entries (the `rag` tool).
    pub rag: bool,
    /// How many earlier messages to recall at most, beside the neighbours
    /// of each (default: as many as the budget holds).
    pub recall_limit: Option<usize>,
    pub now: Timestamp,
    /// Model names the caller knows (the model answering, those the config
    /// names): earlier messages whose username is one of them are sent as
    /// the assistant's, as are names that look like a model's
    /// ([`wo_format::model::is_model_name`]).
    pub known_models: Vec<String>,
}

impl AssemblyOptions {
    pub fn new(state: &State, context_window: usize, reserve_for_answer: usize) -> Self {
        AssemblyOptions {
            system: None,
            leaf: None,
            context_window,
            reserve_for_answer,
            prefs: state.truth.retrieval_prefs.effective(),
            rag: true,
            recall_limit: None,
            now: Timestamp::now(),
            known_models: Vec::new(),
        }
    }
}

/// A file chunk offered by the directory index (product §4 step 5).
#[derive(Clone, Debug)]
pub struct ChunkCandidate {
    /// Stable chunk id, recorded in `sources`.
    pub id: String,
    /// Path and lines, shown to the model and the user.
    pub label: String,
    pub text: String,
}

/// What a part of the prompt is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    System,
    Context,
    Truth,
    EarlierMessage,
    Chunk,
    RecentTurn,
    Query,
}

/// A part that was sent.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Included {
    pub kind: SourceKind,
    pub id: Option<String>,
    pub label: String,
    pub tokens: usize,
}

/// A candidate that was not sent, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Dropped {
    pub kind: SourceKind,
    pub id: Option<String>,
    pub label: String,
    pub reason: String,
}

/// The prompt for one turn.
#[derive(Clone, Debug, Serialize)]
pub struct Assembled {
    /// The system message: instructions, context, knowledge, recalled
    /// messages and file chunks.
    pub system: String,
    /// Conversation turns, oldest first; the last is the new user message.
    pub turns: Vec<(Role, String)>,
    /// What retrieval added, stored on the answer as its `sources`: the ids
    /// of the truth entries, recalled earlier messages and index chunks sent.
    /// Compact by design: the recent turns of the branch (implied by the
    /// answer's parent chain), fetched pages, token counts and every
    /// candidate left out are in `included`/`dropped` (shown by
    /// `--show-context` and the server's `context` event), never in the file.
    pub sources: Vec<String>,
    pub included: Vec<Included>,
    pub dropped: Vec<Dropped>,
    /// Estimated prompt tokens and the budget they had to fit.
    pub tokens: usize,
    pub budget: usize,
}

/// Why a prompt cannot be built at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssembleError(pub String);

impl std::fmt::Display for AssembleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AssembleError {}

/// Share of the flexible budget each section may take at most. Recall has
/// no share of its own: it fills what truth, files and the first pass of the
/// recent window leave, and what it leaves goes to more recent turns.
const TRUTH_SHARE: f64 = 0.30;
const CHUNK_SHARE: f64 = 0.25;
const RECENT_SHARE: f64 = 0.25;
/// Recall stops looking after this many hits in a row did not fit (a long
/// transcript can match thousands of messages).
const RECALL_MISSES: usize = 32;
/// A hit's neighbouring turns rank at this fraction of the hit's score.
const NEIGHBOUR_WEIGHT: f64 = 0.5;
/// The context may take at most this share of the budget before it is cut
/// (and the cut is reported).
const CONTEXT_SHARE: f64 = 0.35;

/// Builds the prompt for `query` from `state`.
pub fn assemble(
    state: &State,
    query: &str,
    opts: &AssemblyOptions,
    count: &dyn Fn(&str) -> usize,
    chunks: &[ChunkCandidate],
) -> Result<Assembled, AssembleError> {
    let budget = opts.context_window.saturating_sub(opts.reserve_for_answer);
    let mut a = Assembled {
        system: String::new(),
        turns: Vec::new(),
        sources: Vec::new(),
        included: Vec::new(),
        dropped: Vec::new(),
        tokens: 0,
        budget,
    };
    let instructions = opts.system.as_deref().unwrap_or(DEFAULT_SYSTEM).trim();
    let query_tokens = count(query) + 4;
    let instr_tokens = count(instructions);
    if instr_tokens + query_tokens > budget {
        return Err(AssembleError(format!(
            "the message ({query_tokens} tokens) and system instructions ({instr_tokens}) do not fit the \
             model's budget of {budget} tokens (context window {} minus {} reserved for the answer)\n\
             hint: shorten the message, lower --max-tokens, or use a model with a larger window",
            opts.context_window, opts.reserve_for_answer
        )));
    }
    a.system.push_str(instructions);
    a.included.push(Included {
        kind: SourceKind::System,
        id: None,
        label: "system instructions".into(),
        tokens: instr_tokens,
    });
    let mut used = instr_tokens + query_tokens;

    // Context: always sent; cut (and reported) only if it would crowd out
    // everything else.
    let context_text = to_plain_text(&state.context);
    if !context_text.is_empty() {
        let cap = ((budget as f64) * CONTEXT_SHARE) as usize;
        let (text, tokens) = fit_text(&context_text, cap.min(budget - used), count);
        if text.len() < context_text.len() {
            a.dropped.push(Dropped {
                kind: SourceKind::Context,
                id: None,
                label: "context".into(),
                reason: format!(
                    "cut to {tokens} tokens of {} to leave room for the conversation",
                    count(&context_text)
                ),
            });
        }
        a.system.push_str("\n\n## Context\n");
        a.system.push_str(&text);
        a.included.push(Included {
            kind: SourceKind::Context,
            id: None,
            label: "context".into(),
            tokens,
        });
        used += tokens + 4;
    }
    let flexible = budget.saturating_sub(used);

    // The branch this turn continues, newest first.
    let branch: Vec<&Message> = match opts
        .leaf
        .as_deref()
        .or(state.messages().last().map(|m| m.id.as_str()))
    {
        Some(leaf) => branch_or_transcript(state, leaf),
        None => Vec::new(),
    };

    // Truth entries.
    let mut truth_text = String::new();
    // Messages whose content an included artifact already carries.
    let mut from_truth: HashSet<&str> = HashSet::new();
    if opts.rag {
        let ranking = rank_truth(&state.truth.trust, query, &opts.prefs, &opts.now);
        for ex in &ranking.excluded {
            a.dropped.push(Dropped {
                kind: SourceKind::Truth,
                id: Some(ex.entry.id.clone()),
                label: ex.entry.title.clone(),
                reason: ex.reason.clone(),
            });
        }
        let cap = ((flexible as f64) * TRUTH_SHARE) as usize;
        let mut spent = 0;
        for (rank, r) in ranking.ranked.iter().enumerate() {
            let e = r.entry;
            let line = format!(
                "- {} (certainty {:.2}): {}\n",
                e.title,
                e.certainty,
                to_plain_text(&e.content).replace('\n', " ")
            );
            let t = count(&line);
            let reason = if rank >= opts.prefs.max_entries {
                Some(format!("beyond max_entries ({})", opts.prefs.max_entries))
            } else if spent + t > cap {
                Some(format!("over the knowledge budget ({cap} tokens)"))
            } else {
                None
            };
            if let Some(reason) = reason {
                a.dropped.push(Dropped {
                    kind: SourceKind::Truth,
                    id: Some(e.id.clone()),
                    label: e.title.clone(),
                    reason,
                });
                continue;
            }
            spent += t;
            truth_text.push_str(&line);
            a.sources.push(e.id.clone());
            from_truth.extend(e.source.as_deref());
            a.included.push(Included {
                kind: SourceKind::Truth,
                id: Some(e.id.clone()),
                label: format!("{} (score {:.3})", e.title, r.score),
                tokens: t,
            });
        }
        used += spent;
    } else if !state.truth.trust.is_empty() {
        a.dropped.push(Dropped {
            kind: SourceKind::Truth,
            id: None,
            label: format!("{} truth entries", state.truth.trust.len()),
            reason: "the rag tool is off".into(),
        });
    }
    if !truth_text.is_empty() {
        a.system.push_str("\n\n## Knowledge\n");
        a.system.push_str(truth_text.trim_end());
        used += 4;
    }

    // Recent turns first pass: the newest turns within their share of the
    // budget, so recall knows which messages the window already covers. The
    // window takes more below only if recall leaves budget unused.
    let recent_cap = ((flexible as f64) * RECENT_SHARE) as usize;
    let mut window_ids: HashSet<&str> = HashSet::new();
    let mut window_tokens = 0;
    for m in &branch {
        let t = count(&to_plain_text(&m.content)) + 4;
        if window_tokens + t > recent_cap {
            break;
        }
        window_tokens += t;
        window_ids.insert(m.id.as_str());
    }

    // Earlier messages recalled by relevance, with the turns around each
    // hit, until the budget left after the window and the files is spent.
    let chunk_cap = if chunks.is_empty() {
        0
    } else {
        ((flexible as f64) * CHUNK_SHARE) as usize
    };
    let cap = budget
        .saturating_sub(used + window_tokens + chunk_cap)
        .saturating_sub(4);
    // Recall passes over the window and over messages an artifact sent
    // came from: nothing is sent twice.
    let mut skip = window_ids.clone();
    skip.extend(&from_truth);
    let recalled_ids = recall_within(
        state.messages(),
        query,
        &skip,
        cap,
        opts.recall_limit,
        count,
        &mut a,
    );
    if let Some((text, spent)) = recalled_ids.1 {
        a.system.push_str("\n\n## Earlier messages\n");
        a.system.push_str(text.trim_end());
        used += spent + 4;
    }
    let recalled_ids = recalled_ids.0;

    // File chunks from the directory index.
    let cap = chunk_cap;
    let mut spent = 0;
    let mut chunk_text = String::new();
    for c in chunks {
        let block = format!("### {}\n{}\n", c.label, c.text.trim_end());
        let t = count(&block);
        if spent + t > cap {
            a.dropped.push(Dropped {
                kind: SourceKind::Chunk,
                id: Some(c.id.clone()),
                label: c.label.clone(),
                reason: format!("over the file budget ({cap} tokens)"),
            });
            continue;
        }
        spent += t;
        chunk_text.push_str(&block);
        // A fetched page's id (`url:…`) is no id a reader can resolve (and
        // no valid one); it stays in `included`.
        if wo_format::validate::is_valid_id(&c.id) {
            a.sources.push(c.id.clone());
        }
        a.included.push(Included {
            kind: SourceKind::Chunk,
            id: Some(c.id.clone()),
            label: c.label.clone(),
            tokens: t,
        });
    }
    if !chunk_text.is_empty() {
        a.system.push_str("\n\n## Files\n");
        a.system.push_str(chunk_text.trim_end());
        used += spent + 4;
    }

    // Recent turns, newest first, until the budget is spent.
    let dropped_before_turns = a.dropped.len();
    let mut remaining = budget.saturating_sub(used);
    let mut turns_newest_first = Vec::new();
    let mut cut = false;
    // Past the cut, the nearest turns are listed one by one and the rest
    // counted in one entry: a long branch would otherwise cost a plain-text
    // conversion and a report line per message, on every turn.
    let mut unlisted = 0usize;
    let mut oldest_unlisted: Option<&str> = None;
    for m in &branch {
        if recalled_ids.contains(m.id.as_str()) {
            continue;
        }
        if cut {
            if a.dropped.len() < dropped_before_turns + DROPPED_TURNS_LISTED {
                a.dropped.push(Dropped {
                    kind: SourceKind::RecentTurn,
                    id: Some(m.id.clone()),
                    label: m.title.clone(),
                    reason: "older than what fits the token budget".into(),
                });
            } else {
                unlisted += 1;
                oldest_unlisted = Some(&m.id);
            }
            continue;
        }
        let text = to_plain_text(&m.content);
        let t = count(&text) + 4;
        if t > remaining {
            cut = true;
            a.dropped.push(Dropped {
                kind: SourceKind::RecentTurn,
                id: Some(m.id.clone()),
                label: m.title.clone(),
                reason: "older than what fits the token budget".into(),
            });
            continue;
        }
        remaining -= t;
        used += t;
        let role = match m.role_with_models(&opts.known_models) {
            Role::Assistant => Role::Assistant,
            _ => Role::User,
        };
        turns_newest_first.push((role, text, m.id.clone(), m.title.clone(), t));
    }
    if unlisted > 0 {
        a.dropped.push(Dropped {
            kind: SourceKind::RecentTurn,
            id: oldest_unlisted.map(str::to_owned),
            label: format!(
                "{unlisted} older messages of this branch, back to the one with this id"
            ),
            reason: "older than what fits the token budget".into(),
        });
    }
    // The recent turns are not added to `sources`: they are the answer's
    // own history (its parent chain), and listing them made every stored
    // answer repeat the ids of the whole conversation (~5 KB each).
    for (role, text, id, title, t) in turns_newest_first.into_iter().rev() {
        a.included.push(Included {
            kind: SourceKind::RecentTurn,
            id: Some(id),
            label: title,
            tokens: t,
        });
        a.turns.push((role, text));
    }
    a.turns.push((Role::User, query.to_owned()));
    a.included.push(Included {
        kind: SourceKind::Query,
        id: None,
        label: "your message".into(),
        tokens: query_tokens,
    });
    a.tokens = used;
    Ok(a)
}

/// Recalls earlier messages for `query` within `cap` tokens: hits and the
/// turns before and after each (a question's answer, or what a reply
/// answers; ranked at [`NEIGHBOUR_WEIGHT`] of the hit's score), best first,
/// skipping anything already taken or in the recent window, so nothing is
/// sent twice. Records what was sent in
/// `a` and returns the ids taken and the section's text and tokens.
fn recall_within<'a>(
    messages: &'a [Message],
    query: &str,
    window: &HashSet<&str>,
    cap: usize,
    limit: Option<usize>,
    count: &dyn Fn(&str) -> usize,
    a: &mut Assembled,
) -> (HashSet<&'a str>, Option<(String, usize)>) {
    let mut taken: HashSet<&'a str> = HashSet::new();
    let hits = recall_messages(messages, query, window, limit.unwrap_or(usize::MAX));
    // Candidates: every hit at its score, and the turns before and after it
    // at a fraction of that score, so a strong hit's neighbours come before
    // weak hits and a weak hit's neighbours after strong ones.
    // (score, transcript position, the hit it neighbours)
    let mut candidates: Vec<(f64, usize, Option<usize>)> = Vec::with_capacity(hits.len() * 3);
    for (rank, hit) in hits.iter().enumerate() {
        candidates.push((hit.score, hit.index, None));
        let w = hit.score * NEIGHBOUR_WEIGHT;
        if let Some(before) = hit.index.checked_sub(1) {
            candidates.push((w, before, Some(rank)));
        }
        if hit.index + 1 < messages.len() {
            candidates.push((w, hit.index + 1, Some(rank)));
        }
    }
    candidates.sort_by(|x, y| {
        y.0.total_cmp(&x.0)
            .then_with(|| x.2.is_some().cmp(&y.2.is_some()))
            .then_with(|| x.1.cmp(&y.1))
    });
    // (transcript position, line, tokens, hit it neighbours)
    let mut chosen: Vec<(usize, String, usize, Option<&'a str>)> = Vec::new();
    let mut spent = 0;
    let mut misses = 0;
    for &(_, idx, neighbour_of) in &candidates {
        if misses >= RECALL_MISSES || cap.saturating_sub(spent) < 8 {
            break;
        }
        let m = &messages[idx];
        if taken.contains(m.id.as_str()) || window.contains(m.id.as_str()) {
            continue;
        }
        let line = format!(
            "- [{} {}]: {}\n",
            m.timestamp,
            m.username,
            to_plain_text(&m.content).replace('\n', " ")
        );
        let t = count(&line);
        if spent + t > cap {
            misses += 1;
            if neighbour_of.is_none() {
                a.dropped.push(Dropped {
                    kind: SourceKind::EarlierMessage,
                    id: Some(m.id.clone()),
                    label: m.title.clone(),
                    reason: format!("over the recall budget ({cap} tokens)"),
                });
            }
            continue;
        }
        misses = 0;
        spent += t;
        taken.insert(m.id.as_str());
        chosen.push((
            idx,
            line,
            t,
            neighbour_of.map(|r| hits[r].message.id.as_str()),
        ));
    }
    let listed: HashSet<&str> = a.dropped.iter().filter_map(|d| d.id.as_deref()).collect();
    let unlisted = hits
        .iter()
        .filter(|h| {
            !taken.contains(h.message.id.as_str()) && !listed.contains(h.message.id.as_str())
        })
        .count();
    if unlisted > 0 {
        a.dropped.push(Dropped {
            kind: SourceKind::EarlierMessage,
            id: None,
            label: format!("{unlisted} more matching earlier messages"),
            reason: format!("over the recall budget ({cap} tokens)"),
        });
    }
    if chosen.is_empty() {
        return (taken, None);
    }
    // Sent in transcript order, so a hit and its neighbours read as the
    // exchange they were.
    chosen.sort_by_key(|c| c.0);
    let mut text = String::new();
    for (idx, line, t, neighbour_of) in chosen {
        let m = &messages[idx];
        text.push_str(&line);
        a.sources.push(m.id.clone());
        a.included.push(Included {
            kind: SourceKind::EarlierMessage,
            id: Some(m.id.clone()),
            label: match neighbour_of {
                Some(hit) => format!("{} (next to {hit})", m.title),
                None => m.title.clone(),
            },
            tokens: t,
        });
    }
    (taken, Some((text, spent)))
}

/// The branch ending at `leaf`, newest first ([`State::branch`]: parentless
/// messages chain in transcript order, so a legacy or imported transcript
/// is kept whole when new turns with parents follow it).
fn branch_or_transcript<'a>(state: &'a State, leaf: &str) -> Vec<&'a Message> {
    let mut path = state.branch(leaf);
    path.reverse();
    path
}

/// The longest prefix of `text` (cut at a word boundary) within `cap` tokens.
fn fit_text(text: &str, cap: usize, count: &dyn Fn(&str) -> usize) -> (String, usize) {
    let total = count(text);
    if total <= cap {
        return (text.to_owned(), total);
    }
    // Binary search on a character prefix; token counts grow with length.
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let (mut lo, mut hi) = (0usize, chars.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        let end = chars.get(mid).map_or(text.len(), |(i, _)| *i);
        if count(&text[..end]) + 2 <= cap {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let end = chars.get(lo).map_or(text.len(), |(i, _)| *i);
    let mut cut = &text[..end];
    if let Some(space) = cut.rfind(char::is_whitespace) {
        cut = &cut[..space];
    }
    let out = format!("{cut} …");
    let t = count(&out);
    (out, t)
}

/// The chars/4 estimate used when a model has no tokenizer.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}
