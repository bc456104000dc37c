//! The MCP server: tools (`context`, `search`, `read`, `recent`, and with
//! `--allow-write` `remember`, `resolve`, `log_exchange`), resources
//! (`wikioracle://context`, `wikioracle://llm.md`, and each memory entry
//! and message by id through the templates `wikioracle://memory/{id}` and
//! `wikioracle://message/{id}`) and prompts (`recall`, `open_efforts`).
//!
//! Every tool declares an `outputSchema` and answers with
//! `structuredContent` (and the same JSON as text, for clients older than
//! 2025-06-18) and carries annotations; a read-only server lists only its
//! read tools. Protocol versions 2025-03-26 to 2026-07-28 are negotiated by
//! rmcp (the `initialize` handshake, or `server/discover` and per-request
//! `_meta`); rmcp also adds `resultType` and the cache hints where the
//! version has them.
//!
//! The store is held behind a mutex and refreshed before each read, so
//! writes by `wo ask`, `wo truth add` or an editor show up at once; every
//! call runs on a blocking thread because the store and the index do file
//! I/O. What is shown is chosen by `wo_engine::agent`; this module parses,
//! calls and renders.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, Prompt, PromptArgument, PromptMessage,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, Role, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wo_engine::agent::{self, Item, ItemKind, MemoryFilter, Page, PageRequest};
use wo_format::query::find_by_prefix;
use wo_format::xhtml::to_plain_text;
use wo_format::{TruthEntry, TruthKind};
use wo_store::{OpenOptions, Store};

use crate::write::{self, WriteOp};

/// What `wo mcp` was started with.
#[derive(Clone, Debug)]
pub struct McpOptions {
    /// The state file (already resolved as the CLI does).
    pub state: PathBuf,
    /// How the state file is opened (symlinks, size limits, lock timeout).
    pub open: OpenOptions,
    /// Allow `remember`, `resolve` and `log_exchange` (off by default).
    pub allow_write: bool,
    /// The directory index's root; `None` finds one beside the state file.
    pub index: Option<PathBuf>,
}

const CONTEXT_URI: &str = "wikioracle://context";
const LLM_MD_URI: &str = "wikioracle://llm.md";
/// A memory entry as a resource: this prefix and its id.
pub const MEMORY_URI_PREFIX: &str = "wikioracle://memory/";
/// A message as a resource: this prefix and its id.
pub const MESSAGE_URI_PREFIX: &str = "wikioracle://message/";
/// The most of `.wo-pack/llm.md` served: the pack's pointer file, far
/// smaller in any pack wo writes.
const MAX_LLM_MD_BYTES: u64 = 64 << 20;

/// The server: one store and its options.
#[derive(Clone)]
pub struct WikiOracleMcp {
    store: Arc<Mutex<Store>>,
    opts: Arc<McpOptions>,
    tool_router: ToolRouter<Self>,
}

/// Serves MCP on stdin/stdout until the client closes it.
pub async fn serve_stdio(opts: McpOptions) -> anyhow::Result<()> {
    let server = WikiOracleMcp::open(opts)?;
    let running = server
        .serve(crate::stdio::LineTransport::new(
            tokio::io::stdin(),
            tokio::io::stdout(),
        ))
        .await
        .map_err(|e| anyhow::anyhow!("MCP initialisation failed: {e}"))?;
    running.waiting().await?;
    Ok(())
}

// ---------------------------------------------------------------- arguments

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextArgs {
    /// The question or task the context is for.
    pub query: String,
    /// Tokens the page may hold, 100..=100000 (default 4000).
    #[schemars(range(min = 100, max = 100_000))]
    pub budget: Option<usize>,
    /// Items on the page, 1..=100 (default 10).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<usize>,
    /// The `next_cursor` of the page before; leave out for the first page.
    pub cursor: Option<String>,
    /// Leave out chunks of the directory index (default false).
    #[serde(default)]
    pub no_files: bool,
}

#[derive(Debug, Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Truth,
    Messages,
    Chunks,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// Words to search for (BM25).
    pub query: String,
    /// Items on the page, 1..=100 (default 10).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<usize>,
    /// Tokens the page may hold, 100..=100000 (default 4000).
    #[schemars(range(min = 100, max = 100_000))]
    pub budget: Option<usize>,
    /// The `next_cursor` of the page before; leave out for the first page.
    pub cursor: Option<String>,
    /// Which of truth (memory entries), messages, chunks to search (default all).
    pub scopes: Option<Vec<Scope>>,
    /// Memory entries: only those at least this sure, 0..=1.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub min_certainty: Option<f64>,
    /// Memory entries: only this kind.
    pub kind: Option<KindArg>,
    /// Memory entries: only those carrying this tag.
    pub tag: Option<String>,
    /// Chunks: only files whose path starts with this.
    pub path_prefix: Option<String>,
    /// Chunks: only this kind of chunk (e.g. code, markdown).
    pub chunk_kind: Option<String>,
}

/// The kind of a memory entry.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum KindArg {
    /// Something true about the person, the project or the world.
    Fact,
    /// Unfinished work (opened as `open`; `resolve` closes it).
    Effort,
    /// Something that happened.
    Event,
    /// Anything else worth keeping.
    Note,
}

impl From<KindArg> for TruthKind {
    fn from(k: KindArg) -> Self {
        match k {
            KindArg::Fact => TruthKind::Fact,
            KindArg::Effort => TruthKind::Effort,
            KindArg::Event => TruthKind::Event,
            KindArg::Note => TruthKind::Note,
        }
    }
}

impl KindArg {
    fn of(k: TruthKind) -> Option<Self> {
        Some(match k {
            TruthKind::Fact => KindArg::Fact,
            TruthKind::Effort => KindArg::Effort,
            TruthKind::Event => KindArg::Event,
            TruthKind::Note => KindArg::Note,
            #[allow(unreachable_patterns)]
            _ => return None,
        })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// A message id (m_…), memory entry id (t_…), or chunk (chunk:<id>, c0001); a unique prefix is enough.
    pub id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecentArgs {
    /// Items on the page, 1..=100 (default 10).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<usize>,
    /// Tokens the page may hold, 100..=100000 (default 4000).
    #[schemars(range(min = 100, max = 100_000))]
    pub budget: Option<usize>,
    /// The `next_cursor` of the page before; leave out for the first page.
    pub cursor: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RememberArgs {
    /// The memory itself (Markdown).
    pub content: String,
    /// A short title (default: the first sentence of the content, as wo titles messages).
    pub title: Option<String>,
    /// fact, effort (an open task), event or note (default note).
    pub kind: Option<KindArg>,
    /// How sure, 0..=1 (default 0.7, as `wo truth add`).
    #[schemars(range(min = 0.0, max = 1.0))]
    pub certainty: Option<f64>,
    /// Tags (default none).
    #[serde(default)]
    pub tags: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveArgs {
    /// The effort's id (t_…), or a unique prefix.
    pub id: String,
    /// How it was resolved.
    pub resolution: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogExchangeArgs {
    /// The user's question (plain text).
    pub question: String,
    /// The answer given (Markdown).
    pub answer: String,
    /// The model that answered (default: the client's name).
    pub model: Option<String>,
}

// ------------------------------------------------------------------ outputs

/// What an item is.
#[derive(Debug, Serialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub enum ItemKindOut {
    /// The project's standing context.
    Context,
    /// A memory entry.
    Memory,
    /// A message of the transcript.
    Message,
    /// A chunk of the directory index.
    Chunk,
}

/// One thing shown: a memory entry, a message, a chunk or the context.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ItemOut {
    /// What it is.
    pub kind: ItemKindOut,
    /// The id `read` takes; none for the context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The item as a resource (memory entries and messages).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// A title, or a path and lines.
    pub title: String,
    /// Plain text: whole in `context` and `read`, an excerpt elsewhere.
    pub text: String,
    /// Estimated tokens of the title and text.
    pub tokens: usize,
    /// How well it matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// A memory entry's kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_kind: Option<KindArg>,
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
    /// A chunk's file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

impl From<Item> for ItemOut {
    fn from(i: Item) -> Self {
        let uri = match (i.kind, &i.id) {
            (ItemKind::Memory, Some(id)) => Some(format!("{MEMORY_URI_PREFIX}{id}")),
            (ItemKind::Message, Some(id)) => Some(format!("{MESSAGE_URI_PREFIX}{id}")),
            _ => None,
        };
        ItemOut {
            kind: match i.kind {
                ItemKind::Context => ItemKindOut::Context,
                ItemKind::Memory => ItemKindOut::Memory,
                ItemKind::Message => ItemKindOut::Message,
                ItemKind::Chunk => ItemKindOut::Chunk,
            },
            id: i.id,
            uri,
            title: i.title,
            text: i.text,
            tokens: i.tokens,
            score: i.score,
            memory_kind: i.memory_kind.and_then(KindArg::of),
            certainty: i.certainty,
            status: i.status,
            tags: i.tags,
            username: i.username,
            timestamp: i.timestamp,
            path: i.path,
        }
    }
}

/// One page of items.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PageOut {
    /// The items.
    pub items: Vec<ItemOut>,
    /// Their estimated tokens together.
    pub tokens: usize,
    /// The budget the page was cut to.
    pub budget: usize,
    /// How many items all pages hold together.
    pub total: usize,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

impl From<Page> for PageOut {
    fn from(p: Page) -> Self {
        PageOut {
            items: p.items.into_iter().map(ItemOut::from).collect(),
            tokens: p.tokens,
            budget: p.budget,
            total: p.total,
            next_cursor: p.next_cursor,
        }
    }
}

/// One item read in full.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReadOut {
    /// The item, with its whole text.
    pub item: ItemOut,
    /// The record as stored (a message or memory entry as in llm.json, a
    /// chunk's ref, path and lines).
    pub record: Value,
}

/// What `remember` added.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RememberOut {
    /// The new memory entry's id.
    pub added: String,
    /// Its title (given, or derived from the content).
    pub title: String,
    /// The entry as a resource.
    #[serde(default)]
    pub uri: String,
}

/// What `resolve` changed.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ResolveOut {
    /// The resolved effort's id.
    pub resolved: String,
}

/// What `log_exchange` appended.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct LogExchangeOut {
    /// The question's message id.
    pub question: String,
    /// The answer's message id.
    pub answer: String,
}

// ------------------------------------------------------------------ helpers

/// A result with `value` as structured content and, for clients older
/// than 2025-06-18, as pretty JSON text.
fn structured<T: Serialize>(value: &T) -> CallToolResult {
    match serde_json::to_value(value) {
        Ok(v) => {
            let text = serde_json::to_string_pretty(&v).unwrap_or_else(|_| v.to_string());
            let mut r = CallToolResult::structured(v);
            r.content = vec![ContentBlock::text(text)];
            r
        }
        Err(e) => tool_error(format!("internal: the result is not JSON: {e}")),
    }
}

fn tool_error(msg: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(msg.into())])
}

fn internal(e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(e.to_string(), None)
}

/// Resource links (2025-06-18 and later know them) to the memory entries
/// and messages of `page`, after its text.
fn with_links(
    mut r: CallToolResult,
    page: &PageOut,
    ctx: &RequestContext<RoleServer>,
) -> CallToolResult {
    let knows_links = ctx
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2025_06_18);
    if !knows_links {
        return r;
    }
    for item in &page.items {
        if let Some(uri) = &item.uri {
            r.content.push(ContentBlock::resource_link(
                Resource::new(uri.clone(), item.id.clone().unwrap_or_default())
                    .with_title(item.title.clone())
                    .with_mime_type("text/plain"),
            ));
        }
    }
    r
}

fn message_record(m: &wo_format::Message) -> Result<Value, McpError> {
    let mut v = serde_json::to_value(m).map_err(internal)?;
    v["text"] = Value::String(to_plain_text(&m.content));
    Ok(v)
}

fn truth_record(t: &TruthEntry) -> Result<Value, McpError> {
    let mut v = serde_json::to_value(t).map_err(internal)?;
    v["text"] = Value::String(to_plain_text(&t.content));
    Ok(v)
}

/// A memory entry or message as a resource's text: its title, then its
/// plain text.
fn resource_text(title: &str, xhtml: &str) -> String {
    format!("{title}\n\n{}", to_plain_text(xhtml).trim())
}

impl WikiOracleMcp {
    /// Opens the state file (it must exist: `wo init` creates one).
    pub fn open(opts: McpOptions) -> anyhow::Result<Self> {
        // The store's error names the file and carries its own hint (for a
        // missing file: `wo init`, or --state): one hint, not two.
        let store = Store::open(&opts.state, opts.open.clone())?;
        Ok(Self::on_store(Arc::new(Mutex::new(store)), opts))
    }

    /// A server on a store another face already holds (`wo serve` shares
    /// its one store with `/mcp`: one writer per process, so the store's
    /// refresh-and-merge sees every change). `opts.open` is not used.
    pub fn on_store(store: Arc<Mutex<Store>>, opts: McpOptions) -> Self {
        Self {
            store,
            opts: Arc::new(opts),
            tool_router: Self::tool_router(),
        }
    }

    /// Every tool this server lists: with `--allow-write` all of them,
    /// else only those annotated read-only. Sorted by name.
    pub fn listed_tools(&self) -> Vec<rmcp::model::Tool> {
        let mut tools = self.tool_router.list_all();
        for t in &mut tools {
            strip_private_formats(Arc::make_mut(&mut t.input_schema));
            if let Some(o) = &mut t.output_schema {
                strip_private_formats(Arc::make_mut(o));
            }
        }
        if !self.opts.allow_write {
            tools.retain(|t| {
                t.annotations
                    .as_ref()
                    .is_some_and(|a| a.read_only_hint == Some(true))
            });
        }
        tools
    }

    /// Runs `f` on the refreshed store on a blocking thread.
    async fn with_store<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<T, McpError> + Send + 'static,
    ) -> Result<T, McpError> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || {
            let mut store = store
                .lock()
                // A panic elsewhere mid-read leaves the store as it was: the
                // store only changes through whole transactions.
                .unwrap_or_else(|p| p.into_inner());
            store.refresh().map_err(internal)?;
            f(&mut store)
        })
        .await
        .map_err(internal)?
    }

    fn index_root(&self) -> Option<PathBuf> {
        wo_engine::files::index_root_for(&self.opts.state, self.opts.index.as_deref())
    }

    fn open_index(&self) -> Result<Option<wo_index::Index>, McpError> {
        match self.index_root() {
            Some(root) => wo_index::Index::open(&root).map(Some).map_err(|e| {
                internal(format!(
                    "cannot open the directory index of {}: {e}",
                    root.display()
                ))
            }),
            None => Ok(None),
        }
    }

    async fn write(
        &self,
        ctx: &RequestContext<RoleServer>,
        op: WriteOp,
        render: fn(Value) -> Result<CallToolResult, String>,
    ) -> Result<CallToolResult, McpError> {
        if !self.opts.allow_write {
            return Ok(tool_error(
                "refused: this server is read-only; start it with `wo mcp --allow-write` (over HTTP: `wo serve --mcp-allow-write`) to let clients write memories",
            ));
        }
        let by = ctx
            .client_info()
            .map(|i| i.name)
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| "mcp-client".to_owned());
        self.with_store(move |store| {
            Ok(match write::apply(store, op, &by).and_then(render) {
                Ok(r) => r,
                Err(e) => tool_error(e),
            })
        })
        .await
    }

    fn chunk_candidates(
        &self,
        query: &str,
    ) -> Result<Vec<wo_engine::assemble::ChunkCandidate>, McpError> {
        Ok(match self.open_index()? {
            Some(i) => wo_engine::files::relevant_chunks(&i, query),
            None => Vec::new(),
        })
    }

    fn chunk_hits(
        &self,
        query: &str,
        path_prefix: Option<String>,
        kind: Option<wo_index::Kind>,
    ) -> Result<Vec<Item>, McpError> {
        let Some(index) = self.open_index()? else {
            return Ok(Vec::new());
        };
        let mut q = wo_index::Query::new(query.to_owned());
        q.limit = agent::MAX_HITS_PER_SCOPE;
        q.path_prefix = path_prefix;
        q.kind = kind;
        Ok(index
            .search(&q)
            .into_iter()
            .map(|h| {
                let id = index
                    .get_chunk(&h.chunk_ref)
                    .map(|rec| format!("chunk:{}", rec.chunk.short_id))
                    .unwrap_or_else(|| h.chunk_ref.clone());
                let title = format!("{}:{}-{} {}", h.path, h.start_line, h.end_line, h.label);
                Item::chunk(id, title.trim().to_owned(), h.snippet, Some(h.path)).scored(h.score)
            })
            .collect())
    }
}

#[tool_router]
impl WikiOracleMcp {
    #[tool(
        title = "Context for a task",
        description = "Start here. What the memory holds for a question or task: the project's context, the relevant memory entries, the relevant earlier messages and file chunks, whole texts within a token budget, with ids for `read`. Page on with `cursor`.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<PageOut>()
    )]
    async fn context(
        &self,
        Parameters(args): Parameters<ContextArgs>,
    ) -> Result<CallToolResult, McpError> {
        let req = match PageRequest::new(args.cursor, args.budget, args.limit) {
            Ok(r) => r,
            Err(e) => return Ok(tool_error(e)),
        };
        let this = self.clone();
        self.with_store(move |store| {
            let chunks = if args.no_files {
                Vec::new()
            } else {
                this.chunk_candidates(&args.query)?
            };
            Ok(
                match agent::context(store.state(), &args.query, &chunks)
                    .and_then(|items| agent::paginate(items, &req))
                {
                    Ok(page) => structured(&PageOut::from(page)),
                    Err(e) => tool_error(e),
                },
            )
        })
        .await
    }

    #[tool(
        title = "Search memory and files",
        description = "Search the memory entries (truth), past conversation messages and the project's indexed files (BM25) for words. Memory hits come first, then messages, then chunks, each best first, as excerpts with ids for `read`. Page on with `cursor`.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<PageOut>()
    )]
    async fn search(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<SearchArgs>,
    ) -> Result<CallToolResult, McpError> {
        let req = match PageRequest::new(args.cursor.clone(), args.budget, args.limit) {
            Ok(r) => r,
            Err(e) => return Ok(tool_error(e)),
        };
        if let Some(c) = args.min_certainty
            && !(0.0..=1.0).contains(&c)
        {
            return Ok(tool_error(format!("min_certainty: {c} is outside 0..=1")));
        }
        if args.query.trim().is_empty() {
            return Ok(tool_error("query: must not be empty"));
        }
        let chunk_kind = match &args.chunk_kind {
            Some(k) => match wo_index::Kind::parse(k) {
                Some(k) => Some(k),
                None => {
                    return Ok(tool_error(format!(
                        "chunk_kind: {k:?} is not a kind of chunk"
                    )));
                }
            },
            None => None,
        };
        let scopes = args
            .scopes
            .clone()
            .unwrap_or_else(|| vec![Scope::Truth, Scope::Messages, Scope::Chunks]);
        let filter = MemoryFilter {
            min_certainty: args.min_certainty,
            kind: args.kind.map(TruthKind::from),
            tag: args.tag.clone(),
        };
        let this = self.clone();
        let result = self
            .with_store(move |store| {
                let s = store.state();
                let mut items = Vec::new();
                if scopes.contains(&Scope::Truth) {
                    items.extend(agent::search_memory(s, &args.query, &filter));
                }
                if scopes.contains(&Scope::Messages) {
                    items.extend(agent::search_messages(s, &args.query));
                }
                if scopes.contains(&Scope::Chunks) {
                    items.extend(this.chunk_hits(&args.query, args.path_prefix, chunk_kind)?);
                }
                Ok(agent::paginate(items, &req).map(PageOut::from))
            })
            .await?;
        Ok(match result {
            Ok(page) => with_links(structured(&page), &page, &ctx),
            Err(e) => tool_error(e),
        })
    }

    #[tool(
        title = "Read by id",
        description = "Read one item in full by id: a message (m_…), a memory entry (t_…) or a file chunk (chunk:<id> or c0001). A unique id prefix is enough.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<ReadOut>()
    )]
    async fn read(
        &self,
        Parameters(args): Parameters<ReadArgs>,
    ) -> Result<CallToolResult, McpError> {
        let id = args.id.trim().to_owned();
        if id.is_empty() {
            return Ok(tool_error("id: must not be empty"));
        }
        let key = id.clone();
        let found = self
            .with_store(move |store| {
                let s = store.state();
                let out = |item: Item, record: Value| {
                    Some(Ok(ReadOut {
                        item: item.into(),
                        record,
                    }))
                };
                if key.starts_with("m_") {
                    return Ok(match find_by_prefix(s.messages(), |m| &m.id, &key) {
                        Ok(m) => out(Item::message(m, None), message_record(m)?),
                        Err(e) => Some(Err(format!("id {key:?}: message: {e}"))),
                    });
                }
                if key.starts_with("t_") {
                    return Ok(match find_by_prefix(&s.truth.trust, |t| &t.id, &key) {
                        Ok(t) => out(Item::memory(t, None), truth_record(t)?),
                        Err(e) => Some(Err(format!("id {key:?}: memory entry: {e}"))),
                    });
                }
                // Ids kept from other tools need not start with m_/t_: an
                // exact match.
                if let Some(m) = s.message(&key) {
                    return Ok(out(Item::message(m, None), message_record(m)?));
                }
                if let Some(t) = s.truth.trust.iter().find(|t| t.id == key) {
                    return Ok(out(Item::memory(t, None), truth_record(t)?));
                }
                Ok(None)
            })
            .await?;
        match found {
            Some(Ok(r)) => return Ok(structured(&r)),
            Some(Err(e)) => return Ok(tool_error(e)),
            None => {}
        }
        let this = self.clone();
        tokio::task::spawn_blocking(move || -> Result<CallToolResult, McpError> {
            let Some(index) = this.open_index()? else {
                return Ok(tool_error(format!(
                    "id {id:?}: not a message (m_…) or memory entry (t_…) id, and there is no directory index for chunks (`wo index` builds one)"
                )));
            };
            let key = id.strip_prefix("chunk:").unwrap_or(&id);
            Ok(match index.get_chunk(key) {
                Some(rec) => {
                    let c = rec.chunk;
                    let read_id = format!("chunk:{}", c.short_id);
                    let title = format!("{}:{}-{}", c.path, c.start_line, c.end_line);
                    structured(&ReadOut {
                        item: Item::chunk(read_id.clone(), title, c.content.clone(), Some(c.path.clone()))
                            .into(),
                        record: serde_json::json!({"id": read_id, "ref": rec.chunk_ref,
                            "path": c.path, "start_line": c.start_line, "end_line": c.end_line}),
                    })
                }
                None => tool_error(format!("id {id:?}: no such message, memory entry or chunk")),
            })
        })
        .await
        .map_err(internal)?
    }

    #[tool(
        title = "Recent activity",
        description = "The latest conversation messages and the most recently added or changed memory entries, newest first on one timeline, as excerpts with ids for `read`. Page on with `cursor`.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<PageOut>()
    )]
    async fn recent(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<RecentArgs>,
    ) -> Result<CallToolResult, McpError> {
        let req = match PageRequest::new(args.cursor, args.budget, args.limit) {
            Ok(r) => r,
            Err(e) => return Ok(tool_error(e)),
        };
        let page = self
            .with_store(move |store| Ok(agent::recent(store.state(), &req)))
            .await?;
        Ok(match page.map(PageOut::from) {
            Ok(page) => with_links(structured(&page), &page, &ctx),
            Err(e) => tool_error(e),
        })
    }

    #[tool(
        title = "Remember",
        description = "Save a memory entry for later sessions. Only `content` is needed: the title defaults to its first sentence, the kind to note, the certainty to 0.7, tags to none. Kinds: fact, effort (an open task, closed with `resolve`), event, note. Do not save secrets.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema_for_output::<RememberOut>()
    )]
    async fn remember(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(a): Parameters<RememberArgs>,
    ) -> Result<CallToolResult, McpError> {
        let op = WriteOp::Remember {
            title: a.title,
            content: a.content,
            kind: a.kind.unwrap_or(KindArg::Note).into(),
            certainty: a.certainty.unwrap_or(write::DEFAULT_CERTAINTY),
            tags: a.tags,
        };
        self.write(&ctx, op, |v| {
            let mut out: RememberOut = serde_json::from_value(v).map_err(|e| e.to_string())?;
            out.uri = format!("{MEMORY_URI_PREFIX}{}", out.added);
            Ok(structured(&out))
        })
        .await
    }

    #[tool(
        title = "Resolve an effort",
        description = "Mark an open effort (task) as resolved, with how. Resolving one already resolved is refused.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<ResolveOut>()
    )]
    async fn resolve(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(a): Parameters<ResolveArgs>,
    ) -> Result<CallToolResult, McpError> {
        let op = WriteOp::Resolve {
            id: a.id.trim().to_owned(),
            resolution: a.resolution,
        };
        self.write(&ctx, op, |v| {
            let out: ResolveOut = serde_json::from_value(v).map_err(|e| e.to_string())?;
            Ok(structured(&out))
        })
        .await
    }

    #[tool(
        title = "Log an exchange",
        description = "Record a question and its answer from this session in the person's transcript (a conversation of its own), so WikiOracle can learn from it.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema_for_output::<LogExchangeOut>()
    )]
    async fn log_exchange(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(a): Parameters<LogExchangeArgs>,
    ) -> Result<CallToolResult, McpError> {
        let op = WriteOp::LogExchange {
            question: a.question,
            answer: a.answer,
            model: a.model,
        };
        self.write(&ctx, op, |v| {
            let out: LogExchangeOut = serde_json::from_value(v).map_err(|e| e.to_string())?;
            Ok(structured(&out))
        })
        .await
    }
}

/// A prompt's one argument: its name and description.
type PromptArg = Option<(&'static str, &'static str)>;

/// The prompts: (name, title, description, its one argument).
const PROMPTS: &[(&str, &str, &str, PromptArg)] = &[
    (
        "recall",
        "Recall what we know",
        "What the memory holds about a topic (its context, memory entries and earlier messages), with a request to summarise it citing ids.",
        Some(("topic", "What to recall.")),
    ),
    (
        "open_efforts",
        "Open efforts",
        "This project's open efforts (unfinished work in memory), with a request to summarise them and suggest what to do next.",
        None,
    ),
];

#[tool_handler]
impl rmcp::ServerHandler for WikiOracleMcp {
    fn get_info(&self) -> ServerConfig {
        let write = if self.opts.allow_write {
            "`remember` saves what should outlive this session (only `content` is needed), `resolve` closes an effort, `log_exchange` records a question and answer."
        } else {
            "This server is read-only (started without --allow-write): it lists no writing tools."
        };
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_prompts()
                .build(),
        )
        .with_server_info(
            Implementation::new("wikioracle", env!("CARGO_PKG_VERSION")).with_title("WikiOracle"),
        )
        .with_instructions(format!(
            "WikiOracle: the person's portable memory (llm.json) and the project's file index. \
             Call `context` with the task before working on the person's project, `search` for \
             words, `read` an id for the full text, `recent` for what happened lately. {write}"
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut r = ListToolsResult::with_all_items(self.listed_tools());
        if context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
        {
            // The list depends on this server's --allow-write: private to
            // it. (rmcp fills in the hints' defaults for the other lists.)
            r.cache_scope = Some(rmcp::model::CacheScope::Private);
            r.ttl_ms = Some(0);
        }
        Ok(r)
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.listed_tools().into_iter().find(|t| t.name == name)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let mut resources = vec![
            Resource::new(CONTEXT_URI, "context")
                .with_description("The person's standing context from llm.json (plain text).")
                .with_mime_type("text/plain"),
        ];
        if self.index_root().is_some() {
            resources.push(
                Resource::new(LLM_MD_URI, "llm.md")
                    .with_description("The directory index's llm.md: what the project's files are.")
                    .with_mime_type("text/markdown"),
            );
        }
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(format!("{MEMORY_URI_PREFIX}{{id}}"), "memory")
                .with_description("A memory entry by id (t_…): its title and plain text.")
                .with_mime_type("text/plain"),
            ResourceTemplate::new(format!("{MESSAGE_URI_PREFIX}{{id}}"), "message")
                .with_description("A message by id (m_…): its title and plain text.")
                .with_mime_type("text/plain"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri;
        let (text, mime) = if uri == CONTEXT_URI {
            let t = self
                .with_store(|store| Ok(to_plain_text(&store.state().context)))
                .await?;
            (t, "text/plain")
        } else if uri == LLM_MD_URI {
            let this = self.clone();
            let t = tokio::task::spawn_blocking(move || -> Result<String, McpError> {
                let Some(index) = this.open_index()? else {
                    return Err(McpError::resource_not_found(
                        "no directory index (`wo index` builds one)",
                        None,
                    ));
                };
                // `wo pack` writes llm.md into `.wo-pack`; without a pack,
                // the catalog the pack would start from. Read as a
                // project file: a link there (to a secret, to /dev/zero)
                // is refused, never served.
                match wo_store::durable::project::read_project_string(
                    index.root(),
                    std::path::Path::new(".wo-pack/llm.md"),
                    MAX_LLM_MD_BYTES,
                ) {
                    Ok(t) => Ok(t),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        wo_index::render_catalog(&index).map_err(internal)
                    }
                    Err(e) => Err(internal(e)),
                }
            })
            .await
            .map_err(internal)??;
            (t, "text/markdown")
        } else if let Some(id) = uri.strip_prefix(MEMORY_URI_PREFIX) {
            let id = id.to_owned();
            let t = self
                .with_store(move |store| {
                    store
                        .state()
                        .truth
                        .trust
                        .iter()
                        .find(|t| t.id == id)
                        .map(|t| resource_text(&t.title, &t.content))
                        .ok_or_else(|| {
                            McpError::resource_not_found(
                                format!("no memory entry {id:?} (`search` or `recent` list ids)"),
                                None,
                            )
                        })
                })
                .await?;
            (t, "text/plain")
        } else if let Some(id) = uri.strip_prefix(MESSAGE_URI_PREFIX) {
            let id = id.to_owned();
            let t = self
                .with_store(move |store| {
                    store
                        .state()
                        .message(&id)
                        .map(|m| resource_text(&m.title, &m.content))
                        .ok_or_else(|| {
                            McpError::resource_not_found(
                                format!("no message {id:?} (`search` or `recent` list ids)"),
                                None,
                            )
                        })
                })
                .await?;
            (t, "text/plain")
        } else {
            return Err(McpError::resource_not_found(
                format!(
                    "no resource {uri:?}; there are {CONTEXT_URI}, {LLM_MD_URI}, {MEMORY_URI_PREFIX}{{id}} and {MESSAGE_URI_PREFIX}{{id}}"
                ),
                None,
            ));
        };
        Ok(
            ReadResourceResult::new(vec![ResourceContents::text(text, uri).with_mime_type(mime)])
                .into(),
        )
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let prompts = PROMPTS
            .iter()
            .map(|(name, title, description, arg)| {
                let args = arg.map(|(n, d)| {
                    vec![
                        PromptArgument::new(n)
                            .with_description(d)
                            .with_required(true),
                    ]
                });
                Prompt::new(*name, Some(*description), args).with_title(*title)
            })
            .collect();
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let arg = |name: &str| -> Option<String> {
            request
                .arguments
                .as_ref()
                .and_then(|a| a.get(name))
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let (description, text) = match request.name.as_str() {
            "recall" => {
                let Some(topic) = arg("topic") else {
                    return Err(McpError::invalid_params(
                        "recall: the argument `topic` is required (what to recall)",
                        None,
                    ));
                };
                let this = self.clone();
                let t = topic.clone();
                let items = self
                    .with_store(move |store| {
                        let chunks = this.chunk_candidates(&t)?;
                        let req = PageRequest::new(None, None, Some(agent::MAX_PAGE_LIMIT))
                            .map_err(internal)?;
                        agent::context(store.state(), &t, &chunks)
                            .and_then(|items| agent::paginate(items, &req))
                            .map_err(|e| McpError::invalid_params(e, None))
                    })
                    .await?;
                (
                    format!("What the memory holds about {topic}"),
                    format!(
                        "Recall what we know about {topic}. Here is what WikiOracle's memory holds \
                         that is relevant (ids in brackets; `read` one for more):\n\n{}\n\n\
                         Summarise what we know, cite the ids you rely on, and say what is \
                         uncertain or missing.",
                        render_items(&items.items)
                    ),
                )
            }
            "open_efforts" => {
                let efforts = self
                    .with_store(|store| {
                        Ok(store
                            .state()
                            .truth
                            .trust
                            .iter()
                            .filter(|t| {
                                t.kind == Some(TruthKind::Effort)
                                    && t.status != Some(wo_format::EffortStatus::Resolved)
                            })
                            .map(|t| Item::memory(t, Some(agent::EXCERPT_CHARS)))
                            .collect::<Vec<_>>())
                    })
                    .await?;
                let list = if efforts.is_empty() {
                    "(no open efforts are recorded)".to_owned()
                } else {
                    render_items(&efforts)
                };
                (
                    "This project's open efforts".to_owned(),
                    format!(
                        "Summarise this project's open efforts and suggest what to do next. \
                         These are the open efforts in WikiOracle's memory:\n\n{list}\n\n\
                         When one is done, it can be closed with the `resolve` tool (if the \
                         server allows writing)."
                    ),
                )
            }
            other => {
                return Err(McpError::invalid_params(
                    format!("no prompt {other:?}; there are recall and open_efforts"),
                    None,
                ));
            }
        };
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
                .with_description(description)
                .into(),
        )
    }
}

/// The `format`s JSON Schema 2020-12 defines; schemars adds its own
/// (`uint`, `double`, `int64`…), which validators warn about or refuse.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Removes every `format` keyword outside [`STANDARD_FORMATS`] from a
/// schema (the bounds stay: `minimum` says what `uint` meant).
fn strip_private_formats(schema: &mut serde_json::Map<String, Value>) {
    if schema
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| !STANDARD_FORMATS.contains(&f))
    {
        schema.remove("format");
    }
    for child in schema.values_mut() {
        strip_in(child);
    }
}

fn strip_in(v: &mut Value) {
    match v {
        Value::Object(o) => strip_private_formats(o),
        Value::Array(a) => a.iter_mut().for_each(strip_in),
        _ => {}
    }
}

/// Items as a bulleted list for a prompt: `- [id] title: text`.
fn render_items(items: &[Item]) -> String {
    if items.is_empty() {
        return "(nothing relevant is recorded)".to_owned();
    }
    items
        .iter()
        .map(|i| {
            let id =
                i.id.as_deref()
                    .map(|id| format!("[{id}] "))
                    .unwrap_or_default();
            format!("- {id}{}: {}", i.title, i.text.replace('\n', " "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}
