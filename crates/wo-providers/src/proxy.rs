//! Which proxy, if any, a provider's requests go through.
//!
//! A proxy sees every request it carries; for an `http://` service that
//! includes the API key, in clear. So:
//!
//! - By default no proxy is used: `HTTP_PROXY`, `HTTPS_PROXY` and
//!   `ALL_PROXY` (any case) are ignored, because any program that can set a
//!   variable in the user's environment could otherwise collect the keys.
//! - `WO_USE_ENV_PROXY=1` opts in to those variables (with `NO_PROXY`, and
//!   never for loopback services, which a proxy cannot reach anyway).
//! - `proxy = "http://proxy:3128"` in a provider's `config.toml` entry is
//!   used for that provider, whatever the environment says.
//! - Either way a key is never sent to a proxy in clear: an `http://`
//!   service with a key through an `http://` proxy is refused when the
//!   provider is built ([`check`]). Through a proxy an `https://` service is
//!   reached with `CONNECT`, so the proxy sees only the host name.

use std::net::IpAddr;

use reqwest::Url;

use crate::env::Env;

/// The variable that opts in to the environment's proxy variables.
pub const OPT_IN_VAR: &str = "WO_USE_ENV_PROXY";

/// The proxy for requests to `base_url`: the configured one, else (only
/// with `WO_USE_ENV_PROXY=1`) the environment's. `Ok(None)`: connect
/// directly. The result still has to pass [`check`].
pub fn resolve(
    base_url: &str,
    configured: Option<&str>,
    env: &Env,
) -> Result<Option<String>, String> {
    if let Some(p) = configured {
        return Ok(Some(p.to_owned()));
    }
    if !opted_in(env) {
        return Ok(None);
    }
    let base = Url::parse(base_url).map_err(|e| format!("invalid base_url {base_url:?}: {e}"))?;
    let Some(host) = base.host_str() else {
        return Ok(None);
    };
    if is_loopback(host) || no_proxy_matches(env, host) {
        return Ok(None);
    }
    let names: &[&str] = if base.scheme() == "https" {
        &["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]
    } else {
        &["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
    };
    for name in names {
        if let Some(v) = env.get(name) {
            let v = v
                .into_string()
                .map_err(|_| format!("${name} is not valid UTF-8"))?;
            return Ok(Some(v.trim().to_owned()));
        }
    }
    Ok(None)
}

/// Whether `WO_USE_ENV_PROXY` is set to a true value (`1`, `true`, `yes`).
pub fn opted_in(env: &Env) -> bool {
    env.get(OPT_IN_VAR)
        .and_then(|v| v.into_string().ok())
        .is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
}

/// Parses `proxy` and refuses what would expose the key: a scheme reqwest
/// cannot use here, or a key for an `http://` service through an `http://`
/// proxy. `base_url` must already be valid.
pub fn check(proxy: &str, base_url: &str, has_key: bool) -> Result<Url, String> {
    // `host:port` without a scheme means an HTTP proxy, as curl reads it.
    let with_scheme = if proxy.contains("://") {
        proxy.to_owned()
    } else {
        format!("http://{proxy}")
    };
    let url =
        Url::parse(&with_scheme).map_err(|e| format!("invalid proxy {:?}: {e}", shown(proxy)))?;
    let shown_url = crate::http::display_url(&url);
    match url.scheme() {
        "http" | "https" => {}
        s => {
            return Err(format!(
                "proxy {shown_url}: scheme {s} is not supported (use http:// or https://)"
            ));
        }
    }
    let base_http = base_url
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("http://");
    if has_key && base_http && url.scheme() == "http" {
        return Err(format!(
            "refusing to send the API key in clear through the proxy {shown_url}: base_url is \
             http://, so the proxy would read the key; use an https:// base_url or an https:// \
             proxy, or leave this provider out of the proxy (NO_PROXY, or unset {OPT_IN_VAR})"
        ));
    }
    Ok(url)
}

/// A proxy setting for messages: without any `user:password@`.
fn shown(proxy: &str) -> String {
    match proxy.rsplit_once('@') {
        Some((head, tail)) => match head.split_once("://") {
            Some((scheme, _)) => format!("{scheme}://…@{tail}"),
            None => format!("…@{tail}"),
        },
        None => proxy.to_owned(),
    }
}

fn is_loopback(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost")
        || h.to_ascii_lowercase().ends_with(".localhost")
        || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// `NO_PROXY`/`no_proxy`: comma-separated host names (matching the host
/// and its subdomains, with or without a leading dot), IP addresses, or `*`.
fn no_proxy_matches(env: &Env, host: &str) -> bool {
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    ["no_proxy", "NO_PROXY"]
        .iter()
        .filter_map(|n| env.get(n).and_then(|v| v.into_string().ok()))
        .any(|list| {
            list.split([',', ' '])
                .map(|e| e.trim().to_ascii_lowercase())
                .filter(|e| !e.is_empty())
                .any(|entry| {
                    if entry == "*" {
                        return true;
                    }
                    // Drop a `:port` (but not from a bare IPv6 address).
                    let entry = match entry.rsplit_once(':') {
                        Some((h, p))
                            if p.bytes().all(|b| b.is_ascii_digit()) && !h.contains(':') =>
                        {
                            h.to_owned()
                        }
                        _ => entry,
                    };
                    let entry = entry.trim_start_matches('.');
                    host == entry || host.ends_with(&format!(".{entry}"))
                })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        Env::from_pairs(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn environment_proxies_only_when_opted_in() {
        let e = env(&[("HTTP_PROXY", "http://p:1"), ("ALL_PROXY", "http://p:2")]);
        assert_eq!(resolve("http://api.example/v1", None, &e).unwrap(), None);
        let e = env(&[
            ("WO_USE_ENV_PROXY", "1"),
            ("HTTP_PROXY", "http://p:1"),
            ("ALL_PROXY", "http://p:2"),
            ("NO_PROXY", "internal.example,.corp"),
        ]);
        assert_eq!(
            resolve("http://api.example/v1", None, &e)
                .unwrap()
                .as_deref(),
            Some("http://p:1")
        );
        assert_eq!(
            resolve("https://api.example/v1", None, &e)
                .unwrap()
                .as_deref(),
            Some("http://p:2")
        );
        for direct in [
            "http://127.0.0.1:8080/v1",
            "http://localhost:1",
            "http://[::1]:2/v1",
            "https://internal.example/v1",
            "https://x.corp/v1",
        ] {
            assert_eq!(resolve(direct, None, &e).unwrap(), None, "{direct}");
        }
        // An explicit entry wins over everything.
        assert_eq!(
            resolve("http://127.0.0.1:1", Some("https://mine:3"), &env(&[]))
                .unwrap()
                .as_deref(),
            Some("https://mine:3")
        );
    }

    #[test]
    fn keys_never_go_to_a_proxy_in_clear() {
        let e = check("http://p:3128", "http://api.example/v1", true).unwrap_err();
        assert!(e.contains("in clear") && e.contains("http://p:3128"), "{e}");
        let e = check("user:pw@p:3128", "http://api.example/v1", true).unwrap_err();
        assert!(!e.contains("pw"), "{e}");
        assert!(check("http://p:3128", "https://api.example/v1", true).is_ok());
        assert!(check("http://p:3128", "http://api.example/v1", false).is_ok());
        assert!(check("https://p:3128", "http://api.example/v1", true).is_ok());
        assert_eq!(
            check("p:3128", "https://a/v1", true).unwrap().as_str(),
            "http://p:3128/"
        );
        assert!(
            check("socks5://p:1080", "https://a/v1", true)
                .unwrap_err()
                .contains("not supported")
        );
    }
}
