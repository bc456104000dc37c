//! What a face asks of one turn ([`TurnRequest`], with the memory step it
//! runs after the commit) and the one validation of its inputs: the raw
//! parameters a face received (flags, a JSON body) plus the config's
//! `[defaults]` become a valid [`TurnRequest`] or a [`FieldError`] naming
//! the field at fault.
//! Each face names that field its own way: the CLI as a flag
//! ([`Field::flag`]), the server as a JSON pointer ([`Field::pointer`]).
//!
//! The range checks every face shares ([`check_certainty`],
//! [`check_temperature`]) and the "no such provider" message
//! ([`unknown_provider`]) live here too, so that they are written once.

use wo_format::State;
use wo_format::records::MAX_NAME_CHARS;
use wo_providers::Config;

use std::sync::Arc;

use wo_format::Role;
use wo_providers::Provider;

use crate::assemble::ChunkCandidate;

/// Tokens kept free for the answer when `max_tokens` is not given.
pub const DEFAULT_ANSWER_RESERVE: u32 = 512;

/// What the caller asks for one turn.
#[derive(Clone, Debug, Default)]
pub struct TurnRequest {
    /// The user's message, as typed (plain text).
    pub prompt: String,
    /// Who asks: the user message's `username`.
    pub username: String,
    /// System instructions for this turn only (never persisted).
    pub system: Option<String>,
    /// The model to ask; `None`: the provider's default model.
    pub model: Option<String>,
    /// Sampling temperature passed to the provider (0 to 2, checked by
    /// [`crate::request::TurnParams::build`]); `None`: the provider's own.
    pub temperature: Option<f32>,
    /// Longest answer in tokens; also the reserve kept free in the window
    /// (default [`DEFAULT_ANSWER_RESERVE`]).
    pub max_tokens: Option<u32>,
    /// The windows servers have said they hold, smaller than their
    /// providers' `context_window` settings, kept across the turns of a
    /// long-running face (a server, a chat session): a turn starts fitted to
    /// its provider's, and adds what it learns. `None`: nothing kept.
    pub said_windows: Option<std::sync::Arc<crate::window::SaidWindows>>,
    /// The message this turn follows (branching); default: the latest,
    /// unless `new_conversation`.
    pub parent: Option<String>,
    /// The question starts a new conversation: it follows no message (it
    /// is stored without a parent, marked as a conversation's root) and no
    /// recent turns are sent with it. [`crate::request::TurnParams::build`]
    /// refuses it together with a `parent`.
    pub new_conversation: bool,
    /// Regenerate: answer this stored question again. The prompt is its
    /// text and `parent` / `new_conversation` where it stands
    /// ([`crate::request::regenerating`] fills all three); the commit appends
    /// only the answer, a sibling of the earlier ones.
    pub regenerate: Option<String>,
    /// Include truth entries (the `rag` tool; default on).
    pub no_rag: bool,
    /// File chunks retrieved from the directory index, if any.
    pub chunks: Vec<ChunkCandidate>,
    /// Fetch the links of the truth entries sent (the `url_fetch` tool),
    /// under this policy; `None` leaves links unfetched.
    pub url_fetch: Option<wo_fetch::FetchPolicy>,
    /// Overrides `truth.retrieval_prefs.max_entries` for this turn.
    pub max_entries: Option<usize>,
    /// Overrides `truth.retrieval_prefs.min_certainty` for this turn.
    pub min_certainty: Option<f64>,
    /// Model names the config knows (every provider's `model`, the default
    /// model): earlier messages written under one of these names are sent
    /// as the assistant's. The answering model is added when the turn is
    /// prepared (`chat::run_turn`).
    pub known_models: Vec<String>,
    /// The earlier turns of a conversation the client keeps itself (an
    /// OpenAI-compatible client), oldest first: sent instead of the stored
    /// branch's recent turns ([`crate::assemble::AssemblyOptions::conversation`]).
    /// The exchange is still appended after the latest message (or `parent`).
    pub conversation: Option<Vec<(Role, String)>>,
    /// The memory interpreter to run on the exchange once it is committed
    /// (product §7); `None` when `[interpreter] mode = "off"`.
    pub memory: Option<MemoryStep>,
    /// A cancellation keeps the exchange: the question and the answer as far
    /// as it got are committed — an empty answer when it came before the
    /// first word, so the question is never lost —, the answer marked
    /// incomplete (`usage.truncated = {"reason": "stopped"}`, finish reason
    /// [`STOPPED`]) and no memory step runs (the reader stopped it: an
    /// interpretation of half an answer would remember what was never
    /// said). Off, a cancellation commits nothing. The CLI's Ctrl-C and the
    /// local server's chat set it.
    pub keep_partial: bool,
    /// `[memory] archive_after_days`: entries with `expires` unused this
    /// long are archived when the turn is recorded; `None`: never.
    pub archive_after_days: Option<u32>,
    /// `[memory] recall_tokens`: the most tokens memory adds to the
    /// question ([`crate::assemble::AssemblyOptions::recall_tokens`]);
    /// `None`: the default.
    pub recall_tokens: Option<usize>,
    /// Dense recall for this turn (the embedding model and the
    /// transcript's vectors, [`crate::dense`]); `None`: BM25 alone.
    pub dense: Option<crate::dense::DenseRecall>,
}

/// The finish reason of an answer stopped by its reader and kept
/// ([`TurnRequest::keep_partial`]); also `usage.truncated.reason`.
pub const STOPPED: &str = "stopped";

/// The memory interpreter a turn runs after its commit: which provider
/// interprets, with which prompt, and the name its operations are
/// attributed to (`provider/model`).
#[derive(Clone)]
pub struct MemoryStep {
    /// The provider that interprets the exchange (often the one that answered).
    pub provider: Arc<dyn Provider>,
    /// The interpreter prompt in effect (`memory::prompt_in_effect`).
    pub prompt: String,
    /// Who the operations are attributed to in their provenance:
    /// `provider/model`.
    pub by: String,
}

impl MemoryStep {
    /// The step for `provider` (named as `provider/model`) with `prompt`.
    pub fn new(provider: Arc<dyn Provider>, prompt: String) -> Self {
        let by = format!("{}/{}", provider.name(), provider.default_model());
        MemoryStep {
            provider,
            prompt,
            by,
        }
    }
}

impl std::fmt::Debug for MemoryStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStep").field("by", &self.by).finish()
    }
}

/// Every model name `cfg` knows (the default model and each provider's), for
/// [`TurnRequest::known_models`].
pub fn configured_models(cfg: &wo_providers::Config) -> Vec<String> {
    let mut names: Vec<String> = cfg.defaults.model.iter().cloned().collect();
    for p in cfg.providers.values() {
        if let Some(m) = &p.model
            && !names.contains(m)
        {
            names.push(m.clone());
        }
    }
    names
}

/// A field of a turn's inputs, as every face knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// The user's message (the question).
    Message,
    /// The sampling temperature (0 to 2).
    Temperature,
    /// The longest answer, in tokens (at least 1).
    MaxTokens,
    /// The lowest certainty of a truth entry sent (0 to 1).
    MinCertainty,
    /// A truth entry's certainty.
    Certainty,
    /// The message the turn follows.
    Parent,
    /// The question a regenerated answer answers.
    Regenerate,
    /// The provider (by name), or its configuration.
    Provider,
    /// Who asks (the question's username).
    Username,
    /// The model (its name becomes the answer's username).
    Model,
}

impl Field {
    /// The command-line flag that sets this field.
    pub fn flag(self) -> &'static str {
        match self {
            Field::Message => "the question",
            Field::Temperature => "--temperature",
            Field::MaxTokens => "--max-tokens",
            Field::MinCertainty => "--min-certainty",
            Field::Certainty => "--certainty",
            Field::Parent => "--parent",
            Field::Regenerate => "--regenerate",
            Field::Provider => "--provider",
            Field::Username => "--username",
            Field::Model => "--model",
        }
    }

    /// The JSON pointer of this field in a chat request body
    /// (`POST /api/chat`, `POST /api/stateless/chat`).
    pub fn pointer(self) -> &'static str {
        match self {
            Field::Message => "/message",
            Field::Temperature => "/params/temperature",
            Field::MaxTokens => "/params/max_tokens",
            Field::MinCertainty => "/params/min_certainty",
            Field::Certainty => "/certainty",
            Field::Parent => "/parent",
            Field::Regenerate => "/regenerate",
            Field::Provider => "/params/provider",
            Field::Username => "/username",
            Field::Model => "/params/model",
        }
    }
}

/// What regenerating an answer asks again ([`regenerating`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Regenerating {
    /// The stored question's id: the new answer's parent.
    pub question: String,
    /// Its text, as it was asked (`wo_format::xhtml::recover_text`, else its
    /// plain text).
    pub prompt: String,
    /// What the question follows (`None`: it starts its conversation).
    pub parent: Option<String>,
}

impl Regenerating {
    /// `params` asking the question again in place: its text, where it
    /// stands, and the question the answer joins.
    pub fn apply(self, params: &mut TurnParams) {
        params.message = self.prompt;
        params.new_conversation = self.parent.is_none();
        params.parent = self.parent;
        params.regenerate = Some(self.question);
    }
}

/// The question to answer again for `id`: the message with that id (or a
/// unique prefix of it) when it is a question, the question it answers when
/// it is an answer. An answer to no stored question, or a system message,
/// cannot be regenerated.
pub fn regenerating(state: &State, id: &str) -> Result<Regenerating, FieldError> {
    let refuse = |m: String| FieldError::new(Field::Regenerate, m);
    let found = wo_format::query::find_by_prefix(state.messages(), |m| m.id.as_str(), id.trim())
        .map_err(refuse)?;
    let question = match found.effective_role() {
        wo_format::Role::User => found,
        wo_format::Role::Assistant => found
            .parent
            .as_deref()
            .and_then(|p| state.message(p))
            .filter(|q| q.effective_role() == wo_format::Role::User)
            .ok_or_else(|| {
                refuse(format!(
                    "{} answers no stored question, so there is nothing to ask again",
                    found.id
                ))
            })?,
        wo_format::Role::System => {
            return Err(refuse(format!(
                "{} is a system message, not a question",
                found.id
            )));
        }
    };
    let prompt = wo_format::xhtml::recover_text(&question.content)
        .unwrap_or_else(|| wo_format::xhtml::to_plain_text(&question.content));
    // Where the question stands: its parent, or the message the implicit
    // chain gives it, so the answer sees the same earlier turns.
    let branch = state.branch(&question.id);
    let parent = branch.len().checked_sub(2).map(|i| branch[i].id.clone());
    Ok(Regenerating {
        question: question.id.clone(),
        prompt,
        parent,
    })
}

/// A turn input that is not valid: which field, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FieldError {
    /// Which input is wrong.
    pub field: Field,
    /// What is wrong with it, without the field's name (each face adds its
    /// own: a flag or a JSON pointer).
    pub message: String,
}

impl FieldError {
    /// An error on `field` saying `message`.
    pub fn new(field: Field, message: impl Into<String>) -> Self {
        FieldError {
            field,
            message: message.into(),
        }
    }

    /// The message with the field named as a command-line flag.
    pub fn for_cli(&self) -> String {
        let hint = match self.field {
            Field::Parent => "\nhint: `wo log` shows message ids",
            Field::Certainty | Field::MinCertainty => "\nhint: 0 = pure guess, 1 = certain",
            _ => "",
        };
        match self.field {
            // The question is not a flag: the message says what it is.
            Field::Message => format!("{}{hint}", self.message),
            _ => format!("{}: {}{hint}", self.field.flag(), self.message),
        }
    }
}

/// A certainty (of a truth entry, or the least one retrieval accepts):
/// within 0–1. The error says why, without naming the field.
pub fn check_certainty(value: f64) -> Result<f64, String> {
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("{value} must be between 0 and 1"))
    }
}

/// A sampling temperature: within 0–2, the range every provider takes.
pub fn check_temperature(value: f32) -> Result<f32, String> {
    if wo_providers::config::temperature_in_range(value) {
        Ok(value)
    } else {
        Err(format!("{value} must be between 0 and 2"))
    }
}

/// `None` when `name` is a configured provider; else the one message that
/// says so, listing those configured.
pub fn unknown_provider(cfg: &Config, name: &str) -> Option<String> {
    if cfg.providers.contains_key(name) {
        return None;
    }
    let known: Vec<&str> = cfg.providers.keys().map(String::as_str).collect();
    Some(format!(
        "provider {name:?} is not configured (known: {})",
        known.join(", ")
    ))
}

/// `-m PROVIDER/MODEL`: when no provider was named and `model` starts with
/// a configured provider's name and a `/`, that provider and the rest as
/// its model. Anything else (a model name with a `/` of its own, such as
/// `meta-llama/Llama-3`) is left alone: `None`.
pub fn split_provider_model(cfg: &Config, model: &str) -> Option<(String, String)> {
    let (provider, rest) = model.split_once('/')?;
    (cfg.providers.contains_key(provider) && !rest.trim().is_empty())
        .then(|| (provider.to_owned(), rest.to_owned()))
}

/// A turn's inputs as a face received them, before validation.
#[derive(Clone, Debug, Default)]
pub struct TurnParams {
    /// The question, as typed; must not be blank.
    pub message: String,
    /// Who asks; empty or absent: [`TurnParams::build`]'s default username.
    pub username: Option<String>,
    /// System instructions for this turn only.
    pub system: Option<String>,
    /// The provider the face chose by name, if the user named one: the
    /// config's default model applies only when none was named.
    pub provider_named: bool,
    /// The model to ask; `None`: the config's default model if no provider
    /// was named, else the provider's own.
    pub model: Option<String>,
    /// Sampling temperature, 0 to 2; `None`: `[defaults] temperature`.
    pub temperature: Option<f32>,
    /// Longest answer in tokens, at least 1; `None`: `[defaults] max_tokens`.
    pub max_tokens: Option<u32>,
    /// The message the turn follows (branching); `None`: the latest.
    pub parent: Option<String>,
    /// Start a new conversation (no parent, no recent turns); refused
    /// together with `parent`.
    pub new_conversation: bool,
    /// Regenerate: the stored question to answer again (see
    /// [`regenerating`], which fills `message`, `parent` and
    /// `new_conversation` from it).
    pub regenerate: Option<String>,
    /// The `rag` tool (truth entries, file chunks).
    pub rag: bool,
    /// The `url_fetch` tool.
    pub url_fetch: bool,
    /// Truth entries sent at most, overriding `retrieval_prefs.max_entries`.
    pub max_entries: Option<u64>,
    /// Lowest certainty of a truth entry sent, 0 to 1, overriding
    /// `retrieval_prefs.min_certainty`.
    pub min_certainty: Option<f64>,
    /// Longest message accepted, in characters (a server's limit).
    pub max_message_chars: Option<usize>,
    /// Earlier turns the client keeps itself, oldest first
    /// ([`TurnRequest::conversation`]).
    pub conversation: Option<Vec<(wo_format::Role, String)>>,
}

impl TurnParams {
    /// The validated request: every range checked, `[defaults]
    /// temperature/max_tokens/model` filling what was not given.
    pub fn build(
        self,
        cfg: &Config,
        default_username: impl FnOnce() -> String,
    ) -> Result<TurnRequest, FieldError> {
        if self.message.trim().is_empty() {
            return Err(FieldError::new(Field::Message, "the message is empty"));
        }
        if let Some(limit) = self.max_message_chars
            && self.message.chars().count() > limit
        {
            return Err(FieldError::new(
                Field::Message,
                format!("longer than {limit} characters"),
            ));
        }
        if self.new_conversation && self.parent.is_some() {
            return Err(FieldError::new(
                Field::Parent,
                "a new conversation follows no message: give a parent or new_conversation, not both",
            ));
        }
        let temperature = self.temperature.or(cfg.defaults.temperature);
        if let Some(t) = temperature {
            check_temperature(t).map_err(|m| FieldError::new(Field::Temperature, m))?;
        }
        if let Some(c) = self.min_certainty {
            check_certainty(c).map_err(|m| FieldError::new(Field::MinCertainty, m))?;
        }
        let max_tokens = self.max_tokens.or(cfg.defaults.max_tokens);
        if max_tokens == Some(0) {
            return Err(FieldError::new(Field::MaxTokens, "must be at least 1"));
        }
        // A name becomes a message's username: blank is no name, and no
        // name is written longer than the file's bound.
        let long = |field: Field, name: &str| {
            let n = name.chars().count();
            if n > MAX_NAME_CHARS {
                Err(FieldError::new(
                    field,
                    format!("{n} characters, more than {MAX_NAME_CHARS}"),
                ))
            } else {
                Ok(())
            }
        };
        if let Some(u) = &self.username {
            long(Field::Username, u.trim())?;
        }
        let model = self
            .model
            .filter(|m| !m.trim().is_empty())
            .or_else(|| cfg.defaults.model.clone().filter(|_| !self.provider_named));
        if let Some(m) = &model {
            long(Field::Model, m)?;
        }
        Ok(TurnRequest {
            prompt: self.message.trim_end().to_owned(),
            username: self
                .username
                .map(|u| u.trim().to_owned())
                .filter(|u| !u.is_empty())
                .unwrap_or_else(default_username),
            system: self.system,
            model,
            temperature,
            max_tokens,
            said_windows: None,
            parent: self.parent,
            new_conversation: self.new_conversation,
            regenerate: self.regenerate,
            no_rag: !self.rag,
            chunks: Vec::new(),
            url_fetch: self.url_fetch.then(wo_fetch::FetchPolicy::default),
            max_entries: self
                .max_entries
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            min_certainty: self.min_certainty,
            known_models: configured_models(cfg),
            conversation: self.conversation,
            // The face adds it (`memory::step_for`): it knows the project.
            memory: None,
            // Each face decides (the CLI keeps a stopped answer).
            keep_partial: false,
            archive_after_days: cfg.memory.archive_after_days(),
            recall_tokens: cfg.memory.recall_tokens,
            // The face adds it: it holds the embedding model.
            dense: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(defaults: &str) -> Config {
        let text = format!(
            "[defaults]\n{defaults}\n[providers.up]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n"
        );
        let env = wo_providers::config::Env::from_pairs::<&str, &str>([]);
        Config::from_toml(&text, std::path::Path::new("config.toml"), env).unwrap()
    }

    fn params(message: &str) -> TurnParams {
        TurnParams {
            message: message.into(),
            rag: true,
            ..TurnParams::default()
        }
    }

    #[test]
    fn defaults_fill_what_was_not_given() {
        let cfg = cfg("temperature = 0.3\nmax_tokens = 77\nmodel = \"dm\"");
        let req = params("hi  \n").build(&cfg, || "me".into()).unwrap();
        assert_eq!(req.prompt, "hi");
        assert_eq!(req.username, "me");
        assert_eq!(req.temperature, Some(0.3));
        assert_eq!(req.max_tokens, Some(77));
        assert_eq!(req.model.as_deref(), Some("dm"));
        // What was given wins; naming a provider drops the default model.
        let req = TurnParams {
            temperature: Some(1.5),
            max_tokens: Some(5),
            provider_named: true,
            username: Some(" ann ".into()),
            ..params("hi")
        }
        .build(&cfg, || "me".into())
        .unwrap();
        assert_eq!(req.temperature, Some(1.5));
        assert_eq!(req.max_tokens, Some(5));
        assert_eq!(req.model, None);
        assert_eq!(req.username, "ann");
    }

    #[test]
    fn the_configured_recall_tokens_reach_the_turn() {
        let req = params("hi").build(&cfg(""), || "me".into()).unwrap();
        assert_eq!(req.recall_tokens, None, "the engine's default");
        let cfg = cfg("[memory]\nrecall_tokens = 12000");
        let req = params("hi").build(&cfg, || "me".into()).unwrap();
        assert_eq!(req.recall_tokens, Some(12_000));
    }

    #[test]
    fn each_bad_field_is_named() {
        let cfg = cfg("");
        let cases = [
            (params("  "), Field::Message),
            (
                TurnParams {
                    max_message_chars: Some(3),
                    ..params("four")
                },
                Field::Message,
            ),
            (
                TurnParams {
                    temperature: Some(2.5),
                    ..params("hi")
                },
                Field::Temperature,
            ),
            (
                TurnParams {
                    temperature: Some(f32::NAN),
                    ..params("hi")
                },
                Field::Temperature,
            ),
            (
                TurnParams {
                    min_certainty: Some(-0.1),
                    ..params("hi")
                },
                Field::MinCertainty,
            ),
            (
                TurnParams {
                    max_tokens: Some(0),
                    ..params("hi")
                },
                Field::MaxTokens,
            ),
            (
                TurnParams {
                    parent: Some("m_0000000000000000".into()),
                    new_conversation: true,
                    ..params("hi")
                },
                Field::Parent,
            ),
        ];
        for (p, field) in cases {
            let e = p.build(&cfg, || "me".into()).unwrap_err();
            assert_eq!(e.field, field, "{e}");
        }
    }

    #[test]
    fn fields_map_to_flags_and_pointers() {
        let e = FieldError::new(Field::Temperature, "3 must be between 0 and 2");
        assert_eq!(e.for_cli(), "--temperature: 3 must be between 0 and 2");
        assert_eq!(e.field.pointer(), "/params/temperature");
        let e = FieldError::new(Field::Parent, "no such message \"m_x\"");
        assert!(e.for_cli().starts_with("--parent: no such message"));
        assert!(e.for_cli().contains("wo log"));
        assert_eq!(Field::MaxTokens.flag(), "--max-tokens");
        assert_eq!(Field::MaxTokens.pointer(), "/params/max_tokens");
        assert_eq!(Field::MinCertainty.pointer(), "/params/min_certainty");
        assert_eq!(Field::Message.pointer(), "/message");
    }

    #[test]
    fn ranges_and_unknown_provider() {
        assert!(check_certainty(0.0).is_ok() && check_certainty(1.0).is_ok());
        assert!(check_certainty(1.01).is_err() && check_certainty(f64::NAN).is_err());
        assert!(check_temperature(2.0).is_ok() && check_temperature(-0.1).is_err());
        let cfg = cfg("");
        assert_eq!(unknown_provider(&cfg, "up"), None);
        let msg = unknown_provider(&cfg, "nope").unwrap();
        assert_eq!(
            msg,
            "provider \"nope\" is not configured (known: anthropic, local, openai, up)"
        );
    }
}
