//! The per-client rate limit the guard applies: a token bucket per
//! session or client address. Below the guard and the app (which holds one).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

/// Whose bucket a request draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RateKey {
    /// Requests carrying this server's token (local mode): the user.
    Session,
    /// Anonymous requests, by client address.
    Addr(IpAddr),
}

/// A per-client token bucket: `per_minute` requests a minute on average,
/// bursts up to the same number. A map behind a mutex is enough at the
/// request rates one process serves; idle clients are evicted.
pub struct RateLimiter {
    per_minute: u32,
    buckets: Mutex<HashMap<RateKey, (f64, Instant)>>,
}

impl RateLimiter {
    /// `per_minute == 0` turns limiting off.
    pub fn new(per_minute: u32) -> Self {
        RateLimiter {
            per_minute,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one token for `key`; false when its bucket is empty.
    pub fn allow(&self, key: RateKey) -> bool {
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
        let (tokens, at) = buckets.entry(key).or_insert((cap, now));
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
