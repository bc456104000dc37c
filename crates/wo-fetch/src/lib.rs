//! Guarded fetching of the links found in truth entries (product §4, `url_fetch` pref).
//!
//! A truth entry's XHTML may contain `<a href>` links; when the user enables URL fetch, the text
//! behind those links is added to the prompt. The URLs come from user (or imported) data, so a
//! fetch must not become a way to read the local machine, the LAN or a cloud metadata endpoint
//! (server-side request forgery). The rules, all enforced here:
//!
//! - only `http` and `https`;
//! - domain block list, then allow list (block wins; a non-empty allow list admits only the
//!   listed domains and their subdomains);
//! - no non-public address: IP-literal hosts are checked directly, and DNS names are resolved by
//!   our own resolver ([`GuardedResolver`]) that refuses a host if *any* of its addresses is
//!   non-public. Because reqwest connects only to the addresses that resolver returns, there is
//!   no window between checking and connecting (no DNS-rebinding TOCTOU);
//! - every redirect hop is re-checked (scheme, domain lists, IP literals; DNS names go through
//!   the resolver again) and the number of hops is capped;
//! - the body is read as a stream and cut at `max_bytes`; the whole fetch has one deadline;
//! - only HTML/XHTML (converted to plain text) and `text/plain` are accepted.
//!
//! System proxies are disabled on purpose: with a proxy the proxy would resolve and connect,
//! bypassing every address check.
//!
//! [`links_in_xhtml`] lists the candidate links of a truth entry.

mod addr;
mod html;
pub mod tls;

use std::error::Error as StdError;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};
use wo_format::xhtml::{Whitespace, collapse_whitespace, html_to_text};

pub use addr::refusal_reason as address_refusal_reason;
pub use html::{links_in_text, links_in_xhtml};

/// Limits and lists that govern one fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPolicy {
    /// Most body bytes read; the rest of the response is never downloaded.
    pub max_bytes: usize,
    /// Deadline for the whole fetch: connecting, every redirect and reading the body.
    pub timeout: Duration,
    /// Most redirects followed before giving up.
    pub max_redirects: usize,
    /// When non-empty, only these domains (and their subdomains) may be fetched.
    pub allow_domains: Vec<String>,
    /// Domains (and their subdomains) never fetched; wins over `allow_domains`.
    pub block_domains: Vec<String>,
    /// TEST-ONLY escape hatch: exact socket addresses (IP literal + port in the URL) that pass
    /// the address check although they are not public, so tests can use a local server.
    ///
    /// Production code must leave this empty; nothing in WikiOracle sets it (it is not read
    /// from preferences). It never relaxes the DNS resolver, so a *name* that resolves to a
    /// local address is refused even when its address is listed here.
    #[doc(hidden)]
    pub allow_addresses_for_tests: Vec<SocketAddr>,
}

impl Default for FetchPolicy {
    fn default() -> Self {
        Self {
            max_bytes: 256 * 1024,
            timeout: Duration::from_secs(5),
            max_redirects: 3,
            allow_domains: Vec::new(),
            block_domains: Vec::new(),
            allow_addresses_for_tests: Vec::new(),
        }
    }
}

/// The text behind a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The final URL, after redirects.
    pub url: String,
    /// The HTML `<title>`, whitespace collapsed; `None` for plain text or a page without one.
    pub title: Option<String>,
    /// Plain text: HTML with scripts/styles dropped and whitespace collapsed, or the
    /// `text/plain` body.
    pub text: String,
    /// The body was longer than `max_bytes` and only its start was read.
    pub truncated: bool,
}

/// A safety rule that refused a URL or an address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Not http or https.
    #[error("refused {url}: scheme {scheme:?} is not allowed (only http and https)")]
    Scheme {
        /// The URL refused.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// A URL without a host.
    #[error("refused {url}: it has no host")]
    NoHost {
        /// The URL refused.
        url: String,
    },
    /// The host is on the block list.
    #[error("refused {url}: host {host} is on the block list (entry {entry:?})")]
    BlockedDomain {
        /// The URL refused.
        url: String,
        /// The host.
        host: String,
        /// The block list entry that matched.
        entry: String,
    },
    /// An allow list is set and the host is not on it.
    #[error("refused {url}: host {host} is not on the allow list")]
    NotAllowedDomain {
        /// The URL refused.
        url: String,
        /// The host.
        host: String,
    },
    /// The URL's host is an IP literal that is not a public address.
    #[error("refused {url}: address {addr} is a {reason}")]
    Address {
        /// The URL refused.
        url: String,
        /// The address.
        addr: IpAddr,
        /// What kind of address it is (loopback, private, link-local, …).
        reason: &'static str,
    },
    /// A DNS name resolved to a non-public address (one is enough).
    #[error("refused host {host}: it resolves to {addr}, a {reason}")]
    ResolvedAddress {
        /// The host.
        host: String,
        /// The non-public address among its answers.
        addr: IpAddr,
        /// What kind of address it is.
        reason: &'static str,
    },
    /// A DNS name with no address.
    #[error("refused host {host}: it resolves to no address")]
    NoAddress {
        /// The host.
        host: String,
    },
}

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The URL does not parse.
    #[error("invalid URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// Why it does not parse.
        reason: String,
    },
    /// A safety rule refused the URL, a redirect or an address.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// More redirect hops than the policy allows.
    #[error("refused {url}: more than {max} redirects")]
    TooManyRedirects {
        /// The URL fetched.
        url: String,
        /// The most hops allowed.
        max: usize,
    },
    /// The whole fetch took longer than its deadline.
    #[error("fetching {url} timed out after {timeout:?}")]
    Timeout {
        /// The URL fetched.
        url: String,
        /// The deadline.
        timeout: Duration,
    },
    /// The server answered with a non-success status.
    #[error("{url} answered HTTP {status}")]
    Status {
        /// The URL fetched.
        url: String,
        /// The HTTP status.
        status: u16,
    },
    /// The body is not HTML, XHTML or plain text.
    #[error(
        "refused {url}: content type {content_type:?} is not text \
         (only text/html, application/xhtml+xml and text/plain)"
    )]
    ContentType {
        /// The URL fetched.
        url: String,
        /// The content type it was served as.
        content_type: String,
    },
    /// Connecting or reading failed.
    #[error("fetching {url} failed: {message}")]
    Http {
        /// The URL fetched.
        url: String,
        /// What failed.
        message: String,
    },
}

/// What the redirect policy and the resolver hand back through reqwest's error chain; we dig it
/// out again in [`map_reqwest_error`] so callers see which rule fired, not a generic I/O error.
#[derive(Debug, Clone, thiserror::Error)]
enum GuardError {
    #[error(transparent)]
    Refused(Refusal),
    #[error("more than {max} redirects at {url}")]
    TooManyRedirects { url: String, max: usize },
}

fn host_matches(host: &str, domain: &str) -> bool {
    let domain = domain.trim().trim_end_matches('.').to_ascii_lowercase();
    let domain = domain.strip_prefix("*.").unwrap_or(&domain);
    !domain.is_empty()
        && (host == domain
            || (host.len() > domain.len()
                && host.ends_with(domain)
                && host.as_bytes()[host.len() - domain.len() - 1] == b'.'))
}

/// Checks everything about a URL that can be known without DNS: scheme, domain lists and
/// IP-literal hosts. Used for the first URL and for every redirect hop.
fn check_url(url: &Url, policy: &FetchPolicy) -> Result<(), Refusal> {
    let s = url.as_str().to_string();
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Refusal::Scheme {
            url: s,
            scheme: url.scheme().to_string(),
        });
    }
    let host = url
        .host()
        .ok_or_else(|| Refusal::NoHost { url: s.clone() })?;
    // `Url` already lower-cases and punycodes names and normalises odd IPv4 spellings
    // (`2130706433`, `0x7f.1`), so comparisons below see the canonical form.
    let host_str = match &host {
        Host::Domain(d) => d.trim_end_matches('.').to_string(),
        Host::Ipv4(ip) => ip.to_string(),
        Host::Ipv6(ip) => ip.to_string(),
    };
    if let Some(entry) = policy
        .block_domains
        .iter()
        .find(|d| host_matches(&host_str, d))
    {
        return Err(Refusal::BlockedDomain {
            url: s,
            host: host_str,
            entry: entry.clone(),
        });
    }
    if !policy.allow_domains.is_empty()
        && !policy
            .allow_domains
            .iter()
            .any(|d| host_matches(&host_str, d))
    {
        return Err(Refusal::NotAllowedDomain {
            url: s,
            host: host_str,
        });
    }
    let ip = match host {
        Host::Ipv4(ip) => IpAddr::V4(ip),
        Host::Ipv6(ip) => IpAddr::V6(ip),
        // Names are checked by the resolver at connect time.
        Host::Domain(_) => return Ok(()),
    };
    if let Some(reason) = addr::refusal_reason(ip) {
        let port = url.port_or_known_default().unwrap_or(0);
        if !policy
            .allow_addresses_for_tests
            .contains(&SocketAddr::new(ip, port))
        {
            return Err(Refusal::Address {
                url: s,
                addr: ip,
                reason,
            });
        }
    }
    Ok(())
}

/// reqwest resolver that only ever yields public addresses.
///
/// It resolves with the system resolver (tokio's `lookup_host`) and refuses the whole host if
/// any answer is non-public: a name with mixed answers is suspicious, and filtering would let an
/// attacker's name silently fall back to whichever address the OS picks. reqwest then connects
/// only to what we returned, so the check and the connection use the same addresses.
#[derive(Debug, Default, Clone, Copy)]
pub struct GuardedResolver;

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            // Port 0: hyper replaces it with the URL's port.
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if addrs.is_empty() {
                return Err(Box::new(GuardError::Refused(Refusal::NoAddress { host }))
                    as Box<dyn StdError + Send + Sync>);
            }
            for a in &addrs {
                if let Some(reason) = addr::refusal_reason(a.ip()) {
                    return Err(Box::new(GuardError::Refused(Refusal::ResolvedAddress {
                        host,
                        addr: a.ip(),
                        reason,
                    })) as Box<dyn StdError + Send + Sync>);
                }
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

fn build_client(policy: &FetchPolicy) -> Result<reqwest::Client, reqwest::Error> {
    let hop_policy = policy.clone();
    let redirect = reqwest::redirect::Policy::custom(move |attempt| {
        // `previous` holds the first URL and every hop already followed.
        if attempt.previous().len() > hop_policy.max_redirects {
            let err = GuardError::TooManyRedirects {
                url: attempt.url().to_string(),
                max: hop_policy.max_redirects,
            };
            return attempt.error(err);
        }
        match check_url(attempt.url(), &hop_policy) {
            Ok(()) => attempt.follow(),
            Err(r) => attempt.error(GuardError::Refused(r)),
        }
    });
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls::client_config(false))
        .no_proxy()
        .dns_resolver(Arc::new(GuardedResolver))
        .redirect(redirect)
        .timeout(policy.timeout)
        .user_agent(concat!(
            "WikiOracle/",
            env!("CARGO_PKG_VERSION"),
            " (url_fetch)"
        ))
        .build()
}

/// Turns a reqwest error into ours, recovering a rule refusal buried in its source chain.
fn map_reqwest_error(url: &str, policy: &FetchPolicy, err: reqwest::Error) -> FetchError {
    let mut source: Option<&(dyn StdError + 'static)> = Some(&err);
    while let Some(e) = source {
        if let Some(g) = e.downcast_ref::<GuardError>() {
            return match g.clone() {
                GuardError::Refused(r) => FetchError::Refused(r),
                GuardError::TooManyRedirects { url, max } => {
                    FetchError::TooManyRedirects { url, max }
                }
            };
        }
        source = e.source();
    }
    if err.is_timeout() {
        return FetchError::Timeout {
            url: url.to_string(),
            timeout: policy.timeout,
        };
    }
    // The full chain says more than the top error ("error sending request").
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        message.push_str(": ");
        message.push_str(&e.to_string());
        source = e.source();
    }
    FetchError::Http {
        url: url.to_string(),
        message,
    }
}

enum Kind {
    Html,
    Plain,
}

fn content_kind(content_type: &str) -> Option<Kind> {
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match mime.as_str() {
        "text/html" | "application/xhtml+xml" => Some(Kind::Html),
        "text/plain" => Some(Kind::Plain),
        _ => None,
    }
}

async fn fetch_inner(
    start: &Url,
    policy: &FetchPolicy,
    client: reqwest::Client,
) -> Result<Fetched, FetchError> {
    let url_s = start.as_str();
    let resp = client
        .get(start.clone())
        .header(
            reqwest::header::ACCEPT,
            "text/html, application/xhtml+xml, text/plain;q=0.9",
        )
        .send()
        .await
        .map_err(|e| map_reqwest_error(url_s, policy, e))?;
    let final_url = resp.url().to_string();
    if resp.status().is_redirection() {
        // reqwest hands back (without following, and without asking our policy) a redirect to
        // a scheme it cannot fetch, such as `file:`; name the rule instead of a bare 3xx.
        let target = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|loc| resp.url().join(loc).ok());
        if let Some(target) = target {
            check_url(&target, policy)?;
        }
    }
    if !resp.status().is_success() {
        return Err(FetchError::Status {
            url: final_url,
            status: resp.status().as_u16(),
        });
    }
    let content_type = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let Some(kind) = content_kind(&content_type) else {
        return Err(FetchError::ContentType {
            url: final_url,
            content_type,
        });
    };
    // Stream the body so an oversized (or endless) response costs at most `max_bytes`.
    let mut body: Vec<u8> = Vec::new();
    let mut truncated = false;
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| map_reqwest_error(&final_url, policy, e))?;
        let room = policy.max_bytes - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            truncated = true;
            break;
        }
        // A body that exactly fills the cap is read to its end and is not truncated.
        body.extend_from_slice(&chunk);
    }
    drop(stream);
    // Lossy: a cut may split a UTF-8 sequence, and a page mislabelled as UTF-8 should still
    // yield its readable parts.
    let raw = String::from_utf8_lossy(&body);
    let (title, text) = match kind {
        Kind::Html => {
            let page = html_to_text(&raw, Whitespace::Collapse);
            (page.title, page.text)
        }
        Kind::Plain => (None, collapse_whitespace(&raw)),
    };
    Ok(Fetched {
        url: final_url,
        title,
        text,
        truncated,
    })
}

/// Fetches `url` under `policy` and returns its text.
///
/// Never panics; every refusal names the rule and the URL or address it applied to.
pub async fn fetch_text(url: &str, policy: &FetchPolicy) -> Result<Fetched, FetchError> {
    let start = Url::parse(url.trim()).map_err(|e| FetchError::InvalidUrl {
        url: url.to_string(),
        reason: e.to_string(),
    })?;
    // Refuse what we can before building a client or touching the network.
    check_url(&start, policy)?;
    let client = build_client(policy).map_err(|e| FetchError::Http {
        url: start.to_string(),
        message: e.to_string(),
    })?;
    // reqwest's own timeout covers the request; this outer one also bounds our body loop.
    match tokio::time::timeout(policy.timeout, fetch_inner(&start, policy, client)).await {
        Ok(r) => r,
        Err(_) => Err(FetchError::Timeout {
            url: start.to_string(),
            timeout: policy.timeout,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domain_matching_covers_subdomains_only() {
        assert!(host_matches("example.org", "example.org"));
        assert!(host_matches("en.example.org", "Example.org."));
        assert!(host_matches("en.example.org", "*.example.org"));
        assert!(!host_matches("badexample.org", "example.org"));
        assert!(!host_matches("example.org", "en.example.org"));
        assert!(!host_matches("example.org", ""));
    }

    #[test]
    fn content_kinds() {
        assert!(matches!(
            content_kind("text/html; charset=utf-8"),
            Some(Kind::Html)
        ));
        assert!(matches!(
            content_kind("Application/XHTML+XML"),
            Some(Kind::Html)
        ));
        assert!(matches!(content_kind("text/plain"), Some(Kind::Plain)));
        assert!(content_kind("application/json").is_none());
        assert!(content_kind("").is_none());
    }
}
