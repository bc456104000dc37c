//! What a server says of its model's context window: whether a failed
//! request was refused as too long (said, or found by asking again
//! unstreamed), and the windows servers have said, kept across turns.
//! The one turn (`chat`) and the memory interpreter (`memory`) both fit
//! their requests to what is read here.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use wo_providers::{ChatRequest, Provider, ProviderError};

/// Why a request brought no answer.
pub enum Unanswered<'a> {
    /// The provider failed.
    Failed(&'a ProviderError),
    /// The stream ended with no text at all.
    Empty,
}

/// The refusal of `request` as longer than the model's window
/// ([`ProviderError::TooLong`]), when that is why it brought no answer:
/// the server said so, or — for a stream closed unanswered or empty, which
/// a server holding fewer tokens than were sent may answer without saying
/// why — it says so when asked once more without streaming, for
/// `reply_tokens` tokens ([`Provider::window_refusal`]). `None`: another
/// failure.
pub async fn refused_as_too_long(
    provider: &dyn Provider,
    why: Unanswered<'_>,
    request: &ChatRequest,
    reply_tokens: u32,
) -> Option<ProviderError> {
    match why {
        Unanswered::Failed(e @ ProviderError::TooLong { .. }) => Some(e.clone()),
        Unanswered::Failed(ProviderError::ConnectionDropped { .. }) | Unanswered::Empty => {
            provider.window_refusal(request, reply_tokens).await
        }
        Unanswered::Failed(_) => None,
    }
}

/// Context windows servers have said they hold, by provider name, where
/// that is smaller than the provider's `context_window` setting (a local
/// server started with less than its kind usually has). Kept by a face
/// that serves many turns, so that only the first is refused.
#[derive(Debug, Default)]
pub struct SaidWindows(Mutex<HashMap<String, usize>>);

impl SaidWindows {
    /// The window `provider`'s server said it holds, if one did.
    pub fn get(&self, provider: &str) -> Option<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(provider)
            .copied()
    }

    /// Keeps the window `provider`'s server said it holds.
    pub fn set(&self, provider: &str, window: usize) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(provider.to_owned(), window);
    }
}
