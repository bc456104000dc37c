//! `Deserialize` for the model's records, written by hand.
//!
//! The derive with `#[serde(flatten)]` buffers every record into serde's
//! private `Content` before reading it, which loses the text of numbers (so
//! unknown fields could not survive byte for byte) and costs a copy of every
//! message. These visitors read each key once: known keys into their typed
//! fields (an optional field that is present must not be `null`; a present
//! `id` must not be empty; a known key twice is an error), anything else into
//! `extra` as [`RawJson`] with its depth checked against where it sits.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::known::KnownMessages;

use crate::model::{
    EffortStatus, Expires, Extra, Message, Provenance, RetrievalPrefs, Role, Tombstone, Truth,
    TruthEntry, TruthKind, Usage,
};
use crate::rawjson::ExtSeed;
use crate::state::State;
use crate::timestamp::Timestamp;

/// Depth (root object = 1) of the object each record is at in a state file;
/// its unknown fields' values start one level below.
pub(crate) const STATE_DEPTH: usize = 1;
pub(crate) const TRUTH_DEPTH: usize = 2;
pub(crate) const MESSAGE_DEPTH: usize = 3;
pub(crate) const PREFS_DEPTH: usize = 3;
pub(crate) const ENTRY_DEPTH: usize = 4;
pub(crate) const TOMBSTONE_DEPTH: usize = 4;
pub(crate) const USAGE_DEPTH: usize = 4;
pub(crate) const PROVENANCE_DEPTH: usize = 5;

/// A map key, borrowed from the input when it can be.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// Reads the value of a known key into `slot`, refusing a second one.
fn take<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
    map: &mut A,
    slot: &mut Option<T>,
    name: &'static str,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(de::Error::duplicate_field(name));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

/// Reads an `id`: present means non-empty (a missing one is derived later).
fn take_id<'de, A: MapAccess<'de>>(map: &mut A, slot: &mut Option<String>) -> Result<(), A::Error> {
    take(map, slot, "id")?;
    if slot.as_deref() == Some("") {
        return Err(de::Error::custom("an id must not be empty"));
    }
    Ok(())
}

/// Reads an unknown key's value into `extra` (a repeated key keeps the last).
fn take_extra<'de, A: MapAccess<'de>>(
    map: &mut A,
    extra: &mut Extra,
    key: Cow<'de, str>,
    depth: usize,
) -> Result<(), A::Error> {
    let value = map.next_value_seed(ExtSeed { base: depth })?;
    extra.insert(key.into_owned(), value);
    Ok(())
}

fn required<T, E: de::Error>(slot: Option<T>, name: &'static str) -> Result<T, E> {
    slot.ok_or_else(|| de::Error::missing_field(name))
}

/// Implements `Deserialize` for a record through a map visitor.
macro_rules! record {
    ($ty:ty, $what:literal, |$map:ident| $body:block) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str($what)
                    }
                    fn visit_map<A: MapAccess<'de>>(self, mut $map: A) -> Result<$ty, A::Error> {
                        $body
                    }
                }
                d.deserialize_map(V)
            }
        }
    };
}

record!(Message, "a message object", |map| {
    let (mut id, mut title, mut username, mut timestamp, mut content) =
        (None, None, None, None, None);
    let (mut role, mut parent, mut provider, mut model, mut usage, mut sources) = (
        None::<Role>,
        None,
        None,
        None,
        None::<Usage>,
        None::<Vec<String>>,
    );
    let mut extra = Extra::new();
    while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
        match &*key {
            "id" => take_id(&mut map, &mut id)?,
            "title" => take(&mut map, &mut title, "title")?,
            "username" => take(&mut map, &mut username, "username")?,
            "timestamp" => take(&mut map, &mut timestamp, "timestamp")?,
            "content" => take(&mut map, &mut content, "content")?,
            "role" => take(&mut map, &mut role, "role")?,
            "parent" => take(&mut map, &mut parent, "parent")?,
            "provider" => take(&mut map, &mut provider, "provider")?,
            "model" => take(&mut map, &mut model, "model")?,
            "usage" => take(&mut map, &mut usage, "usage")?,
            "sources" => take(&mut map, &mut sources, "sources")?,
            _ => take_extra(&mut map, &mut extra, key, MESSAGE_DEPTH)?,
        }
    }
    Ok(Message {
        id: id.unwrap_or_default(),
        title: required(title, "title")?,
        username: required(username, "username")?,
        timestamp: required::<Timestamp, _>(timestamp, "timestamp")?,
        content: required(content, "content")?,
        role,
        parent,
        provider,
        model,
        usage,
        sources,
        extra,
    })
});

record!(Usage, "a usage object", |map| {
    let (mut prompt_tokens, mut completion_tokens) = (None, None);
    let mut extra = Extra::new();
    while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
        match &*key {
            "prompt_tokens" => take(&mut map, &mut prompt_tokens, "prompt_tokens")?,
            "completion_tokens" => take(&mut map, &mut completion_tokens, "completion_tokens")?,
            _ => take_extra(&mut map, &mut extra, key, USAGE_DEPTH)?,
        }
    }
    Ok(Usage {
        prompt_tokens,
        completion_tokens,
        extra,
    })
});

record!(TruthEntry, "a truth entry object", |map| {
    let (mut id, mut title, mut timestamp, mut certainty, mut content) =
        (None, None, None, None::<f64>, None);
    let (mut kind, mut status, mut resolution, mut supersedes, mut tags) = (
        None::<TruthKind>,
        None::<EffortStatus>,
        None,
        None,
        None::<Vec<String>>,
    );
    let (mut expires, mut refs, mut updated, mut source) =
        (None::<Expires>, None::<u64>, None::<Timestamp>, None);
    let mut provenance = None::<Provenance>;
    let (mut archived, mut used) = (None::<Timestamp>, None::<Timestamp>);
    let mut extra = Extra::new();
    while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
        match &*key {
            "id" => take_id(&mut map, &mut id)?,
            "title" => take(&mut map, &mut title, "title")?,
            "timestamp" => take(&mut map, &mut timestamp, "timestamp")?,
            "certainty" => take(&mut map, &mut certainty, "certainty")?,
            "content" => take(&mut map, &mut content, "content")?,
            "kind" => take(&mut map, &mut kind, "kind")?,
            "status" => take(&mut map, &mut status, "status")?,
            "resolution" => take(&mut map, &mut resolution, "resolution")?,
            "supersedes" => take(&mut map, &mut supersedes, "supersedes")?,
            "tags" => take(&mut map, &mut tags, "tags")?,
            "expires" => take(&mut map, &mut expires, "expires")?,
            "refs" => take(&mut map, &mut refs, "refs")?,
            "updated" => take(&mut map, &mut updated, "updated")?,
            "source" => take(&mut map, &mut source, "source")?,
            "provenance" => take(&mut map, &mut provenance, "provenance")?,
            "archived" => take(&mut map, &mut archived, "archived")?,
            "used" => take(&mut map, &mut used, "used")?,
            _ => take_extra(&mut map, &mut extra, key, ENTRY_DEPTH)?,
        }
    }
    Ok(TruthEntry {
        id: id.unwrap_or_default(),
        title: required(title, "title")?,
        timestamp: required::<Timestamp, _>(timestamp, "timestamp")?,
        certainty: required(certainty, "certainty")?,
        content: required(content, "content")?,
        kind,
        status,
        resolution,
        supersedes,
        tags,
        expires,
        refs,
        updated,
        source,
        provenance,
        archived,
        used,
        extra,
    })
});

record!(Provenance, "a provenance object", |map| {
    let (mut messages, mut by, mut at, mut exchange) = (
        None::<Vec<String>>,
        None::<String>,
        None::<Timestamp>,
        None::<String>,
    );
    let mut extra = Extra::new();
    while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
        match &*key {
            "messages" => take(&mut map, &mut messages, "messages")?,
            "by" => take(&mut map, &mut by, "by")?,
            "at" => take(&mut map, &mut at, "at")?,
            "exchange" => take(&mut map, &mut exchange, "exchange")?,
            _ => take_extra(&mut map, &mut extra, key, PROVENANCE_DEPTH)?,
        }
    }
    Ok(Provenance {
        messages: required(messages, "messages")?,
        by: required(by, "by")?,
        at: required::<Timestamp, _>(at, "at")?,
        exchange,
        extra,
    })
});

record!(Tombstone, "a tombstone object", |map| {
    let (mut id, mut date) = (None::<String>, None::<Timestamp>);
    let mut extra = Extra::new();
    while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
        match &*key {
            "id" => take(&mut map, &mut id, "id")?,
            "date" => take(&mut map, &mut date, "date")?,
            _ => take_extra(&mut map, &mut extra, key, TOMBSTONE_DEPTH)?,
        }
    }
    Ok(Tombstone {
        id: required(id, "id")?,
        date: required(date, "date")?,
        extra,
    })
});

record!(RetrievalPrefs, "a retrieval_prefs object", |map| {
    let (mut max_entries, mut min_certainty, mut prefer_higher_certainty) =
        (None::<u64>, None::<f64>, None::<bool>);
    let (mut certainty_weight, mut recency_weight) = (None::<f64>, None::<f64>);
    let mut extra = Extra::new();
    while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
        match &*key {
            "max_entries" => take(&mut map, &mut max_entries, "max_entries")?,
            "min_certainty" => take(&mut map, &mut min_certainty, "min_certainty")?,
            "prefer_higher_certainty" => take(
                &mut map,
                &mut prefer_higher_certainty,
                "prefer_higher_certainty",
            )?,
            "certainty_weight" => take(&mut map, &mut certainty_weight, "certainty_weight")?,
            "recency_weight" => take(&mut map, &mut recency_weight, "recency_weight")?,
            _ => take_extra(&mut map, &mut extra, key, PREFS_DEPTH)?,
        }
    }
    Ok(RetrievalPrefs {
        max_entries,
        min_certainty,
        prefer_higher_certainty,
        certainty_weight,
        recency_weight,
        extra,
    })
});

record!(Truth, "a truth object", |map| {
    let (mut trust, mut retrieval_prefs, mut deleted) = (
        None::<Vec<TruthEntry>>,
        None::<RetrievalPrefs>,
        None::<Vec<Tombstone>>,
    );
    let mut extra = Extra::new();
    while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
        match &*key {
            "trust" => take(&mut map, &mut trust, "trust")?,
            "retrieval_prefs" => take(&mut map, &mut retrieval_prefs, "retrieval_prefs")?,
            "deleted" => take(&mut map, &mut deleted, "deleted")?,
            _ => take_extra(&mut map, &mut extra, key, TRUTH_DEPTH)?,
        }
    }
    Ok(Truth {
        trust: trust.unwrap_or_default(),
        retrieval_prefs: retrieval_prefs.unwrap_or_default(),
        deleted: deleted.unwrap_or_default(),
        extra,
    })
});

/// `messages`: a sequence read element by element into one vector. With
/// `known`, an element whose bytes are exactly those of a known message is
/// counted in `skipped` instead of being built again (see
/// [`crate::known::KnownMessages`]); every other element is read as usual.
struct Messages<'k> {
    known: Option<&'k KnownMessages>,
    skipped: &'k Cell<usize>,
}

impl<'de> DeserializeSeed<'de> for Messages<'_> {
    type Value = Vec<Message>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Message>, D::Error> {
        struct V<'k>(Messages<'k>);
        impl<'de> Visitor<'de> for V<'_> {
            type Value = Vec<Message>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of messages")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Message>, A::Error> {
                // A size hint from the input is untrusted: cap the reservation.
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
                let Some(known) = self.0.known else {
                    while let Some(m) = seq.next_element()? {
                        out.push(m);
                    }
                    return Ok(out);
                };
                let mut hint = 0;
                while let Some(raw) = seq.next_element::<&'de RawValue>()? {
                    if let Some(i) = known.find(raw.get().as_bytes(), hint) {
                        hint = i + 1;
                        self.0.skipped.set(self.0.skipped.get() + 1);
                        continue;
                    }
                    let m: Message = serde_json::from_str(raw.get()).map_err(de::Error::custom)?;
                    out.push(m);
                }
                Ok(out)
            }
        }
        d.deserialize_seq(V(self))
    }
}

/// Reads a state's fields; see [`Messages`] for `known`.
fn visit_state<'de, A: MapAccess<'de>>(
    mut map: A,
    known: Option<&KnownMessages>,
    skipped: &Cell<usize>,
) -> Result<State, A::Error> {
    let (mut version, mut schema, mut date, mut context) = (
        None::<u64>,
        None::<String>,
        None::<Timestamp>,
        None::<String>,
    );
    let (mut messages, mut truth) = (None::<Vec<Message>>, None::<Truth>);
    let mut extra = Extra::new();
    while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
        match &*key {
            "version" => take(&mut map, &mut version, "version")?,
            "schema" => take(&mut map, &mut schema, "schema")?,
            "date" => take(&mut map, &mut date, "date")?,
            "context" => take(&mut map, &mut context, "context")?,
            "messages" => {
                if messages.is_some() {
                    return Err(de::Error::duplicate_field("messages"));
                }
                messages = Some(map.next_value_seed(Messages { known, skipped })?);
            }
            "truth" => take(&mut map, &mut truth, "truth")?,
            _ => take_extra(&mut map, &mut extra, key, STATE_DEPTH)?,
        }
    }
    Ok(State {
        version: required(version, "version")?,
        schema: required(schema, "schema")?,
        date: required(date, "date")?,
        context: context.unwrap_or_default(),
        messages: required(messages, "messages")?,
        truth: truth.unwrap_or_default(),
        extra,
        clean_prefix: 0,
        save_token: 0,
        transcript: crate::transcript::TranscriptLog::new(),
        links: Default::default(),
        key_cache: Default::default(),
        savepoints: Vec::new(),
    })
}

impl<'de> Deserialize<'de> for State {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = State;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a state object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<State, A::Error> {
                visit_state(map, None, &Cell::new(0))
            }
        }
        d.deserialize_map(V)
    }
}

/// A state whose messages already known are only counted (see [`Messages`]).
pub(crate) struct StateSeed<'k> {
    pub known: &'k KnownMessages,
    pub skipped: &'k Cell<usize>,
}

impl<'de> DeserializeSeed<'de> for StateSeed<'_> {
    type Value = State;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<State, D::Error> {
        struct V<'k>(StateSeed<'k>);
        impl<'de> Visitor<'de> for V<'_> {
            type Value = State;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a state object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<State, A::Error> {
                visit_state(map, Some(self.0.known), self.0.skipped)
            }
        }
        d.deserialize_map(V(self))
    }
}
