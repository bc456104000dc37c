//! Memory by conclusions (product §7): the operations an interpreter call
//! returns for one exchange (`spec/memory_ops_v1.json`), their validation,
//! applying them to a [`State`] with provenance on every created entry, the
//! journal of what each exchange did (`memory_log`) and undoing it.
//!
//! A batch is all or nothing: malformed or hostile output (unknown fields,
//! ids that do not exist, out-of-range certainty, oversized text) is rejected
//! whole with a reason naming the JSON pointer, and the state is untouched.
//! Text from the model is plain text: it is escaped into XHTML, never parsed
//! as markup.

use std::collections::{HashMap, HashSet};

use crate::retrieve::{
    AUTOMATIC_CERTAINTY_CEILING, SUGGESTED_SUPERSEDE_KEY, noted_automatically, suggested_supersede,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wo_format::validate::is_valid_id;
use wo_format::xhtml::text_to_xhtml;
use wo_format::{
    EffortStatus, Expires, Provenance, RawJson, State, Timestamp, TruthEntry, TruthKind,
};
use wo_providers::{
    CancellationToken, ChatMessage, ChatRequest, Provider, ProviderError, StreamEvent,
};

/// The published operations schema, shipped in the binary (sent to models).
pub const OPS_SCHEMA: &str = include_str!("../../../spec/memory_ops_v1.json");
/// The default interpreter prompt (Markdown), shipped in the binary.
pub const DEFAULT_INTERPRETER_PROMPT: &str = include_str!("../prompts/interpreter.md");
/// Key of the journal in the state file's top-level extensions.
pub const LOG_KEY: &str = "memory_log";
/// Why [`apply_ops`] refuses an exchange the journal already records.
pub const ALREADY_RECORDED: &str = "already remembered by another process";

/// Limits of the schema, enforced here too (the schema is the contract).
const MAX_OPS: usize = 32;
const MAX_TITLE: usize = 200;
const MAX_TEXT: usize = 4000;
const MAX_TAGS: usize = 16;
const MAX_TAG: usize = 64;

/// Kinds an `add` may create (efforts are opened by `open_effort`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AddKind {
    /// Something true about the world or the user.
    Fact,
    /// Something that happened, at a time.
    Event,
    /// A remark worth keeping that is neither.
    Note,
}

impl From<AddKind> for TruthKind {
    fn from(k: AddKind) -> Self {
        match k {
            AddKind::Fact => TruthKind::Fact,
            AddKind::Event => TruthKind::Event,
            AddKind::Note => TruthKind::Note,
        }
    }
}

/// One memory operation (`$defs/op` of `spec/memory_ops_v1.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Op {
    /// Adds a fact, event or note.
    Add {
        /// What the new entry is.
        kind: AddKind,
        /// Its title, plain text, at most 200 characters.
        title: String,
        /// Its content, plain text (stored as XHTML), at most 4,000 characters.
        content: String,
        /// How sure the interpreter is, 0 to 1.
        certainty: f64,
        /// At most 16 tags of at most 64 characters.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tags: Option<Vec<String>>,
        /// When the entry ages out of retrieval (`true`: when unreferenced).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires: Option<Expires>,
    },
    /// Opens an effort (a goal or task still under way); an open effort with
    /// the same title is not opened twice.
    OpenEffort {
        /// Its title, plain text, at most 200 characters.
        title: String,
        /// What the effort is about, plain text, at most 4,000 characters.
        content: String,
        /// How sure the interpreter is, 0 to 1.
        certainty: f64,
        /// At most 16 tags of at most 64 characters.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tags: Option<Vec<String>>,
        /// When the entry ages out of retrieval (`true`: when unreferenced).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires: Option<Expires>,
    },
    /// Resolves an open effort in place (no new entry).
    Resolve {
        /// The effort's id; anything else (or a resolved effort) is refused.
        id: String,
        /// How it was resolved, plain text, at most 4,000 characters.
        resolution: String,
    },
    /// Replaces a contradicted entry: a new entry of the same kind whose
    /// `supersedes` is `id`; the old one is kept and retrieval skips it.
    Supersede {
        /// The entry replaced.
        id: String,
        /// The new entry's title, plain text, at most 200 characters.
        title: String,
        /// The new entry's content, plain text, at most 4,000 characters.
        content: String,
        /// How sure the interpreter is, 0 to 1.
        certainty: f64,
        /// At most 16 tags of at most 64 characters.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tags: Option<Vec<String>>,
        /// When the new entry ages out of retrieval (`true`: when unreferenced).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires: Option<Expires>,
    },
    /// Marks entries the exchange used: each one's `refs` goes up by one.
    Touch {
        /// 1 to 32 entry ids, all of which must exist.
        ids: Vec<String>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Batch {
    ops: Vec<Op>,
}

/// Why a batch (or one operation) was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("memory operations rejected at {pointer}: {reason}")]
pub struct OpsError {
    /// JSON pointer into the batch (`/ops/2/certainty`), `""` for the whole.
    pub pointer: String,
    /// Why, in words.
    pub reason: String,
}

fn err(pointer: impl Into<String>, reason: impl Into<String>) -> OpsError {
    OpsError {
        pointer: pointer.into(),
        reason: reason.into(),
    }
}

/// Parses and validates an interpreter's reply: one JSON object
/// `{"ops": [...]}` (a Markdown code fence around it is tolerated, since small
/// models add one; nothing else is).
pub fn parse_ops(text: &str) -> Result<Vec<Op>, OpsError> {
    let body = strip_fence(text.trim());
    let value: Value =
        serde_json::from_str(body).map_err(|e| err("", format!("not one JSON object: {e}")))?;
    let Value::Object(root) = &value else {
        return Err(err("", "expected an object {\"ops\": [...]}"));
    };
    let Some(Value::Array(items)) = root.get("ops") else {
        return Err(err("/ops", "expected an array of operations"));
    };
    if let Some(k) = root.keys().find(|k| *k != "ops") {
        return Err(err(format!("/{k}"), "unknown field"));
    }
    if items.len() > MAX_OPS {
        return Err(err("/ops", format!("more than {MAX_OPS} operations")));
    }
    // Per item, so the error names the operation that is wrong.
    for (i, item) in items.iter().enumerate() {
        serde_json::from_value::<Op>(item.clone())
            .map_err(|e| err(format!("/ops/{i}"), e.to_string()))?;
    }
    let batch: Batch = serde_json::from_value(value).map_err(|e| err("", e.to_string()))?;
    for (i, op) in batch.ops.iter().enumerate() {
        check_op(op, &format!("/ops/{i}"))?;
    }
    Ok(batch.ops)
}

fn strip_fence(t: &str) -> &str {
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

/// The checks of the schema serde's types do not make.
pub fn check_op(op: &Op, at: &str) -> Result<(), OpsError> {
    let text = |v: &str, field: &str, max: usize| {
        if v.trim().is_empty() {
            Err(err(format!("{at}/{field}"), "must not be blank"))
        } else if v.chars().count() > max {
            Err(err(
                format!("{at}/{field}"),
                format!("longer than {max} characters"),
            ))
        } else {
            Ok(())
        }
    };
    let certainty = |c: f64| {
        if c.is_finite() && (0.0..=1.0).contains(&c) {
            Ok(())
        } else {
            Err(err(format!("{at}/certainty"), "must be between 0 and 1"))
        }
    };
    let tags = |t: &Option<Vec<String>>| {
        let Some(t) = t else { return Ok(()) };
        if t.len() > MAX_TAGS {
            return Err(err(format!("{at}/tags"), format!("more than {MAX_TAGS}")));
        }
        for (i, tag) in t.iter().enumerate() {
            if tag.is_empty() || tag.chars().count() > MAX_TAG {
                return Err(err(
                    format!("{at}/tags/{i}"),
                    format!("must be 1 to {MAX_TAG} characters"),
                ));
            }
        }
        Ok(())
    };
    let id = |v: &str, p: String| {
        if is_valid_id(v) {
            Ok(())
        } else {
            Err(err(p, "not an entry id"))
        }
    };
    match op {
        Op::Add {
            title,
            content,
            certainty: c,
            tags: t,
            ..
        }
        | Op::OpenEffort {
            title,
            content,
            certainty: c,
            tags: t,
            ..
        } => {
            text(title, "title", MAX_TITLE)?;
            text(content, "content", MAX_TEXT)?;
            certainty(*c)?;
            tags(t)
        }
        Op::Supersede {
            id: target,
            title,
            content,
            certainty: c,
            tags: t,
            ..
        } => {
            id(target, format!("{at}/id"))?;
            text(title, "title", MAX_TITLE)?;
            text(content, "content", MAX_TEXT)?;
            certainty(*c)?;
            tags(t)
        }
        Op::Resolve {
            id: target,
            resolution,
        } => {
            id(target, format!("{at}/id"))?;
            text(resolution, "resolution", MAX_TEXT)
        }
        Op::Touch { ids } => {
            if ids.is_empty() || ids.len() > MAX_OPS {
                return Err(err(format!("{at}/ids"), "1 to 32 ids"));
            }
            for (i, v) in ids.iter().enumerate() {
                id(v, format!("{at}/ids/{i}"))?;
            }
            Ok(())
        }
    }
}

/// Who applies operations, from what, when: becomes each created entry's
/// [`Provenance`]. `by` is a model (`provider/model`) or a client's name
/// (an MCP agent).
#[derive(Clone, Debug, PartialEq)]
pub struct Origin {
    /// Ids of the messages the operations came from.
    pub messages: Vec<String>,
    /// A model (`provider/model`) or a client's name.
    pub by: String,
    /// When the operations were applied: each created entry's date.
    pub at: Timestamp,
    /// The exchange (its answer's message id); `None` for a one-off write.
    pub exchange: Option<String>,
}

impl Origin {
    /// The origin of an interpreter's operations on `exchange`, now.
    pub fn exchange(exchange: &Exchange, by: &str) -> Self {
        Origin {
            messages: vec![exchange.question_id.clone(), exchange.answer_id.clone()],
            by: by.to_owned(),
            at: Timestamp::now(),
            exchange: Some(exchange.answer_id.clone()),
        }
    }
}

/// What one operation did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// Ids of the truth entries created.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created: Vec<String>,
    /// Ids of the efforts resolved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resolved: Vec<String>,
    /// Ids of the entries whose `refs` went up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub touched: Vec<String>,
}

impl Effect {
    fn extend(&mut self, other: Effect) {
        self.created.extend(other.created);
        self.resolved.extend(other.resolved);
        self.touched.extend(other.touched);
    }
}

/// One element of `memory_log`: what an exchange's operations did
/// (`$defs/record` of the operations schema).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The exchange (its answer's message id); `undo` finds records by it.
    pub exchange: String,
    /// Who applied the operations (see [`Origin::by`]).
    pub by: String,
    /// When they were applied.
    pub at: Timestamp,
    /// Ids of the messages the operations came from.
    pub messages: Vec<String>,
    /// The operations as applied, in order.
    pub ops: Vec<Op>,
    /// What they did, all operations together (flattened into the record).
    #[serde(flatten)]
    pub effect: Effect,
    /// What each entry the operations created or resolved said once they
    /// were applied ([`TruthEntry::fingerprint`], by id): `undo` takes back
    /// only an entry that still says it, so an edit made since — in `wo`,
    /// the web app or a text editor — is kept. Empty in records written
    /// before fingerprints were kept (`undo` then compares `updated`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub fingerprints: std::collections::BTreeMap<String, String>,
    /// When it was undone; an undone record stays as history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undone: Option<Timestamp>,
}

fn new_entry(
    kind: TruthKind,
    title: &str,
    content: &str,
    certainty: f64,
    tags: &Option<Vec<String>>,
    expires: &Option<Expires>,
    origin: &Origin,
) -> TruthEntry {
    // However sure the model says it is, its notes start below the
    // person's own entries.
    let certainty = certainty.min(AUTOMATIC_CERTAINTY_CEILING);
    let mut e = TruthEntry::new(
        title.trim(),
        origin.at.clone(),
        certainty,
        text_to_xhtml(content.trim()),
    );
    e.kind = Some(kind);
    e.tags = tags.clone().filter(|t| !t.is_empty());
    e.expires = expires.clone();
    e.source = origin.messages.first().cloned();
    e.provenance = Some(Provenance {
        messages: origin.messages.clone(),
        by: origin.by.clone(),
        at: origin.at.clone(),
        exchange: origin.exchange.clone(),
        extra: Default::default(),
    });
    e
}

/// Applies one validated operation to `state` with `origin` as provenance.
/// Refuses (state unchanged) an id that does not exist, resolving what is not
/// an open effort. Re-adding an identical entry, or opening an effort whose
/// title an open effort already has, changes nothing (never a duplicate).
/// Public so every writer of memory (the interpreter, an MCP tool) shares it.
pub fn apply_op(state: &mut State, op: &Op, origin: &Origin) -> Result<Effect, OpsError> {
    check_op(op, "")?;
    let mut effect = Effect::default();
    let create = |state: &mut State, e: TruthEntry, effect: &mut Effect| {
        let id = e.id.clone();
        if state.add_truth(e) {
            effect.created.push(id);
        }
    };
    match op {
        Op::Add {
            kind,
            title,
            content,
            certainty,
            tags,
            expires,
        } => {
            let e = new_entry(
                (*kind).into(),
                title,
                content,
                *certainty,
                tags,
                expires,
                origin,
            );
            create(state, e, &mut effect);
        }
        Op::OpenEffort {
            title,
            content,
            certainty,
            tags,
            expires,
        } => {
            let already = state.truth.trust.iter().any(|t| {
                t.kind == Some(TruthKind::Effort)
                    && t.status != Some(EffortStatus::Resolved)
                    && t.title.trim().eq_ignore_ascii_case(title.trim())
            });
            if !already {
                let mut e = new_entry(
                    TruthKind::Effort,
                    title,
                    content,
                    *certainty,
                    tags,
                    expires,
                    origin,
                );
                e.status = Some(EffortStatus::Open);
                create(state, e, &mut effect);
            }
        }
        Op::Resolve { id, resolution } => {
            let Some(e) = state.truth.trust.iter_mut().find(|t| &t.id == id) else {
                return Err(err("/id", format!("no entry {id}")));
            };
            if e.kind != Some(TruthKind::Effort) {
                return Err(err("/id", format!("{id} is not an effort")));
            }
            if e.status == Some(EffortStatus::Resolved) {
                return Err(err("/id", format!("effort {id} is already resolved")));
            }
            e.status = Some(EffortStatus::Resolved);
            e.resolution = Some(resolution.trim().to_owned());
            e.mark_changed(origin.at.clone());
            effect.resolved.push(id.clone());
        }
        Op::Supersede {
            id,
            title,
            content,
            certainty,
            tags,
            expires,
        } => {
            let Some(old) = state.truth_entry(id) else {
                return Err(err("/id", format!("no entry {id}")));
            };
            let kind = old.kind.unwrap_or(TruthKind::Fact);
            let persons_own = !noted_automatically(old);
            let mut e = new_entry(kind, title, content, *certainty, tags, expires, origin);
            e.status = old.status;
            if persons_own {
                // Only the person replaces what the person wrote: the
                // replacement waits as a suggestion (never sent) until
                // accepted (`accept_suggestion`).
                e.extra.insert(
                    SUGGESTED_SUPERSEDE_KEY.to_owned(),
                    RawJson::from(Value::String(id.clone())),
                );
            } else {
                e.supersedes = Some(id.clone());
            }
            create(state, e, &mut effect);
        }
        Op::Touch { ids } => {
            if let Some((i, missing)) = ids
                .iter()
                .enumerate()
                .find(|(_, id)| state.truth_entry(id).is_none())
            {
                return Err(err(format!("/ids/{i}"), format!("no entry {missing}")));
            }
            for id in ids {
                if let Some(e) = state.truth.trust.iter_mut().find(|t| &t.id == id) {
                    e.refs = Some(e.refs.unwrap_or(0).saturating_add(1));
                    effect.touched.push(id.clone());
                }
            }
        }
    }
    Ok(effect)
}

/// The suggestions waiting for the person: entries proposed as the
/// replacement of one of the person's own (an interpreter's `supersede`),
/// each with the id of the entry it would replace, in file order.
pub fn pending_suggestions(state: &State) -> Vec<(&TruthEntry, String)> {
    state
        .truth
        .trust
        .iter()
        .filter_map(|e| suggested_supersede(e).map(|old| (e, old)))
        .collect()
}

/// The person accepts the suggestion `id` (see [`pending_suggestions`]):
/// it now supersedes the entry it proposed to replace, and is sent like any
/// entry (still ranked as noted automatically). Returns the id of the entry
/// replaced. Refused, with the state unchanged, when `id` is no pending
/// suggestion or the entry it would replace is gone.
pub fn accept_suggestion(state: &mut State, id: &str, now: Timestamp) -> Result<String, OpsError> {
    let Some(e) = state.truth_entry(id) else {
        return Err(err("/id", format!("no entry {id}")));
    };
    let Some(old) = suggested_supersede(e) else {
        return Err(err(
            "/id",
            format!("{id} is not a pending suggestion (`wo memory list` marks them)"),
        ));
    };
    if state.truth_entry(&old).is_none() {
        return Err(err(
            "/id",
            format!(
                "the entry {old} that {id} would replace no longer exists; remove {id} instead"
            ),
        ));
    }
    // An edit by the person: dated after the suggestion was made, so a
    // merge keeps it and an undo of the exchange leaves it alone.
    state.edit_truth(id, wo_format::TruthEdit::default(), now);
    if let Some(e) = state.truth.trust.iter_mut().find(|t| t.id == id) {
        e.extra.remove(SUGGESTED_SUPERSEDE_KEY);
        e.supersedes = Some(old.clone());
    }
    Ok(old)
}

/// Applies a batch for one exchange, all or nothing, and appends its
/// [`Record`] to `memory_log`. On error `state` is as it was.
pub fn apply_ops(state: &mut State, ops: &[Op], origin: &Origin) -> Result<Record, OpsError> {
    let exchange = origin
        .exchange
        .clone()
        .ok_or_else(|| err("", "an exchange id is needed to record the operations"))?;
    let before = state.truth.clone();
    let mut effect = Effect::default();
    for (i, op) in ops.iter().enumerate() {
        match apply_op(state, op, origin) {
            Ok(e) => effect.extend(e),
            Err(e) => {
                state.truth = before;
                return Err(err(format!("/ops/{i}{}", e.pointer), e.reason));
            }
        }
    }
    let fingerprints = effect
        .created
        .iter()
        .chain(&effect.resolved)
        .filter_map(|id| Some((id.clone(), state.truth_entry(id)?.fingerprint())))
        .collect();
    let record = Record {
        exchange,
        by: origin.by.clone(),
        at: origin.at.clone(),
        messages: origin.messages.clone(),
        ops: ops.to_vec(),
        effect,
        fingerprints,
        undone: None,
    };
    let mut log = read_log(state);
    log.push(record.clone());
    write_log(state, &log);
    Ok(record)
}

/// [`apply_ops`] for an exchange the journal does not record yet (not
/// undone); one it records is refused, the state unchanged. Called under the
/// store's lock with the file as it is then, so that two processes
/// interpreting the same exchange (two `wo memory rebuild` at once, a
/// background run beside a rebuild) record it once.
pub fn apply_ops_once(state: &mut State, ops: &[Op], origin: &Origin) -> Result<Record, OpsError> {
    if let Some(exchange) = origin.exchange.as_deref()
        && is_recorded(state, exchange)
    {
        return Err(err("", format!("{ALREADY_RECORDED} (exchange {exchange})")));
    }
    apply_ops(state, ops, origin)
}

/// The journal (`memory_log`), oldest first; records that do not parse
/// (written by a newer or foreign tool) are skipped, and kept in the file.
pub fn read_log(state: &State) -> Vec<Record> {
    let Some(raw) = state.extra.get(LOG_KEY) else {
        return Vec::new();
    };
    match raw.to_value() {
        Value::Array(items) => items
            .into_iter()
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect(),
        _ => Vec::new(),
    }
}

/// Rewrites the journal, keeping records this version cannot read.
fn write_log(state: &mut State, log: &[Record]) {
    let mut out: Vec<Value> = match state.extra.get(LOG_KEY).map(RawJson::to_value) {
        Some(Value::Array(items)) => items
            .into_iter()
            .filter(|v| serde_json::from_value::<Record>(v.clone()).is_err())
            .collect(),
        _ => Vec::new(),
    };
    out.extend(log.iter().filter_map(|r| serde_json::to_value(r).ok()));
    state
        .extra
        .insert(LOG_KEY.to_owned(), RawJson::from(Value::Array(out)));
}

/// What [`undo`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Undone {
    /// Created entries removed (with a tombstone, so a merge cannot revive them).
    pub removed: Vec<String>,
    /// Efforts reopened.
    pub reopened: Vec<String>,
    /// Entries whose `refs` went back down.
    pub untouched: Vec<String>,
    /// Entries left alone because someone changed them since (never lose an edit).
    pub kept: Vec<String>,
}

/// Undoes the newest not-yet-undone record of `exchange`; marks it undone.
pub fn undo(state: &mut State, exchange: &str, now: Timestamp) -> Result<Undone, OpsError> {
    let mut log = read_log(state);
    let Some(rec) = log
        .iter_mut()
        .rev()
        .find(|r| r.exchange == exchange && r.undone.is_none())
    else {
        return Err(err(
            "",
            format!("no memory operations of exchange {exchange} to undo"),
        ));
    };
    let mut out = Undone::default();
    // As the exchange left it: the same fingerprint where the record kept
    // one (an editor sets no `updated`), else (an older record) no edit
    // stamped since.
    let unchanged = |e: &TruthEntry, stamped: bool| match rec.fingerprints.get(&e.id) {
        Some(f) => &e.fingerprint() == f,
        None => stamped,
    };
    // Each id is looked up once in a map, and the removals are made in one
    // pass: a client's journal may name every entry it sends.
    let mut at: HashMap<String, usize> = HashMap::with_capacity(state.truth.trust.len());
    for (i, t) in state.truth.trust.iter().enumerate() {
        at.entry(t.id.clone()).or_insert(i);
    }
    let mut doomed: HashSet<String> = HashSet::new();
    for id in &rec.effect.created {
        let Some(&i) = at.get(id) else { continue };
        if doomed.contains(id) {
            continue;
        }
        let e = &state.truth.trust[i];
        let ours = unchanged(e, e.updated.is_none())
            && e.provenance
                .as_ref()
                .is_some_and(|p| p.exchange.as_deref() == Some(exchange));
        if ours {
            doomed.insert(id.clone());
            out.removed.push(id.clone());
        } else {
            out.kept.push(id.clone());
        }
    }
    let live = |id: &String| at.get(id).copied().filter(|_| !doomed.contains(id));
    for id in &rec.effect.resolved {
        if let Some(i) = live(id) {
            let e = &mut state.truth.trust[i];
            let stamped = e.updated.as_ref() == Some(&rec.at);
            if unchanged(e, stamped) && e.status == Some(EffortStatus::Resolved) {
                e.status = Some(EffortStatus::Open);
                e.resolution = None;
                e.mark_changed(now.clone());
                out.reopened.push(id.clone());
            } else {
                out.kept.push(id.clone());
            }
        }
    }
    for id in &rec.effect.touched {
        if let Some(i) = live(id) {
            let e = &mut state.truth.trust[i];
            e.refs = e.refs.map(|r| r.saturating_sub(1));
            out.untouched.push(id.clone());
        }
    }
    state.delete_truths(&doomed, &now);
    rec.undone = Some(now);
    write_log(state, &log);
    Ok(out)
}

/// One exchange to interpret: the question and the answer as saved.
#[derive(Clone, Debug)]
pub struct Exchange {
    /// The user message's id.
    pub question_id: String,
    /// The assistant message's id (the exchange's id).
    pub answer_id: String,
}

/// Why an interpreter call produced nothing.
#[derive(Debug, thiserror::Error)]
pub enum InterpretError {
    /// The exchange names a message the state does not have.
    #[error("no message {0} in the state")]
    NoMessage(String),
    /// The interpreter's provider failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The model's output failed validation twice (the reason of the last).
    #[error("the interpreter's output was rejected twice: {0}")]
    Rejected(OpsError),
    /// The request leaves the model too little of its window to reply in.
    #[error(
        "the interpreter's request takes {prompt} of the model's {window}-token window, leaving under {MIN_REPLY_TOKENS} tokens for its reply"
    )]
    TooLong {
        /// Tokens of the request (the model's count, else an estimate).
        prompt: usize,
        /// The provider's context window in tokens.
        window: usize,
    },
}

/// The most an interpreter reply may take: a full set of operations under
/// the structured-output bounds fits with room to spare.
const MAX_REPLY_TOKENS: u32 = 1024;
/// The least room worth a call: one or two operations.
const MIN_REPLY_TOKENS: usize = 256;

/// Sizes `req`'s reply to what is left of `provider`'s window once its
/// messages are counted: a server with a small window (llama.cpp's default
/// is 2,048 tokens) drops a request asking for more than it holds, and the
/// interpreter would fail every time with an empty answer.
///
/// `window` is the model's window when its server said it is smaller than
/// the provider's setting.
fn fit_to_window(
    provider: &dyn Provider,
    req: &mut ChatRequest,
    window: Option<usize>,
) -> Result<(), InterpretError> {
    // Each message also costs its role's framing: a few tokens, say 8.
    let prompt: usize = req
        .messages
        .iter()
        .map(|m| {
            provider
                .count_tokens(&m.content)
                .unwrap_or_else(|| crate::assemble::estimate_tokens(&m.content))
                + 8
        })
        .sum();
    let window = window.unwrap_or_else(|| provider.context_window());
    let room = window.saturating_sub(prompt);
    if room < MIN_REPLY_TOKENS {
        return Err(InterpretError::TooLong { prompt, window });
    }
    req.max_tokens = Some(MAX_REPLY_TOKENS.min(u32::try_from(room).unwrap_or(u32::MAX)));
    Ok(())
}

/// `req` sized to the window its server said it has, when that is smaller
/// than the provider's setting; else `too_long` is the error. The window
/// is returned for the retry.
fn refitted(
    provider: &dyn Provider,
    req: &mut ChatRequest,
    too_long: ProviderError,
) -> Result<Option<usize>, InterpretError> {
    match too_long {
        ProviderError::TooLong {
            window: Some(said), ..
        } if said < provider.context_window() => {
            fit_to_window(provider, req, Some(said))?;
            Ok(Some(said))
        }
        other => Err(other.into()),
    }
}

/// Plain text of a message or entry's XHTML, for the prompt.
fn plain(xhtml: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in xhtml.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                out.push(' ');
            }
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The request of one interpreter call: the prompt (Markdown), the schema,
/// the entries it may refer to (open efforts, then the newest others) and
/// the exchange.
pub fn interpreter_request(
    state: &State,
    exchange: &Exchange,
    prompt: &str,
) -> Result<ChatRequest, InterpretError> {
    let find = |id: &str| {
        state
            .messages()
            .iter()
            .find(|m| m.id == id)
            .ok_or_else(|| InterpretError::NoMessage(id.to_owned()))
    };
    let (q, a) = (find(&exchange.question_id)?, find(&exchange.answer_id)?);
    let mut entries: Vec<&TruthEntry> = state.truth.trust.iter().collect();
    entries.sort_by_key(|e| {
        (
            !(e.kind == Some(TruthKind::Effort) && e.status == Some(EffortStatus::Open)),
            std::cmp::Reverse(e.effective_update().clone()),
        )
    });
    let entries: Vec<&TruthEntry> = entries.into_iter().take(40).collect();
    let mut listed = String::new();
    for e in &entries {
        let kind = e
            .kind
            .map(|k| serde_json::to_value(k).ok())
            .and_then(|v| v.and_then(|v| v.as_str().map(str::to_owned)))
            .unwrap_or_else(|| "fact".into());
        let status = match e.status {
            Some(EffortStatus::Open) => " (open)",
            Some(EffortStatus::Resolved) => " (resolved)",
            None => "",
        };
        let body: String = plain(&e.content).chars().take(300).collect();
        listed.push_str(&format!(
            "- {} [{kind}{status}] {}: {body}\n",
            e.id, e.title
        ));
    }
    if listed.is_empty() {
        listed.push_str("(none)\n");
    }
    // The model reads the schema its reply must follow — the subset for
    // these entries, on one line — not the published one with the journal
    // record's definitions: about 560 tokens instead of 1,700, which every
    // call pays (in money, or in a local server's seconds).
    let schema = structured_output_schema(&entries);
    let system = format!("{prompt}\n\n## Schema\n\n```json\n{schema}\n```\n");
    let user = format!(
        "## Memory entries\n\n{listed}\n## Exchange\n\n{}: {}\n\n{}: {}\n",
        q.username,
        plain(&q.content),
        a.username,
        plain(&a.content)
    );
    let mut req = ChatRequest::new(vec![ChatMessage::system(system), ChatMessage::user(user)]);
    req.temperature = Some(0.0);
    req.max_tokens = Some(MAX_REPLY_TOKENS);
    req.json_schema = Some(wo_providers::JsonSchema {
        name: "memory_ops".into(),
        schema,
    });
    Ok(req)
}

/// Longest title and text a structured reply may spell: below the
/// published limits (200 and 4000), which stay what [`parse_ops`] accepts.
/// A grammar-constrained small model that starts to loop inside a string
/// is cut there instead of running to its token cap.
const STRUCTURED_TITLE_CHARS: u64 = 120;
const STRUCTURED_TEXT_CHARS: u64 = 500;
const STRUCTURED_MAX_OPS: u64 = 8;

/// The operations schema as providers' structured output gets it, for a
/// request listing `listed` entries: a stricter subset of the published
/// schema, so that whatever a constrained model spells also passes
/// [`parse_ops`] and [`apply_ops`]. Annotations go; the `\S` patterns and
/// long length bounds of titles and texts become short bounds (a pattern
/// or a 4000-long bound is an enormous grammar in a server's converter);
/// ids become the ids listed (only open efforts can be resolved), and an
/// operation with nothing to refer to is left out — a grammar then cannot
/// even spell an id that does not exist.
pub fn structured_output_schema(listed: &[&TruthEntry]) -> Value {
    let mut schema: Value = serde_json::from_str(OPS_SCHEMA).unwrap_or(Value::Null);
    let ids: Vec<Value> = listed.iter().map(|e| Value::from(e.id.as_str())).collect();
    let open: Vec<Value> = listed
        .iter()
        .filter(|e| e.kind == Some(TruthKind::Effort) && e.status == Some(EffortStatus::Open))
        .map(|e| Value::from(e.id.as_str()))
        .collect();
    let Value::Object(root) = &mut schema else {
        return schema;
    };
    for key in ["$schema", "$id", "title", "description"] {
        root.remove(key);
    }
    if let Some(Value::Object(ops)) = root.get_mut("properties").and_then(|p| p.get_mut("ops")) {
        ops.insert("maxItems".into(), STRUCTURED_MAX_OPS.into());
    }
    let Some(Value::Object(defs)) = root.get_mut("$defs") else {
        return schema;
    };
    defs.retain(|name, _| name != "record" && name != "effect");
    for (name, max) in [
        ("title", STRUCTURED_TITLE_CHARS),
        ("text", STRUCTURED_TEXT_CHARS),
    ] {
        if let Some(Value::Object(def)) = defs.get_mut(name) {
            def.remove("pattern");
            def.insert("minLength".into(), 1.into());
            def.insert("maxLength".into(), max.into());
        }
    }
    // Servers' grammars drop a number's bounds (llama-cpp-python's, and
    // llama.cpp's for non-integers): a certainty of 10 was then a rejected
    // reply. Twenty-one steps of 0.05 from 0 to 1 are a grammar of their own.
    if let Some(certainty) = defs.get_mut("certainty") {
        let steps: Vec<Value> = (0..=20)
            .map(|i| match i {
                0 => Value::from(0),
                20 => Value::from(1),
                i => Value::from(f64::from(i) / 20.0),
            })
            .collect();
        *certainty = serde_json::json!({ "enum": steps });
    }
    // llama-cpp-python's server (0.3) turns a pattern's `\.` into a grammar
    // its own parser refuses, and then crashes the whole server on the
    // missing grammar: `[.]` means the same and converts everywhere.
    if let Some(Value::Array(choices)) = defs.get_mut("expires").and_then(|e| e.get_mut("anyOf")) {
        for choice in choices {
            if let Some(Value::String(pattern)) = choice.get_mut("pattern") {
                *pattern = pattern.replace(r"\.", "[.]");
            }
        }
    }
    // An operation with nothing to refer to goes, with its definition (an
    // empty `enum` is no grammar at all).
    let mut dropped = Vec::new();
    if open.is_empty() {
        dropped.push("resolve");
    } else if let Some(id) = defs
        .get_mut("resolve")
        .and_then(|r| r.pointer_mut("/properties/id"))
    {
        *id = serde_json::json!({ "enum": open });
    }
    if ids.is_empty() {
        dropped.extend(["supersede", "touch", "id"]);
    } else {
        defs.insert("id".into(), serde_json::json!({ "enum": ids }));
    }
    for name in &dropped {
        defs.remove(*name);
    }
    if let Some(Value::Array(choices)) = defs.get_mut("op").and_then(|o| o.get_mut("oneOf")) {
        choices.retain(|c| {
            let target = c["$ref"].as_str().unwrap_or_default();
            !dropped.iter().any(|d| target == format!("#/$defs/{d}"))
        });
    }
    schema
}

/// Largest interpreter reply read: 32 operations at their limits fit well
/// within it; anything longer is not a valid batch and is cut off.
const MAX_REPLY_BYTES: usize = 256 * 1024;

/// The whole reply, within the provider's answer limits (size and time) and
/// [`MAX_REPLY_BYTES`]: an endless or stalled stream ends the call, so an
/// interpreter can never hold a command up for ever.
async fn complete(provider: &dyn Provider, req: ChatRequest) -> Result<String, InterpretError> {
    use futures::StreamExt;
    let limits = provider.answer_limits();
    let cap = limits.max_bytes.min(MAX_REPLY_BYTES);
    let read = async {
        let mut stream = provider.stream(req, CancellationToken::new()).await?;
        let mut text = String::new();
        while let Some(ev) = stream.next().await {
            match ev? {
                StreamEvent::Delta(d) => {
                    text.push_str(&d);
                    if text.len() > cap {
                        return Ok(Err(err("", format!("the reply exceeds {cap} bytes"))));
                    }
                }
                StreamEvent::Done { .. } => break,
            }
        }
        Ok::<_, ProviderError>(Ok(text))
    };
    match tokio::time::timeout(limits.max_duration, read).await {
        Ok(Ok(Ok(text))) => Ok(text),
        Ok(Ok(Err(too_long))) => Err(InterpretError::Rejected(too_long)),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(InterpretError::Rejected(err(
            "",
            format!("no complete reply within {:?}", limits.max_duration),
        ))),
    }
}

/// One interpreter call for an exchange through any provider: the reply is
/// parsed and validated, and checked against the state (ids exist, efforts
/// open) on a copy; an invalid reply is retried once with the reason. The
/// caller applies the returned operations with [`apply_ops`] inside its
/// store transaction (the file may have changed meanwhile; that re-checks).
pub async fn interpret_exchange(
    provider: &dyn Provider,
    state: &State,
    exchange: &Exchange,
    prompt: &str,
    origin: &Origin,
) -> Result<Vec<Op>, InterpretError> {
    let req = interpreter_request(state, exchange, prompt)?;
    interpret(provider, req, &check_copy(state), origin).await
}

/// What [`interpret`] checks a reply against: the state's truth (and date)
/// only — no transcript copy. Taken while the state is at hand, so that the
/// model's call can run with no access to it (a server's lock).
pub fn check_copy(state: &State) -> State {
    let mut scratch = State::new(state.date.clone());
    scratch.truth = state.truth.clone();
    scratch
}

/// The call and its one retry for a request made by [`interpreter_request`],
/// each reply checked by applying it to a clone of `scratch` (see
/// [`check_copy`]).
pub async fn interpret(
    provider: &dyn Provider,
    req: ChatRequest,
    scratch: &State,
    origin: &Origin,
) -> Result<Vec<Op>, InterpretError> {
    let check = |reply: &str| {
        parse_ops(reply).and_then(|ops| {
            let mut scratch = scratch.clone();
            apply_ops(&mut scratch, &ops, origin).map(|_| ops)
        })
    };
    let mut req = req;
    let mut window = None;
    fit_to_window(provider, &mut req, window)?;
    // A reply cut at a cap returns at once (a second would be as long).
    let reply = match complete(provider, req.clone()).await {
        // The server may hold less than the provider's setting says: when
        // it says how much, the reply is sized to that (or the call is too
        // long for it). A stream it broke off may be that too, unsaid.
        Err(InterpretError::Provider(e)) => {
            let reply = req.max_tokens.unwrap_or(MAX_REPLY_TOKENS);
            let why = crate::window::Unanswered::Failed(&e);
            match crate::window::refused_as_too_long(provider, why, &req, reply).await {
                Some(too_long) => {
                    window = refitted(provider, &mut req, too_long)?;
                    complete(provider, req.clone()).await?
                }
                None => return Err(e.into()),
            }
        }
        reply => reply?,
    };
    let first = match check(&reply) {
        Ok(ops) => return Ok(ops),
        Err(e) => e,
    };
    let mut retry = req;
    retry.messages.push(ChatMessage::assistant(reply));
    retry.messages.push(ChatMessage::user(format!(
        "That was rejected: {first}. Reply again with one valid JSON object only."
    )));
    // The retry carries the first reply: no room left means the first
    // reason stands.
    if fit_to_window(provider, &mut retry, window).is_err() {
        return Err(InterpretError::Rejected(first));
    }
    let reply = complete(provider, retry).await?;
    check(&reply).map_err(InterpretError::Rejected)
}

/// Why [`remember`] stored nothing.
#[derive(Debug, thiserror::Error)]
pub enum RememberError {
    /// The interpreter call produced nothing usable.
    #[error(transparent)]
    Interpret(#[from] InterpretError),
    /// The file changed while the model answered and the operations no
    /// longer apply (e.g. the effort was resolved by hand meanwhile).
    #[error("{0}")]
    Stale(OpsError),
    /// The store could not read or write the file.
    #[error(transparent)]
    Store(#[from] wo_store::StoreError),
    /// The journal already records the exchange: another process (a second
    /// `wo memory rebuild`, a background run) interpreted it first.
    #[error("{ALREADY_RECORDED}")]
    AlreadyRecorded,
}

/// After a saved turn: one interpreter call on a snapshot of the state
/// (no lock held while the model answers), then the operations applied in
/// one store transaction, re-checked against the file as it is then. On any
/// error the file keeps its truth as it was.
pub async fn remember(
    store: &mut wo_store::Store,
    provider: &dyn Provider,
    exchange: &Exchange,
    prompt: &str,
    by: &str,
) -> Result<Record, RememberError> {
    let origin = Origin::exchange(exchange, by);
    // Another process may have recorded it since this one read the file:
    // no call is paid for twice. `apply_ops` checks again under the lock.
    store.refresh()?;
    if is_recorded(store.state(), &exchange.answer_id) {
        return Err(RememberError::AlreadyRecorded);
    }
    let ops = interpret_exchange(provider, store.state(), exchange, prompt, &origin).await?;
    let (applied, _) = store.transact(|s| apply_ops_once(s, &ops, &origin))?;
    applied.map_err(|e| match is_recorded(store.state(), &exchange.answer_id) {
        true => RememberError::AlreadyRecorded,
        false => RememberError::Stale(e),
    })
}

/// Whether the journal holds a record of `exchange` that was not undone.
pub fn is_recorded(state: &State, exchange: &str) -> bool {
    read_log(state)
        .iter()
        .any(|r| r.exchange == exchange && r.undone.is_none())
}

/// The provider that interprets a turn answered by `answered_by`: the
/// `[interpreter] provider`, else the one that answered.
pub fn interpreter_name<'a>(
    cfg: &'a wo_providers::Config,
    answered_by: &'a dyn Provider,
) -> &'a str {
    cfg.interpreter
        .provider
        .as_deref()
        .unwrap_or(answered_by.name())
}

/// The memory step `cfg` asks for after a turn answered by `answered_by`
/// (`[interpreter] mode`, see `Config::interpreter_mode_for`; `off` →
/// `None`): the `[interpreter] provider`
/// when one is configured (the caller builds it: `interpreter`), else the
/// provider that answered; the interpreter prompt in effect for the project
/// in `project_dir` (see [`prompt_in_effect`]). An error says why the step
/// cannot run (an unreadable prompt file); the turn goes on without it.
pub fn step_for(
    cfg: &wo_providers::Config,
    answered_by: &std::sync::Arc<dyn Provider>,
    interpreter: Option<std::sync::Arc<dyn Provider>>,
    project_dir: Option<&std::path::Path>,
) -> Result<Option<crate::request::MemoryStep>, std::io::Error> {
    let name = interpreter_name(cfg, answered_by.as_ref());
    if cfg.interpreter_mode_for(name) == wo_providers::config::InterpreterMode::Off {
        return Ok(None);
    }
    let user_dir = wo_providers::config::config_path(cfg.env())
        .and_then(|p| p.parent().map(std::path::Path::to_path_buf));
    let (_, prompt) = prompt_in_effect("interpreter", project_dir, user_dir.as_deref())?;
    let provider = interpreter.unwrap_or_else(|| answered_by.clone());
    Ok(Some(crate::request::MemoryStep::new(provider, prompt)))
}

/// The exchanges of `state` the interpreter has no record of (a question
/// and the answer whose parent it is), oldest first: what `wo memory
/// rebuild` interprets. An exchange whose record was undone is skipped too
/// (the person chose to forget it). `since` keeps the answers given at or
/// after it. Because each exchange's record is written as it is
/// interpreted, a rebuild that stops resumes where it was.
pub fn unremembered(
    state: &State,
    since: Option<&Timestamp>,
    known_models: &[String],
) -> Vec<Exchange> {
    let recorded: std::collections::HashSet<String> =
        read_log(state).into_iter().map(|r| r.exchange).collect();
    state
        .messages()
        .iter()
        .filter(|a| since.is_none_or(|t| &a.timestamp >= t))
        .filter(|a| a.role_with_models(known_models) == wo_format::Role::Assistant)
        .filter(|a| !recorded.contains(&a.id))
        .filter_map(|a| {
            let q = state.message(a.parent.as_deref()?)?;
            (q.role_with_models(known_models) == wo_format::Role::User).then(|| Exchange {
                question_id: q.id.clone(),
                answer_id: a.id.clone(),
            })
        })
        .collect()
}

/// What re-interpreting `exchanges` costs at least: one call each, and the
/// prompt tokens of those calls (estimated; retries and answers come on
/// top). Shown before a rebuild starts.
pub fn rebuild_estimate(state: &State, exchanges: &[Exchange], prompt: &str) -> (usize, usize) {
    let tokens = exchanges
        .iter()
        .filter_map(|e| interpreter_request(state, e, prompt).ok())
        .map(|req| {
            req.messages
                .iter()
                .map(|m| crate::assemble::estimate_tokens(&m.content))
                .sum::<usize>()
        })
        .sum();
    (exchanges.len(), tokens)
}

/// Where the prompt in effect comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum PromptSource {
    /// `prompts/<name>.md` beside the project's `llm.json`.
    Project(std::path::PathBuf),
    /// `prompts/<name>.md` in the user's config directory.
    User(std::path::PathBuf),
    /// The default shipped in the binary.
    Builtin,
}

/// The prompts shipped in the binary, by name (each overridable).
pub const PROMPTS: &[(&str, &str)] = &[("interpreter", DEFAULT_INTERPRETER_PROMPT)];

/// The most read of a prompt file: a prompt is sent with every call, so a
/// larger one is a mistake (or a file planted to exhaust memory).
pub const MAX_PROMPT_BYTES: u64 = 256 * 1024;

/// The prompt `name` in effect: the project's file, else the user's, else
/// the built-in default. A file that exists but cannot be read, or is not
/// UTF-8, is an error naming it (never a silent fall-back to the default);
/// so is a symbolic link at `prompts/` or the file (never followed: a link
/// out of a project would send another file to the provider), anything but
/// a regular file and a file over [`MAX_PROMPT_BYTES`].
pub fn prompt_in_effect(
    name: &str,
    project_dir: Option<&std::path::Path>,
    user_config_dir: Option<&std::path::Path>,
) -> Result<(PromptSource, String), std::io::Error> {
    let rel = std::path::Path::new("prompts").join(format!("{name}.md"));
    let candidates = [
        project_dir.map(|d| (d, PromptSource::Project(d.join(&rel)))),
        user_config_dir.map(|d| (d, PromptSource::User(d.join(&rel)))),
    ];
    for (dir, c) in candidates.into_iter().flatten() {
        match wo_store::durable::project::read_project_string(dir, &rel, MAX_PROMPT_BYTES) {
            Ok(text) => return Ok((c, text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            // The error names the file (or the link on the way) and why.
            Err(e) => return Err(e),
        }
    }
    PROMPTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| (PromptSource::Builtin, (*text).to_owned()))
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no prompt named {name:?}"),
            )
        })
}
