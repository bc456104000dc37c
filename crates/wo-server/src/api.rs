//! The JSON API handlers. Each takes its body through an extractor of
//! [`crate::extract`] (size limit, timeout, JSON errors with pointers), calls
//! the engine or the store, and answers a `wo_wire` type; the logic they
//! share with the CLI lives in the library crates. Handlers of both modes
//! are generic over [`Mode`]; local-only ones take [`Local`] and reach the
//! one store through [`Local::with_store`]; a chat turn is the engine's,
//! run through [`crate::turn`] (the stateless one's input is read in
//! [`crate::stateless`]).

use std::borrow::Cow;
use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use wo_engine::chat::stream_answer;
use wo_format::xhtml::{ContentFormat, sanitize_html, to_xhtml};
use wo_format::{Timestamp, TruthEdit, TruthEntry};
use wo_wire::api as wire;

use crate::app::{App, Local, Mode, Stateless};
use crate::error::ApiError;
use crate::extract::{JsonBody, Upload};
use crate::setup::{chat_turn_request, check_prefs, client_chunks, regenerating, set_up_local};
use crate::turn::LocalTurn;

type AppState = State<Arc<Local>>;

/// `GET /api/health`: liveness, and how many blocking jobs (sanitising,
/// parsing, state file work) are waiting or running.
pub async fn health<M: Mode>(State(app): State<Arc<M>>) -> Json<wire::Health> {
    Json(wire::Health {
        status: "ok".into(),
        mode: app.mode().into(),
        version: env!("CARGO_PKG_VERSION").into(),
        busy: app.busy(),
    })
}

/// `GET /api/info`: what the web client needs to know of this server.
pub async fn info<M: Mode>(State(app): State<Arc<M>>) -> Json<wire::Info> {
    Json(wire::Info {
        mode: app.mode().into(),
        version: env!("CARGO_PKG_VERSION").into(),
        username: app.username.clone(),
        state_file: app.state_file_name(),
        default_provider: app.default_provider().into(),
        prefs_cookie: app.cookies.prefs.clone(),
        max_tokens: (!app.local).then(|| app.max_tokens_cap()),
        index: app.index_root.is_some(),
        limits: wire::InfoLimits {
            body_bytes: app.limits.body_bytes,
            upload_bytes: app.limits.upload_bytes,
            message_chars: app.limits.message_chars,
            window_messages: app.limits.window_messages,
            truth_entries: app.limits.truth_entries,
        },
    })
}

/// `GET /api/providers`: the providers a client may choose. Local mode
/// (the signed-in user) lists every configured one and, with `check=true`,
/// why one is unreachable; stateless mode (anonymous clients) lists only
/// the operator's allowed providers and models, never a URL, a file path or
/// where a key comes from, and ignores `check` (no outbound request for an
/// anonymous client).
pub async fn providers<M: Mode>(
    State(app): State<Arc<M>>,
    Query(q): Query<wire::ProvidersQuery>,
) -> Json<wire::ProviderList> {
    let offered = app.offered_providers();
    let infos: Vec<wo_providers::config::ProviderInfo> = wo_providers::config::list(&app.config)
        .into_iter()
        .filter(|i| offered.contains(&i.name))
        .collect();
    let mut rows: Vec<wire::ProviderRow> = infos.iter().map(|i| provider_row(&app, i)).collect();
    // A check is a request to each provider: only the signed-in user may
    // make the server send them. Anonymous clients of a hosted server get
    // the list without it (they learn whether one answers by asking).
    if q.check.unwrap_or(false) && app.local {
        let checks = infos.iter().map(|i| {
            let config = &app.config;
            async move {
                match wo_providers::build(&i.name, config) {
                    Ok(p) => p.check().await,
                    Err(e) => wo_providers::Reachability::NotConfigured {
                        reason: e.to_string(),
                    },
                }
            }
        });
        for (row, r) in rows.iter_mut().zip(futures::future::join_all(checks).await) {
            row.reachable = Some(r.is_reachable());
            row.detail = Some(r.to_string());
        }
    }
    Json(wire::ProviderList {
        default: app.default_provider().into(),
        providers: rows,
    })
}

/// What a client may know of a provider: never its key, URL or path.
fn provider_row(app: &App, i: &wo_providers::config::ProviderInfo) -> wire::ProviderRow {
    wire::ProviderRow {
        name: i.name.clone(),
        kind: i.kind.as_str().into(),
        default_model: i.model.clone(),
        models: app
            .offered_models(i)
            .unwrap_or_else(|| vec![i.model.clone()]),
        context_window: i.context_window,
        reachable: None,
        detail: None,
    }
}

/// `POST /api/chat`: one turn on the server's state, run by the engine
/// ([`crate::turn::LocalTurn`]: the store is locked only to assemble the
/// prompt and to append the turn, never while the model answers, so many
/// chats run at once). A client that goes away mid-answer leaves the
/// question and the answer so far in the file, marked `stopped`.
pub async fn chat(
    State(app): AppState,
    JsonBody(mut body): JsonBody<wo_wire::ChatRequest>,
) -> Result<Response, ApiError> {
    let provider = app.provider(body.params.provider.as_deref()).await?;
    // The browser's own folder index (the ingestion page) adds its chunks.
    let browser_chunks = client_chunks(std::mem::take(&mut body.chunks))?;
    let again = regenerating(&app, &body).await?;
    let req = chat_turn_request(&app, body, again)?;
    // Stop, or the tab closing, ends the stream: the question and the
    // answer so far are kept, marked incomplete, even when no word had come
    // yet.
    let req = set_up_local(&app, &provider, req, browser_chunks, true).await?;
    let name = provider.name().to_owned();
    crate::turn::respond(&name, false, |cancel, sink| {
        crate::turn::run(LocalTurn { app }, provider, req, cancel, sink)
    })
    .await
}

/// Messages per page by default, and at most.
const PAGE_DEFAULT: usize = 500;
const PAGE_MAX: usize = 5000;

/// `GET /api/state`: everything but the transcript, plus one page of it
/// (by default the latest messages) — of the whole transcript, or with
/// `conversation` of that conversation only (a conversation older than the
/// latest page opens without the pages between).
pub async fn get_state(
    State(app): AppState,
    Query(q): Query<wire::StateQuery>,
) -> Result<Response, ApiError> {
    let limit = q.limit.unwrap_or(PAGE_DEFAULT);
    if limit == 0 || limit > PAGE_MAX {
        return Err(ApiError::bad_request(format!(
            "limit must be 1..={PAGE_MAX}"
        )));
    }
    let body = app
        .with_store(move |store| {
            let s = store.state();
            let all = s.messages();
            // The conversation's messages, oldest first, by index.
            let (root, members) = match q.conversation.as_deref() {
                None => (None, None),
                Some(wanted) => {
                    let root_id = wo_format::conversation::find(s, wanted)
                        .map_err(|e| ApiError::not_found(format!("conversation: {e}")))?;
                    let roots = wo_format::conversation::roots(s);
                    let r = all
                        .iter()
                        .position(|m| m.id == root_id)
                        .ok_or_else(|| ApiError::internal("a found root is not in the file"))?;
                    let members: Vec<usize> = (0..all.len()).filter(|&i| roots[i] == r).collect();
                    (Some(root_id.to_owned()), Some(members))
                }
            };
            let total = members.as_ref().map_or(all.len(), Vec::len);
            let offset = q.offset.unwrap_or(total.saturating_sub(limit)).min(total);
            let end = (offset + limit).min(total);
            let messages: Cow<'_, [wo_format::Message]> = match &members {
                None => Cow::Borrowed(&all[offset..end]),
                Some(members) => Cow::Owned(
                    members[offset..end]
                        .iter()
                        .map(|&i| all[i].clone())
                        .collect(),
                ),
            };
            serde_json::to_vec(&wire::StatePage {
                schema: Cow::Borrowed(&s.schema),
                version: s.version,
                date: s.date.clone(),
                context: Cow::Borrowed(&s.context),
                truth: Cow::Borrowed(&s.truth),
                messages,
                total_messages: total,
                offset,
                conversation: root,
                memory_log: s.extra.get(wo_engine::memory::LOG_KEY).map(Cow::Borrowed),
            })
            .map_err(|e| ApiError::internal(e.to_string()))
        })
        .await?;
    Ok(json_bytes(body))
}

/// Conversations per page by default, and at most.
const CONVERSATIONS_DEFAULT: usize = 200;
const CONVERSATIONS_MAX: usize = 1000;

/// `GET /api/conversations`: every conversation of the file, newest first,
/// a page at a time, optionally only those matching `q` (title or a
/// message's text, with a snippet of the message) — the list
/// `wo_format::conversation::listed` makes, whatever the transcript's size,
/// so the web client's sidebar never depends on which messages it loaded.
pub async fn conversations(
    State(app): AppState,
    Query(q): Query<wire::ConversationsQuery>,
) -> Result<Json<wire::ConversationList>, ApiError> {
    let limit = q.limit.unwrap_or(CONVERSATIONS_DEFAULT);
    if limit == 0 || limit > CONVERSATIONS_MAX {
        return Err(ApiError::bad_request(format!(
            "limit must be 1..={CONVERSATIONS_MAX}"
        )));
    }
    let offset = q.offset.unwrap_or(0);
    let filter = q.q.unwrap_or_default();
    if filter.chars().count() > SEARCH_MAX_CHARS {
        return Err(ApiError::bad_request(format!(
            "q must be at most {SEARCH_MAX_CHARS} characters"
        )));
    }
    app.with_store(move |store| {
        let listed = if q.archived == Some(true) {
            wo_format::conversation::listed_archived(store.state(), &filter)
        } else {
            wo_format::conversation::listed(store.state(), &filter)
        };
        let total = listed.len();
        let conversations = listed
            .into_iter()
            .skip(offset)
            .take(limit)
            .map(|l| wire::ConversationSummary {
                root: l.conversation.root.id.clone(),
                title: l.title,
                created: l.conversation.root.timestamp.as_str().to_owned(),
                updated: l.conversation.updated().as_str().to_owned(),
                latest: l.conversation.latest.id.clone(),
                messages: l.conversation.count,
                snippet: l.snippet,
            })
            .collect();
        Ok(Json(wire::ConversationList {
            conversations,
            total,
            offset: offset.min(total),
        }))
    })
    .await
}

/// The longest filter `GET /api/conversations` takes: a search box's text,
/// not a document.
const SEARCH_MAX_CHARS: usize = 500;

fn json_bytes(body: Vec<u8>) -> Response {
    let mut resp = Response::new(Body::from(body));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// `PATCH /api/state`: the context (sanitised) and retrieval prefs.
pub async fn patch_state(
    State(app): AppState,
    JsonBody(patch): JsonBody<wire::StatePatch>,
) -> Result<Json<wire::StatePatched>, ApiError> {
    if let Some(p) = &patch.retrieval_prefs {
        check_prefs(p)?;
    }
    // Converted before the store is locked, off the async workers.
    let context = match patch.context {
        Some(c) => Some(
            app.cpu(move || to_xhtml(&c, ContentFormat::Markdown))
                .await?,
        ),
        None => None,
    };
    let out = app
        .with_store(move |store| {
            store.transact(|s| {
                if let Some(c) = context {
                    s.context = c;
                }
                if let Some(p) = patch.retrieval_prefs {
                    s.truth.retrieval_prefs = p;
                }
            })?;
            let s = store.state();
            Ok(wire::StatePatched {
                date: s.date.as_str().to_owned(),
                context: s.context.clone(),
                retrieval_prefs: s.truth.retrieval_prefs.clone(),
            })
        })
        .await?;
    Ok(Json(out))
}

/// A record a request built, refused with its first problem's pointer
/// (relative to the request body) unless it meets the file's rules.
fn refuse_record(issues: Vec<wo_format::Issue>) -> Result<(), ApiError> {
    match issues.first() {
        None => Ok(()),
        Some(first) => Err(ApiError::bad_field(
            first.pointer.clone(),
            match issues.len() {
                1 => first.message.clone(),
                n => format!("{} (and {} more)", first.message, n - 1),
            },
        )),
    }
}

fn check_certainty(c: f64) -> Result<f64, ApiError> {
    wo_engine::request::check_certainty(c).map_err(|m| ApiError::bad_field("/certainty", m))
}

/// `POST /api/truth`.
pub async fn add_truth(
    State(app): AppState,
    JsonBody(new): JsonBody<wire::NewTruth>,
) -> Result<Response, ApiError> {
    if new.title.trim().is_empty() {
        return Err(ApiError::bad_field("/title", "the title is empty"));
    }
    let certainty = check_certainty(new.certainty)?;
    let content = app
        .cpu(move || to_xhtml(&new.content, ContentFormat::Markdown))
        .await?;
    let mut entry = TruthEntry::new(new.title.trim(), Timestamp::now(), certainty, content);
    entry.kind = new.kind;
    refuse_record(wo_format::records::new_truth_entry_issues(&entry, ""))?;
    let out = app
        .with_store(move |store| {
            let value =
                serde_json::to_value(&entry).map_err(|e| ApiError::internal(e.to_string()))?;
            store.transact(|s| s.add_truth(entry))?;
            Ok(value)
        })
        .await?;
    Ok((StatusCode::CREATED, Json(out)).into_response())
}

/// `PATCH /api/truth/{id}`.
pub async fn edit_truth(
    State(app): AppState,
    Path(id): Path<String>,
    JsonBody(e): JsonBody<wire::TruthEdit>,
) -> Result<Json<Value>, ApiError> {
    if e.title.as_deref().is_some_and(|t| t.trim().is_empty()) {
        return Err(ApiError::bad_field("/title", "the title is empty"));
    }
    if let Some(n) = e.title.as_deref().map(|t| t.trim().chars().count())
        && n > wo_format::records::MAX_TITLE_CHARS
    {
        return Err(ApiError::bad_field(
            "/title",
            format!(
                "{n} characters, more than {}",
                wo_format::records::MAX_TITLE_CHARS
            ),
        ));
    }
    let certainty = e.certainty.map(check_certainty).transpose()?;
    let content = match e.content {
        Some(c) => Some(
            app.cpu(move || to_xhtml(&c, ContentFormat::Markdown))
                .await?,
        ),
        None => None,
    };
    let edit = TruthEdit {
        title: e.title.map(|t| t.trim().to_owned()),
        content,
        certainty,
    };
    let out = app
        .with_store(move |store| {
            if store.state().truth_entry(&id).is_none() {
                return Err(ApiError::not_found(format!("no memory entry {id:?}")));
            }
            let (value, _) = store.transact(|s| {
                serde_json::to_value(s.edit_truth(&id, edit, Timestamp::now()))
                    .unwrap_or(Value::Null)
            })?;
            Ok(value)
        })
        .await?;
    Ok(Json(out))
}

/// `PATCH /api/messages/{id}`: a person's title for a message (the web
/// app renames a conversation by its root), by the engine's one rule
/// (`wo_engine::conversation`); one store transaction, nothing written when
/// the title is refused or unchanged.
pub async fn rename_message(
    State(app): AppState,
    Path(id): Path<String>,
    JsonBody(e): JsonBody<wire::MessageEdit>,
) -> Result<Json<wire::MessageRenamed>, ApiError> {
    use wo_engine::conversation::{RenameError, archive, clean_title, rename};
    if e.title.is_none() && e.archived.is_none() {
        return Err(ApiError::bad_field("", "give a title, archived, or both"));
    }
    let title = e
        .title
        .as_deref()
        .map(clean_title)
        .transpose()
        .map_err(|err| ApiError::bad_field("/title", err.to_string()))?;
    let archived = e.archived;
    let out = app
        .with_store(move |store| {
            let Some(current) = store.state().message(&id) else {
                return Err(ApiError::not_found(format!("no message {id:?}")));
            };
            let retitle = title.as_ref().filter(|t| **t != current.title).cloned();
            if retitle.is_some() || archived.is_some() {
                store.try_transact(|s| {
                    let now = Timestamp::now();
                    if let Some(t) = &retitle {
                        rename(s, &id, t, now.clone()).map_err(|err| match err {
                            // Removed by a hand edit since the check above.
                            RenameError::NotFound(_) => ApiError::not_found(err.to_string()),
                            other => ApiError::bad_field("/title", other.to_string()),
                        })?;
                    }
                    if let Some(hidden) = archived {
                        archive(s, &id, hidden, now).map_err(ApiError::not_found)?;
                    }
                    Ok::<_, ApiError>(())
                })??;
            }
            let title = store
                .state()
                .message(&id)
                .map(|m| m.title.clone())
                .unwrap_or_default();
            Ok(wire::MessageRenamed {
                id,
                title,
                archived,
            })
        })
        .await?;
    Ok(Json(out))
}

/// `POST /api/markdown` (both modes): Markdown → the sanitised XHTML a
/// local server stores for it, so a stateless client keeps the context it
/// edits as Markdown in the same form. Nothing is saved.
pub async fn markdown<M: Mode>(
    State(app): State<Arc<M>>,
    JsonBody(body): JsonBody<wire::MarkdownRequest>,
) -> Result<Json<wire::MarkdownConverted>, ApiError> {
    let xhtml = app
        .cpu(move || to_xhtml(&body.markdown, ContentFormat::Markdown))
        .await?;
    Ok(Json(wire::MarkdownConverted { xhtml }))
}

/// `POST /api/memory/undo`: undoes what the memory interpreter recorded
/// for one exchange (as `wo memory undo` does).
pub async fn memory_undo(
    State(app): AppState,
    JsonBody(body): JsonBody<wire::MemoryUndo>,
) -> Result<Json<wire::MemoryUndone>, ApiError> {
    let out = app
        .with_store(move |store| {
            let exchange = body.exchange;
            let pending = wo_engine::memory::read_log(store.state())
                .iter()
                .any(|r| r.exchange == exchange && r.undone.is_none());
            if !pending {
                return Err(ApiError::not_found(format!(
                    "no memory operations of exchange {exchange:?} to undo"
                )));
            }
            let (undone, _) =
                store.transact(|s| wo_engine::memory::undo(s, &exchange, Timestamp::now()))?;
            let undone = undone.map_err(|e| ApiError::bad_field("/exchange", e.reason))?;
            Ok(wire::MemoryUndone {
                exchange,
                removed: undone.removed,
                reopened: undone.reopened,
                untouched: undone.untouched,
                kept: undone.kept,
            })
        })
        .await?;
    Ok(Json(out))
}

/// `DELETE /api/truth/{id}`: removes the entry, leaving a tombstone.
pub async fn delete_truth(
    State(app): AppState,
    Path(id): Path<String>,
) -> Result<Json<wire::TruthDeleted>, ApiError> {
    let out = app
        .with_store(move |store| {
            if store.state().truth_entry(&id).is_none() {
                return Err(ApiError::not_found(format!("no memory entry {id:?}")));
            }
            store.transact(|s| s.delete_truth(&id, Timestamp::now()))?;
            Ok(wire::TruthDeleted { deleted: id })
        })
        .await?;
    Ok(Json(out))
}

/// `POST /api/merge`: the body is an export; merged as product §3 says.
pub async fn merge(
    State(app): AppState,
    Upload(bytes): Upload,
) -> Result<Json<wire::MergeReport>, ApiError> {
    // The one gate for outside data (as `wo import` and `wo merge` use): parsed
    // with the readers' depth limit, validated like `wo validate`, content
    // sanitised, so a merge can never leave a file wo cannot open again.
    let admitted = app
        .cpu(move || wo_format::admit::admit_bytes(&bytes))
        .await?
        .map_err(|issues| {
            let first = issues.first();
            ApiError {
                pointer: Some(first.map(|i| i.pointer.clone()).unwrap_or_default()),
                ..ApiError::bad_request(format!(
                    "not a valid llm.json: {}",
                    first.map(|i| i.to_string()).unwrap_or_default()
                ))
            }
        })?;
    let sanitised = admitted.sanitised;
    let incoming = admitted.state;
    let report = app
        .with_store(move |store| {
            let (report, _) = store.transact(|s| wo_format::merge::merge_into(s, &incoming))?;
            Ok(report)
        })
        .await?;
    Ok(Json(wire::MergeReport::of(&report, sanitised)))
}

/// `GET /api/export`: the whole state as a download.
pub async fn export(State(app): AppState) -> Result<Response, ApiError> {
    let bytes = app
        .with_store(|store| Ok(wo_format::to_canonical_vec(store.state())))
        .await?;
    let name = wo_store::exports::export_file_name_now();
    let mut resp = json_bytes(bytes);
    resp.headers_mut().insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_str(&format!("attachment; filename=\"{name}\""))
            .map_err(|e| ApiError::internal(e.to_string()))?,
    );
    Ok(resp)
}

/// `GET /api/search`: BM25 over messages and truth, and the index's chunks.
pub async fn search(
    State(app): AppState,
    Query(q): Query<wire::SearchQuery>,
) -> Result<Json<wire::SearchResults>, ApiError> {
    let limit = q.limit.unwrap_or(10).clamp(1, 100);
    let kind =
        match &q.kind {
            Some(k) => Some(wo_index::Kind::parse(k).ok_or_else(|| {
                ApiError::bad_request(format!("kind {k:?} is not a kind of chunk"))
            })?),
            None => None,
        };
    let text = q.q.clone();
    let (messages, truth) = app
        .with_store(move |store| {
            let s = store.state();
            let docs: Vec<wo_engine::bm25::Doc> = s
                .messages()
                .iter()
                .map(|m| wo_engine::bm25::Doc {
                    plain: &m.title,
                    xhtml: &m.content,
                })
                .collect();
            let messages: Vec<wire::MessageHit> =
                top(&wo_engine::bm25::scores_docs(&docs, &text), limit)
                    .into_iter()
                    .map(|(i, score)| {
                        let m = &s.messages()[i];
                        wire::MessageHit {
                            id: m.id.clone(),
                            title: m.title.clone(),
                            username: m.username.clone(),
                            timestamp: m.timestamp.as_str().to_owned(),
                            score,
                        }
                    })
                    .collect();
            let docs: Vec<wo_engine::bm25::Doc> = s
                .truth
                .trust
                .iter()
                .map(|t| wo_engine::bm25::Doc {
                    plain: &t.title,
                    xhtml: &t.content,
                })
                .collect();
            let truth: Vec<wire::TruthHit> =
                top(&wo_engine::bm25::scores_docs(&docs, &text), limit)
                    .into_iter()
                    .map(|(i, score)| {
                        let t = &s.truth.trust[i];
                        wire::TruthHit {
                            id: t.id.clone(),
                            title: t.title.clone(),
                            certainty: t.certainty,
                            score,
                        }
                    })
                    .collect();
            Ok((messages, truth))
        })
        .await?;
    let app2 = app.clone();
    let chunks = if app.index_root.is_none() {
        Vec::new()
    } else {
        tokio::task::spawn_blocking(move || -> Result<Vec<Value>, ApiError> {
            let Some(index) = app2.index()? else {
                return Ok(Vec::new());
            };
            let mut query = wo_index::Query::new(q.q);
            query.limit = limit;
            query.path_prefix = q.path_prefix;
            query.kind = kind;
            index
                .search(&query)
                .iter()
                .map(|hit| serde_json::to_value(hit).map_err(|e| ApiError::internal(e.to_string())))
                .collect()
        })
        .await
        .map_err(|e| ApiError::internal(e.to_string()))??
    };
    Ok(Json(wire::SearchResults {
        messages,
        truth,
        chunks,
    }))
}

/// Indexes and scores of the `limit` best positive scores, best first.
fn top(scores: &[f64], limit: usize) -> Vec<(usize, f64)> {
    let mut hits: Vec<(usize, f64)> = scores
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, s)| *s > 0.0)
        .collect();
    hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    hits.truncate(limit);
    hits
}

/// `GET /api/chunks/{ref}`: one chunk of the directory index.
pub async fn chunk(State(app): AppState, Path(key): Path<String>) -> Result<Json<Value>, ApiError> {
    tokio::task::spawn_blocking(move || {
        let index = app.index()?.ok_or_else(|| {
            ApiError::not_found("no directory index; run `wo index` in the project")
        })?;
        let rec = index
            .get_chunk(&key)
            .ok_or_else(|| ApiError::not_found(format!("no chunk {key:?}")))?;
        let c = rec.chunk;
        Ok(Json(json!({
            "ref": rec.chunk_ref, "id": c.id, "path": c.path, "kind": c.kind,
            "start_line": c.start_line, "end_line": c.end_line,
            "heading_path": c.heading_path, "symbol": c.symbol, "content": c.content,
        })))
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?
}

/// What drafting needs from a state: the current context, when it was last
/// updated, how many messages are new, and the request to the model.
type DraftInput = (String, Option<Timestamp>, usize, wo_providers::ChatRequest);

fn draft_input(state: &wo_format::State, model: Option<String>) -> Result<DraftInput, ApiError> {
    let new = wo_engine::context_update::new_messages(state);
    if new.is_empty() {
        return Err(ApiError::bad_request(
            "no new messages since the last context update",
        ));
    }
    Ok((
        state.context.clone(),
        wo_engine::context_update::last_update(state),
        new.len(),
        wo_engine::context_update::draft_request(&state.context, &new, model),
    ))
}

/// `POST /api/context/draft` on a local server: a proposed context from the
/// messages since the last update, read from the state under the lock
/// (never a copy of the whole state). Nothing is saved.
pub async fn context_draft_local(
    State(app): AppState,
    JsonBody(body): JsonBody<wire::DraftRequest>,
) -> Result<Json<Value>, ApiError> {
    let provider = app.provider(body.params.provider.as_deref()).await?;
    app.checked_choices(&body.params)?;
    let model = body.params.model.clone();
    let input = app
        .with_store(move |store| draft_input(store.state(), model))
        .await?;
    draft(&app, provider, input).await
}

/// `POST /api/context/draft` on a stateless server: the same, from the
/// `context` and `messages` of the body. Nothing is saved.
pub async fn context_draft_stateless(
    State(app): State<Arc<Stateless>>,
    JsonBody(body): JsonBody<wire::DraftRequest>,
) -> Result<Json<Value>, ApiError> {
    let provider = app.provider(body.params.provider.as_deref()).await?;
    app.checked_choices(&body.params)?;
    let model = body.params.model.clone();
    let window = body.messages.unwrap_or_default();
    if window.len() > app.limits.window_messages {
        return Err(ApiError::bad_field(
            "/messages",
            format!("more than {} messages", app.limits.window_messages),
        ));
    }
    let context = body.context.unwrap_or_default();
    let input = app
        .cpu(move || {
            draft_input(
                &crate::stateless::state_from_parts(context, Vec::new(), window, "/messages")?,
                model,
            )
        })
        .await??;
    draft(&app, provider, input).await
}

/// Asks the model for the draft and compares it with the current context.
async fn draft(
    app: &App,
    provider: Arc<dyn wo_providers::Provider>,
    (context, since, count, request): DraftInput,
) -> Result<Json<Value>, ApiError> {
    let streamed = stream_answer(
        provider.as_ref(),
        request,
        wo_providers::Cancel::new(),
        |_| {},
    )
    .await
    .map_err(|e| ApiError::new(StatusCode::BAD_GATEWAY, "provider", e.to_string()))?;
    // The model's answer becomes XHTML: off the async workers (a hostile
    // upstream can send anything).
    let draft = app
        .cpu(move || {
            serde_json::to_value(wo_engine::context_update::draft_from_answer(
                &context,
                &streamed.answer,
                count,
                since,
            ))
        })
        .await?
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(Json(draft))
}

/// `POST /api/context/apply`: saves a reviewed draft (local mode).
pub async fn context_apply(
    State(app): AppState,
    JsonBody(body): JsonBody<wire::ApplyRequest>,
) -> Result<Json<wire::ContextApplied>, ApiError> {
    let (current, draft) = (body.current, body.draft);
    let current = app.cpu(move || sanitize_html(&current)).await?;
    let out = app
        .with_store(move |store| {
            let (id, _) = store
                .try_transact(|s| {
                    wo_engine::context_update::apply(s, &current, &draft, Timestamp::now())
                })?
                .map_err(|e| ApiError::conflict(e.to_string()))?;
            Ok(wire::ContextApplied {
                context: store.state().context.clone(),
                truth_id: id,
            })
        })
        .await?;
    Ok(Json(out))
}
