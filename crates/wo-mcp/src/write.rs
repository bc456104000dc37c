//! The one place `wo mcp` changes `llm.json`: [`apply`] validates a
//! [`WriteOp`] completely before taking the store's lock, then writes it in
//! one `try_transact` (lock, merge with the file as it is, atomic rename),
//! so a refused argument writes nothing and a concurrent `wo ask` or
//! `wo truth add` loses nothing.
//!
//! Provenance: until the memory operations with typed provenance land
//! (`wo_engine::memory`), the client's name is kept in the entry's
//! `x_provenance` extension field (`{"by": …, "via": "mcp"}`), which every
//! read-modify-write preserves; re-point [`apply`] at the typed API then.

use serde_json::{Value, json};
use wo_format::RawJson;
use wo_format::query::find_by_prefix;
use wo_format::records::{self, MAX_NAME_CHARS, MAX_RESOLUTION_BYTES};
use wo_format::xhtml::{ContentFormat, to_xhtml};
use wo_format::{EffortStatus, Message, Role, Timestamp, TruthEdit, TruthEntry, TruthKind};
use wo_store::Store;

/// The certainty of a memory entry whose writer gives none (as `wo truth add`).
pub const DEFAULT_CERTAINTY: f64 = 0.7;

/// A change a client asked for, already parsed from its arguments.
#[derive(Clone, Debug)]
pub enum WriteOp {
    /// `remember`: adds a truth entry.
    Remember {
        /// Its title; must not be blank. `None`: derived from the content
        /// by the rule every message title follows
        /// ([`wo_format::title::title_for`]).
        title: Option<String>,
        /// Its content as Markdown (stored as sanitised XHTML); must not be blank.
        content: String,
        /// Fact, event, note or effort (an effort is opened).
        kind: TruthKind,
        /// How sure the client is, 0 to 1.
        certainty: f64,
        /// Tags; none may be blank.
        tags: Vec<String>,
    },
    /// `resolve`: marks an open effort resolved, recording who resolved it.
    Resolve {
        /// The effort's id, or a unique prefix of it.
        id: String,
        /// How it was resolved, if the client says.
        resolution: Option<String>,
    },
    /// `log_exchange`: appends a question and its answer as two messages, the
    /// answer a child of the question.
    LogExchange {
        /// The question, plain text; must not be blank.
        question: String,
        /// The answer, Markdown; must not be blank.
        answer: String,
        /// The model that answered (the answer's `username` and `model`);
        /// `None`: the client's name.
        model: Option<String>,
    },
}

/// Validates `op`, writes it through `store` with provenance `by`, and
/// returns what was written (ids). Errors are messages for the agent; the
/// file is unchanged when one is returned.
pub fn apply(store: &mut Store, op: WriteOp, by: &str) -> Result<Value, String> {
    let provenance = RawJson::parse(&json!({"by": by, "via": "mcp"}).to_string())
        .map_err(|e| format!("internal: provenance: {e}"))?;
    let now = Timestamp::now();
    let outcome = match op {
        WriteOp::Remember {
            title,
            content,
            kind,
            certainty,
            tags,
        } => {
            if content.trim().is_empty() {
                return Err("content: must not be empty".into());
            }
            let given = title.map(|t| t.trim().to_owned());
            if given.as_deref() == Some("") {
                return Err(
                    "title: must not be empty (leave it out to derive one from the content)".into(),
                );
            }
            if !(0.0..=1.0).contains(&certainty) {
                return Err(format!("certainty: {certainty} is outside 0..=1"));
            }
            if let Some(t) = tags.iter().find(|t| t.trim().is_empty()) {
                return Err(format!("tags: {t:?} is empty"));
            }
            let content = to_xhtml(&content, ContentFormat::Markdown);
            check_size(store, "content", &content)?;
            let title = given.unwrap_or_else(|| {
                wo_format::title::title_for(&wo_format::xhtml::to_plain_text(&content))
            });
            let mut entry = TruthEntry::new(title, now, certainty, content);
            entry.kind = Some(kind);
            if kind == TruthKind::Effort {
                entry.status = Some(EffortStatus::Open);
            }
            if !tags.is_empty() {
                entry.tags = Some(tags);
            }
            entry.extra.insert("x_provenance".into(), provenance);
            // The rules the file is read with, and the bounds of every
            // field: a refused entry is never written.
            refuse_issues("", &records::new_truth_entry_issues(&entry, ""))?;
            let (id, title) = (entry.id.clone(), entry.title.clone());
            store.try_transact(|s| {
                if s.add_truth(entry) {
                    Ok(json!({"added": id, "title": title}))
                } else {
                    Err(format!("{id}: an identical entry already exists"))
                }
            })
        }
        WriteOp::Resolve { id, resolution } => {
            if let Some(r) = &resolution
                && r.len() > MAX_RESOLUTION_BYTES
            {
                return Err(format!(
                    "resolution: {} bytes, over the limit of {MAX_RESOLUTION_BYTES}",
                    r.len()
                ));
            }
            store.try_transact(|s| {
                let found = find_by_prefix(&s.truth.trust, |t| &t.id, &id)
                    .map_err(|e| format!("id {id:?}: {e}"))?;
                if found.kind != Some(TruthKind::Effort) {
                    return Err(format!(
                        "id {}: not an effort (only efforts resolve)",
                        found.id
                    ));
                }
                if found.status == Some(EffortStatus::Resolved) {
                    return Err(format!("id {}: already resolved", found.id));
                }
                // Who created the entry stays; who resolved it is added. Built
                // before anything changes: a failed change is not undone.
                let mut p = found
                    .extra
                    .get("x_provenance")
                    .map(RawJson::to_value)
                    .filter(Value::is_object)
                    .unwrap_or_else(|| provenance.to_value());
                p["resolved_by"] = Value::String(by.to_owned());
                let p = RawJson::parse(&p.to_string())
                    .map_err(|e| format!("internal: provenance: {e}"))?;
                let full = found.id.clone();
                s.edit_truth(&full, TruthEdit::default(), now);
                if let Some(t) = s.truth.trust.iter_mut().find(|t| t.id == full) {
                    t.status = Some(EffortStatus::Resolved);
                    t.resolution = resolution;
                    t.extra.insert("x_provenance".into(), p);
                }
                Ok(json!({"resolved": full}))
            })
        }
        WriteOp::LogExchange {
            question,
            answer,
            model,
        } => {
            if question.trim().is_empty() {
                return Err("question: must not be empty".into());
            }
            if answer.trim().is_empty() {
                return Err("answer: must not be empty".into());
            }
            // The model's name becomes the answer's username, which the
            // file's rules require to be neither blank nor endless.
            if let Some(name) = &model {
                if name.trim().is_empty() {
                    return Err(
                        "model: must not be blank (leave it out to log the answer under the client's name)"
                            .into(),
                    );
                }
                let chars = name.chars().count();
                if chars > MAX_NAME_CHARS {
                    return Err(format!(
                        "model: {chars} characters, more than {MAX_NAME_CHARS}"
                    ));
                }
            }
            let mut q = Message::new(
                "user",
                now.clone(),
                wo_format::title::title_for(&question),
                wo_format::xhtml::question_to_xhtml(&question),
            );
            q.role = Some(Role::User);
            // An agent's logged exchange is a conversation of its own: wo
            // never writes an unlinked message (llm_state_v1.md,
            // `new_conversation`), which would join the implicit chain.
            q.mark_new_conversation();
            q.extra.insert("x_provenance".into(), provenance.clone());
            // Strictly later, as a chat turn does, so the transcript's
            // (timestamp, id) order keeps the question first.
            let later = now.next_micro();
            let mut a = Message::new(
                model.clone().unwrap_or_else(|| by.to_owned()),
                later,
                wo_format::title::title_for(&answer),
                wo_engine::turn::answer_xhtml(&answer),
            );
            a.role = Some(Role::Assistant);
            a.parent = Some(q.id.clone());
            a.model = model;
            a.extra.insert("x_provenance".into(), provenance);
            refuse_issues("question", &records::new_message_issues(&q, ""))?;
            refuse_issues("answer", &records::new_message_issues(&a, ""))?;
            check_size(store, "question", &q.content)?;
            check_size(store, "answer", &a.content)?;
            let (qid, aid) = (q.id.clone(), a.id.clone());
            store.try_transact(|s| {
                s.push_message(q);
                s.push_message(a);
                Ok(json!({"question": qid, "answer": aid}))
            })
        }
    };
    match outcome {
        Ok(Ok((v, _))) => Ok(v),
        Ok(Err(e)) => Err(e),
        Err(e) => Err(format!("not written: {e}")),
    }
}

/// A refusal naming the argument (`what`, or the field's pointer) and the
/// first problem; nothing was written.
fn refuse_issues(what: &str, issues: &[wo_format::Issue]) -> Result<(), String> {
    if issues.is_empty() {
        return Ok(());
    }
    let first = &issues[0];
    let field = first.pointer.trim_start_matches('/');
    let at = match (what.is_empty(), field.is_empty()) {
        (true, _) => field.to_owned(),
        (false, true) => what.to_owned(),
        (false, false) => format!("{what} {field}"),
    };
    let more = match issues.len() {
        1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    Err(format!(
        "{at}: {}{more} (nothing was written)",
        first.message
    ))
}

/// Refuses content over the store's limit before any change is made (the
/// store would refuse it too, and take the change back, but a refusal
/// naming the argument is clearer).
fn check_size(store: &Store, argument: &str, xhtml: &str) -> Result<(), String> {
    store
        .limits()
        .check_message(store.path(), argument, xhtml.len())
        .map_err(|e| format!("not written: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wo_store::{Limits, OpenOptions};

    fn store(dir: &std::path::Path) -> Store {
        let opts = OpenOptions {
            limits: Limits {
                max_message_bytes: 1_000,
                ..Limits::default()
            },
            ..OpenOptions::default()
        };
        Store::create(
            dir.join("llm.json"),
            wo_format::State::new(Timestamp::now()),
            opts,
        )
        .unwrap()
    }

    fn remember(content: String) -> WriteOp {
        WriteOp::Remember {
            title: Some("t".into()),
            content,
            kind: TruthKind::Fact,
            certainty: 0.5,
            tags: Vec::new(),
        }
    }

    fn disk(store: &Store) -> wo_format::State {
        wo_format::parse(&std::fs::read(store.path()).unwrap()).unwrap()
    }

    /// One oversized `remember` or `log_exchange` in a long-lived session
    /// is refused alone: the session's later writes work, and the file
    /// holds exactly them.
    #[test]
    fn an_oversized_write_does_not_poison_the_session() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = store(dir.path());
        let err = apply(&mut store, remember("x".repeat(2_000)), "agent").unwrap_err();
        assert!(err.starts_with("not written:"), "{err}");
        assert!(err.contains("content is"), "{err}");
        let err = apply(
            &mut store,
            WriteOp::LogExchange {
                question: "q".into(),
                answer: "-\n+\n".repeat(200),
                model: None,
            },
            "agent",
        )
        .unwrap_err();
        assert!(err.contains("answer is"), "{err}");
        assert_eq!(store.state(), &disk(&store));

        apply(&mut store, remember("small".into()), "agent").unwrap();
        apply(
            &mut store,
            WriteOp::LogExchange {
                question: "q".into(),
                answer: "a".into(),
                model: None,
            },
            "agent",
        )
        .unwrap();
        let on_disk = disk(&store);
        assert_eq!(store.state(), &on_disk);
        assert_eq!(on_disk.truth.trust.len(), 1);
        assert_eq!(on_disk.messages().len(), 2);
    }
}
