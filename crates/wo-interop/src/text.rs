//! Plain text ↔ XHTML for formats that store plain text, and the secret-key
//! rule. (Titles: `wo_format::title`.)
//!
//! Both neighbours store plain text; `llm.json` stores XHTML made by
//! [`wo_format::xhtml::text_to_xhtml`]. [`recover_text`] inverts that
//! function exactly on its own output, so the importers only need to keep the
//! original text where the conversion loses something (CR LF, runs of blank
//! lines, control characters, …).

use serde_json::Value;
pub use wo_format::xhtml::recover_text;
use wo_format::xhtml::{text_to_xhtml, to_plain_text};

/// True when `text` survives the trip through XHTML unchanged, so the
/// importer need not keep a copy.
pub(crate) fn is_recoverable(text: &str) -> bool {
    recover_text(&text_to_xhtml(text)).as_deref() == Some(text)
}

/// Plain text of stored content: exact for converted text, the visible text
/// otherwise (Markdown answers, hand-written XHTML).
pub(crate) fn plain_text(xhtml: &str) -> String {
    recover_text(xhtml).unwrap_or_else(|| to_plain_text(xhtml))
}

/// Key names whose values are credentials. `env_key` (the CLI chat format (product §9)) names an
/// environment variable, not a secret, and counters such as `max_tokens`
/// must not match, hence whole-name matching after normalisation.
pub(crate) fn is_secret_key(key: &str) -> bool {
    let k: String = key
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    matches!(
        k.as_str(),
        "apikey"
            | "key"
            | "secret"
            | "secretkey"
            | "clientsecret"
            | "password"
            | "passwd"
            | "token"
            | "accesstoken"
            | "authtoken"
            | "refreshtoken"
            | "bearer"
            | "authorization"
            | "privatekey"
    ) || k.ends_with("apikey")
        || k.ends_with("secretkey")
        || k.ends_with("accesstoken")
}

/// A secret key with an empty or null value holds nothing to hide.
pub(crate) fn holds_secret(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::String(s) => !s.trim().is_empty(),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_what_text_to_xhtml_made() {
        for text in [
            "",
            "hello",
            "a < b & c > d",
            "line one\nline two",
            "para one\n\npara two\nwith break",
            "looks like <p>markup</p> &amp; entities",
            "unicode: café 😀",
        ] {
            assert!(is_recoverable(text), "{text:?}");
        }
        for lossy in [
            "\n\nleading",
            "a\r\nb",
            "a\n\n\nb",
            "bell\u{7}",
            "trailing\n",
            "  \n\n x",
        ] {
            assert!(!is_recoverable(lossy), "{lossy:?}");
        }
        assert_eq!(recover_text("<h1>x</h1>"), None);
        assert_eq!(recover_text("<p>a &nbsp;</p>"), None);
        assert_eq!(recover_text("plain"), None);
    }

    #[test]
    fn plain_text_falls_back_to_visible_text() {
        assert_eq!(plain_text("<p>a<br/>b</p>"), "a\nb");
        assert_eq!(plain_text("<h1>T</h1><p>x <b>y</b></p>"), "T\nx y");
    }

    #[test]
    fn secret_keys() {
        for k in [
            "api_key",
            "OPENAI_API_KEY",
            "apiKey",
            "token",
            "Authorization",
            "client_secret",
        ] {
            assert!(is_secret_key(k), "{k}");
        }
        for k in [
            "env_key",
            "max_tokens",
            "total_turns",
            "model",
            "key_name",
            "tokens",
        ] {
            assert!(!is_secret_key(k), "{k}");
        }
    }
}
