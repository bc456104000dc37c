//! The MCP server: tools (`context`, `search`, `read`, `recent`, and with
//! `--allow-write` `remember`, `resolve`, `log_exchange`) and resources
//! (`wikioracle://context`, `wikioracle://llm.md`). The store is held behind
//! a mutex and refreshed before each read, so writes by `wo ask`, `wo truth
//! add` or an editor show up at once; every call runs on a blocking thread
//! because the store and the index do file I/O.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    AnnotateAble, CallToolResult, Content, Implementation, ListResourcesResult,
    PaginatedRequestParam, RawResource, ReadResourceRequestParam, ReadResourceResult,
    ResourceContents, ServerCapabilities, ServerInfo,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use wo_format::TruthKind;
use wo_format::query::find_by_prefix;
use wo_format::xhtml::to_plain_text;
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
const DEFAULT_BUDGET: usize = 4096;
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

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextArgs {
    /// The question the context is for.
    pub query: String,
    /// Token budget for the whole prompt (default 4096).
    pub budget: Option<usize>,
    /// Leave out chunks of the directory index.
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
    /// Hits per scope, 1..=100 (default 10).
    pub limit: Option<usize>,
    /// Which of truth, messages, chunks to search (default all).
    pub scopes: Option<Vec<Scope>>,
    /// Truth: only entries with at least this certainty.
    pub min_certainty: Option<f64>,
    /// Truth: only entries of this kind (fact, effort, event, note).
    pub kind: Option<KindArg>,
    /// Truth: only entries carrying this tag.
    pub tag: Option<String>,
    /// Chunks: only files whose path starts with this.
    pub path_prefix: Option<String>,
    /// Chunks: only this kind of chunk (e.g. code, markdown).
    pub chunk_kind: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum KindArg {
    Fact,
    Effort,
    Event,
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

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// A message id (m_…), truth id (t_…), or chunk (chunk:<id>, c0001); a unique prefix is enough.
    pub id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecentArgs {
    /// How many messages and memories, 1..=100 (default 10).
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RememberArgs {
    /// A short title.
    pub title: String,
    /// The memory itself (Markdown).
    pub content: String,
    /// fact, effort (an open task), event or note.
    pub kind: KindArg,
    /// How sure, 0..=1.
    pub certainty: f64,
    /// Tags.
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
    /// The model that answered.
    pub model: Option<String>,
}

fn json_result(v: Value) -> CallToolResult {
    CallToolResult::success(vec![Content::text(
        serde_json::to_string_pretty(&v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}")),
    )])
}

fn tool_error(msg: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![Content::text(msg.into())])
}

fn internal(e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(e.to_string(), None)
}

/// The `limit` best positive scores, best first (ties: file order).
fn top(scores: &[f64], limit: usize, keep: impl Fn(usize) -> bool) -> Vec<(usize, f64)> {
    let mut hits: Vec<(usize, f64)> = scores
        .iter()
        .copied()
        .enumerate()
        .filter(|&(i, s)| s > 0.0 && keep(i))
        .collect();
    hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    hits.truncate(limit);
    hits
}

fn excerpt(xhtml: &str, max: usize) -> String {
    let text = to_plain_text(xhtml);
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(max).collect();
    s.push('…');
    s
}

fn truth_json(t: &wo_format::TruthEntry) -> Value {
    let mut v = serde_json::to_value(t).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.insert("text".into(), Value::String(to_plain_text(&t.content)));
    }
    v
}

impl WikiOracleMcp {
    /// Opens the state file (it must exist: `wo init` creates one).
    pub fn open(opts: McpOptions) -> anyhow::Result<Self> {
        let store = Store::open(&opts.state, opts.open.clone()).map_err(|e| {
            anyhow::anyhow!("{e}\nhint: `wo init` creates llm.json, or pass --state PATH")
        })?;
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
        peer: &Peer<RoleServer>,
        op: WriteOp,
    ) -> Result<CallToolResult, McpError> {
        if !self.opts.allow_write {
            return Ok(tool_error(
                "refused: this server is read-only; start it with `wo mcp --allow-write` (over HTTP: `wo serve --mcp-allow-write`) to let clients write memories",
            ));
        }
        let by = peer
            .peer_info()
            .map(|i| i.client_info.name.clone())
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| "mcp-client".to_owned());
        self.with_store(move |store| {
            Ok(match write::apply(store, op, &by) {
                Ok(v) => json_result(v),
                Err(e) => tool_error(e),
            })
        })
        .await
    }

    fn context_text(&self, store: &Store, args: ContextArgs) -> Result<Value, String> {
        use wo_engine::assemble::{AssemblyOptions, assemble, estimate_tokens};
        let budget = args.budget.unwrap_or(DEFAULT_BUDGET);
        if budget == 0 {
            return Err("budget: must be at least 1".into());
        }
        let state = store.state();
        let chunks = if args.no_files {
            Vec::new()
        } else {
            match self.open_index().map_err(|e| e.message.to_string())? {
                Some(i) => wo_engine::files::relevant_chunks(&i, &args.query),
                None => Vec::new(),
            }
        };
        let mut opts = AssemblyOptions::new(state, budget, 0);
        opts.rag = !args.no_files;
        let a = assemble(state, &args.query, &opts, &estimate_tokens, &chunks)
            .map_err(|e| format!("query: {e}"))?;
        let e = wo_engine::explain::explain(state, &a);
        serde_json::to_value(&e).map_err(|e| e.to_string())
    }
}

#[tool_router]
impl WikiOracleMcp {
    #[tool(
        description = "What WikiOracle would send a model for this question within a token budget: instructions, relevant memory entries, recalled messages and file chunks, with their ids."
    )]
    async fn context(
        &self,
        Parameters(args): Parameters<ContextArgs>,
    ) -> Result<CallToolResult, McpError> {
        let this = self.clone();
        self.with_store(move |store| {
            Ok(match this.context_text(store, args) {
                Ok(v) => json_result(v),
                Err(e) => tool_error(e),
            })
        })
        .await
    }

    #[tool(
        description = "Search the person's memory entries, past conversation messages and the project's indexed files (BM25). Results carry ids for `read`."
    )]
    async fn search(
        &self,
        Parameters(args): Parameters<SearchArgs>,
    ) -> Result<CallToolResult, McpError> {
        let limit = args.limit.unwrap_or(10);
        if !(1..=100).contains(&limit) {
            return Ok(tool_error(format!("limit: {limit} is outside 1..=100")));
        }
        if let Some(c) = args.min_certainty
            && !(0.0..=1.0).contains(&c)
        {
            return Ok(tool_error(format!("min_certainty: {c} is outside 0..=1")));
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
        let text = args.query.clone();
        let (s_truth, s_msgs) = (
            scopes.contains(&Scope::Truth),
            scopes.contains(&Scope::Messages),
        );
        let (truth, messages) = self
            .with_store(move |store| {
                let s = store.state();
                let mut truth = Vec::new();
                if s_truth {
                    let docs: Vec<wo_engine::bm25::Doc> = s
                        .truth
                        .trust
                        .iter()
                        .map(|t| wo_engine::bm25::Doc { plain: &t.title, xhtml: &t.content })
                        .collect();
                    let kind = args.kind.map(TruthKind::from);
                    let keep = |i: usize| {
                        let t = &s.truth.trust[i];
                        args.min_certainty.is_none_or(|c| t.certainty >= c)
                            && kind.is_none_or(|k| t.kind == Some(k))
                            && args.tag.as_ref().is_none_or(|tag| {
                                t.tags.as_ref().is_some_and(|ts| ts.iter().any(|x| x == tag))
                            })
                    };
                    for (i, score) in top(&wo_engine::bm25::scores_docs(&docs, &text), limit, keep) {
                        let t = &s.truth.trust[i];
                        truth.push(json!({"id": t.id, "title": t.title, "kind": t.kind,
                            "certainty": t.certainty, "tags": t.tags, "score": score,
                            "excerpt": excerpt(&t.content, 200)}));
                    }
                }
                let mut messages = Vec::new();
                if s_msgs {
                    let docs: Vec<wo_engine::bm25::Doc> = s
                        .messages()
                        .iter()
                        .map(|m| wo_engine::bm25::Doc { plain: &m.title, xhtml: &m.content })
                        .collect();
                    for (i, score) in top(&wo_engine::bm25::scores_docs(&docs, &text), limit, |_| true) {
                        let m = &s.messages()[i];
                        messages.push(json!({"id": m.id, "title": m.title, "username": m.username,
                            "timestamp": m.timestamp, "score": score, "excerpt": excerpt(&m.content, 200)}));
                    }
                }
                Ok((truth, messages))
            })
            .await?;
        let mut chunks = Value::Array(Vec::new());
        if scopes.contains(&Scope::Chunks) {
            let this = self.clone();
            let q = args.query.clone();
            let prefix = args.path_prefix.clone();
            chunks = tokio::task::spawn_blocking(move || -> Result<Value, McpError> {
                let Some(index) = this.open_index()? else {
                    return Ok(json!([]));
                };
                let mut query = wo_index::Query::new(q);
                query.limit = limit;
                query.path_prefix = prefix;
                query.kind = chunk_kind;
                let hits: Vec<Value> = index
                    .search(&query)
                    .into_iter()
                    .map(|h| {
                        let mut v = serde_json::to_value(&h).unwrap_or(Value::Null);
                        if let (Some(o), Some(rec)) =
                            (v.as_object_mut(), index.get_chunk(&h.chunk_ref))
                        {
                            o.insert(
                                "read_id".into(),
                                json!(format!("chunk:{}", rec.chunk.short_id)),
                            );
                        }
                        v
                    })
                    .collect();
                Ok(Value::Array(hits))
            })
            .await
            .map_err(internal)??;
        }
        Ok(json_result(
            json!({"truth": truth, "messages": messages, "chunks": chunks}),
        ))
    }

    #[tool(
        description = "Read one item in full by id: a message (m_…), a memory entry (t_…) or a file chunk (chunk:<id> or c0001). A unique id prefix is enough."
    )]
    async fn read(
        &self,
        Parameters(args): Parameters<ReadArgs>,
    ) -> Result<CallToolResult, McpError> {
        let id = args.id.trim().to_owned();
        if id.is_empty() {
            return Ok(tool_error("id: must not be empty"));
        }
        if id.starts_with("m_") || id.starts_with("t_") {
            return self
                .with_store(move |store| {
                    let s = store.state();
                    Ok(if id.starts_with("m_") {
                        match find_by_prefix(s.messages(), |m| &m.id, &id) {
                            Ok(m) => {
                                let mut v = serde_json::to_value(m).map_err(internal)?;
                                v["text"] = Value::String(to_plain_text(&m.content));
                                json_result(v)
                            }
                            Err(e) => tool_error(format!("id {id:?}: message: {e}")),
                        }
                    } else {
                        match find_by_prefix(&s.truth.trust, |t| &t.id, &id) {
                            Ok(t) => json_result(truth_json(t)),
                            Err(e) => tool_error(format!("id {id:?}: memory entry: {e}")),
                        }
                    })
                })
                .await;
        }
        // Ids kept from other tools need not start with m_/t_: an exact match.
        if !id.starts_with("chunk:") {
            let key = id.clone();
            let found = self
                .with_store(move |store| {
                    let s = store.state();
                    if let Some(m) = s.message(&key) {
                        let mut v = serde_json::to_value(m).map_err(internal)?;
                        v["text"] = Value::String(to_plain_text(&m.content));
                        return Ok(Some(json_result(v)));
                    }
                    Ok(s.truth
                        .trust
                        .iter()
                        .find(|t| t.id == key)
                        .map(|t| json_result(truth_json(t))))
                })
                .await?;
            if let Some(r) = found {
                return Ok(r);
            }
        }
        let this = self.clone();
        tokio::task::spawn_blocking(move || -> Result<CallToolResult, McpError> {
            let Some(index) = this.open_index()? else {
                return Ok(tool_error(format!(
                    "id {id:?}: not a message (m_…) or truth (t_…) id, and there is no directory index for chunks (`wo index` builds one)"
                )));
            };
            let key = id.strip_prefix("chunk:").unwrap_or(&id);
            Ok(match index.get_chunk(key) {
                Some(rec) => json_result(json!({
                    "id": format!("chunk:{}", rec.chunk.short_id), "ref": rec.chunk_ref,
                    "path": rec.chunk.path, "start_line": rec.chunk.start_line,
                    "end_line": rec.chunk.end_line, "content": rec.chunk.content})),
                None => tool_error(format!("id {id:?}: no such message, memory entry or chunk")),
            })
        })
        .await
        .map_err(internal)?
    }

    #[tool(
        description = "The latest conversation messages and the most recently added or changed memory entries, newest first."
    )]
    async fn recent(
        &self,
        Parameters(args): Parameters<RecentArgs>,
    ) -> Result<CallToolResult, McpError> {
        let limit = args.limit.unwrap_or(10);
        if !(1..=100).contains(&limit) {
            return Ok(tool_error(format!("limit: {limit} is outside 1..=100")));
        }
        self.with_store(move |store| {
            let s = store.state();
            let messages: Vec<Value> = s
                .messages()
                .iter()
                .rev()
                .take(limit)
                .map(|m| {
                    json!({"id": m.id, "username": m.username, "timestamp": m.timestamp,
                    "title": m.title, "excerpt": excerpt(&m.content, 300)})
                })
                .collect();
            let mut truth: Vec<&wo_format::TruthEntry> = s.truth.trust.iter().collect();
            truth.sort_by(|a, b| b.effective_update().cmp(a.effective_update()));
            let truth: Vec<Value> = truth
                .into_iter()
                .take(limit)
                .map(|t| {
                    json!({"id": t.id, "title": t.title, "kind": t.kind, "status": t.status,
                    "certainty": t.certainty, "updated": t.effective_update(),
                    "excerpt": excerpt(&t.content, 300)})
                })
                .collect();
            Ok(json_result(json!({"messages": messages, "truth": truth})))
        })
        .await
    }

    #[tool(
        description = "Save a memory entry for later sessions: a fact, an effort (open task), an event or a note, with certainty 0..1 and tags. Needs `wo mcp --allow-write` (or `wo serve --mcp-allow-write`)."
    )]
    async fn remember(
        &self,
        peer: Peer<RoleServer>,
        Parameters(a): Parameters<RememberArgs>,
    ) -> Result<CallToolResult, McpError> {
        let op = WriteOp::Remember {
            title: a.title,
            content: a.content,
            kind: a.kind.into(),
            certainty: a.certainty,
            tags: a.tags,
        };
        self.write(&peer, op).await
    }

    #[tool(
        description = "Mark an open effort (task) as resolved, with how. Needs `wo mcp --allow-write` (or `wo serve --mcp-allow-write`)."
    )]
    async fn resolve(
        &self,
        peer: Peer<RoleServer>,
        Parameters(a): Parameters<ResolveArgs>,
    ) -> Result<CallToolResult, McpError> {
        let op = WriteOp::Resolve {
            id: a.id.trim().to_owned(),
            resolution: a.resolution,
        };
        self.write(&peer, op).await
    }

    #[tool(
        description = "Record a question and its answer from this session in the person's transcript, so WikiOracle can learn from it. Needs `wo mcp --allow-write` (or `wo serve --mcp-allow-write`)."
    )]
    async fn log_exchange(
        &self,
        peer: Peer<RoleServer>,
        Parameters(a): Parameters<LogExchangeArgs>,
    ) -> Result<CallToolResult, McpError> {
        let op = WriteOp::LogExchange {
            question: a.question,
            answer: a.answer,
            model: a.model,
        };
        self.write(&peer, op).await
    }
}

#[tool_handler]
impl rmcp::ServerHandler for WikiOracleMcp {
    fn get_info(&self) -> ServerInfo {
        let write = if self.opts.allow_write {
            "remember/resolve/log_exchange write to it."
        } else {
            "This server is read-only (remember/resolve/log_exchange are refused)."
        };
        ServerInfo {
            instructions: Some(format!(
                "WikiOracle: the person's portable memory (llm.json) and the project's file index. \
                 Call `context` or `search` before answering questions about the person or project; \
                 `read` an id for the full text. {write}"
            )),
            capabilities: ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
            server_info: Implementation {
                name: "wikioracle".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                ..Implementation::from_build_env()
            },
            ..Default::default()
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParam>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let mut ctx = RawResource::new(CONTEXT_URI, "context");
        ctx.description = Some("The person's standing context from llm.json (plain text).".into());
        ctx.mime_type = Some("text/plain".into());
        let mut resources = vec![ctx.no_annotation()];
        if self.index_root().is_some() {
            let mut md = RawResource::new(LLM_MD_URI, "llm.md");
            md.description =
                Some("The directory index's llm.md: what the project's files are.".into());
            md.mime_type = Some("text/markdown".into());
            resources.push(md.no_annotation());
        }
        Ok(ListResourcesResult {
            resources,
            next_cursor: None,
        })
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParam,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResult, McpError> {
        let uri = request.uri;
        let text = match uri.as_str() {
            CONTEXT_URI => {
                self.with_store(|store| Ok(to_plain_text(&store.state().context)))
                    .await?
            }
            LLM_MD_URI => {
                let this = self.clone();
                tokio::task::spawn_blocking(move || -> Result<String, McpError> {
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
                .map_err(internal)??
            }
            other => {
                return Err(McpError::resource_not_found(
                    format!("no resource {other:?}; there are {CONTEXT_URI} and {LLM_MD_URI}"),
                    None,
                ));
            }
        };
        Ok(ReadResourceResult {
            contents: vec![ResourceContents::text(text, uri)],
        })
    }
}
