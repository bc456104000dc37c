//! A string that must never be shown: API keys.
//!
//! `Debug` and `Display` print `***`, there is no `Serialize`, and the only
//! way to read the value is the explicitly named [`Secret::expose`], so a key
//! cannot reach a log line, an error message or `llm.json` by accident.

use std::fmt;

use serde::{Deserialize, Deserializer};

/// An API key or bearer token.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap a key.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    /// The key itself, for building the one request header that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// Replace every occurrence of this key in `text` with `***` (server
    /// error bodies sometimes echo the key back).
    pub fn scrub(&self, text: &str) -> String {
        // Very short "keys" would scrub ordinary words; real keys are long.
        if self.0.len() < 8 {
            return text.to_owned();
        }
        text.replace(&self.0, "***")
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Secret)
    }
}
