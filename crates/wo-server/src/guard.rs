//! The security layer every request passes (SPEC §6): the `Host` must be a
//! loopback name (DNS-rebinding defence) or one the operator allowed; the
//! API needs the session token (cookie or bearer, compared in constant
//! time) in local mode; state-changing requests need a JSON content type and
//! a same-origin `Origin`; a per-client rate limit; and headers that forbid
//! framing, sniffing and any foreign resource. No CORS header is ever sent.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::Instant;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::app::App;
use crate::error::ApiError;

/// The session cookie that carries the token.
pub const SESSION_COOKIE: &str = "wo_session";

/// Host names that always mean this machine.
const LOOPBACK_NAMES: [&str; 4] = ["localhost", "127.0.0.1", "[::1]", "::1"];

/// A fresh random token: 32 bytes, base64url without padding.
pub fn new_token() -> String {
    use base64::Engine as _;
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Constant-time token comparison (no early exit on the first difference).
pub fn token_matches(expected: &str, given: &str) -> bool {
    expected.len() == given.len() && bool::from(expected.as_bytes().ct_eq(given.as_bytes()))
}

/// The host name of a `Host` header value, without the port.
pub fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return host
            .split_once(']')
            .map_or(host, |(h, _)| &host[..h.len() + 1]);
    }
    host.rsplit_once(':').map_or(host, |(h, _)| h)
}

/// Whether `host` (a `Host` header value) names this server.
pub fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let name = host_name(host).to_ascii_lowercase();
    LOOPBACK_NAMES.contains(&name.as_str())
        || allowed
            .iter()
            .any(|a| a == "*" || a.eq_ignore_ascii_case(&name))
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

/// Which credential in `headers` carries `token`, if any.
pub fn authenticate(headers: &HeaderMap, token: &str) -> Option<Auth> {
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
            && name == SESSION_COOKIE
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

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
}

/// Paths anyone may read: liveness, the API description and the client.
fn is_public(path: &str) -> bool {
    !path.starts_with("/api/") || path == "/api/health" || path == "/api/openapi.json"
}

/// The middleware: checks in the order that leaks least (host, rate, auth,
/// then the request's shape), then adds the security headers.
pub async fn guard(State(app): State<std::sync::Arc<App>>, req: Request, next: Next) -> Response {
    let mut resp = match check(&app, &req) {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    };
    let h = resp.headers_mut();
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

fn check(app: &App, req: &Request) -> Result<(), ApiError> {
    let headers = req.headers();
    // Two Host headers could disagree about who we are: refuse both.
    let host = match headers.get_all(header::HOST).iter().count() {
        1 => headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or(""),
        _ => "",
    };
    if !host_allowed(host, &app.allowed_hosts) {
        return Err(ApiError::forbidden(format!(
            "Host {host:?} is not this server's name; only loopback names are accepted (start `wo serve --allow-host NAME` to serve another)"
        )));
    }
    let path = req.uri().path();
    if path.starts_with("/api/") {
        let client = req
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip());
        if let Some(ip) = client
            && !app.limiter.allow(ip)
        {
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                "too many requests; slow down",
            ));
        }
    }
    let auth = match &app.token {
        Some(token) if !is_public(path) => {
            Some(authenticate(headers, token).ok_or_else(ApiError::unauthorized)?)
        }
        _ => None,
    };
    if is_state_changing(req.method()) {
        if !is_json(headers) {
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

/// A per-client token bucket: `per_minute` requests a minute on average,
/// bursts up to the same number. A map behind a mutex is enough at the
/// request rates one process serves; idle clients are evicted.
pub struct RateLimiter {
    per_minute: u32,
    buckets: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

impl RateLimiter {
    /// `per_minute == 0` turns limiting off.
    pub fn new(per_minute: u32) -> Self {
        RateLimiter {
            per_minute,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one token for `ip`; false when its bucket is empty.
    pub fn allow(&self, ip: IpAddr) -> bool {
        if self.per_minute == 0 {
            return true;
        }
        let now = Instant::now();
        let cap = f64::from(self.per_minute);
        let rate = cap / 60.0;
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() > 10_000 {
            buckets.retain(|_, (_, at)| now.duration_since(*at).as_secs() < 120);
        }
        let (tokens, at) = buckets.entry(ip).or_insert((cap, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * rate).min(cap);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
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
        assert_eq!(authenticate(&h, "tok"), None);
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=b; wo_session=tok"),
        );
        assert_eq!(authenticate(&h, "tok"), Some(Auth::Cookie));
        assert_eq!(authenticate(&h, "other"), None);
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer tok"),
        );
        assert_eq!(authenticate(&h, "tok"), Some(Auth::Bearer));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic tok"));
        assert_eq!(authenticate(&h, "tok"), None);
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
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        assert!(l.allow(a) && l.allow(a) && l.allow(a));
        assert!(!l.allow(a));
        assert!(l.allow(b));
        assert!(RateLimiter::new(0).allow(a));
    }
}
