//! Every route the server answers, with the mode that serves it. The
//! server's router is built from these paths, the OpenAPI document must list
//! exactly these (checked by wo-server's `tests/openapi.rs`), and clients
//! name paths through the constants rather than by hand.

/// Which kind of server answers a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Both a local and a stateless server.
    Both,
    /// Only a local server (it owns an `llm.json`).
    Local,
    /// Only a stateless server (it keeps nothing).
    Stateless,
}

impl Mode {
    /// Whether a server running in `local` (true) or stateless (false)
    /// mode answers a route of this mode.
    pub fn served_by(self, local: bool) -> bool {
        match self {
            Mode::Both => true,
            Mode::Local => local,
            Mode::Stateless => !local,
        }
    }
}

/// An HTTP method of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `GET`.
    Get,
    /// `POST`.
    Post,
    /// `PATCH`.
    Patch,
    /// `DELETE`.
    Delete,
}

impl Method {
    /// The lowercase name, as OpenAPI's path items spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "get",
            Method::Post => "post",
            Method::Patch => "patch",
            Method::Delete => "delete",
        }
    }
}

/// One route: method, path (axum's `{param}` syntax, as OpenAPI writes it),
/// the mode that serves it, and the names of its JSON bodies' schemas
/// ([`crate::schemas`]; the OpenAPI document must name the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The method.
    pub method: Method,
    /// The path template.
    pub path: &'static str,
    /// Who serves it.
    pub mode: Mode,
    /// The JSON request body's schema, if the route takes one.
    pub request: Option<&'static str>,
    /// The success answer: a JSON schema's name, [`STREAM`] for the SSE
    /// answer of a turn, or `None` for a body that is not a wire type (a
    /// file, a download, an engine or index record).
    pub response: Option<&'static str>,
}

/// [`Route::response`] of a turn: Server-Sent Events ([`crate::EVENTS`]).
pub const STREAM: &str = "Stream";

/// `GET`: liveness (answers 200 when the server is up).
pub const HEALTH_PATH: &str = "/api/health";
/// `GET`: this document's subject, the API described.
pub const OPENAPI_PATH: &str = "/api/openapi.json";
/// `GET`: mode, version, limits ([`crate::api::Info`]).
pub const INFO_PATH: &str = "/api/info";
/// `GET`: the providers a client may choose ([`crate::api::ProviderList`]).
pub const PROVIDERS_PATH: &str = "/api/providers";
/// `GET` a page of the state, `PATCH` its context and retrieval prefs.
pub const STATE_PATH: &str = "/api/state";
/// `POST`: a new truth entry ([`crate::api::NewTruth`]).
pub const TRUTH_PATH: &str = "/api/truth";
/// `PATCH` / `DELETE` one truth entry.
pub const TRUTH_ENTRY_PATH: &str = "/api/truth/{id}";
/// `POST`: a turn on the local server's state ([`crate::ChatRequest`], SSE).
pub const CHAT_PATH: &str = "/api/chat";
/// A message of the transcript (its title).
pub const MESSAGE_PATH: &str = "/api/messages/{id}";
/// Markdown → the sanitised XHTML the server stores.
pub const MARKDOWN_PATH: &str = "/api/markdown";
/// `POST`: an export to merge (a whole `llm.json`).
pub const MERGE_PATH: &str = "/api/merge";
/// `GET`: the whole state as a download.
pub const EXPORT_PATH: &str = "/api/export";
/// `GET`: every conversation of the file, a page at a time, newest first
/// ([`crate::api::ConversationList`]).
pub const CONVERSATIONS_PATH: &str = "/api/conversations";
/// `GET`: BM25 over messages, truth and the directory index.
pub const SEARCH_PATH: &str = "/api/search";
/// `GET`: one chunk of the directory index.
pub const CHUNK_PATH: &str = "/api/chunks/{ref}";
/// `POST`: a proposed context ([`crate::api::DraftRequest`]).
pub const CONTEXT_DRAFT_PATH: &str = "/api/context/draft";
/// `POST`: saves a reviewed context draft ([`crate::api::ApplyRequest`]).
pub const CONTEXT_APPLY_PATH: &str = "/api/context/apply";
/// `POST`: undoes one exchange's memory operations ([`crate::api::MemoryUndo`]).
pub const MEMORY_UNDO_PATH: &str = "/api/memory/undo";
/// `POST`: a stateless client's undo of one exchange's memory operations
/// ([`crate::api::StatelessMemoryUndo`]).
pub const STATELESS_MEMORY_UNDO_PATH: &str = "/api/stateless/memory/undo";
/// `POST`: the patch that keeps a stateless turn its reader stopped
/// ([`crate::api::StatelessStopped`]).
pub const STATELESS_STOPPED_PATH: &str = "/api/stateless/stopped";
/// `POST`: a stateless turn ([`crate::StatelessChatRequest`], SSE).
pub const STATELESS_CHAT_PATH: &str = "/api/stateless/chat";
/// `GET`: the models an OpenAI client may name
/// ([`crate::openai::OpenAiModelList`]).
pub const OPENAI_MODELS_PATH: &str = "/v1/models";
/// `POST`: an OpenAI chat completion with the person's memory
/// ([`crate::openai::OpenAiChatRequest`]; JSON or `chat.completion.chunk`
/// frames).
pub const OPENAI_CHAT_PATH: &str = "/v1/chat/completions";
/// `POST`/`GET`/`DELETE`: the Model Context Protocol over streamable HTTP
/// (JSON-RPC; the MCP specification defines the bodies).
pub const MCP_PATH: &str = "/mcp";
/// Paths under this prefix answer errors in OpenAI's shape
/// ([`crate::openai::OpenAiError`]).
pub const OPENAI_PREFIX: &str = "/v1/";

const fn route(
    method: Method,
    path: &'static str,
    mode: Mode,
    request: Option<&'static str>,
    response: Option<&'static str>,
) -> Route {
    Route {
        method,
        path,
        mode,
        request,
        response,
    }
}

use Method::{Delete, Get, Patch, Post};
use Mode::{Both, Local, Stateless};

/// Every route of the API (the web client's files under `/` are not API).
pub const ROUTES: &[Route] = &[
    route(Get, HEALTH_PATH, Both, None, Some("Health")),
    route(Get, OPENAPI_PATH, Both, None, None),
    route(Get, INFO_PATH, Both, None, Some("Info")),
    route(Get, PROVIDERS_PATH, Both, None, Some("ProviderList")),
    // The draft is the engine's record (`wo_engine::context_update::Draft`).
    route(Post, CONTEXT_DRAFT_PATH, Both, Some("DraftRequest"), None),
    route(
        Post,
        MARKDOWN_PATH,
        Both,
        Some("MarkdownRequest"),
        Some("MarkdownConverted"),
    ),
    route(Get, STATE_PATH, Local, None, Some("StatePage")),
    route(
        Patch,
        STATE_PATH,
        Local,
        Some("StatePatch"),
        Some("StatePatched"),
    ),
    route(
        Post,
        TRUTH_PATH,
        Local,
        Some("NewTruth"),
        Some("TruthEntry"),
    ),
    route(
        Patch,
        TRUTH_ENTRY_PATH,
        Local,
        Some("TruthEdit"),
        Some("TruthEntry"),
    ),
    route(Delete, TRUTH_ENTRY_PATH, Local, None, Some("TruthDeleted")),
    route(
        Patch,
        MESSAGE_PATH,
        Local,
        Some("MessageEdit"),
        Some("MessageRenamed"),
    ),
    route(
        Post,
        STATELESS_MEMORY_UNDO_PATH,
        Stateless,
        Some("StatelessMemoryUndo"),
        Some("StatelessMemoryUndone"),
    ),
    route(
        Post,
        MEMORY_UNDO_PATH,
        Local,
        Some("MemoryUndo"),
        Some("MemoryUndone"),
    ),
    route(Post, CHAT_PATH, Local, Some("ChatRequest"), Some(STREAM)),
    // The upload is a whole llm.json, held to the file format's rules.
    route(Post, MERGE_PATH, Local, None, Some("MergeReport")),
    route(Get, EXPORT_PATH, Local, None, None),
    route(Get, SEARCH_PATH, Local, None, Some("SearchResults")),
    route(
        Get,
        CONVERSATIONS_PATH,
        Local,
        None,
        Some("ConversationList"),
    ),
    // A chunk is the index's record (`wo_index`).
    route(Get, CHUNK_PATH, Local, None, None),
    route(
        Post,
        CONTEXT_APPLY_PATH,
        Local,
        Some("ApplyRequest"),
        Some("ContextApplied"),
    ),
    route(
        Post,
        STATELESS_CHAT_PATH,
        Stateless,
        Some("StatelessChatRequest"),
        Some(STREAM),
    ),
    route(
        Post,
        STATELESS_STOPPED_PATH,
        Stateless,
        Some("StatelessStopped"),
        Some("StatelessKept"),
    ),
    route(
        Get,
        OPENAI_MODELS_PATH,
        Local,
        None,
        Some("OpenAiModelList"),
    ),
    // With `"stream": true` the answer is `chat.completion.chunk` frames.
    route(
        Post,
        OPENAI_CHAT_PATH,
        Local,
        Some("OpenAiChatRequest"),
        Some("OpenAiChatCompletion"),
    ),
    // JSON-RPC messages of the MCP specification, not wire types.
    route(Post, MCP_PATH, Local, None, None),
    route(Get, MCP_PATH, Local, None, None),
    route(Delete, MCP_PATH, Local, None, None),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_operation_is_listed_once_and_names_known_schemas() {
        let names: Vec<&str> = crate::schemas().iter().map(|(n, _)| *n).collect();
        for (i, r) in ROUTES.iter().enumerate() {
            assert!(
                !ROUTES[..i]
                    .iter()
                    .any(|o| o.path == r.path && o.method == r.method),
                "{} {} listed twice",
                r.method.as_str(),
                r.path
            );
            for name in r.request.iter().chain(r.response.iter()) {
                assert!(
                    *name == STREAM || names.contains(name),
                    "{} {}: {name} is not in schemas()",
                    r.method.as_str(),
                    r.path
                );
            }
        }
        // A path shared by two operations is served by one mode.
        for r in ROUTES {
            assert!(
                ROUTES
                    .iter()
                    .filter(|o| o.path == r.path)
                    .all(|o| o.mode == r.mode),
                "{}",
                r.path
            );
        }
    }
}
