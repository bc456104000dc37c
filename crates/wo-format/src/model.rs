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
