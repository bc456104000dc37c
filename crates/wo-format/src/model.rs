//! The typed model of `llm.json` v1 (product §1) with its optional extensions.
//!
//! Every struct keeps the fields it does not know in `extra`, so a newer
//! tool's data survives a read-modify-write by this one. Field declaration
//! order is the canonical key order of the serializer; unknown keys follow in
//! sorted order.

use serde::{Deserialize, Serialize};

pub use crate::rawjson::RawJson;

use crate::ids;
use crate::timestamp::Timestamp;

/// The canonical value written into `schema`.
pub const SCHEMA_URL: &str =
    "https://raw.githubusercontent.com/arborrhythms/WikiOracle/main/spec/llm_state_v1.json";
/// The only `version` this library reads and writes.
pub const VERSION: u64 = 1;

/// Unknown fields of a record, by name (sorted: the canonical order of the
/// keys after the known ones), their values kept as written.
pub type Extra = std::collections::BTreeMap<String, RawJson>;

/// A whole state file.
/// (`Deserialize` for the model types is in `model_de`: hand-written so
/// that unknown fields keep their exact text and need no buffering.)
#[derive(Clone, Debug)]
pub struct State {
    /// Format version; always [`VERSION`] (the compatibility gate).
    pub version: u64,
    /// Schema identifier; writers write [`SCHEMA_URL`].
    pub schema: String,
    /// When the file last changed; set by the writer on every save.
    pub date: Timestamp,
    /// The operating context (XHTML), sent with every query.
    pub context: String,
    pub(crate) messages: Vec<Message>,
    /// Curated knowledge and retrieval preferences.
    pub truth: Truth,
    /// Unknown top-level fields (e.g. `memory_log`), kept as written.
    pub extra: Extra,
    /// How many leading messages are unchanged since [`State::mark_saved`];
    /// lets the store re-use their serialised bytes (append fast path).
    pub(crate) clean_prefix: usize,
    /// Identifies the [`crate::codec::MessageCache`] filled by the last save.
    pub(crate) save_token: u64,
    /// Which transcript contents this state has had (see
    /// [`State::transcript_version`]).
    pub(crate) transcript: TranscriptLog,
    /// Each message's next step in [`State::branch`], kept between walks.
    pub(crate) links: crate::links::LinkCache,
    /// Open savepoints, innermost last (see [`crate::undo`]).
    pub(crate) savepoints: Vec<crate::undo::Savepoint>,
}

/// Names the contents of a state's transcript at one moment: its first
/// `len` messages as they were then. A cache kept beside a state (the
/// recall index of a long-lived server) records the version it reflects,
/// and [`State::unchanged_since`] tells it later whether those messages are
/// still exactly what it saw, so it only has to take in what was appended.
/// Process-local: never stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TranscriptVersion {
    /// Messages covered (a prefix of the transcript).
    pub len: usize,
    /// Unique in this process: drawn afresh at every change.
    stamp: u64,
}

/// The bookkeeping behind [`TranscriptVersion`]: `base` names the
/// transcript as it was after the last change that could touch any message
/// (a parse, [`State::messages_mut`], a re-sort); `log` holds the versions
/// handed out since, each valid for the prefix it names, the current one
/// last. Only versions someone took are kept (`observed`), so a merge that
/// appends a thousand messages adds one entry, not a thousand. Clones keep
/// the stamps they were cloned with and draw new ones for their own
/// changes, so two diverging copies never share a version they do not both
/// hold.
#[derive(Debug)]
pub(crate) struct TranscriptLog {
    base: u64,
    log: Vec<LoggedVersion>,
    /// The current version was handed out by [`State::transcript_version`].
    observed: std::sync::atomic::AtomicBool,
}

impl Clone for TranscriptLog {
    fn clone(&self) -> Self {
        TranscriptLog {
            base: self.base,
            log: self.log.clone(),
            observed: std::sync::atomic::AtomicBool::new(
                self.observed.load(std::sync::atomic::Ordering::Relaxed),
            ),
        }
    }
}

/// A version handed out, and how much of it still holds.
#[derive(Clone, Copy, Debug)]
struct LoggedVersion {
    /// Messages the version covers.
    len: usize,
    /// Its first `valid` messages are still exactly as they were: a
    /// message inserted at `pos` leaves the `pos` before it alone, so a
    /// cache of this version can keep that prefix and redo only the rest.
    valid: usize,
    stamp: u64,
}

/// Versions kept: a cache more this many taken versions behind rebuilds.
const TRANSCRIPT_LOG_LEN: usize = 64;

fn fresh_stamp() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl TranscriptLog {
    pub(crate) fn new() -> Self {
        TranscriptLog {
            base: fresh_stamp(),
            log: Vec::new(),
            observed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Any message may have changed: every earlier version is void.
    fn changed_all(&mut self) {
        self.base = fresh_stamp();
        self.log.clear();
        *self.observed.get_mut() = false;
    }

    /// One message was inserted at `pos` into a transcript of `len_before`
    /// messages: versions covering more than `pos` messages hold only for
    /// their first `pos`.
    fn inserted(&mut self, pos: usize, len_before: usize) {
        let observed = std::mem::take(self.observed.get_mut());
        if self.log.is_empty() {
            if observed {
                self.log.push(LoggedVersion {
                    len: len_before,
                    valid: len_before,
                    stamp: self.base,
                });
            }
        } else if !observed {
            // The current version (always last) was never handed out.
            self.log.pop();
        }
        for v in &mut self.log {
            v.valid = v.valid.min(pos);
        }
        // A version with nothing left that holds is of no use to anyone.
        self.log.retain(|v| v.valid > 0 || v.len == 0);
        if self.log.len() >= TRANSCRIPT_LOG_LEN {
            self.log.remove(0);
        }
        self.log.push(LoggedVersion {
            len: len_before + 1,
            valid: len_before + 1,
            stamp: fresh_stamp(),
        });
    }

    fn current(&self, len: usize) -> TranscriptVersion {
        self.observed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        match self.log.last() {
            // The last entry is always whole: every insertion pushes one.
            Some(v) if v.len == len => TranscriptVersion {
                len,
                stamp: v.stamp,
            },
            _ => TranscriptVersion {
                len,
                stamp: self.base,
            },
        }
    }

    /// How many leading messages of version `v` still hold in a transcript
    /// of `len` messages; `None` when `v` is unknown (void or never of this
    /// state).
    fn held_prefix(&self, v: &TranscriptVersion, len: usize) -> Option<usize> {
        if self.log.is_empty() {
            return (v.len == len && v.stamp == self.base).then_some(len);
        }
        self.log
            .iter()
            .find(|l| l.len == v.len && l.stamp == v.stamp)
            .map(|l| l.valid)
    }
}

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A person.
    User,
    /// A model.
    Assistant,
    /// Instructions to the model (`username` `system`).
    System,
}

impl Role {
    /// The name as written in the file (`user`, `assistant`, `system`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
        }
    }
}

/// One message of the transcript.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Message {
    /// Content-addressed id (`m_` + 16 hex); derived when missing on read.
    pub id: String,
    /// A short label for lists (see [`crate::title::title_for`]).
    pub title: String,
    /// Who wrote it: a person's name, or a model's name and version.
    pub username: String,
    /// When it was written; the transcript is sorted by (timestamp, id).
    pub timestamp: Timestamp,
    /// XHTML fragment.
    pub content: String,
    /// Who spoke; when absent, derived (see [`Message::role_with_models`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// The message this one answers or follows (conversation tree).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The provider that wrote an assistant message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model that wrote an assistant message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The provider's token accounting for the answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Ids of truth entries, messages and chunks sent as context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<String>>,
    /// Unknown fields, kept as written.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Token accounting reported by a provider.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Usage {
    /// Tokens the prompt took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    /// Tokens the answer took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u64>,
    /// Unknown fields, kept as written.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `truth`: curated knowledge plus retrieval preferences.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Truth {
    /// The curated entries.
    pub trust: Vec<TruthEntry>,
    /// Retrieval knobs as written (see [`RetrievalPrefs::effective`]).
    pub retrieval_prefs: RetrievalPrefs,
    /// Tombstones: deleted entries an older export must not resurrect.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deleted: Vec<Tombstone>,
    /// Unknown fields, kept as written.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Kind of a truth entry (memory, product §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TruthKind {
    /// Something true about the user or the world.
    Fact,
    /// Something being worked on; has a [`EffortStatus`].
    Effort,
    /// Something that happened, at a time.
    Event,
    /// Anything else worth keeping.
    Note,
}

/// Status of an `effort`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EffortStatus {
    /// Still being worked on.
    Open,
    /// Done; `resolution` says how.
    Resolved,
}

/// `expires`: a flag, or the instant after which the entry ages out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Expires {
    /// `true`: aged out now; `false`: never.
    Flag(bool),
    /// Aged out of retrieval after this instant (archived, not deleted).
    At(Timestamp),
}

/// One entry of `truth.trust`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TruthEntry {
    /// Content-addressed id (`t_` + 16 hex); derived when missing on read.
    pub id: String,
    /// A short label; part of the id.
    pub title: String,
    /// When the entry was created.
    pub timestamp: Timestamp,
    /// In [0, 1].
    pub certainty: f64,
    /// XHTML fragment.
    pub content: String,
    /// What sort of knowledge it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<TruthKind>,
    /// For efforts: open or resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<EffortStatus>,
    /// For a resolved effort: how.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
    /// Id of the entry this one replaces (that one is kept, not deleted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
    /// Free-form labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// When the entry ages out of retrieval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires: Option<Expires>,
    /// How many prompts have used it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refs: Option<u64>,
    /// Last edit; decides merge conflicts (else `timestamp`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated: Option<Timestamp>,
    /// Id of the message it was distilled from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Who made the entry from what, and when (memory, product §7).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    /// When the entry was archived: it had `expires` and went unused for
    /// the configured age (`[memory] archive_after_days`), so it left
    /// retrieval. Kept, never deleted; listed and searched on request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archived: Option<Timestamp>,
    /// When a prompt last used it (the turn's time; `refs` counts uses).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used: Option<Timestamp>,
    /// Unknown fields, kept as written.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Where a truth entry came from (memory, product §7): the messages it was
/// distilled from, who made it — a model (`provider/model`) or a client such
/// as an MCP agent — when, and the exchange whose operations created it (so
/// `wo memory undo` can find it).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Provenance {
    /// Ids of the messages the entry came from.
    pub messages: Vec<String>,
    /// The model or client that wrote it.
    pub by: String,
    /// When it was written.
    pub at: Timestamp,
    /// Id of the exchange (its answer's message id) whose operations made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exchange: Option<String>,
    /// Unknown fields, kept as written.
    #[serde(flatten)]
    pub extra: Extra,
}

impl TruthEntry {
    /// The instant that decides which of two versions of an entry wins a merge.
    pub fn effective_update(&self) -> &Timestamp {
        self.updated.as_ref().unwrap_or(&self.timestamp)
    }

    /// Stamps a change made at `now`: `updated` becomes `now`, or a
    /// microsecond after the version changed (its `updated` and its
    /// `timestamp`) when this clock is not past it. The one rule every
    /// writer that changes an entry follows, so the changed version wins a
    /// merge against the one it changed whatever the clocks say (an entry
    /// dated by a phone whose clock runs fast included); a tie would leave
    /// the merge to a byte comparison that the old version may win.
    pub fn mark_changed(&mut self, now: Timestamp) {
        let changed = self.effective_update().max(&self.timestamp).clone();
        self.updated = Some(if now > changed {
            now
        } else {
            changed.next_micro()
        });
    }

    /// A digest of what the entry says — title, content, certainty, kind,
    /// status, resolution, tags, expiry, what it supersedes — leaving out
    /// what use and time change (`refs`, `used`, `updated`, `archived`):
    /// equal fingerprints mean nobody changed what the entry says. The
    /// memory journal keeps the fingerprint of what an exchange wrote, so
    /// undoing it can tell an entry edited since (in any editor, which sets
    /// no `updated`) from one left as written.
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let said = serde_json::json!([
            self.title,
            self.content,
            self.certainty,
            self.kind,
            self.status,
            self.resolution,
            self.tags,
            self.expires,
            self.supersedes,
        ]);
        let digest = Sha256::digest(said.to_string().as_bytes());
        digest[..8].iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The fields of a truth entry an edit may change (`None` = unchanged).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TruthEdit {
    /// A new title.
    pub title: Option<String>,
    /// XHTML fragment, already sanitised.
    pub content: Option<String>,
    /// A new certainty, in [0, 1].
    pub certainty: Option<f64>,
}

/// A deleted truth entry.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Tombstone {
    /// Id of the deleted entry.
    pub id: String,
    /// When it was deleted.
    pub date: Timestamp,
    /// Unknown fields, kept as written.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `truth.retrieval_prefs`; absent knobs take product §1's defaults.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RetrievalPrefs {
    /// Most truth entries sent per query (default 8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_entries: Option<u64>,
    /// Entries below this certainty are never sent (default 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_certainty: Option<f64>,
    /// Rank by certainty as well as relevance (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefer_higher_certainty: Option<bool>,
    /// Certainty's share of the prior (default 0.7).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certainty_weight: Option<f64>,
    /// Recency's share of the prior (default 0.3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recency_weight: Option<f64>,
    /// Unknown fields, kept as written.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Retrieval knobs with defaults applied and weights normalised to sum 1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EffectivePrefs {
    /// Most truth entries sent per query.
    pub max_entries: usize,
    /// Entries below this certainty are never sent.
    pub min_certainty: f64,
    /// Rank by certainty as well as relevance.
    pub prefer_higher_certainty: bool,
    /// Certainty's share of the prior (with `recency_weight`, sums to 1).
    pub certainty_weight: f64,
    /// Recency's share of the prior.
    pub recency_weight: f64,
}

impl RetrievalPrefs {
    /// The defaults of product §1, written into new files.
    pub fn spec_defaults() -> Self {
        RetrievalPrefs {
            max_entries: Some(8),
            min_certainty: Some(0.0),
            prefer_higher_certainty: Some(true),
            certainty_weight: Some(0.7),
            recency_weight: Some(0.3),
            extra: Extra::new(),
        }
    }

    /// The knobs in effect: product §1's defaults for what is absent, the two
    /// weights normalised to sum 1 (a negative weight counts as 0; both 0 means
    /// the defaults).
    pub fn effective(&self) -> EffectivePrefs {
        let cw = self.certainty_weight.unwrap_or(0.7).max(0.0);
        let rw = self.recency_weight.unwrap_or(0.3).max(0.0);
        let (cw, rw) = if cw + rw > 0.0 {
            (cw / (cw + rw), rw / (cw + rw))
        } else {
            (0.7, 0.3)
        };
        EffectivePrefs {
            max_entries: usize::try_from(self.max_entries.unwrap_or(8)).unwrap_or(usize::MAX),
            min_certainty: self.min_certainty.unwrap_or(0.0),
            prefer_higher_certainty: self.prefer_higher_certainty.unwrap_or(true),
            certainty_weight: cw,
            recency_weight: rw,
        }
    }
}

impl Message {
    /// A new message with a derived id.
    pub fn new(
        username: impl Into<String>,
        timestamp: Timestamp,
        title: impl Into<String>,
        content_xhtml: impl Into<String>,
    ) -> Self {
        let mut m = Message {
            id: String::new(),
            title: title.into(),
            username: username.into(),
            timestamp,
            content: content_xhtml.into(),
            role: None,
            parent: None,
            provider: None,
            model: None,
            usage: None,
            sources: None,
            extra: Extra::new(),
        };
        m.id = ids::message_id(&m.username, m.timestamp.as_str(), &m.content);
        m
    }

    /// The role, inferred when absent: see [`Message::role_with_models`]
    /// (with no configured model names).
    pub fn effective_role(&self) -> Role {
        self.role_with_models::<&str>(&[])
    }

    /// The role, the one place it is inferred. An explicit `role` always
    /// wins. Otherwise: `system` for the username "system"; `assistant` when
    /// provider or model metadata is present or the username is a model's
    /// name ([`is_model_name`]: one of `known_models`, such as the models the
    /// config names, or one that looks like a model's, as other tools write
    /// them: `gpt-4o`, `claude-sonnet-4.5`, `llama3.1:8b`, `SmolLM2`);
    /// otherwise `user`.
    pub fn role_with_models<S: AsRef<str>>(&self, known_models: &[S]) -> Role {
        self.role.unwrap_or_else(|| {
            if self.username.eq_ignore_ascii_case("system") {
                Role::System
            } else if self.provider.is_some()
                || self.model.is_some()
                || is_model_name(&self.username, known_models)
            {
                Role::Assistant
            } else {
                Role::User
            }
        })
    }

    /// Sort key of the transcript.
    pub fn order_key(&self) -> (&Timestamp, &str) {
        (&self.timestamp, &self.id)
    }

    /// Whether this message starts a conversation of its own: it has no
    /// `parent` and carries `"new_conversation": true`
    /// ([`NEW_CONVERSATION_KEY`]), so [`State::branch`] does not chain it
    /// to the parentless messages before it.
    pub fn starts_conversation(&self) -> bool {
        self.parent.is_none()
            && self
                .extra
                .get(NEW_CONVERSATION_KEY)
                .is_some_and(|v| v.as_str() == "true")
    }

    /// Whether this message arrived without links — no `parent` and no
    /// [`NEW_CONVERSATION_KEY`] mark (a legacy transcript, a tool that keeps
    /// none) — so it joins the implicit chain: it follows the latest earlier
    /// message of the chain, and the chain's next one follows it. Messages
    /// with links never join it, so adding them (an import, a merge, a new
    /// conversation) never changes which conversation an unlinked message
    /// belongs to.
    pub fn is_unlinked(&self) -> bool {
        self.parent.is_none() && !self.starts_conversation()
    }

    /// Whether this message — a conversation's root — is archived: hidden
    /// from conversation lists ([`ARCHIVE_KEY`]'s `hidden`; a malformed
    /// field hides nothing).
    pub fn archived(&self) -> bool {
        self.archive_say().is_some_and(|(_, hidden)| hidden)
    }

    /// The [`ARCHIVE_KEY`] field read: when it was said, and whether hidden.
    pub fn archive_say(&self) -> Option<(Timestamp, bool)> {
        let raw = self.extra.get(ARCHIVE_KEY)?;
        let v: serde_json::Value = serde_json::from_str(raw.as_str()).ok()?;
        let at = Timestamp::parse(v.get("at")?.as_str()?).ok()?;
        Some((at, v.get("hidden")?.as_bool()?))
    }

    /// When a person last renamed this message ([`RETITLED_KEY`]); `None`
    /// when never, or when the field is not a timestamp (`wo validate`
    /// reports that).
    pub fn retitled(&self) -> Option<Timestamp> {
        let raw = self.extra.get(RETITLED_KEY)?;
        let text: String = serde_json::from_str(raw.as_str()).ok()?;
        Timestamp::parse(&text).ok()
    }

    /// Marks this message as the start of a conversation (see
    /// [`Message::starts_conversation`]); it must have no `parent`.
    pub fn mark_new_conversation(&mut self) {
        self.extra.insert(
            NEW_CONVERSATION_KEY.to_owned(),
            RawJson::from(serde_json::Value::Bool(true)),
        );
    }
}

/// The message field that archives a conversation, on its root
/// (`llm_state_v1.md`, Message): `{"at": timestamp, "hidden": bool}`, the
/// latest say of whether the conversation is hidden from lists. Archiving
/// removes nothing: the messages stay in the file, and restoring shows them
/// again. Of two copies, the later `at` wins a merge.
pub const ARCHIVE_KEY: &str = "archive";

/// The message field that says when a person last renamed the message
/// (`llm_state_v1.md`, Message): of two copies with different titles, the
/// later rename wins a merge. A message never renamed has none.
pub const RETITLED_KEY: &str = "retitled";

/// The message field that makes a parentless message the root of a new
/// conversation (`llm_state_v1.md`, Message). Without it a parentless
/// message continues the parentless messages before it (a legacy
/// transcript), which is what keeps such files one conversation.
pub const NEW_CONVERSATION_KEY: &str = "new_conversation";

/// Model families whose names other tools write as usernames. A name
/// counts only with something after the family that starts with a digit or
/// a separator (`gpt-4o`, `llama3.1`, `smollm2`, `claude-sonnet-4.5`): a
/// bare `claude` or `gemma` is as likely a person's name.
const MODEL_FAMILIES: &[&str] = &[
    "gpt",
    "chatgpt",
    "o1",
    "o3",
    "o4",
    "davinci",
    "text-davinci",
    "claude",
    "gemini",
    "gemma",
    "palm",
    "bard",
    "llama",
    "codellama",
    "tinyllama",
    "mistral",
    "mixtral",
    "codestral",
    "ministral",
    "magistral",
    "devstral",
    "pixtral",
    "qwen",
    "qwq",
    "deepseek",
    "phi",
    "smollm",
    "falcon",
    "command-r",
    "grok",
    "nanochat",
    "olmo",
    "granite",
    "internlm",
    "starcoder",
    "vicuna",
    "zephyr",
    "nemotron",
    "kimi",
    "glm",
    "chatglm",
    "yi",
    "aya",
    "jamba",
    "dbrx",
    "openchat",
    "orca",
    "wizardlm",
    "hermes",
    "nous-hermes",
    "solar",
    "stablelm",
    "baichuan",
    "ernie",
    "reka",
    "sonar",
    "exaone",
    "hunyuan",
    "minimax",
];

/// Whether `name` (a message's username) is a model's name rather than a
/// person's. The rule, case-insensitive, after dropping a `vendor/` prefix
/// (`meta-llama/Llama-3.1-8B`):
/// 1. it equals one of `known_models` (with or without its prefix);
/// 2. or it is `assistant`;
/// 3. or, containing no whitespace, it starts with one of the model families
///    above followed by a digit or one of `-._:` and more
///    (`gpt-4o`, `claude-sonnet-4.5`, `llama3.1:8b`, `SmolLM2`);
/// 4. or it carries a parameter-size tag: a part (split at `-_:/`) such as
///    `8b`, `1.7b`, `135m` or `8x7b` (`mybot:7b`, `foo-13B`).
pub fn is_model_name<S: AsRef<str>>(name: &str, known_models: &[S]) -> bool {
    let name = name.trim();
    if name.is_empty() {
        return false;
    }
    let base = |n: &str| -> String {
        n.trim()
            .rsplit_once('/')
            .map_or(n.trim(), |(_, b)| b)
            .to_ascii_lowercase()
    };
    let lower = base(name);
    if known_models
        .iter()
        .any(|k| !k.as_ref().trim().is_empty() && base(k.as_ref()) == lower)
    {
        return true;
    }
    if lower == "assistant" {
        return true;
    }
    if name.chars().any(char::is_whitespace) {
        return false;
    }
    let family = MODEL_FAMILIES.iter().any(|f| {
        lower.strip_prefix(f).is_some_and(|rest| {
            let mut chars = rest.chars();
            match chars.next() {
                Some(c) if c.is_ascii_digit() => true,
                Some('-' | '.' | '_' | ':') => chars.any(|c| c.is_ascii_alphanumeric()),
                _ => false,
            }
        })
    });
    family || lower.split(['-', '_', ':', '/']).any(is_size_tag)
}

/// `8b`, `1.7b`, `135m`, `8x7b`: a model's parameter count.
fn is_size_tag(part: &str) -> bool {
    let Some(num) = part.strip_suffix(['b', 'm']) else {
        return false;
    };
    let num = match num.split_once('x') {
        Some((experts, size))
            if !experts.is_empty() && experts.bytes().all(|b| b.is_ascii_digit()) =>
        {
            size
        }
        Some(_) => return false,
        None => num,
    };
    let (whole, frac) = num.split_once('.').unwrap_or((num, "0"));
    !whole.is_empty()
        && !frac.is_empty()
        && whole.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit())
}

impl TruthEntry {
    /// A new entry with a derived id.
    pub fn new(
        title: impl Into<String>,
        timestamp: Timestamp,
        certainty: f64,
        content_xhtml: impl Into<String>,
    ) -> Self {
        let mut t = TruthEntry {
            id: String::new(),
            title: title.into(),
            timestamp,
            certainty: certainty.clamp(0.0, 1.0),
            content: content_xhtml.into(),
            kind: None,
            status: None,
            resolution: None,
            supersedes: None,
            tags: None,
            expires: None,
            refs: None,
            updated: None,
            source: None,
            provenance: None,
            archived: None,
            used: None,
            extra: Extra::new(),
        };
        t.id = ids::truth_id(&t.title, t.timestamp.as_str(), &t.content);
        t
    }
}

impl PartialEq for State {
    /// Equality of content; the save bookkeeping is not content.
    fn eq(&self, other: &Self) -> bool {
        self.version == other.version
            && self.schema == other.schema
            && self.date == other.date
            && self.context == other.context
            && self.messages == other.messages
            && self.truth == other.truth
            && self.extra == other.extra
    }
}

impl State {
    /// An empty state with SPEC defaults, dated `now`.
    pub fn new(now: Timestamp) -> Self {
        State {
            version: VERSION,
            schema: SCHEMA_URL.to_owned(),
            date: now,
            context: String::new(),
            messages: Vec::new(),
            truth: Truth {
                retrieval_prefs: RetrievalPrefs::spec_defaults(),
                ..Truth::default()
            },
            extra: Extra::new(),
            clean_prefix: 0,
            save_token: 0,
            transcript: TranscriptLog::new(),
            links: Default::default(),
            savepoints: Vec::new(),
        }
    }

    /// The transcript's contents now (see [`TranscriptVersion`]).
    pub fn transcript_version(&self) -> TranscriptVersion {
        self.transcript.current(self.messages.len())
    }

    /// True when the first `v.len` messages are exactly what they were when
    /// `v` was taken from this state (or the state it was cloned from):
    /// since then messages were at most inserted after them. False when
    /// unsure (a change anywhere, a re-read, many insertions since).
    pub fn unchanged_since(&self, v: &TranscriptVersion) -> bool {
        self.unchanged_prefix_since(v) == Some(v.len)
    }

    /// How many of the first `v.len` messages are exactly what they were
    /// when `v` was taken from this state (or the state it was cloned from):
    /// messages inserted since moved the rest, so a cache of `v` (the
    /// server's recall index) keeps that many and redoes the others.
    /// `None` when unsure (a change anywhere, a re-read, many insertions
    /// since).
    pub fn unchanged_prefix_since(&self, v: &TranscriptVersion) -> Option<usize> {
        if v.len > self.messages.len() {
            return None;
        }
        self.transcript
            .held_prefix(v, self.messages.len())
            .map(|kept| kept.min(v.len))
    }

    /// The transcript, sorted by (timestamp, id).
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Mutable access to the transcript. Callers must leave it sorted (or call
    /// [`State::normalize`]); the append fast path is disabled until the next
    /// save.
    pub fn messages_mut(&mut self) -> &mut Vec<Message> {
        self.note_any_change();
        self.clean_prefix = 0;
        self.transcript.changed_all();
        self.links.clear();
        &mut self.messages
    }

    /// Inserts a message at its sorted place (normally the end). Returns false
    /// and changes nothing when a message with the same id is present.
    pub fn push_message(&mut self, mut message: Message) -> bool {
        if message.id.is_empty() {
            message.id = ids::message_id(
                &message.username,
                message.timestamp.as_str(),
                &message.content,
            );
        }
        if self.messages.iter().rev().any(|m| m.id == message.id) {
            return false;
        }
        let pos = self
            .messages
            .partition_point(|m| m.order_key() <= message.order_key());
        self.insert_message_at(pos, message);
        true
    }

    /// Inserts `message` at `pos` (its sorted place, which the caller has
    /// found), keeping the save and transcript bookkeeping.
    pub(crate) fn insert_message_at(&mut self, pos: usize, message: Message) {
        self.note_inserted(pos);
        self.clean_prefix = self.clean_prefix.min(pos);
        self.transcript.inserted(pos, self.messages.len());
        if pos == self.messages.len() {
            self.links.appending(&self.messages, &message);
        } else {
            self.links.clear();
        }
        self.messages.insert(pos, message);
    }

    /// Number of leading messages unchanged since the last [`State::mark_saved`].
    pub fn clean_prefix(&self) -> usize {
        self.clean_prefix.min(self.messages.len())
    }

    /// Records that the current messages are what was last written, and
    /// returns a fresh token naming that save.
    pub fn mark_saved(&mut self) -> u64 {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        self.clean_prefix = self.messages.len();
        self.save_token = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.save_token
    }

    /// The token of the last [`State::mark_saved`] (0: never saved).
    pub fn save_token(&self) -> u64 {
        self.save_token
    }

    /// Finds a message by id.
    pub fn message(&self, id: &str) -> Option<&Message> {
        self.messages.iter().find(|m| m.id == id)
    }

    /// Finds a truth entry by id.
    pub fn truth_entry(&self, id: &str) -> Option<&TruthEntry> {
        self.truth.trust.iter().find(|t| t.id == id)
    }

    /// Derives missing ids and restores the canonical order of messages and
    /// truth entries. Idempotent.
    pub fn normalize(&mut self) {
        let sorted = self
            .messages
            .is_sorted_by(|a, b| a.order_key() <= b.order_key());
        if !sorted || self.messages.iter().any(|m| m.id.is_empty()) {
            self.note_any_change();
        }
        let mut changed = false;
        for m in &mut self.messages {
            if m.id.is_empty() {
                m.id = ids::message_id(&m.username, m.timestamp.as_str(), &m.content);
                changed = true;
            }
        }
        for t in &mut self.truth.trust {
            if t.id.is_empty() {
                t.id = ids::truth_id(&t.title, t.timestamp.as_str(), &t.content);
            }
        }
        // Checked again: a derived id may put messages of one instant out
        // of (timestamp, id) order.
        if !self
            .messages
            .is_sorted_by(|a, b| a.order_key() <= b.order_key())
        {
            self.messages
                .sort_by(|a, b| a.order_key().cmp(&b.order_key()));
            changed = true;
        }
        if changed {
            self.clean_prefix = 0;
            self.transcript.changed_all();
            self.links.clear();
        }
    }

    /// Renames the message `id` at `now`: sets its title (its content, and
    /// so its id, stay as they are) and stamps [`RETITLED_KEY`] with `now`,
    /// or a microsecond after the rename it replaces when the clock is not
    /// past it, so the new title wins a merge against every older copy
    /// (see `merge::join_message`). Returns the message, or `None` when
    /// there is none. Only that message's cached bytes are invalidated: the
    /// messages before it keep the append fast path.
    pub fn set_message_title(
        &mut self,
        id: &str,
        title: String,
        now: Timestamp,
    ) -> Option<&Message> {
        let pos = self.messages.iter().position(|m| m.id == id)?;
        if self.messages[pos].title != title {
            self.note_replacing(pos);
            let m = &mut self.messages[pos];
            let stamp = match m.retitled() {
                Some(before) if now <= before => before.next_micro(),
                _ => now,
            };
            m.title = title;
            m.extra.insert(
                RETITLED_KEY.to_owned(),
                RawJson::from(serde_json::Value::String(stamp.as_str().to_owned())),
            );
            self.clean_prefix = self.clean_prefix.min(pos);
            // A title is searched: a recall index kept beside this state
            // must not take it for unchanged (see `unchanged_since`).
            self.transcript.changed_all();
        }
        Some(&self.messages[pos])
    }

    /// Archives (`hidden`) or restores the conversation whose root is `id`,
    /// said at `now` — or just after the last say, so a machine whose clock
    /// runs slow still has the last word ([`ARCHIVE_KEY`]). Content, id and
    /// every other message are unchanged. `None` when no message has `id`.
    pub fn set_archived(&mut self, id: &str, hidden: bool, now: Timestamp) -> Option<&Message> {
        let pos = self.messages.iter().position(|m| m.id == id)?;
        let m = &mut self.messages[pos];
        if m.archived() != hidden {
            let at = match m.archive_say() {
                Some((before, _)) if now <= before => before.next_micro(),
                _ => now,
            };
            m.extra.insert(
                ARCHIVE_KEY.to_owned(),
                RawJson::from(serde_json::json!({"at": at.as_str(), "hidden": hidden})),
            );
            self.clean_prefix = self.clean_prefix.min(pos);
            self.transcript.changed_all();
        }
        Some(&self.messages[pos])
    }

    /// Adds a truth entry unless one with its id exists; returns whether it
    /// was added.
    pub fn add_truth(&mut self, entry: TruthEntry) -> bool {
        if self.truth.trust.iter().any(|t| t.id == entry.id) {
            return false;
        }
        self.truth.trust.push(entry);
        true
    }

    /// Applies an edit to the truth entry `id` and stamps `updated`: `now`,
    /// or a microsecond after the version edited when the clock is not past
    /// it, so the edit always wins a merge against it; returns the
    /// edited entry, or `None` when there is no such entry.
    pub fn edit_truth(&mut self, id: &str, edit: TruthEdit, now: Timestamp) -> Option<&TruthEntry> {
        let entry = self.truth.trust.iter_mut().find(|t| t.id == id)?;
        if let Some(title) = edit.title {
            entry.title = title;
        }
        if let Some(content) = edit.content {
            entry.content = content;
        }
        if let Some(c) = edit.certainty {
            entry.certainty = c.clamp(0.0, 1.0);
        }
        entry.mark_changed(now);
        Some(entry)
    }

    /// Removes a truth entry and leaves a tombstone; returns it if found.
    pub fn delete_truth(&mut self, id: &str, now: Timestamp) -> Option<TruthEntry> {
        let pos = self.truth.trust.iter().position(|t| t.id == id)?;
        let removed = self.truth.trust.remove(pos);
        // The tombstone must bury the version just removed, even when the
        // clock is behind its `updated`, and an older tombstone of the same
        // id (which did not bury it) is moved forward, not kept as it was.
        let date = now.max(removed.effective_update().clone());
        match self.truth.deleted.iter_mut().find(|d| d.id == id) {
            Some(d) => {
                if date > d.date {
                    d.date = date;
                }
            }
            None => {
                self.truth.deleted.push(Tombstone {
                    id: id.to_owned(),
                    date,
                    extra: Extra::new(),
                });
                self.truth.deleted.sort_by(|a, b| a.id.cmp(&b.id));
            }
        }
        Some(removed)
    }

    /// [`State::delete_truth`] for every entry whose id is in `ids`, in one
    /// pass (one by one, each removal costs a scan and a shift of the
    /// list). Returns the entries removed, in the list's order.
    pub fn delete_truths(
        &mut self,
        ids: &std::collections::HashSet<String>,
        now: &Timestamp,
    ) -> Vec<TruthEntry> {
        if ids.is_empty() {
            return Vec::new();
        }
        let (removed, kept): (Vec<TruthEntry>, Vec<TruthEntry>) =
            std::mem::take(&mut self.truth.trust)
                .into_iter()
                .partition(|t| ids.contains(&t.id));
        self.truth.trust = kept;
        let mut at: std::collections::HashMap<String, usize> = self
            .truth
            .deleted
            .iter()
            .enumerate()
            .map(|(i, d)| (d.id.clone(), i))
            .collect();
        for r in &removed {
            // As `delete_truth`: the tombstone buries the version removed.
            let date = now.clone().max(r.effective_update().clone());
            match at.get(&r.id) {
                Some(&i) => {
                    let d = &mut self.truth.deleted[i];
                    if date > d.date {
                        d.date = date;
                    }
                }
                None => {
                    at.insert(r.id.clone(), self.truth.deleted.len());
                    self.truth.deleted.push(Tombstone {
                        id: r.id.clone(),
                        date,
                        extra: Extra::new(),
                    });
                }
            }
        }
        self.truth.deleted.sort_by(|a, b| a.id.cmp(&b.id));
        removed
    }

    /// The branch ending at `leaf`: the messages on the path from its root
    /// to `leaf`, oldest first (empty when no message has that id).
    ///
    /// Each step goes to the message's `parent`. [Unlinked
    /// messages](Message::is_unlinked) (no parent and no mark: a legacy
    /// transcript, a tool that keeps none) form an implicit chain in
    /// (timestamp, id) order: from such a message, and from one whose
    /// `parent` is not in the file, the step goes to the latest earlier
    /// unlinked message. So a transcript without parents is one branch,
    /// turns added to it with explicit parents continue it, and forks
    /// (several children of one message) are separate branches sharing
    /// their history. A message that [starts a
    /// conversation](Message::starts_conversation) ends the walk: it is a
    /// root, and it is never a step of the implicit chain, so conversations
    /// added later (imports, New chat) never capture an unlinked message.
    /// A cycle of hand-edited parents ends the walk.
    ///
    /// Each message's step is kept between calls (built on the first walk,
    /// extended as messages are appended), so a walk costs its length, not
    /// the transcript's.
    pub fn branch(&self, leaf: &str) -> Vec<&Message> {
        match self.links.get(&self.messages) {
            Some(links) => links.branch(&self.messages, leaf),
            None => self.branch_uncached(leaf),
        }
    }

    /// The branch to `leaf` newest first — [`State::branch`] reversed —
    /// walked lazily over the cached links: a caller that reads the newest
    /// few messages of a long branch pays for those, and counts the rest
    /// with [`crate::BranchWalk::rest_excluding`].
    pub fn branch_walk(&self, leaf: &str) -> crate::links::BranchWalk<'_> {
        match self.links.get(&self.messages) {
            Some(links) => links.walk(&self.messages, leaf),
            None => crate::links::BranchWalk::eager(self.branch_uncached(leaf)),
        }
    }

    /// [`State::branch`] computed from scratch (the definition the cached
    /// walk is held to).
    pub fn branch_uncached(&self, leaf: &str) -> Vec<&Message> {
        let index: std::collections::HashMap<&str, usize> = self
            .messages
            .iter()
            .enumerate()
            .map(|(i, m)| (m.id.as_str(), i))
            .collect();
        let previous_parentless = implicit_chain(&self.messages);
        let mut seen = vec![false; self.messages.len()];
        let mut path = Vec::new();
        let mut cur = index.get(leaf).copied();
        while let Some(i) = cur {
            if std::mem::replace(&mut seen[i], true) {
                break; // a cycle in hand-edited parents: stop, never loop
            }
            let m = &self.messages[i];
            path.push(m);
            cur = match &m.parent {
                Some(p) => index.get(p.as_str()).copied().or(previous_parentless[i]),
                // A conversation's root: nothing before it belongs to it.
                None if m.starts_conversation() => None,
                None => previous_parentless[i],
            };
        }
        path.reverse();
        path
    }
}

/// The implicit chain ([`State::branch`]): for each message (by index),
/// the latest earlier [unlinked](Message::is_unlinked) message, which an
/// unlinked message, or one whose `parent` is not in the file, follows.
pub(crate) fn implicit_chain(messages: &[Message]) -> Vec<Option<usize>> {
    let mut previous = Vec::with_capacity(messages.len());
    let mut last = None;
    for (i, m) in messages.iter().enumerate() {
        previous.push(last);
        if m.is_unlinked() {
            last = Some(i);
        }
    }
    previous
}

#[cfg(test)]
mod transcript_version_tests {
    use super::*;

    fn msg(i: i64) -> Message {
        Message::new(
            "u",
            Timestamp::from_unix(1_800_000_000 + i),
            "t",
            format!("<p>m{i}</p>"),
        )
    }

    fn state(n: i64) -> State {
        let mut s = State::new(Timestamp::from_unix(1_800_000_000));
        for i in 0..n {
            s.push_message(msg(i * 10));
        }
        s
    }

    #[test]
    fn appends_keep_earlier_versions_and_changes_void_them() {
        let mut s = state(3);
        let v = s.transcript_version();
        assert_eq!(v.len, 3);
        assert!(s.unchanged_since(&v));
        assert_eq!(s.transcript_version(), v, "no change, same version");
        s.push_message(msg(100));
        let w = s.transcript_version();
        assert_ne!(v, w);
        assert!(s.unchanged_since(&v) && s.unchanged_since(&w));
        // An insertion before the end voids what covered its place.
        s.push_message(msg(15));
        assert!(!s.unchanged_since(&w), "message 2 moved");
        assert!(!s.unchanged_since(&v));
        // … but the messages before the insertion still hold for both.
        assert_eq!(s.unchanged_prefix_since(&w), Some(2));
        assert_eq!(s.unchanged_prefix_since(&v), Some(2));
        s.push_message(msg(5));
        assert_eq!(
            s.unchanged_prefix_since(&w),
            Some(1),
            "the lowest insertion counts"
        );
        s.push_message(msg(110));
        assert_eq!(
            s.unchanged_prefix_since(&w),
            Some(1),
            "an append moves nothing"
        );
        s.push_message(msg(-1));
        assert_eq!(
            s.unchanged_prefix_since(&w),
            None,
            "nothing left that holds"
        );
        let x = s.transcript_version();
        s.push_message(msg(200));
        assert!(s.unchanged_since(&x));
        assert_eq!(s.unchanged_prefix_since(&x), Some(x.len));
        // Any mutable access voids everything.
        let _ = s.messages_mut();
        assert!(!s.unchanged_since(&x));
        assert_eq!(s.unchanged_prefix_since(&x), None);
        let y = s.transcript_version();
        assert!(s.unchanged_since(&y));
        // A re-sort that changes nothing keeps the version.
        s.normalize();
        assert!(s.unchanged_since(&y));
    }

    #[test]
    fn diverging_clones_and_reparses_share_no_version() {
        let s = state(4);
        let v = s.transcript_version();
        let (mut a, mut b) = (s.clone(), s.clone());
        a.push_message(msg(1000));
        b.push_message(msg(2000));
        let va = a.transcript_version();
        assert!(a.unchanged_since(&v) && b.unchanged_since(&v));
        assert!(!b.unchanged_since(&va), "b's fifth message is another");
        // Unobserved intermediate versions are not kept, so a long run of
        // appends still leaves the first version usable.
        for i in 0..1000 {
            a.push_message(msg(3000 + i));
        }
        assert!(a.unchanged_since(&v) && a.unchanged_since(&va));
        // A state read from bytes is a new lineage, even when equal.
        let reread = crate::parse(&crate::to_canonical_vec(&s)).unwrap();
        assert_eq!(reread, s);
        assert!(!reread.unchanged_since(&v));
        // A version longer than the transcript never holds.
        let short = state(2);
        assert!(!short.unchanged_since(&v));
    }

    #[test]
    fn merge_appends_keep_the_version() {
        let mut base = state(3);
        let v = base.transcript_version();
        let mut other = state(3);
        other.push_message(msg(500));
        other.push_message(msg(600));
        crate::merge::merge_into(&mut base, &other);
        assert_eq!(base.messages().len(), 5);
        assert!(base.unchanged_since(&v));
        let w = base.transcript_version();
        let mut early = State::new(Timestamp::from_unix(1_800_000_000));
        early.push_message(msg(-5));
        crate::merge::merge_into(&mut base, &early);
        assert!(!base.unchanged_since(&w), "merged in before the start");
    }
}
