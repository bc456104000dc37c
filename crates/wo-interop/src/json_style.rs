//! JSON that remembers its key order, and the writing styles of the tools
//! that produce JSON lines, so an exported line can be byte-identical to the
//! one imported.
//!
//! `serde_json::Value` sorts keys (the workspace must not enable
//! `preserve_order`: `wo-format`'s canonical serializer relies on sorted
//! unknown keys), hence [`OValue`]. A line whose bytes no style reproduces is
//! kept verbatim by the importer instead.

use std::fmt::Write as _;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// A JSON value with object keys in document order (duplicates kept).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum OValue {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<OValue>),
    Object(Vec<(String, OValue)>),
}

impl OValue {
    /// The `serde_json` value (a later duplicate key wins, as in serde_json).
    pub(crate) fn to_value(&self) -> Value {
        match self {
            OValue::Null => Value::Null,
            OValue::Bool(b) => Value::Bool(*b),
            OValue::Number(n) => Value::Number(n.clone()),
            OValue::String(s) => Value::String(s.clone()),
            OValue::Array(a) => Value::Array(a.iter().map(OValue::to_value).collect()),
            OValue::Object(o) => {
                let mut m = Map::new();
                for (k, v) in o {
                    m.insert(k.clone(), v.to_value());
                }
                Value::Object(m)
            }
        }
    }

    /// From a `serde_json` value (keys in its sorted order).
    pub(crate) fn from_value(v: &Value) -> OValue {
        match v {
            Value::Null => OValue::Null,
            Value::Bool(b) => OValue::Bool(*b),
            Value::Number(n) => OValue::Number(n.clone()),
            Value::String(s) => OValue::String(s.clone()),
            Value::Array(a) => OValue::Array(a.iter().map(OValue::from_value).collect()),
            Value::Object(o) => OValue::Object(
                o.iter()
                    .map(|(k, v)| (k.clone(), OValue::from_value(v)))
                    .collect(),
            ),
        }
    }
}

impl<'de> Deserialize<'de> for OValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(OVisitor)
    }
}

struct OVisitor;

impl<'de> Visitor<'de> for OVisitor {
    type Value = OValue;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<OValue, E> {
        Ok(OValue::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<OValue, E> {
        Ok(OValue::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<OValue, E> {
        Ok(OValue::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<OValue, E> {
        Number::from_f64(v)
            .map(OValue::Number)
            .ok_or_else(|| E::custom("non-finite number"))
    }
    fn visit_str<E>(self, v: &str) -> Result<OValue, E> {
        Ok(OValue::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<OValue, E> {
        Ok(OValue::String(v))
    }
    fn visit_unit<E>(self) -> Result<OValue, E> {
        Ok(OValue::Null)
    }
    fn visit_none<E>(self) -> Result<OValue, E> {
        Ok(OValue::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<OValue, D::Error> {
        OValue::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OValue, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element()? {
            items.push(v);
        }
        Ok(OValue::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OValue, A::Error> {
        let mut entries = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, OValue>()? {
            entries.push((k, v));
        }
        Ok(OValue::Object(entries))
    }
}

/// How a tool writes one JSON line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineStyle {
    /// Python's `json.dumps(obj)`: `", "` and `": "` separators, non-ASCII
    /// escaped as `\uXXXX`. The likely writer of the profiles layout (product §9) (a Python server)
    /// and the style of chats this crate creates.
    Python,
    /// `json.dumps(obj, ensure_ascii=False)`.
    PythonUtf8,
    /// JavaScript's `JSON.stringify` (and most other libraries): no spaces,
    /// UTF-8 kept.
    Compact,
    /// No spaces, non-ASCII escaped.
    CompactAscii,
}

impl LineStyle {
    /// Every style, in the order detection prefers them on a tie.
    pub const ALL: [LineStyle; 4] = [
        LineStyle::Python,
        LineStyle::PythonUtf8,
        LineStyle::Compact,
        LineStyle::CompactAscii,
    ];

    /// The name stored in `extra`.
    pub fn name(self) -> &'static str {
        match self {
            LineStyle::Python => "python",
            LineStyle::PythonUtf8 => "python-utf8",
            LineStyle::Compact => "compact",
            LineStyle::CompactAscii => "compact-ascii",
        }
    }

    /// The style whose [`LineStyle::name`] is `name`, as read back from `extra`;
    /// `None` for a name this version does not know.
    pub fn from_name(name: &str) -> Option<Self> {
        LineStyle::ALL.into_iter().find(|s| s.name() == name)
    }

    fn spaced(self) -> bool {
        matches!(self, LineStyle::Python | LineStyle::PythonUtf8)
    }

    fn ascii(self) -> bool {
        matches!(self, LineStyle::Python | LineStyle::CompactAscii)
    }

    /// Renders one value on one line.
    pub(crate) fn render(self, v: &OValue) -> String {
        let mut out = String::new();
        self.render_into(v, &mut out);
        out
    }

    fn render_into(self, v: &OValue, out: &mut String) {
        let (item_sep, key_sep) = if self.spaced() {
            (", ", ": ")
        } else {
            (",", ":")
        };
        match v {
            OValue::Null => out.push_str("null"),
            OValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            OValue::Number(n) => self.render_number(n, out),
            OValue::String(s) => self.render_string(s, out),
            OValue::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(item_sep);
                    }
                    self.render_into(item, out);
                }
                out.push(']');
            }
            OValue::Object(entries) => {
                out.push('{');
                for (i, (k, item)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(item_sep);
                    }
                    self.render_string(k, out);
                    out.push_str(key_sep);
                    self.render_into(item, out);
                }
                out.push('}');
            }
        }
    }

    /// Renders like Python's `json.dumps(obj, indent=2)` (ASCII-escaped
    /// when the style is): the form of the profiles layout's (product §9) meta files.
    pub(crate) fn render_pretty(self, v: &OValue) -> String {
        let mut out = String::new();
        self.pretty_into(v, 0, &mut out);
        out
    }

    fn pretty_into(self, v: &OValue, depth: usize, out: &mut String) {
        let pad = |out: &mut String, d: usize| {
            out.push('\n');
            out.push_str(&"  ".repeat(d));
        };
        match v {
            OValue::Array(items) if !items.is_empty() => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    pad(out, depth + 1);
                    self.pretty_into(item, depth + 1, out);
                }
                pad(out, depth);
                out.push(']');
            }
            OValue::Object(entries) if !entries.is_empty() => {
                out.push('{');
                for (i, (k, item)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    pad(out, depth + 1);
                    self.render_string(k, out);
                    out.push_str(": ");
                    self.pretty_into(item, depth + 1, out);
                }
                pad(out, depth);
                out.push('}');
            }
            other => self.render_into(other, out),
        }
    }

    fn render_string(self, s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                }
                // Python's ensure_ascii escapes everything outside ' '..'~'.
                c if self.ascii() && (c as u32) >= 0x7f => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        let _ = write!(out, "\\u{u:04x}");
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }

    fn render_number(self, n: &Number, out: &mut String) {
        if n.is_i64() || n.is_u64() {
            out.push_str(&n.to_string());
            return;
        }
        let Some(f) = n.as_f64() else {
            out.push_str(&n.to_string());
            return;
        };
        out.push_str(&if self.spaced() {
            python_float(f)
        } else {
            js_float(f)
        });
    }
}

/// Shortest round-trip digits and decimal exponent of `f` (`d.ddd × 10^e`).
fn digits_exponent(f: f64) -> (bool, String, i32) {
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    (f.is_sign_negative(), digits, exp.parse().unwrap_or(0))
}

/// Python's `repr(float)`: positional for 1e-4 ≤ |f| < 1e16, else
/// `d.ddde±XX`; integral values keep `.0`.
fn python_float(f: f64) -> String {
    let (neg, digits, e) = digits_exponent(f);
    let sign = if neg { "-" } else { "" };
    if f == 0.0 {
        return format!("{sign}0.0");
    }
    if !(-4..16).contains(&e) {
        return format!("{sign}{}", exponential(&digits, e, 2));
    }
    format!("{sign}{}", positional(&digits, e, true))
}

/// JavaScript's `Number.prototype.toString`.
fn js_float(f: f64) -> String {
    let (neg, digits, e) = digits_exponent(f);
    if f == 0.0 {
        return "0".to_owned();
    }
    let sign = if neg { "-" } else { "" };
    if !(-6..21).contains(&e) {
        return format!("{sign}{}", exponential(&digits, e, 1));
    }
    format!("{sign}{}", positional(&digits, e, false))
}

/// `d.ddde±X`, the exponent zero-padded to `width` digits (Python pads to
/// two, JavaScript does not pad).
fn exponential(digits: &str, e: i32, width: usize) -> String {
    let (head, tail) = digits.split_at(1);
    let point = if tail.is_empty() { "" } else { "." };
    let esign = if e < 0 { '-' } else { '+' };
    format!("{head}{point}{tail}e{esign}{:0width$}", e.abs())
}

fn positional(digits: &str, e: i32, keep_point_zero: bool) -> String {
    let point = e + 1; // digits before the decimal point
    if point <= 0 {
        return format!("0.{}{digits}", "0".repeat((-point) as usize));
    }
    let point = point as usize;
    if digits.len() <= point {
        let int = format!("{digits}{}", "0".repeat(point - digits.len()));
        return if keep_point_zero {
            format!("{int}.0")
        } else {
            int
        };
    }
    format!("{}.{}", &digits[..point], &digits[point..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> OValue {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn python_style_reproduces_json_dumps() {
        // Produced by Python 3: json.dumps({"role": "user", "text": "caf\u00e9 \"q\"\n😀", "ts": "Dec 06, 2025 05:14 PM", "n": [1, 2.5, None, True]})
        let line = r#"{"role": "user", "text": "caf\u00e9 \"q\"\n\ud83d\ude00", "ts": "Dec 06, 2025 05:14 PM", "n": [1, 2.5, null, true]}"#;
        assert_eq!(LineStyle::Python.render(&parse(line)), line);
        let utf8 = "{\"text\": \"café 😀\\u0001\"}";
        assert_eq!(LineStyle::PythonUtf8.render(&parse(utf8)), utf8);
        let compact = r#"{"b":1,"a":{"z":[],"y":{}}}"#;
        assert_eq!(LineStyle::Compact.render(&parse(compact)), compact);
    }

    #[test]
    fn floats_follow_each_language() {
        for (f, py, js) in [
            (1.0, "1.0", "1"),
            (0.0001, "0.0001", "0.0001"),
            (0.00001, "1e-05", "0.00001"),
            (1e16, "1e+16", "10000000000000000"),
            (1e21, "1e+21", "1e+21"),
            (123.456, "123.456", "123.456"),
            (-2.5e-7, "-2.5e-07", "-2.5e-7"),
            (1.5e300, "1.5e+300", "1.5e+300"),
        ] {
            assert_eq!(python_float(f), py, "{f}");
            assert_eq!(js_float(f), js, "{f}");
        }
    }

    #[test]
    fn key_order_and_duplicates_survive() {
        let v = parse(r#"{"z":1,"a":2,"z":3}"#);
        assert_eq!(LineStyle::Compact.render(&v), r#"{"z":1,"a":2,"z":3}"#);
        assert_eq!(v.to_value(), serde_json::json!({"a": 2, "z": 3}));
        assert_eq!(
            LineStyle::from_name("python-utf8"),
            Some(LineStyle::PythonUtf8)
        );
    }

    #[test]
    fn pretty_matches_python_indent_2() {
        // json.dumps({"id": "A", "display_name": "Caf\u00e9", "tags": [], "n": [1, {"a": None}]}, indent=2)
        let v = parse(r#"{"id": "A", "display_name": "Café", "tags": [], "n": [1, {"a": null}]}"#);
        assert_eq!(
            LineStyle::Python.render_pretty(&v),
            "{\n  \"id\": \"A\",\n  \"display_name\": \"Caf\\u00e9\",\n  \"tags\": [],\n  \"n\": [\n    1,\n    {\n      \"a\": null\n    }\n  ]\n}"
        );
    }
}
