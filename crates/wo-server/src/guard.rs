//! The security layer every request passes (product §6): the `Host` must be a
//! loopback name (DNS-rebinding defence) or one the operator allowed; the
//! API needs the session token (cookie or bearer, compared in constant
//! time) in local mode; state-changing requests need a JSON content type and
//! a same-origin `Origin`; a per-client rate limit; and headers that forbid
//! framing, sniffing and any foreign resource. No CORS header is ever sent.
//!
//! The faces for other tools — the OpenAI-compatible `/v1/` and MCP's
//! `/mcp` — take the token as `Authorization: Bearer` only (never the
//! browser's cookie), so a page in a browser can never reach them; they
//! need no `Origin`, and refuse a foreign one. Errors under `/v1/` are
//! answered in OpenAI's shape.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::app::App;
pub use crate::credentials::{
    CookieNames, SESSION_COOKIE_PREFIX, new_instance_id, new_token, token_matches,
};
use crate::error::ApiError;
pub use crate::rate::{RateKey, RateLimiter};

/// Host names that always mean this machine.
const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// A `Host` header value as RFC 9110 §7.2 allows it (`uri-host [":"
/// port]`), split into the lowercase name and the port; `None` for what no
/// browser sends: an empty, non-numeric, zero or out-of-range port, text
/// after `]`, userinfo (`@`), spaces, paths, percent signs, empty labels,
/// or an IPv6 address outside brackets. The name may be a DNS name, an IPv4
/// address or a bracketed IPv6 address (which must parse).
pub fn parse_host(host: &str) -> Option<(String, Option<u16>)> {
    if host.is_empty() || host.len() > 270 {
        return None;
    }
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        inside.parse::<std::net::Ipv6Addr>().ok()?;
        let port = match after {
            "" => None,
            p => Some(parse_port(p.strip_prefix(':')?)?),
        };
        (&host[..inside.len() + 2], port)
    } else {
        let (name, port) = match host.split_once(':') {
            Some((n, p)) => (n, Some(parse_port(p)?)),
            None => (host, None),
        };
        let labels = name.strip_suffix('.').unwrap_or(name);
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        if !labels.split('.').all(label_ok) {
            return None;
        }
        (name, port)
    };
    Some((name.to_ascii_lowercase(), port))
}

/// 1 to 65535, digits only, no leading zero.
fn parse_port(p: &str) -> Option<u16> {
    if p.is_empty() || p.len() > 5 || p.starts_with('0') || !p.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    p.parse::<u16>().ok()
}

/// Whether the host name `name` (from [`parse_host`]) names this server.
pub fn name_allowed(name: &str, allowed: &[String]) -> bool {
    LOOPBACK_NAMES.contains(&name)
        || allowed
            .iter()
            .any(|a| a == "*" || a.eq_ignore_ascii_case(name))
}

/// Whether `host` (a `Host` header value) is well formed and names this
/// server.
pub fn host_allowed(host: &str, allowed: &[String]) -> bool {
    parse_host(host).is_some_and(|(name, _)| name_allowed(&name, allowed))
}

/// How a request proved who it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// The session cookie: a browser, which sends cookies on its own, so
    /// state-changing requests must also prove they come from our page.
    Cookie,
    /// `Authorization: Bearer`: a program; browsers never add it by
    /// themselves, so a cross-site page cannot forge it.
    Bearer,
}

/// Which credential in `headers` carries `token`, if any: the bearer
/// header, or the session cookie called `cookie` (other servers' cookies on
/// this host are not looked at).
pub fn authenticate(headers: &HeaderMap, token: &str, cookie: &str) -> Option<Auth> {
    if let Some(v) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        && let Some(given) = v.strip_prefix("Bearer ")
        && token_matches(token, given.trim())
    {
        return Some(Auth::Bearer);
    }
    let cookies = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'));
    for c in cookies {
        if let Some((name, value)) = c.trim().split_once('=')
            && name == cookie
            && token_matches(token, value)
        {
            return Some(Auth::Cookie);
        }
    }
    None
}

/// Whether `origin` is this server as the browser reached it (`Host`).
pub fn same_origin(origin: &str, host: &str) -> bool {
    let origin = origin.to_ascii_lowercase();
    let host = host.to_ascii_lowercase();
    origin == format!("http://{host}") || origin == format!("https://{host}")
}

fn is_state_changing(m: &Method) -> bool {
    !matches!(*m, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Whether a request says it carries a body.
fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0")
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
}

/// Which part of the server a path belongs to: each has its own checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Area {
    /// The web client's files, liveness and the API description: anyone.
    Public,
    /// `/api/`: the session cookie or the bearer token.
    Api,
    /// `/v1/` (OpenAI-compatible) and `/mcp`: the bearer token only.
    Tools,
}

/// The area of `path`.
pub fn area(path: &str) -> Area {
    use wo_wire::routes::{MCP_PATH, OPENAI_PREFIX};
    if path.starts_with(OPENAI_PREFIX)
        || path == MCP_PATH
        || path
            .strip_prefix(MCP_PATH)
            .is_some_and(|rest| rest.starts_with('/'))
    {
        Area::Tools
    } else if path.starts_with("/api/") && path != "/api/health" && path != "/api/openapi.json" {
        Area::Api
    } else {
        Area::Public
    }
}

/// Paths anyone may read: liveness, the API description and the client.
fn is_public(path: &str) -> bool {
    area(path) == Area::Public
}

/// Whether errors on `path` are answered in OpenAI's shape.
pub fn speaks_openai(path: &str) -> bool {
    path.starts_with(wo_wire::routes::OPENAI_PREFIX)
}

/// The middleware: checks in the order that leaks least (host, rate, auth,
/// then the request's shape), then adds the security headers.
pub async fn guard(State(app): State<std::sync::Arc<App>>, req: Request, next: Next) -> Response {
    let (mut resp, body_left_unread) = match check(&app, &req) {
        Ok(()) => (next.run(req).await, false),
        Err(e) if speaks_openai(req.uri().path()) => {
            (crate::error::error_response(&e), has_body(req.headers()))
        }
        Err(e) => (e.into_response(), has_body(req.headers())),
    };
    let too_large = resp.status() == StatusCode::PAYLOAD_TOO_LARGE;
    let h = resp.headers_mut();
    // The server closes a connection whose request body it did not read to
    // the end (a refusal before the handler, or a body past its limit). A
    // client told nothing would keep it for its next request and have that
    // one fail mid-send; saying so makes it open a fresh one.
    if body_left_unread || too_large {
        h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(crate::assets::CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    resp
}

/// Whether a browser says this request comes from another origin (Fetch
/// Metadata): another port on this host is `same-site` for cookies, which
/// is why the session cookie rides along on such requests at all.
fn is_cross_origin_fetch(headers: &HeaderMap) -> bool {
    headers
        .get("sec-fetch-site")
        .is_some_and(|v| !matches!(v.as_bytes(), b"same-origin" | b"none"))
}

/// The one `Host` of a request, well formed, or a 400 naming the problem.
fn request_host(headers: &HeaderMap) -> Result<&str, ApiError> {
    let mut hosts = headers.get_all(header::HOST).iter();
    let (Some(value), None) = (hosts.next(), hosts.next()) else {
        // None, or two that could disagree about who we are.
        return Err(ApiError::bad_request(
            "a request needs exactly one Host header",
        ));
    };
    let host = value.to_str().unwrap_or("");
    if parse_host(host).is_none() {
        return Err(ApiError::bad_request(format!(
            "malformed Host header {:?}: expected a host name, IPv4 address or [IPv6] address, optionally followed by :PORT (1-65535)",
            String::from_utf8_lossy(value.as_bytes())
        )));
    }
    Ok(host)
}

fn check(app: &App, req: &Request) -> Result<(), ApiError> {
    let headers = req.headers();
    let host = request_host(headers)?;
    if !host_allowed(host, &app.allowed_hosts) {
        return Err(ApiError::forbidden(format!(
            "Host {host:?} is not this server's name; only loopback names are accepted (start `wo serve --allow-host NAME` to serve another)"
        )));
    }
    // An absolute-form target (`GET http://other/… HTTP/1.1`) names the
    // server it is for, and it is the one a proxy would honour over `Host`:
    // it must name an allowed host too, and the same one.
    if let Some(authority) = req.uri().authority() {
        let named = authority.as_str();
        if authority.as_str().contains('@')
            || !host_allowed(named, &app.allowed_hosts)
            || parse_host(named) != parse_host(host)
        {
            return Err(ApiError::bad_request(format!(
                "the request target names {named:?}, not this server ({host:?}); send the path only (origin form)"
            )));
        }
    }
    let path = req.uri().path();
    let area = area(path);
    let api = area != Area::Public;
    let credential = app
        .token
        .as_deref()
        .and_then(|t| authenticate(headers, t, &app.cookies.session));
    // A page on another port of this host gets our cookie attached by the
    // browser: such a request proves nothing about who sent it.
    let foreign = credential == Some(Auth::Cookie) && is_cross_origin_fetch(headers);
    if api {
        // The signed-in user has a bucket of their own, so anonymous
        // clients (another local page, a token guesser) cannot use it up;
        // anonymous requests are limited by address.
        let key = match credential {
            Some(_) if !foreign => Some(RateKey::Session),
            _ => req
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| RateKey::Addr(c.0.ip())),
        };
        if let Some(key) = key
            && !app.limiter.allow(key)
        {
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                "too many requests; slow down",
            ));
        }
        if foreign {
            return Err(ApiError::forbidden(
                "cross-origin request refused (Sec-Fetch-Site says it comes from another page)",
            ));
        }
    }
    let auth = match &app.token {
        // Programs only: a browser's cookie is no credential here.
        Some(_) if area == Area::Tools => match credential {
            Some(Auth::Bearer) => Some(Auth::Bearer),
            _ => return Err(ApiError::unauthorized_program()),
        },
        Some(_) if !is_public(path) => Some(credential.ok_or_else(ApiError::unauthorized)?),
        _ => None,
    };
    if is_state_changing(req.method()) {
        // MCP ends a session with a bodiless DELETE.
        let bodiless_mcp_delete =
            area == Area::Tools && req.method() == Method::DELETE && !has_body(headers);
        if !is_json(headers) && !bodiless_mcp_delete {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "state-changing requests must send Content-Type: application/json",
            ));
        }
        if headers.get_all(header::ORIGIN).iter().count() > 1 {
            return Err(ApiError::forbidden("more than one Origin header"));
        }
        match headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
            Some(origin) if same_origin(origin, host) => {}
            Some(origin) => {
                return Err(ApiError::forbidden(format!(
                    "cross-origin request from {origin} refused"
                )));
            }
            // A browser always sends Origin on these requests; only a
            // program without a cookie (bearer, or stateless mode) may omit it.
            None if auth == Some(Auth::Cookie) => {
                return Err(ApiError::forbidden(
                    "state-changing requests from a browser must carry an Origin header",
                ));
            }
            None => {}
        }
        if let Some(len) = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok())
        {
            let limit = app.body_limit(path);
            if len > limit {
                return Err(ApiError::too_large(limit));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_pass_and_others_do_not() {
        for h in [
            "localhost:8787",
            "127.0.0.1:1",
            "[::1]:8787",
            "LOCALHOST",
            "127.0.0.1",
        ] {
            assert!(host_allowed(h, &[]), "{h}");
        }
        // Well formed, but not one of our names.
        assert!(parse_host("localhost.").is_some());
        assert!(!host_allowed("localhost.", &[]));
        for h in [
            "evil.example:8787",
            "127.0.0.2",
            "localhost.evil.example",
            "",
            "[::2]:80",
        ] {
            assert!(!host_allowed(h, &[]), "{h}");
        }
        assert!(host_allowed("wo.example.org", &["wo.example.org".into()]));
        assert!(host_allowed("anything", &["*".into()]));
    }

    #[test]
    fn tokens_compare_exactly() {
        let t = new_token();
        assert_eq!(t.len(), 43);
        assert!(token_matches(&t, &t.clone()));
        assert!(!token_matches(&t, &t[..42]));
        assert!(!token_matches(&t, ""));
        assert_ne!(new_token(), t);
    }

    #[test]
    fn credentials_are_found_in_cookie_or_bearer() {
        let mut h = HeaderMap::new();
        let c = "wo_session_8787_abcdef";
        assert_eq!(authenticate(&h, "tok", c), None);
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=b; wo_session_8787_abcdef=tok"),
        );
        assert_eq!(authenticate(&h, "tok", c), Some(Auth::Cookie));
        assert_eq!(authenticate(&h, "other", c), None);
        // Another server's cookie, even with our token in it, is not ours.
        assert_eq!(authenticate(&h, "tok", "wo_session_9999_abcdef"), None);
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer tok"),
        );
        assert_eq!(authenticate(&h, "tok", c), Some(Auth::Bearer));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic tok"));
        assert_eq!(authenticate(&h, "tok", c), None);
    }

    #[test]
    fn origins_must_match_the_host() {
        assert!(same_origin("http://127.0.0.1:8787", "127.0.0.1:8787"));
        assert!(!same_origin("http://127.0.0.1:8788", "127.0.0.1:8787"));
        assert!(!same_origin("http://evil.example", "127.0.0.1:8787"));
        assert!(!same_origin("null", "127.0.0.1:8787"));
    }

    #[test]
    fn the_bucket_empties_and_limits_per_client() {
        let l = RateLimiter::new(3);
        let a = RateKey::Addr("10.0.0.1".parse().unwrap());
        let b = RateKey::Addr("10.0.0.2".parse().unwrap());
        assert!(l.allow(a) && l.allow(a) && l.allow(a));
        assert!(!l.allow(a));
        assert!(l.allow(b));
        assert!(l.allow(RateKey::Session));
        assert!(RateLimiter::new(0).allow(a));
    }

    #[test]
    fn cookie_names_are_per_port_and_instance() {
        let n = CookieNames::new(8787, "ab12cd");
        assert_eq!(n.session, "wo_session_8787_ab12cd");
        assert_eq!(n.prefs, "wo_prefs_8787");
        assert!(n.is_stale_session("wo_session_8787_ffffff"));
        assert!(!n.is_stale_session("wo_session_8787_ab12cd"));
        assert!(!n.is_stale_session("wo_session_9999_ffffff"));
        assert!(!n.is_stale_session("wo_session_87870_ffffff"));
        assert!(!n.is_stale_session("wo_session"));
        assert!(!n.is_stale_session("wo_session_8787_"));
        assert_eq!(new_instance_id().len(), 6);
    }
}
