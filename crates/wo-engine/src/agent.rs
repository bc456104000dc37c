//! What a coding agent is handed from memory (the MCP face's `search`,
//! `recent` and `context`): one list of [`Item`]s per question, cut into
//! pages by a token budget and an item limit, the next page named by an
//! opaque cursor.
//!
//! [`context`] is the agent's view of a turn's prompt: the project's
//! context, the memory entries and earlier messages relevant to the
//! question, and file chunks — chosen by the same assembly and relevance
//! rules as a chat turn ([`crate::assemble`]), but without the chat
//! persona and without the conversation a browser has open (an agent's
//! question starts no branch of it).

use serde::Serialize;
use wo_format::xhtml::to_plain_text;
use wo_format::{State, TruthEntry, TruthKind};

use crate::assemble::{AssemblyOptions, ChunkCandidate, SourceKind, assemble, estimate_tokens};

/// The default token budget of one page.
pub const DEFAULT_PAGE_BUDGET: usize = 4000;
/// The smallest token budget a page may be given.
pub const MIN_PAGE_BUDGET: usize = 100;
/// The largest token budget a page may be given.
pub const MAX_PAGE_BUDGET: usize = 100_000;
/// The default number of items on one page.
pub const DEFAULT_PAGE_LIMIT: usize = 10;
/// The most items one page may hold.
pub const MAX_PAGE_LIMIT: usize = 100;
/// The most hits taken from each scope of a search, over all its pages.
pub const MAX_HITS_PER_SCOPE: usize = 100;
/// The characters of an excerpt (search and recent show excerpts; `read`
/// and `context` the whole text).
pub const EXCERPT_CHARS: usize = 300;
/// The window the agent's context is assembled in: large enough that the
/// relevance rules, not the window, decide what is relevant; the page
/// budget then cuts.
const AGENT_WINDOW: usize = 1 << 22;
/// The most earlier messages recalled for an agent's question.
const AGENT_RECALL_LIMIT: usize = 50;

/// What an item is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemKind {
    /// The project's standing context (`llm.json`'s `context`).
    Context,
    /// A memory entry (truth).
    Memory,
    /// A message of the transcript.
    Message,
    /// A chunk of the directory index.
    Chunk,
}

/// One thing an agent is shown.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Item {
    /// What it is.
    pub kind: ItemKind,
    /// The id `read` takes (`t_…`, `m_…`, `chunk:…`); none for the context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// A title, or a path and lines.
    pub title: String,
    /// Plain text: the whole text in `context`, an excerpt elsewhere.
    pub text: String,
    /// Estimated tokens of the title and text.
    pub tokens: usize,
    /// How well it matched the question (search: BM25; context: the share
    /// of the question's ideal score); none where nothing was matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// A memory entry's kind (fact, effort, event, note).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_kind: Option<TruthKind>,
    /// A memory entry's certainty, 0 to 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certainty: Option<f64>,
    /// An effort's status (open, resolved).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// A memory entry's tags.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// Who wrote a message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// When a message was written or a memory entry last changed (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// A chunk's file, relative to the index root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

impl Item {
    fn new(kind: ItemKind, id: Option<String>, title: String, text: String) -> Self {
        let tokens = estimate_tokens(&title) + estimate_tokens(&text);
        Item {
            kind,
            id,
            title,
            text,
            tokens,
            score: None,
            memory_kind: None,
            certainty: None,
            status: None,
            tags: None,
            username: None,
            timestamp: None,
            path: None,
        }
    }

    /// A memory entry: its whole plain text, or an excerpt of `excerpt` characters.
    pub fn memory(t: &TruthEntry, excerpt: Option<usize>) -> Self {
        let mut item = Item::new(
            ItemKind::Memory,
            Some(t.id.clone()),
            t.title.clone(),
            text_of(&t.content, excerpt),
        );
        item.memory_kind = t.kind;
        item.certainty = Some(t.certainty);
        item.status = t
            .status
            .and_then(|s| serde_json::to_value(s).ok())
            .and_then(|v| v.as_str().map(str::to_owned));
        item.tags = t.tags.clone();
        item.timestamp = Some(t.effective_update().to_string());
        item
    }

    /// A message: its whole plain text, or an excerpt of `excerpt` characters.
    pub fn message(m: &wo_format::Message, excerpt: Option<usize>) -> Self {
        let mut item = Item::new(
            ItemKind::Message,
            Some(m.id.clone()),
            m.title.clone(),
            text_of(&m.content, excerpt),
        );
        item.username = Some(m.username.clone());
        item.timestamp = Some(m.timestamp.to_string());
        item
    }

    /// A chunk of the directory index (`id` as `read` takes it).
    pub fn chunk(id: String, title: String, text: String, path: Option<String>) -> Self {
        let mut item = Item::new(ItemKind::Chunk, Some(id), title, text);
        item.path = path;
        item
    }

    /// This item with `score`.
    pub fn scored(mut self, score: f64) -> Self {
        self.score = Some(score);
        self
    }
}

/// The plain text of `xhtml`, whole or cut to `max` characters with `…`.
fn text_of(xhtml: &str, max: Option<usize>) -> String {
    let text = to_plain_text(xhtml);
    let text = text.trim();
    match max {
        Some(max) if text.chars().count() > max => {
            let mut s: String = text.chars().take(max).collect();
            s.push('…');
            s
        }
        _ => text.to_owned(),
    }
}

/// How one page is cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageRequest {
    /// Where the page starts: the `next_cursor` of the page before, or
    /// `None` for the first.
    pub cursor: Option<String>,
    /// The most estimated tokens the page's items may hold together.
    pub budget: usize,
    /// The most items on the page.
    pub limit: usize,
}

impl PageRequest {
    /// A request with the defaults filled in, each bound checked; errors
    /// name the argument and its allowed range.
    pub fn new(
        cursor: Option<String>,
        budget: Option<usize>,
        limit: Option<usize>,
    ) -> Result<Self, String> {
        let budget = budget.unwrap_or(DEFAULT_PAGE_BUDGET);
        if !(MIN_PAGE_BUDGET..=MAX_PAGE_BUDGET).contains(&budget) {
            return Err(format!(
                "budget: {budget} is outside {MIN_PAGE_BUDGET}..={MAX_PAGE_BUDGET}"
            ));
        }
        let limit = limit.unwrap_or(DEFAULT_PAGE_LIMIT);
        if !(1..=MAX_PAGE_LIMIT).contains(&limit) {
            return Err(format!("limit: {limit} is outside 1..={MAX_PAGE_LIMIT}"));
        }
        Ok(PageRequest {
            cursor,
            budget,
            limit,
        })
    }
}

/// One page of items.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Page {
    /// The items, in the list's order.
    pub items: Vec<Item>,
    /// Their estimated tokens together (at most the budget, unless one
    /// item alone is larger: a page always holds at least one item).
    pub tokens: usize,
    /// The budget the page was cut to.
    pub budget: usize,
    /// How many items the whole list holds.
    pub total: usize,
    /// Pass this as `cursor` for the next page; none on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// The prefix of the cursors [`paginate`] gives (an offset follows).
const CURSOR_PREFIX: &str = "wo1:";

fn cursor_offset(cursor: Option<&str>, total: usize) -> Result<usize, String> {
    let Some(c) = cursor else { return Ok(0) };
    c.strip_prefix(CURSOR_PREFIX)
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|&n| n <= total)
        .ok_or_else(|| {
            format!(
                "cursor: {c:?} is not a cursor this list gave (pass the `next_cursor` of the page before, or leave it out for the first page)"
            )
        })
}

/// The page of `items` that `req` asks for.
pub fn paginate(items: Vec<Item>, req: &PageRequest) -> Result<Page, String> {
    let total = items.len();
    let mut items: Vec<Option<Item>> = items.into_iter().map(Some).collect();
    paginate_with(total, req, |i| items.get_mut(i).and_then(Option::take))
}

/// The page `req` asks for of a list of `total` items, the `i`th made by
/// `item(i)` only when the page needs it (a long list is never rendered
/// whole). The list ends early where `item` gives none.
pub fn paginate_with(
    total: usize,
    req: &PageRequest,
    mut item: impl FnMut(usize) -> Option<Item>,
) -> Result<Page, String> {
    let start = cursor_offset(req.cursor.as_deref(), total)?;
    let mut page = Vec::new();
    let mut tokens = 0;
    for i in start..total {
        if page.len() == req.limit {
            break;
        }
        let Some(next) = item(i) else { break };
        if !page.is_empty() && tokens + next.tokens > req.budget {
            break;
        }
        tokens += next.tokens;
        page.push(next);
    }
    let end = start + page.len();
    Ok(Page {
        items: page,
        tokens,
        budget: req.budget,
        total,
        next_cursor: (end < total).then(|| format!("{CURSOR_PREFIX}{end}")),
    })
}

/// Which memory entries a search keeps.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemoryFilter {
    /// Only entries at least this sure.
    pub min_certainty: Option<f64>,
    /// Only entries of this kind.
    pub kind: Option<TruthKind>,
    /// Only entries carrying this tag.
    pub tag: Option<String>,
}

/// The `max` best positive scores, best first (ties: file order).
fn top(scores: &[f64], max: usize, keep: impl Fn(usize) -> bool) -> Vec<(usize, f64)> {
    let mut hits: Vec<(usize, f64)> = scores
        .iter()
        .copied()
        .enumerate()
        .filter(|&(i, s)| s > 0.0 && keep(i))
        .collect();
    hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    hits.truncate(max);
    hits
}

/// Memory entries matching `query` (BM25 over title and text), best first,
/// at most [`MAX_HITS_PER_SCOPE`], as excerpts.
pub fn search_memory(state: &State, query: &str, filter: &MemoryFilter) -> Vec<Item> {
    let trust = &state.truth.trust;
    let docs: Vec<crate::bm25::Doc> = trust
        .iter()
        .map(|t| crate::bm25::Doc {
            plain: &t.title,
            xhtml: &t.content,
        })
        .collect();
    let keep = |i: usize| {
        let t = &trust[i];
        filter.min_certainty.is_none_or(|c| t.certainty >= c)
            && filter.kind.is_none_or(|k| t.kind == Some(k))
            && filter
                .tag
                .as_ref()
                .is_none_or(|tag| t.tags.as_ref().is_some_and(|ts| ts.contains(tag)))
    };
    top(
        &crate::bm25::scores_docs(&docs, query),
        MAX_HITS_PER_SCOPE,
        keep,
    )
    .into_iter()
    .map(|(i, score)| Item::memory(&trust[i], Some(EXCERPT_CHARS)).scored(score))
    .collect()
}

/// Messages matching `query` (BM25 over title and text), best first, at
/// most [`MAX_HITS_PER_SCOPE`], as excerpts.
pub fn search_messages(state: &State, query: &str) -> Vec<Item> {
    let messages = state.messages();
    let docs: Vec<crate::bm25::Doc> = messages
        .iter()
        .map(|m| crate::bm25::Doc {
            plain: &m.title,
            xhtml: &m.content,
        })
        .collect();
    top(
        &crate::bm25::scores_docs(&docs, query),
        MAX_HITS_PER_SCOPE,
        |_| true,
    )
    .into_iter()
    .map(|(i, score)| Item::message(&messages[i], Some(EXCERPT_CHARS)).scored(score))
    .collect()
}

/// The page `req` asks for of the latest messages and the memory entries
/// changed last, newest first on one timeline (ties: memory first, then by
/// id), as excerpts. Only the page's items are rendered.
pub fn recent(state: &State, req: &PageRequest) -> Result<Page, String> {
    let trust = &state.truth.trust;
    let messages = state.messages();
    // (when, 0 for memory / 1 for a message, index, id)
    let mut order: Vec<(&wo_format::Timestamp, u8, usize, &str)> = trust
        .iter()
        .enumerate()
        .map(|(i, t)| (t.effective_update(), 0, i, t.id.as_str()))
        .chain(
            messages
                .iter()
                .enumerate()
                .map(|(i, m)| (&m.timestamp, 1, i, m.id.as_str())),
        )
        .collect();
    order.sort_by(|a, b| b.0.cmp(a.0).then(a.1.cmp(&b.1)).then(a.3.cmp(b.3)));
    paginate_with(order.len(), req, |n| {
        let &(_, kind, i, _) = order.get(n)?;
        Some(if kind == 0 {
            Item::memory(&trust[i], Some(EXCERPT_CHARS))
        } else {
            Item::message(&messages[i], Some(EXCERPT_CHARS))
        })
    })
}

/// An agent's context for `query`: the project's context, then the
/// relevant memory entries, the relevant earlier messages and `chunks`, in
/// the order a chat turn would place them. Errors when the query is
/// blank.
pub fn context(state: &State, query: &str, chunks: &[ChunkCandidate]) -> Result<Vec<Item>, String> {
    if query.trim().is_empty() {
        return Err("query: must not be empty".into());
    }
    let mut opts = AssemblyOptions::new(state, AGENT_WINDOW, 0);
    // No persona: the agent has its own instructions.
    opts.system = Some(String::new());
    // No branch: the conversation a browser has open is not the agent's.
    opts.new_conversation = true;
    opts.recall_limit = Some(AGENT_RECALL_LIMIT);
    // Pages, not a token bound, cut what an agent is given.
    opts.recall_tokens = AGENT_WINDOW;
    let a = assemble(state, query, &opts, &estimate_tokens, chunks)
        .map_err(|e| format!("query: {e}"))?;
    let mut items = Vec::new();
    for part in &a.included {
        let item = match (part.kind, part.id.as_deref()) {
            (SourceKind::Context, _) => {
                let text = to_plain_text(&state.context);
                let text = text.trim();
                if text.is_empty() {
                    continue;
                }
                Item::new(
                    ItemKind::Context,
                    None,
                    "Project context".to_owned(),
                    text.to_owned(),
                )
            }
            (SourceKind::Truth, Some(id)) => match state.truth.trust.iter().find(|t| t.id == id) {
                Some(t) => Item::memory(t, None),
                None => continue,
            },
            (SourceKind::EarlierMessage, Some(id)) => match state.message(id) {
                Some(m) => Item::message(m, None),
                None => continue,
            },
            (SourceKind::Chunk, Some(id)) => match chunks.iter().find(|c| c.id == id) {
                Some(c) => Item::chunk(
                    format!("chunk:{}", c.id),
                    c.label.clone(),
                    c.text.clone(),
                    None,
                ),
                None => continue,
            },
            // The instructions, the question itself, recent turns (none:
            // a new conversation) and fetched pages are not memory.
            _ => continue,
        };
        items.push(match part.score {
            Some(s) => item.scored(s),
            None => item,
        });
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wo_format::{Message, Role, Timestamp, TruthEntry};

    fn item(n: usize, tokens: usize) -> Item {
        let mut i = Item::new(
            ItemKind::Memory,
            Some(format!("t_{n}")),
            "x".into(),
            "y".into(),
        );
        i.tokens = tokens;
        i
    }

    #[test]
    fn pages_follow_their_cursors_to_the_end() {
        let items: Vec<Item> = (0..7).map(|n| item(n, 30)).collect();
        let req = PageRequest::new(None, Some(100), Some(5)).unwrap();
        let first = paginate(items.clone(), &req).unwrap();
        assert_eq!(first.items.len(), 3, "100 tokens hold three of 30");
        assert_eq!(first.tokens, 90);
        assert_eq!(first.total, 7);
        let mut seen: Vec<_> = first.items.iter().map(|i| i.id.clone()).collect();
        let mut cursor = first.next_cursor;
        while let Some(c) = cursor {
            let req = PageRequest::new(Some(c), Some(100), Some(2)).unwrap();
            let page = paginate(items.clone(), &req).unwrap();
            assert!(page.items.len() <= 2);
            seen.extend(page.items.iter().map(|i| i.id.clone()));
            cursor = page.next_cursor;
        }
        let all: Vec<_> = items.iter().map(|i| i.id.clone()).collect();
        assert_eq!(seen, all, "every item once, in order");
    }

    #[test]
    fn an_item_larger_than_the_budget_is_a_page_of_its_own() {
        let items = vec![item(0, 500), item(1, 10)];
        let req = PageRequest::new(None, Some(100), None).unwrap();
        let page = paginate(items, &req).unwrap();
        assert_eq!(page.items.len(), 1);
        assert_eq!(page.next_cursor.as_deref(), Some("wo1:1"));
    }

    #[test]
    fn bad_cursors_and_bounds_are_refused_by_name() {
        let items = vec![item(0, 1)];
        for c in ["junk", "wo1:x", "wo1:2", ""] {
            let req = PageRequest::new(Some(c.into()), None, None).unwrap();
            let e = paginate(items.clone(), &req).unwrap_err();
            assert!(e.starts_with("cursor: "), "{c}: {e}");
        }
        assert!(
            PageRequest::new(None, Some(99), None)
                .unwrap_err()
                .starts_with("budget: 99 is outside 100..=100000")
        );
        assert!(
            PageRequest::new(None, None, Some(0))
                .unwrap_err()
                .starts_with("limit: 0 is outside 1..=100")
        );
        assert!(PageRequest::new(None, None, Some(101)).is_err());
    }

    fn state_with_chat() -> State {
        let t0 = Timestamp::from_unix(1_800_000_000);
        let mut s = State::new(t0.clone());
        s.context = "<p>WikiOracle keeps a portable memory.</p>".into();
        let mut fact = TruthEntry::new(
            "Kangaroo habitat",
            t0.clone(),
            0.9,
            "<p>Kangaroos live in grassland.</p>",
        );
        fact.kind = Some(TruthKind::Fact);
        s.add_truth(fact);
        let mut q = Message::new(
            "user",
            t0.next_micro(),
            "Which teapot pours best?",
            "<p>Which teapot pours best?</p>",
        );
        q.role = Some(Role::User);
        let qid = q.id.clone();
        s.push_message(q);
        let mut a = Message::new(
            "model",
            t0.next_micro().next_micro(),
            "Unrelated browser chat",
            "<p>The browser talks about teapots.</p>",
        );
        a.role = Some(Role::Assistant);
        a.parent = Some(qid);
        s.push_message(a);
        s
    }

    #[test]
    fn an_agents_context_has_no_persona_and_no_open_conversation() {
        let s = state_with_chat();
        let items = context(&s, "kangaroo grassland", &[]).unwrap();
        assert_eq!(items[0].kind, ItemKind::Context);
        assert!(items[0].text.contains("portable memory"));
        assert!(
            items
                .iter()
                .any(|i| i.kind == ItemKind::Memory && i.text.contains("grassland"))
        );
        for i in &items {
            assert!(!i.text.contains("helpful assistant"), "persona: {i:?}");
            assert!(!i.text.contains("teapots"), "the browser's branch: {i:?}");
        }
        assert!(context(&s, "   ", &[]).is_err());
    }

    #[test]
    fn an_agents_context_is_cut_by_pages_not_by_a_chats_memory_bound() {
        // 80 matching messages of ~100 tokens: far more than a chat turn's
        // memory bound holds, all relevant to the agent's question.
        let mut s = State::new(Timestamp::from_unix(1_800_000_000));
        for i in 0..80i64 {
            let text = format!(
                "wombat burrow survey {i}: {}",
                "soil and grass notes ".repeat(20)
            );
            s.push_message(Message::new(
                "ann",
                Timestamp::from_unix(1_700_000_000 + i * 60),
                format!("survey {i}"),
                format!("<p>{text}</p>"),
            ));
        }
        let items = context(&s, "wombat burrow survey", &[]).unwrap();
        let recalled = items.iter().filter(|i| i.kind == ItemKind::Message).count();
        assert!(recalled >= AGENT_RECALL_LIMIT, "{recalled} messages");
    }

    #[test]
    fn recent_is_one_timeline_newest_first() {
        let s = state_with_chat();
        let req = PageRequest::new(None, None, None).unwrap();
        let items = recent(&s, &req).unwrap().items;
        assert_eq!(items.len(), 3);
        assert_eq!(items[0].title, "Unrelated browser chat");
        assert_eq!(items[2].kind, ItemKind::Memory);
    }
}
