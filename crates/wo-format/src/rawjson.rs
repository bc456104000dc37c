//! Values of fields this tool does not know (`extra` maps), kept as JSON
//! text so they survive a read-modify-write byte for byte.
//!
//! `serde_json::Value` cannot hold `1.10`, a 20-digit integer or `1e400`
//! without changing it (the `arbitrary_precision` feature would, but it is
//! workspace-wide and breaks numbers inside `#[serde(flatten)]` and untagged
//! content elsewhere). A [`RawJson`] instead keeps the value's text in a
//! canonical compact form: no insignificant whitespace, object keys sorted
//! (a repeated key keeps its last value, as `Value` does), strings escaped
//! as serde_json escapes them, and numbers exactly as written. Serialising it
//! walks that text, so the canonical pretty printer indents it like any other
//! value while numbers go out as raw fragments.
//!
//! Nesting is bounded: a value deeper than the state file parser accepts at
//! its position would make the written file unreadable, so it is refused on
//! the way in (see [`MAX_DEPTH`]).

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// Deepest nesting of arrays and objects a state file may have, counting the
/// root object as 1. serde_json refuses the 128th level, so this is what every
/// reader of `llm.json` (the typed parser, `Value`, the validator) accepts.
pub const MAX_DEPTH: usize = 127;

/// Start of the message of a too-deep value (the parser's error says where).
pub(crate) const TOO_DEEP: &str = "nested deeper than";

/// One JSON value in canonical compact text; see the module docs.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RawJson(Box<str>);

/// Why text is not a value [`RawJson`] accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawJsonError(pub String);

impl fmt::Display for RawJsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RawJsonError {}

impl RawJson {
    /// Canonicalises JSON text whose outermost container would sit `base`
    /// levels deep in the document (0 for a value on its own). Fails on bad
    /// syntax and on nesting deeper than [`MAX_DEPTH`] in all.
    pub fn parse_at(text: &str, base: usize) -> Result<RawJson, RawJsonError> {
        let mut p = Parser {
            s: text.as_bytes(),
            text,
            i: 0,
            base,
        };
        p.ws();
        let node = p.value(0)?;
        p.ws();
        if p.i != p.s.len() {
            return Err(RawJsonError(format!(
                "trailing characters at byte {} of an extension value",
                p.i
            )));
        }
        let mut out = String::with_capacity(text.len());
        node.write(&mut out);
        Ok(RawJson(out.into_boxed_str()))
    }

    /// [`RawJson::parse_at`] for a value on its own.
    pub fn parse(text: &str) -> Result<RawJson, RawJsonError> {
        Self::parse_at(text, 0)
    }

    /// The canonical compact text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value as a `serde_json::Value` (numbers `Value` cannot hold
    /// exactly are approximated; use it to read, not to store).
    pub fn to_value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or_else(|_| {
            // Only numbers outside f64's range (`1e400`) fail here.
            Value::String(self.0.to_string())
        })
    }

    /// Nesting depth of the value itself (a scalar is 0, `[]` is 1).
    pub fn depth(&self) -> usize {
        let mut depth = 0usize;
        let mut max = 0usize;
        let mut in_str = false;
        let mut escaped = false;
        for &b in self.0.as_bytes() {
            if in_str {
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == b'"' {
                    in_str = false;
                }
                continue;
            }
            match b {
                b'"' => in_str = true,
                b'[' | b'{' => {
                    depth += 1;
                    max = max.max(depth);
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        max
    }

    /// The member `key` of an object value.
    pub fn get(&self, key: &str) -> Option<Value> {
        match self.to_value() {
            Value::Object(mut m) => m.remove(key),
            _ => None,
        }
    }
}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawJson({})", self.0)
    }
}

impl fmt::Display for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&Value> for RawJson {
    fn from(v: &Value) -> Self {
        // `Value`'s own serialisation is already canonical (sorted keys,
        // serde_json escaping, its numbers' shortest text).
        RawJson(v.to_string().into_boxed_str())
    }
}

impl From<Value> for RawJson {
    fn from(v: Value) -> Self {
        RawJson::from(&v)
    }
}

impl PartialEq<Value> for RawJson {
    fn eq(&self, other: &Value) -> bool {
        self.to_value() == *other
    }
}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let w = Walker {
            s: self.0.as_bytes(),
            text: &self.0,
            i: std::cell::Cell::new(0),
        };
        w.emit(s)
    }
}

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        ExtSeed { base: 0 }.deserialize(d)
    }
}

/// Deserialises an extension value that sits `base` levels deep, checking
/// the nesting against [`MAX_DEPTH`].
#[derive(Clone, Copy)]
pub struct ExtSeed {
    /// How deep the value sits in the document (its containers count toward [`MAX_DEPTH`]).
    pub base: usize,
}

impl<'de> DeserializeSeed<'de> for ExtSeed {
    type Value = RawJson;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<RawJson, D::Error> {
        // Borrowed from the input when it is a slice; owned otherwise (a
        // `Value`, a reader).
        let raw = Box::<RawValue>::deserialize(d)?;
        RawJson::parse_at(raw.get(), self.base).map_err(de::Error::custom)
    }
}

/// A whole document as a `serde_json::Value` for the validator, which only
/// reads it: unlike `serde_json`, a number outside f64's range (`1e400`, which
/// an extension field may hold and the state file keeps byte for byte) is no
/// error; it reads as the largest finite f64 of its sign, so a known number
/// field holding one still fails its own check.
pub(crate) fn document_value(text: &str) -> Result<Value, RawJsonError> {
    let mut p = Parser {
        s: text.as_bytes(),
        text,
        i: 0,
        base: 0,
    };
    p.ws();
    let node = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(p.err("trailing characters"));
    }
    Ok(node.to_value())
}

/// A parsed value borrowing from the text; only lives while canonicalising.
enum Node<'a> {
    /// `null`, `true`, `false` or a number, verbatim.
    Atom(&'a str),
    Str(Cow<'a, str>),
    Arr(Vec<Node<'a>>),
    Obj(Vec<(Cow<'a, str>, Node<'a>)>),
}

impl Node<'_> {
    fn to_value(&self) -> Value {
        match self {
            Node::Atom("null") => Value::Null,
            Node::Atom("true") => Value::Bool(true),
            Node::Atom("false") => Value::Bool(false),
            Node::Atom(number) => serde_json::from_str(number).unwrap_or_else(|_| {
                let max = if number.starts_with('-') {
                    -f64::MAX
                } else {
                    f64::MAX
                };
                Value::from(max)
            }),
            Node::Str(s) => Value::String(s.to_string()),
            Node::Arr(items) => Value::Array(items.iter().map(Node::to_value).collect()),
            Node::Obj(members) => {
                // A repeated key keeps its last value, as `Value` does.
                let mut map = serde_json::Map::new();
                for (k, v) in members {
                    map.insert(k.to_string(), v.to_value());
                }
                Value::Object(map)
            }
        }
    }

    fn write(&self, out: &mut String) {
        match self {
            Node::Atom(a) => out.push_str(a),
            Node::Str(s) => write_str(s, out),
            Node::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Node::Obj(members) => {
                // Sorted by key; of a repeated key the last one written wins.
                let mut idx: Vec<usize> = (0..members.len()).collect();
                idx.sort_by(|&a, &b| members[a].0.cmp(&members[b].0).then(b.cmp(&a)));
                idx.dedup_by(|later, first| members[*later].0 == members[*first].0);
                out.push('{');
                for (n, &i) in idx.iter().enumerate() {
                    if n > 0 {
                        out.push(',');
                    }
                    write_str(&members[i].0, out);
                    out.push(':');
                    members[i].1.write(out);
                }
                out.push('}');
            }
        }
    }
}

fn write_str(s: &str, out: &mut String) {
    // serde_json's escaping is the canonical one; writing a str cannot fail.
    let mut buf = Vec::with_capacity(s.len() + 2);
    serde_json::to_writer(&mut buf, s).expect("in-memory JSON serialisation");
    out.push_str(std::str::from_utf8(&buf).expect("serde_json writes UTF-8"));
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    i: usize,
    base: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, what: &str) -> RawJsonError {
        RawJsonError(format!("{what} at byte {} of an extension value", self.i))
    }

    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\n' | b'\r' | b'\t') {
            self.i += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node<'a>, RawJsonError> {
        match self.s.get(self.i) {
            Some(b'{') | Some(b'[') => {
                if self.base + depth + 1 > MAX_DEPTH {
                    return Err(RawJsonError(format!(
                        "{TOO_DEEP} {MAX_DEPTH} levels (the most a state file may have)"
                    )));
                }
                if self.s[self.i] == b'{' {
                    self.object(depth + 1)
                } else {
                    self.array(depth + 1)
                }
            }
            Some(b'"') => Ok(Node::Str(self.string()?)),
            Some(b't') => self.literal("true"),
            Some(b'f') => self.literal("false"),
            Some(b'n') => self.literal("null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.err("expected a value")),
        }
    }

    fn literal(&mut self, word: &'static str) -> Result<Node<'a>, RawJsonError> {
        if self.s[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(Node::Atom(word))
        } else {
            Err(self.err("expected a value"))
        }
    }

    fn number(&mut self) -> Result<Node<'a>, RawJsonError> {
        let start = self.i;
        let digits = |p: &mut Self| {
            let from = p.i;
            while p.i < p.s.len() && p.s[p.i].is_ascii_digit() {
                p.i += 1;
            }
            p.i - from
        };
        if self.s[self.i] == b'-' {
            self.i += 1;
        }
        let int_start = self.i;
        let n = digits(self);
        if n == 0 || (n > 1 && self.s[int_start] == b'0') {
            return Err(self.err("invalid number"));
        }
        if self.s.get(self.i) == Some(&b'.') {
            self.i += 1;
            if digits(self) == 0 {
                return Err(self.err("invalid number"));
            }
        }
        if matches!(self.s.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.s.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if digits(self) == 0 {
                return Err(self.err("invalid number"));
            }
        }
        Ok(Node::Atom(&self.text[start..self.i]))
    }

    fn string(&mut self) -> Result<Cow<'a, str>, RawJsonError> {
        let start = self.i;
        self.i += 1;
        let mut escaped = false;
        loop {
            match self.s.get(self.i) {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => break,
                Some(b'\\') => {
                    escaped = true;
                    self.i += 2;
                }
                Some(&c) if c < 0x20 => return Err(self.err("control character in a string")),
                Some(_) => self.i += 1,
            }
        }
        self.i += 1;
        let token = &self.text[start..self.i];
        if !escaped {
            return Ok(Cow::Borrowed(&token[1..token.len() - 1]));
        }
        serde_json::from_str::<String>(token)
            .map(Cow::Owned)
            .map_err(|e| self.err(&format!("invalid string ({e})")))
    }

    fn array(&mut self, depth: usize) -> Result<Node<'a>, RawJsonError> {
        self.i += 1;
        let mut items = Vec::new();
        self.ws();
        if self.s.get(self.i) == Some(&b']') {
            self.i += 1;
            return Ok(Node::Arr(items));
        }
        loop {
            self.ws();
            items.push(self.value(depth)?);
            self.ws();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(Node::Arr(items));
                }
                _ => return Err(self.err("expected `,` or `]`")),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Node<'a>, RawJsonError> {
        self.i += 1;
        let mut members = Vec::new();
        self.ws();
        if self.s.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Ok(Node::Obj(members));
        }
        loop {
            self.ws();
            if self.s.get(self.i) != Some(&b'"') {
                return Err(self.err("expected a key"));
            }
            let key = self.string()?;
            self.ws();
            if self.s.get(self.i) != Some(&b':') {
                return Err(self.err("expected `:`"));
            }
            self.i += 1;
            self.ws();
            let v = self.value(depth)?;
            members.push((key, v));
            self.ws();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Node::Obj(members));
                }
                _ => return Err(self.err("expected `,` or `}`")),
            }
        }
    }
}

/// Serialises canonical compact text (as [`RawJson`] holds it) through any
/// serializer; numbers go out as raw fragments so they stay as written. The
/// position is a `Cell` because `Serialize::serialize` takes `&self` while
/// each nested element advances it.
struct Walker<'a> {
    s: &'a [u8],
    text: &'a str,
    i: std::cell::Cell<usize>,
}

impl<'a> Walker<'a> {
    fn peek(&self) -> u8 {
        self.s[self.i.get()]
    }

    fn bump(&self, n: usize) {
        self.i.set(self.i.get() + n);
    }

    fn string(&self) -> Cow<'a, str> {
        let start = self.i.get();
        let mut i = start + 1;
        let mut escaped = false;
        while self.s[i] != b'"' {
            if self.s[i] == b'\\' {
                escaped = true;
                i += 1;
            }
            i += 1;
        }
        i += 1;
        self.i.set(i);
        let token = &self.text[start..i];
        if escaped {
            // Canonical text holds only valid escapes.
            Cow::Owned(serde_json::from_str(token).unwrap_or_default())
        } else {
            Cow::Borrowed(&token[1..token.len() - 1])
        }
    }

    fn emit<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.peek() {
            b'"' => {
                let v = self.string();
                s.serialize_str(&v)
            }
            b'n' => {
                self.bump(4);
                s.serialize_unit()
            }
            b't' => {
                self.bump(4);
                s.serialize_bool(true)
            }
            b'f' => {
                self.bump(5);
                s.serialize_bool(false)
            }
            b'[' => {
                self.bump(1);
                let mut seq = s.serialize_seq(None)?;
                while self.peek() != b']' {
                    if self.peek() == b',' {
                        self.bump(1);
                    }
                    seq.serialize_element(&Element(self))?;
                }
                self.bump(1);
                seq.end()
            }
            b'{' => {
                self.bump(1);
                let mut map = s.serialize_map(None)?;
                while self.peek() != b'}' {
                    if self.peek() == b',' {
                        self.bump(1);
                    }
                    let key = self.string();
                    self.bump(1); // ':'
                    map.serialize_key(&*key)?;
                    map.serialize_value(&Element(self))?;
                }
                self.bump(1);
                map.end()
            }
            _ => {
                let start = self.i.get();
                let mut i = start;
                while i < self.s.len() && !matches!(self.s[i], b',' | b']' | b'}') {
                    i += 1;
                }
                self.i.set(i);
                let number = &self.text[start..i];
                match RawValue::from_string(number.to_owned()) {
                    Ok(raw) => raw.serialize(s),
                    Err(e) => Err(serde::ser::Error::custom(e)),
                }
            }
        }
    }
}

/// The next value of a [`Walker`], serialised in place.
struct Element<'w, 'a>(&'w Walker<'a>);

impl Serialize for Element<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.emit(s)
    }
}
