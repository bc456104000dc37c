//! JSON: one section per top-level key (`$.key`), or per 50-element range of a top-level
//! array (`$[0:50]`); anything else is a single `$` section.
//!
//! The document is parsed with serde_json into borrowed `RawValue`s, which are slices of the
//! input; their offsets give exact line ranges, so provenance is precise rather than
//! whole-file. Text that is not valid JSON is chunked as plain text with a warning.

use std::fmt;

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::{ChunkOutput, Labels, Line, Packer, chunk_plain};
use crate::model::WarningKind;
use crate::options::ChunkingConfig;
use crate::util::LineIndex;

/// Elements per array range chunk (seed: "ranges of 50 elements").
const ARRAY_RANGE: usize = 50;

enum Top<'a> {
    Object(Vec<(String, &'a RawValue)>),
    Array(Vec<&'a RawValue>),
    Scalar,
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON document")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let value: &'de RawValue = map.next_value()?;
            entries.push((key, value));
        }
        Ok(Top::Object(entries))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<&'de RawValue>()? {
            items.push(item);
        }
        Ok(Top::Array(items))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Top::Scalar)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Top::Scalar)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Top::Scalar)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Top::Scalar)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Top::Scalar)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Top::Scalar)
    }
}

fn parse(text: &str) -> Result<Top<'_>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let top = (&mut de).deserialize_any(TopVisitor)?;
    de.end()?;
    Ok(top)
}

/// `$.key` for identifier-like keys, `$["key"]` (JSON-escaped) otherwise.
fn key_address(key: &str) -> String {
    let simple = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !key.starts_with(|c: char| c.is_ascii_digit());
    if simple {
        format!("$.{key}")
    } else {
        let quoted = serde_json::to_string(key).unwrap_or_else(|_| "\"\"".to_string());
        format!("$[{quoted}]")
    }
}

/// Lines covering bytes `from..to` of `text`, numbered as in the file.
fn range_lines<'a>(text: &'a str, index: &LineIndex, from: usize, to: usize) -> Vec<Line<'a>> {
    let to = to.min(text.len());
    let from = from.min(to);
    let first = index.line_of(from);
    text[from..to]
        .split('\n')
        .enumerate()
        .map(|(i, l)| Line {
            no: first + i,
            text: l.strip_suffix('\r').unwrap_or(l),
        })
        .collect()
}

pub(crate) fn chunk(text: &str, cfg: &ChunkingConfig, out: &mut ChunkOutput) {
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    let bom = text.len() - body.len();
    let top = match parse(body) {
        Ok(top) => top,
        Err(err) => {
            out.warnings.push((
                WarningKind::ParseFallback,
                format!(
                    "invalid JSON at line {} column {}; chunked as text",
                    err.line(),
                    err.column()
                ),
            ));
            chunk_plain(text, cfg, out);
            return;
        }
    };
    let index = LineIndex::new(text);
    let base = body.as_ptr() as usize;
    let offset_of = |raw: &RawValue| raw.get().as_ptr() as usize - base + bom;
    let bytes = text.as_bytes();
    // Skips whitespace and one separator so a section starts at its key or element.
    let skip_sep = |mut i: usize| {
        while i < bytes.len() && (bytes[i].is_ascii_whitespace() || bytes[i] == b',') {
            i += 1;
        }
        i
    };
    let mut packer = Packer::new(cfg);
    let mut emit = |from: usize, to: usize, address: String, packer: &mut Packer<'_>| {
        let labels = Labels {
            address: Some(address),
            ..Labels::default()
        };
        let lines = range_lines(text, &index, from, to);
        packer.pack(&lines, &labels, &|_| false, &mut out.pieces);
    };
    match top {
        Top::Object(entries) if !entries.is_empty() => {
            // A key's section runs from the end of the previous value (or the opening brace)
            // to the end of its own value, so the key text is included.
            let mut cursor = body.find('{').map_or(bom, |i| i + bom + 1);
            for (key, raw) in &entries {
                let end = offset_of(raw) + raw.get().len();
                emit(skip_sep(cursor), end, key_address(key), &mut packer);
                cursor = end;
            }
        }
        Top::Array(items) if !items.is_empty() => {
            for (n, group) in items.chunks(ARRAY_RANGE).enumerate() {
                let lo = n * ARRAY_RANGE;
                let hi = lo + group.len();
                let last = group[group.len() - 1];
                let end = offset_of(last) + last.get().len();
                emit(
                    offset_of(group[0]),
                    end,
                    format!("$[{lo}:{hi}]"),
                    &mut packer,
                );
            }
        }
        _ => emit(0, text.len(), "$".to_string(), &mut packer),
    }
    out.warnings
        .extend(packer.long_lines.into_warning(cfg.chunk_max_chars));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(key_address("name"), "$.name");
        assert_eq!(key_address("a b"), "$[\"a b\"]");
        assert_eq!(key_address("1x"), "$[\"1x\"]");
    }
}
