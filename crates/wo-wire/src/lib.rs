//! The HTTP wire of WikiOracle, in one place: every route ([`routes`]),
//! every JSON body a client sends or receives ([`chat`], [`api`]), the
//! Server-Sent Events of a turn ([`chat::ServerEvent`]), the error body
//! ([`error::ErrorBody`]) and how a client applies a stateless turn's
//! `state_patch` ([`patch`]), and the OpenAI-compatible endpoint's bodies
//! ([`openai`]).
//!
//! The server (`wo-server`), the `wikioracle` provider (`wo-providers`) and
//! the tests all speak through these types, so a field renamed here is
//! renamed for each of them at once; the served `openapi.json` is checked
//! against them (each type derives its JSON Schema) by wo-server's
//! `tests/openapi.rs`. This crate does no I/O and knows no framework.

#![deny(missing_docs)]

pub mod api;
pub mod chat;
pub mod error;
pub mod openai;
pub mod patch;
pub mod routes;

pub use chat::{
    ChatParams, ChatRequest, ChatRole, ContextReport, DeltaEvent, DoneEvent, EVENT_CONTEXT,
    EVENT_DELTA, EVENT_DONE, EVENT_ERROR, EVENT_MEMORY, ErrorEvent, FileChunk, MemoryEvent,
    ServerEvent, StatelessChatRequest, TruthEntry, Usage, WindowMessage, write_delta_frame,
};
pub use error::{ErrorBody, ErrorDetail};
pub use patch::{apply_merge_patch, apply_state_patch};
pub use routes::{HEALTH_PATH, Method, Mode, ROUTES, Route, STATELESS_CHAT_PATH};

/// The JSON Schema of every wire type, by the name its component has in
/// the OpenAPI document (`#/components/schemas/<name>`): what wo-server's
/// `tests/openapi.rs` holds the served document to.
pub fn schemas() -> Vec<(&'static str, schemars::Schema)> {
    use schemars::schema_for;
    vec![
        ("Error", schema_for!(ErrorBody)),
        ("TruthEntry", schema_for!(chat::TruthEntry)),
        ("WindowMessage", schema_for!(chat::WindowMessage)),
        ("FileChunk", schema_for!(chat::FileChunk)),
        ("ChatParams", schema_for!(ChatParams)),
        ("ChatRequest", schema_for!(ChatRequest)),
        ("StatelessChatRequest", schema_for!(StatelessChatRequest)),
        ("ContextReport", schema_for!(ContextReport)),
        ("DeltaEvent", schema_for!(DeltaEvent)),
        ("DoneEvent", schema_for!(DoneEvent)),
        ("ErrorEvent", schema_for!(ErrorEvent)),
        ("MemoryEvent", schema_for!(MemoryEvent)),
        ("Usage", schema_for!(Usage)),
        ("StatePatch", schema_for!(api::StatePatch)),
        ("StatePatched", schema_for!(api::StatePatched)),
        ("NewTruth", schema_for!(api::NewTruth)),
        ("TruthEdit", schema_for!(api::TruthEdit)),
        ("TruthDeleted", schema_for!(api::TruthDeleted)),
        ("MessageEdit", schema_for!(api::MessageEdit)),
        ("MessageRenamed", schema_for!(api::MessageRenamed)),
        ("MarkdownRequest", schema_for!(api::MarkdownRequest)),
        ("MarkdownConverted", schema_for!(api::MarkdownConverted)),
        ("MemoryUndo", schema_for!(api::MemoryUndo)),
        ("MemoryUndone", schema_for!(api::MemoryUndone)),
        ("StatelessMemoryUndo", schema_for!(api::StatelessMemoryUndo)),
        (
            "StatelessMemoryUndone",
            schema_for!(api::StatelessMemoryUndone),
        ),
        ("StatelessStopped", schema_for!(api::StatelessStopped)),
        ("StatelessKept", schema_for!(api::StatelessKept)),
        ("DraftRequest", schema_for!(api::DraftRequest)),
        ("ApplyRequest", schema_for!(api::ApplyRequest)),
        ("ContextApplied", schema_for!(api::ContextApplied)),
        ("MergeReport", schema_for!(api::MergeReport)),
        ("Health", schema_for!(api::Health)),
        ("Info", schema_for!(api::Info)),
        ("InfoLimits", schema_for!(api::InfoLimits)),
        ("ProviderList", schema_for!(api::ProviderList)),
        ("ProviderRow", schema_for!(api::ProviderRow)),
        ("StatePage", schema_for!(api::StatePage<'static>)),
        ("ConversationList", schema_for!(api::ConversationList)),
        ("ConversationSummary", schema_for!(api::ConversationSummary)),
        ("SearchResults", schema_for!(api::SearchResults)),
        ("MessageHit", schema_for!(api::MessageHit)),
        ("TruthHit", schema_for!(api::TruthHit)),
        ("ErrorDetail", schema_for!(ErrorDetail)),
        ("ChatRole", schema_for!(ChatRole)),
        ("OpenAiChatRequest", schema_for!(openai::OpenAiChatRequest)),
        (
            "OpenAiStreamOptions",
            schema_for!(openai::OpenAiStreamOptions),
        ),
        ("OpenAiRole", schema_for!(openai::OpenAiRole)),
        ("OpenAiMessage", schema_for!(openai::OpenAiMessage)),
        ("OpenAiContent", schema_for!(openai::OpenAiContent)),
        ("OpenAiContentPart", schema_for!(openai::OpenAiContentPart)),
        ("OpenAiUsage", schema_for!(openai::OpenAiUsage)),
        (
            "OpenAiChatCompletion",
            schema_for!(openai::OpenAiChatCompletion),
        ),
        ("OpenAiChoice", schema_for!(openai::OpenAiChoice)),
        (
            "OpenAiAssistantMessage",
            schema_for!(openai::OpenAiAssistantMessage),
        ),
        ("OpenAiChunk", schema_for!(openai::OpenAiChunk)),
        ("OpenAiChunkChoice", schema_for!(openai::OpenAiChunkChoice)),
        ("OpenAiDelta", schema_for!(openai::OpenAiDelta)),
        ("OpenAiModelList", schema_for!(openai::OpenAiModelList)),
        ("OpenAiModel", schema_for!(openai::OpenAiModel)),
        ("OpenAiError", schema_for!(openai::OpenAiError)),
        ("OpenAiErrorDetail", schema_for!(openai::OpenAiErrorDetail)),
    ]
}

/// The SSE events of a turn, in the order they come, with the schema
/// name of each payload.
pub const EVENTS: &[(&str, &str)] = &[
    (EVENT_CONTEXT, "ContextReport"),
    (EVENT_DELTA, "DeltaEvent"),
    (EVENT_DONE, "DoneEvent"),
    (EVENT_MEMORY, "MemoryEvent"),
    (EVENT_ERROR, "ErrorEvent"),
];
