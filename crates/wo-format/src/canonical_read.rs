//! Reading one message element laid out as the canonical writer lays it
//! out (`    {`, one key a line at six spaces, `\n    }`), without serde's
//! per-key machinery: the file a store wrote is re-read on every one-shot
//! write, and at 100k messages serde's generic key matching and string
//! scanning were half of that parse.
//!
//! The reader is a shortcut, never a second definition: whenever it is not
//! sure — an unusual layout, an escape in a key, a known key twice, a value
//! that does not read — the element is read by serde, so the message (or
//! the error) is always the one [`serde_json::from_str`] gives. A property
//! test holds the two to each other.

use serde::de::DeserializeSeed;

use crate::model::{Extra, Message, Role, Usage};
use crate::model_de::MESSAGE_DEPTH;
use crate::rawjson::ExtSeed;
use crate::timestamp::Timestamp;

/// The message in `element` (the bytes of one array element, from its
/// indentation to its closing brace), exactly as serde reads it.
pub(crate) fn read_message(element: &str) -> Result<Message, serde_json::Error> {
    match read_canonical(element) {
        Some(message) => Ok(message),
        None => serde_json::from_str(element),
    }
}

const OPEN: &str = "    {\n      \"";
const NEXT_KEY: &str = ",\n      \"";
const CLOSE: &str = "\n    }";

/// The canonical shortcut; `None`: not sure, let serde read it.
fn read_canonical(element: &str) -> Option<Message> {
    let body_end = element.len().checked_sub(CLOSE.len())?;
    // `ends_with`, not a slice at `body_end`: in bytes that are not wo's
    // layout that offset can fall inside a character.
    if !element.starts_with(OPEN) || !element.ends_with(CLOSE) {
        return None;
    }
    let mut fields = Fields::default();
    // `at`: the start of a key's name, just after its opening quote.
    let mut at = OPEN.len();
    loop {
        let rest = element.get(at..body_end)?;
        let key_len = memchr::memchr2(b'"', b'\\', rest.as_bytes())?;
        let key = &rest[..key_len];
        if rest.as_bytes()[key_len] != b'"' || key.bytes().any(|b| b < 0x20) {
            return None;
        }
        // After the key's closing quote: `": "` then the value.
        if !rest[key_len + 1..].starts_with(": ") {
            return None;
        }
        let value_start = at + key_len + 3;
        let value = value_at(element, value_start, body_end)?;
        let value_end = value_start + value.text.len();
        fields.set(key, &value)?;
        if value_end == body_end {
            break;
        }
        at = value_end + NEXT_KEY.len();
    }
    fields.finish()
}

/// One value of the element: its JSON text, and its contents when it is a
/// string with no escape (found while finding its end).
struct Value<'a> {
    text: &'a str,
    plain: Option<&'a str>,
}

/// The value starting at `start`: it ends at the next key of this element
/// (`,\n` and a key at six spaces) or at its closing brace. Nested values
/// are indented deeper and strings hold no raw newline, so the first such
/// break is the value's end; a string is found by its closing quote. A
/// value cut wrongly (a layout that only looks canonical) does not read as
/// JSON, and the element then goes to serde.
fn value_at(element: &str, start: usize, body_end: usize) -> Option<Value<'_>> {
    let bytes = element.as_bytes();
    let (after, escaped) = if bytes.get(start) == Some(&b'"') {
        let mut i = start + 1;
        let mut escaped = false;
        loop {
            i += memchr::memchr2(b'"', b'\\', bytes.get(i..body_end)?)?;
            if bytes[i] == b'\\' {
                escaped = true;
                i += 2;
            } else {
                break (i + 1, escaped);
            }
        }
    } else {
        (start, true)
    };
    let rest = bytes.get(after..body_end)?;
    // The common case, a string followed at once by the next key or the
    // end, needs no search.
    let end = if after > start && (rest.is_empty() || rest.starts_with(NEXT_KEY.as_bytes())) {
        after
    } else {
        static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new(NEXT_KEY.as_bytes()));
        FINDER.find(rest).map_or(body_end, |k| after + k)
    };
    let text = &element[start..end];
    // Control characters are refused by JSON: a string holding one goes
    // the long way (one branch-free pass).
    let plain = (!escaped && end == after)
        .then(|| &text[1..text.len() - 1])
        .filter(|s| s.bytes().fold(0x20, u8::min) >= 0x20);
    Some(Value { text, plain })
}

/// A string value: plain ones directly, any other by serde.
fn string(value: &Value) -> Option<String> {
    match value.plain {
        Some(s) => Some(s.to_owned()),
        None => serde_json::from_str(value.text).ok(),
    }
}

#[derive(Default)]
struct Fields {
    id: Option<String>,
    title: Option<String>,
    username: Option<String>,
    timestamp: Option<Timestamp>,
    content: Option<String>,
    role: Option<Role>,
    parent: Option<String>,
    provider: Option<String>,
    model: Option<String>,
    usage: Option<Usage>,
    sources: Option<Vec<String>>,
    extra: Extra,
}

/// Fills an empty slot; a known key seen twice is serde's error to report.
fn fill<T>(slot: &mut Option<T>, value: Option<T>) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(value?);
    Some(())
}

impl Fields {
    /// Reads `value` (its JSON text) into the field `key` names.
    fn set(&mut self, key: &str, value: &Value) -> Option<()> {
        match key {
            "id" => fill(&mut self.id, string(value).filter(|id| !id.is_empty())),
            "title" => fill(&mut self.title, string(value)),
            "username" => fill(&mut self.username, string(value)),
            "timestamp" => fill(
                &mut self.timestamp,
                value.plain.and_then(|t| Timestamp::parse(t).ok()),
            ),
            "content" => fill(&mut self.content, string(value)),
            "role" => fill(&mut self.role, serde_json::from_str(value.text).ok()),
            "parent" => fill(&mut self.parent, string(value)),
            "provider" => fill(&mut self.provider, string(value)),
            "model" => fill(&mut self.model, string(value)),
            "usage" => fill(&mut self.usage, serde_json::from_str(value.text).ok()),
            "sources" => fill(&mut self.sources, serde_json::from_str(value.text).ok()),
            _ => {
                let mut de = serde_json::Deserializer::from_str(value.text);
                let raw = ExtSeed {
                    base: MESSAGE_DEPTH,
                }
                .deserialize(&mut de)
                .ok()?;
                de.end().ok()?;
                // A repeated unknown key keeps the last, as serde's reader does.
                self.extra.insert(key.to_owned(), raw);
                Some(())
            }
        }
    }

    fn finish(self) -> Option<Message> {
        Some(Message {
            id: self.id.unwrap_or_default(),
            title: self.title?,
            username: self.username?,
            timestamp: self.timestamp?,
            content: self.content?,
            role: self.role,
            parent: self.parent,
            provider: self.provider,
            model: self.model,
            usage: self.usage,
            sources: self.sources,
            extra: self.extra,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What the canonical writer writes for `m`, as an element.
    fn element(m: &Message) -> String {
        let mut cache = crate::codec::MessageCache::default();
        let mut s = crate::state::State::new(Timestamp::from_unix(1_800_000_000));
        s.messages = vec![m.clone()];
        let parts = crate::codec::canonical_parts(&s, &mut cache);
        String::from_utf8(parts.messages.to_vec()).unwrap()
    }

    fn serde_read(text: &str) -> Option<Message> {
        serde_json::from_str(text).ok()
    }

    #[test]
    fn reads_canonical_elements_as_serde_does() {
        let mut m = Message::new(
            "alec",
            Timestamp::parse("2026-02-22T20:11:05.25Z").unwrap(),
            "t \"q\" \\ é",
            "<p>a\n\"b\"\t\u{1}</p><p>日本 😀</p>",
        );
        m.parent = Some("m_0123456789abcdef".into());
        m.role = Some(Role::Assistant);
        m.provider = Some("local".into());
        m.model = Some("smol".into());
        m.usage = Some(Usage {
            prompt_tokens: Some(3),
            completion_tokens: None,
            extra: Extra::new(),
        });
        m.sources = Some(vec!["t_0123456789abcdef".into()]);
        m.extra.insert(
            "x_note".into(),
            crate::RawJson::from(serde_json::json!({"a": [1, {"b": "c,\n"}], "n": 1.5})),
        );
        m.extra.insert(
            "new_conversation".into(),
            crate::RawJson::from(serde_json::json!(true)),
        );
        let text = element(&m);
        assert_eq!(read_canonical(&text).as_ref(), Some(&m), "{text}");
        assert_eq!(read_message(&text).unwrap(), m);
    }

    #[test]
    fn unsure_shapes_go_to_serde_with_its_verdict() {
        let base = element(&Message::new(
            "alec",
            Timestamp::parse("2026-02-22T20:11:05Z").unwrap(),
            "t",
            "<p>a</p>",
        ));
        let cases = [
            // A known key twice: serde's duplicate-field error.
            base.replacen(
                "\"title\": \"t\",",
                "\"title\": \"t\",\n      \"title\": \"u\",",
                1,
            ),
            // An empty id, a null where a string goes, a bad timestamp.
            base.replacen("\"id\": \"m_", "\"id\": \"\", \"x\": \"m_", 1),
            base.replacen("\"title\": \"t\"", "\"title\": null", 1),
            base.replacen("T20:11:05Z", "T25:11:05Z", 1),
            // A raw control character inside a string.
            base.replacen("<p>a</p>", "<p>a\u{7}</p>", 1),
            // A nested value that only looks like a break.
            base.replacen(
                "\"title\": \"t\"",
                "\"x_obj\": {\"k\": 1,\n      \"title\": \"t\"}",
                1,
            ),
            // Not the canonical layout at all.
            base.replace("\n      ", " "),
            base.replacen("\"title\": ", "\"title\" : ", 1),
            base.replacen("\"content\"", "\"con\\u0074ent\"", 1),
        ];
        for text in cases {
            assert_eq!(read_message(&text).ok(), serde_read(&text), "{text}");
        }
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z <>/=\"]{0,12}",
            "\\PC{0,12}",
            proptest::collection::vec(any::<char>(), 0..8).prop_map(|v| v.into_iter().collect()),
        ]
    }

    /// Bytes that only look like an element, ending in characters of
    /// several bytes: the reader says "not sure" (serde decides), never
    /// panics on a cut inside a character.
    #[test]
    fn an_element_ending_inside_wide_characters_goes_to_serde() {
        for tail in ["€€}", "\u{1F600}\n}", "é}", "€€€€€€"] {
            let text = format!("{OPEN}id\": \"x{tail}");
            assert!(read_canonical(&text).is_none(), "{text:?}");
            assert!(read_message(&text).is_err(), "{text:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever the writer writes is read back to the same message, and
        /// whatever bytes come, the reader's verdict is serde's.
        #[test]
        fn agrees_with_serde(
            title in text(),
            content in text(),
            user in "[a-z]{1,6}",
            parent in proptest::option::of("m_[0-9a-f]{16}"),
            extra in proptest::option::of(text()),
            cut in 0usize..400,
            splice in "[\",:{}\\[\\]\n \\\\a1é€]{0,3}",
        ) {
            let mut m = Message::new(
                &user,
                Timestamp::from_unix(1_700_000_000),
                title,
                content,
            );
            m.parent = parent;
            if let Some(e) = extra {
                m.extra.insert(e.clone(), crate::RawJson::from(serde_json::json!({"v": e})));
            }
            let text = element(&m);
            let shortcut = read_canonical(&text);
            prop_assert!(shortcut.is_none() || shortcut.as_ref() == Some(&m));
            prop_assert_eq!(read_message(&text).ok(), Some(m));
            // Damaged copies: the same verdict either way.
            let mut at = cut.min(text.len());
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            let damaged = format!("{}{}{}", &text[..at], splice, &text[at..]);
            let shortcut = read_canonical(&damaged);
            prop_assert!(shortcut.is_none() || shortcut == serde_read(&damaged), "{}", damaged);
            prop_assert_eq!(read_message(&damaged).ok(), serde_read(&damaged));
        }
    }
}
