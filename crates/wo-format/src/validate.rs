//! Validation of a parsed JSON document against the `llm.json` v1 rules,
//! reporting every problem with its JSON pointer and the rule it breaks.
//!
//! The structural rules here mirror `spec/llm_state_v1.json` exactly (tests
//! run both over the same fixtures). Content rules that JSON Schema cannot
//! express — XHTML well-formedness and the element allowlist — are checked by
//! [`validate_content`] as well.

use std::fmt;

use serde_json::{Map, Value};

use crate::timestamp::Timestamp;
use crate::xhtml;

/// One validation problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issue {
    /// RFC 6901 JSON pointer to the offending value (`""` is the root).
    pub pointer: String,
    /// Short rule name: `json-syntax`, `type`, `required`, `const`, `enum`,
    /// `format`, `pattern`, `range`, `duplicate-key`, `xhtml-well-formed`,
    /// `xhtml-allowlist`; lint warnings use `unique`.
    pub rule: &'static str,
    /// What is wrong, in words.
    pub message: String,
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() {
            "(root)"
        } else {
            &self.pointer
        };
        write!(f, "{at}: {} [{}]", self.message, self.rule)
    }
}

/// Escapes one JSON-pointer reference token (RFC 6901).
pub fn pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

struct Checker {
    issues: Vec<Issue>,
}

impl Checker {
    fn push(&mut self, pointer: &str, rule: &'static str, message: impl Into<String>) {
        self.issues.push(Issue {
            pointer: pointer.to_owned(),
            rule,
            message: message.into(),
        });
    }

    fn object<'v>(&mut self, v: &'v Value, at: &str) -> Option<&'v Map<String, Value>> {
        match v {
            Value::Object(m) => Some(m),
            other => {
                self.push(
                    at,
                    "type",
                    format!("expected an object, found {}", json_kind(other)),
                );
                None
            }
        }
    }

    fn required<'v>(
        &mut self,
        obj: &'v Map<String, Value>,
        at: &str,
        field: &str,
    ) -> Option<&'v Value> {
        let v = obj.get(field);
        if v.is_none() {
            self.push(at, "required", format!("missing required field `{field}`"));
        }
        v
    }

    fn string<'v>(&mut self, v: &'v Value, at: &str) -> Option<&'v str> {
        match v {
            Value::String(s) => Some(s),
            other => {
                self.push(
                    at,
                    "type",
                    format!("expected a string, found {}", json_kind(other)),
                );
                None
            }
        }
    }

    fn timestamp(&mut self, v: &Value, at: &str) {
        if let Some(s) = self.string(v, at)
            && Timestamp::parse(s).is_err()
        {
            self.push(
                at,
                "format",
                format!("{s:?} is not a UTC timestamp YYYY-MM-DDTHH:MM:SS[.fff]Z"),
            );
        }
    }

    fn unit_number(&mut self, v: &Value, at: &str) {
        match v.as_f64() {
            Some(x) if (0.0..=1.0).contains(&x) => {}
            Some(x) => self.push(at, "range", format!("{x} is outside [0, 1]")),
            None => self.push(
                at,
                "type",
                format!("expected a number, found {}", json_kind(v)),
            ),
        }
    }

    fn non_negative_integer(&mut self, v: &Value, at: &str) {
        if v.as_u64().is_none() {
            if v.as_i64().is_some() {
                self.push(at, "range", "must not be negative");
            } else {
                self.push(
                    at,
                    "type",
                    format!("expected an integer, found {}", json_kind(v)),
                );
            }
        }
    }

    fn boolean(&mut self, v: &Value, at: &str) {
        if !v.is_boolean() {
            self.push(
                at,
                "type",
                format!("expected a boolean, found {}", json_kind(v)),
            );
        }
    }

    fn one_of(&mut self, v: &Value, at: &str, allowed: &[&str]) {
        if let Some(s) = self.string(v, at)
            && !allowed.contains(&s)
        {
            self.push(
                at,
                "enum",
                format!("{s:?} is not one of {}", allowed.join(", ")),
            );
        }
    }

    fn id(&mut self, v: &Value, at: &str) {
        if let Some(s) = self.string(v, at)
            && !is_valid_id(s)
        {
            self.push(
                at,
                "pattern",
                format!("{s:?} is not an id (1–128 of A–Z a–z 0–9 _ . : ~ -)"),
            );
        }
    }

    fn string_array(&mut self, v: &Value, at: &str, ids: bool) {
        match v {
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let p = format!("{at}/{i}");
                    if ids {
                        self.id(item, &p);
                    } else {
                        self.string(item, &p);
                    }
                }
            }
            other => self.push(
                at,
                "type",
                format!("expected an array, found {}", json_kind(other)),
            ),
        }
    }

    fn optional(
        &mut self,
        obj: &Map<String, Value>,
        at: &str,
        field: &str,
        check: impl FnOnce(&mut Self, &Value, &str),
    ) {
        if let Some(v) = obj.get(field) {
            check(self, v, &format!("{at}/{field}"));
        }
    }
}

/// True for ids this format accepts (derived ones and those of older tools).
pub fn is_valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'~' | b'-'))
}

/// True when `schema` names this format (product §1: the canonical URL, any URL
/// whose last segment is `llm_state_v1.json`, or `wikioracle.llm_state`).
pub fn is_accepted_schema(s: &str) -> bool {
    s == "wikioracle.llm_state" || s.rsplit('/').next() == Some("llm_state_v1.json")
}

/// What a JSON value is, for messages: "an object", "a string", "null", ….
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Structural validation (the JSON Schema's rules). Empty means valid.
pub fn validate_structure(doc: &Value) -> Vec<Issue> {
    let mut c = Checker { issues: Vec::new() };
    let Some(root) = c.object(doc, "") else {
        return c.issues;
    };
    if let Some(v) = c.required(root, "", "version")
        && v.as_u64() != Some(1)
    {
        c.push("/version", "const", format!("version must be 1, found {v}"));
    }
    if let Some(v) = c.required(root, "", "schema")
        && let Some(s) = c.string(v, "/schema")
        && !is_accepted_schema(s)
    {
        c.push(
            "/schema",
            "pattern",
            format!("{s:?} does not name llm_state_v1.json (or wikioracle.llm_state)"),
        );
    }
    if let Some(v) = c.required(root, "", "date") {
        c.timestamp(v, "/date");
    }
    c.optional(root, "", "context", |c, v, at| {
        c.string(v, at);
    });
    if let Some(v) = c.required(root, "", "messages") {
        match v {
            Value::Array(items) => {
                for (i, m) in items.iter().enumerate() {
                    message(&mut c, m, &format!("/messages/{i}"));
                }
            }
            other => c.push(
                "/messages",
                "type",
                format!("expected an array, found {}", json_kind(other)),
            ),
        }
    }
    c.optional(root, "", "truth", truth);
    c.issues
}

/// The structural rules for one message (a JSON value) at `at`.
pub(crate) fn message_value_issues(v: &Value, at: &str) -> Vec<Issue> {
    let mut c = Checker { issues: Vec::new() };
    message(&mut c, v, at);
    c.issues
}

/// The structural rules for one truth entry (a JSON value) at `at`.
pub(crate) fn truth_entry_value_issues(v: &Value, at: &str) -> Vec<Issue> {
    let mut c = Checker { issues: Vec::new() };
    truth_entry(&mut c, v, at);
    c.issues
}

fn message(c: &mut Checker, v: &Value, at: &str) {
    let Some(m) = c.object(v, at) else { return };
    c.optional(m, at, "id", Checker::id);
    for field in ["title", "username", "content"] {
        if let Some(v) = c.required(m, at, field) {
            c.string(v, &format!("{at}/{field}"));
        }
    }
    if let Some(Value::String(u)) = m.get("username")
        && u.trim().is_empty()
    {
        c.push(
            &format!("{at}/username"),
            "pattern",
            "username must not be blank",
        );
    }
    if let Some(v) = c.required(m, at, "timestamp") {
        c.timestamp(v, &format!("{at}/timestamp"));
    }
    c.optional(m, at, "role", |c, v, at| {
        c.one_of(v, at, &["user", "assistant", "system"])
    });
    c.optional(m, at, "parent", Checker::id);
    c.optional(m, at, "retitled", Checker::timestamp);
    for field in ["provider", "model"] {
        c.optional(m, at, field, |c, v, at| {
            c.string(v, at);
        });
    }
    c.optional(m, at, "usage", |c, v, at| {
        if let Some(u) = c.object(v, at) {
            for field in ["prompt_tokens", "completion_tokens"] {
                c.optional(u, at, field, Checker::non_negative_integer);
            }
        }
    });
    c.optional(m, at, "sources", |c, v, at| c.string_array(v, at, true));
}

fn truth(c: &mut Checker, v: &Value, at: &str) {
    let Some(t) = c.object(v, at) else { return };
    c.optional(t, at, "trust", |c, v, at| match v {
        Value::Array(items) => {
            for (i, e) in items.iter().enumerate() {
                truth_entry(c, e, &format!("{at}/{i}"));
            }
        }
        other => c.push(
            at,
            "type",
            format!("expected an array, found {}", json_kind(other)),
        ),
    });
    c.optional(t, at, "retrieval_prefs", |c, v, at| {
        let Some(p) = c.object(v, at) else { return };
        c.optional(p, at, "max_entries", Checker::non_negative_integer);
        c.optional(p, at, "min_certainty", Checker::unit_number);
        c.optional(p, at, "prefer_higher_certainty", Checker::boolean);
        c.optional(p, at, "certainty_weight", Checker::unit_number);
        c.optional(p, at, "recency_weight", Checker::unit_number);
    });
    c.optional(t, at, "deleted", |c, v, at| match v {
        Value::Array(items) => {
            for (i, d) in items.iter().enumerate() {
                let p = format!("{at}/{i}");
                let Some(d) = c.object(d, &p) else { continue };
                if let Some(v) = c.required(d, &p, "id") {
                    c.id(v, &format!("{p}/id"));
                }
                if let Some(v) = c.required(d, &p, "date") {
                    c.timestamp(v, &format!("{p}/date"));
                }
            }
        }
        other => c.push(
            at,
            "type",
            format!("expected an array, found {}", json_kind(other)),
        ),
    });
}

fn truth_entry(c: &mut Checker, v: &Value, at: &str) {
    let Some(e) = c.object(v, at) else { return };
    c.optional(e, at, "id", Checker::id);
    for field in ["title", "content"] {
        if let Some(v) = c.required(e, at, field) {
            c.string(v, &format!("{at}/{field}"));
        }
    }
    if let Some(v) = c.required(e, at, "timestamp") {
        c.timestamp(v, &format!("{at}/timestamp"));
    }
    if let Some(v) = c.required(e, at, "certainty") {
        c.unit_number(v, &format!("{at}/certainty"));
    }
    c.optional(e, at, "kind", |c, v, at| {
        c.one_of(v, at, &["fact", "effort", "event", "note"])
    });
    c.optional(e, at, "status", |c, v, at| {
        c.one_of(v, at, &["open", "resolved"])
    });
    c.optional(e, at, "resolution", |c, v, at| {
        c.string(v, at);
    });
    c.optional(e, at, "supersedes", Checker::id);
    c.optional(e, at, "source", Checker::id);
    c.optional(e, at, "provenance", |c, v, at| {
        let Some(p) = c.object(v, at) else { return };
        if let Some(v) = c.required(p, at, "messages") {
            c.string_array(v, &format!("{at}/messages"), true);
        }
        if let Some(v) = c.required(p, at, "by") {
            c.string(v, &format!("{at}/by"));
        }
        if let Some(v) = c.required(p, at, "at") {
            c.timestamp(v, &format!("{at}/at"));
        }
        c.optional(p, at, "exchange", Checker::id);
    });
    c.optional(e, at, "tags", |c, v, at| c.string_array(v, at, false));
    c.optional(e, at, "expires", |c, v, at| {
        if !v.is_boolean() {
            match v {
                Value::String(_) => c.timestamp(v, at),
                other => c.push(
                    at,
                    "type",
                    format!(
                        "expected a boolean or a timestamp, found {}",
                        json_kind(other)
                    ),
                ),
            }
        }
    });
    c.optional(e, at, "refs", Checker::non_negative_integer);
    c.optional(e, at, "updated", Checker::timestamp);
    c.optional(e, at, "archived", Checker::timestamp);
    c.optional(e, at, "used", Checker::timestamp);
}

/// Content rules: every XHTML field (context, message and truth content) must
/// be a well-formed fragment within the allowlist.
pub fn validate_content(doc: &Value) -> Vec<Issue> {
    let mut issues = Vec::new();
    let mut check = |pointer: String, v: Option<&Value>| {
        if let Some(Value::String(s)) = v
            && let Err(p) = xhtml::check_fragment(s)
        {
            issues.push(Issue {
                pointer,
                rule: p.rule,
                message: p.detail,
            });
        }
    };
    check("/context".into(), doc.get("context"));
    if let Some(Value::Array(ms)) = doc.get("messages") {
        for (i, m) in ms.iter().enumerate() {
            check(format!("/messages/{i}/content"), m.get("content"));
        }
    }
    if let Some(Value::Array(ts)) = doc.pointer("/truth/trust") {
        for (i, t) in ts.iter().enumerate() {
            check(format!("/truth/trust/{i}/content"), t.get("content"));
        }
    }
    issues
}

/// Warnings that do not make a file invalid: duplicate ids.
pub fn lint(doc: &Value) -> Vec<Issue> {
    let mut issues = Vec::new();
    for (list, pointer) in [("/messages", "/messages"), ("/truth/trust", "/truth/trust")] {
        if let Some(Value::Array(items)) = doc.pointer(list) {
            let mut seen = std::collections::HashMap::new();
            for (i, item) in items.iter().enumerate() {
                if let Some(Value::String(id)) = item.get("id")
                    && let Some(first) = seen.insert(id.as_str(), i)
                {
                    issues.push(Issue {
                        pointer: format!("{pointer}/{i}/id"),
                        rule: "unique",
                        message: format!("id {id:?} repeats {pointer}/{first}/id"),
                    });
                }
            }
        }
    }
    issues
}
