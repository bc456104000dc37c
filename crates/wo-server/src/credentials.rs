//! The local server's secrets and cookie names: the session token, the
//! instance id that keeps two servers on one port apart, and the
//! constant-time comparison every token check uses. Below the guard and the
//! app, which both hold them.

use subtle::ConstantTimeEq;

/// A fresh random token: 32 bytes, base64url without padding.
pub fn new_token() -> String {
    use base64::Engine as _;
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A short random id for this server process (6 hex digits).
pub fn new_instance_id() -> String {
    let mut bytes = [0u8; 3];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The cookie names of one server. Browsers scope cookies by host name
/// only, never by port, so every server on 127.0.0.1 sees every other's
/// cookies: a fixed name let a second `wo serve` sign the first one out by
/// overwriting its session, and share (or set) its preferences.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CookieNames {
    /// `wo_session_<port>_<instance>`: HttpOnly, carries the token. The
    /// random instance id keeps a later server on the same port from
    /// taking the name over.
    pub session: String,
    /// `wo_prefs_<port>`: the web client's settings. Stable across
    /// restarts (settings survive them) and across the instances of a
    /// stateless deployment behind one port; the client validates what it
    /// reads against what the server offers, because any page on this host
    /// can read and write a non-HttpOnly cookie whatever its name.
    pub prefs: String,
}

impl CookieNames {
    /// The names for a server on `port` with the random `instance` id.
    pub fn new(port: u16, instance: &str) -> Self {
        CookieNames {
            session: format!("{SESSION_COOKIE_PREFIX}{port}_{instance}"),
            prefs: format!("wo_prefs_{port}"),
        }
    }

    /// Whether `name` is the session cookie of an earlier server on this
    /// same port (another instance id): safe to expire at sign-in.
    pub fn is_stale_session(&self, name: &str) -> bool {
        let Some(ours_rest) = self.session.strip_prefix(SESSION_COOKIE_PREFIX) else {
            return false;
        };
        let port_prefix = &ours_rest[..ours_rest.rfind('_').map_or(0, |i| i + 1)];
        name != self.session
            && name
                .strip_prefix(SESSION_COOKIE_PREFIX)
                .and_then(|rest| rest.strip_prefix(port_prefix))
                .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit()))
    }
}

/// Every session cookie's name starts so.
pub const SESSION_COOKIE_PREFIX: &str = "wo_session_";

/// Constant-time token comparison (no early exit on the first difference).
pub fn token_matches(expected: &str, given: &str) -> bool {
    expected.len() == given.len() && bool::from(expected.as_bytes().ct_eq(given.as_bytes()))
}
