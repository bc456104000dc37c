//! Answers before memory: a long-lived process (the server) that answers
//! turns and interprets them for memory on the same model lets a waiting
//! answer go first.
//!
//! One [`Foreground`] per process counts the answers in flight. A provider
//! handed out for answers is wrapped in [`ForegroundProvider`]: its call
//! counts from the request until the stream ends. The memory step's
//! provider is wrapped in [`BackgroundProvider`]: its call starts only when
//! no answer is in flight, and an answer that starts meanwhile stops it
//! (the local model stops within one token, a remote request is dropped);
//! it starts again, from the beginning, once the answers are done. Its
//! reply is read whole before it is returned, so a stopped attempt never
//! leaves half a reply behind. Why: the in-process model runs one
//! generation at a time, so an interpreter call of a minute would otherwise
//! hold up the next answer for that minute. The time a call waits counts
//! against the interpreter's own bound (`AnswerLimits::max_duration`), so
//! a server answering without a pause fails its memory step in plain words
//! rather than queueing it without end.

use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::watch;
use wo_providers::{
    AnswerLimits, CancellationToken, ChatRequest, EventStream, ModelList, ModelsError, Provider,
    ProviderError, Reachability, StreamEvent,
};

/// The answers in flight in one process (see the module docs).
#[derive(Debug)]
pub struct Foreground {
    busy: watch::Sender<Answers>,
}

/// What [`Foreground`] counts: the answers in flight, and every answer
/// ever started (so a wait for a pause sees an answer that began and ended
/// while it slept).
#[derive(Clone, Copy, Debug, Default)]
struct Answers {
    in_flight: usize,
    started: u64,
}

impl Default for Foreground {
    fn default() -> Self {
        Foreground {
            busy: watch::Sender::new(Answers::default()),
        }
    }
}

/// One answer in flight: counted until dropped.
#[derive(Debug)]
pub struct ForegroundGuard(Arc<Foreground>);

impl Drop for ForegroundGuard {
    fn drop(&mut self) {
        self.0
            .busy
            .send_modify(|a| a.in_flight = a.in_flight.saturating_sub(1));
    }
}

impl Foreground {
    /// A new gate, shared by the providers that wrap it.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Counts one answer in flight until the guard is dropped.
    pub fn enter(self: &Arc<Self>) -> ForegroundGuard {
        self.busy.send_modify(|a| {
            a.in_flight += 1;
            a.started += 1;
        });
        ForegroundGuard(self.clone())
    }

    /// Answers in flight now.
    pub fn in_flight(&self) -> usize {
        self.busy.borrow().in_flight
    }

    /// Returns once no answer is in flight.
    pub async fn idle(&self) {
        let mut rx = self.busy.subscribe();
        let _ = rx.wait_for(|a| a.in_flight == 0).await;
    }

    /// Returns once no answer has been in flight for `pause` (at once,
    /// when none is and `pause` is zero).
    pub async fn quiet_for(&self, pause: std::time::Duration) {
        loop {
            self.idle().await;
            if pause.is_zero() {
                return;
            }
            let started = self.busy.borrow().started;
            tokio::time::sleep(pause).await;
            let now = *self.busy.borrow();
            if now.in_flight == 0 && now.started == started {
                return;
            }
        }
    }

    /// Returns once an answer is in flight.
    async fn busy(&self) {
        let mut rx = self.busy.subscribe();
        let _ = rx.wait_for(|a| a.in_flight > 0).await;
    }
}

/// Forwards the synchronous methods of a provider (`async_trait` does not
/// see into a macro: `check` and `models` are written out).
macro_rules! forward_provider {
    () => {
        fn name(&self) -> &str {
            self.inner.name()
        }
        fn default_model(&self) -> &str {
            self.inner.default_model()
        }
        fn context_window(&self) -> usize {
            self.inner.context_window()
        }
        fn count_tokens(&self, text: &str) -> Option<usize> {
            self.inner.count_tokens(text)
        }
        fn answer_limits(&self) -> AnswerLimits {
            self.inner.answer_limits()
        }
    };
}

/// A provider whose calls are answers: counted in the [`Foreground`] from
/// the request until the stream ends (its last event, or dropped).
pub struct ForegroundProvider {
    inner: Arc<dyn Provider>,
    gate: Arc<Foreground>,
}

impl ForegroundProvider {
    /// `inner`, its calls counted in `gate`.
    pub fn wrap(inner: Arc<dyn Provider>, gate: Arc<Foreground>) -> Arc<dyn Provider> {
        Arc::new(ForegroundProvider { inner, gate })
    }
}

#[async_trait::async_trait]
impl Provider for ForegroundProvider {
    forward_provider!();

    async fn check(&self) -> Reachability {
        self.inner.check().await
    }

    async fn models(&self) -> Result<ModelList, ModelsError> {
        self.inner.models().await
    }

    async fn window_refusal(&self, req: &ChatRequest, reply_tokens: u32) -> Option<ProviderError> {
        self.inner.window_refusal(req, reply_tokens).await
    }

    async fn stream(
        &self,
        req: ChatRequest,
        cancel: CancellationToken,
    ) -> Result<EventStream, ProviderError> {
        let guard = self.gate.enter();
        let stream = self.inner.stream(req, cancel).await?;
        // The guard goes with the stream and is dropped at its last event,
        // so the memory step that follows this answer does not wait for
        // the stream itself to be dropped.
        Ok(futures::stream::unfold(
            (stream, Some(guard)),
            |(mut stream, mut guard)| async move {
                guard.as_ref()?;
                let ev = stream.next().await;
                if matches!(ev, None | Some(Err(_)) | Some(Ok(StreamEvent::Done { .. }))) {
                    guard = None;
                }
                ev.map(|ev| (ev, (stream, guard)))
            },
        )
        .boxed())
    }
}

/// A provider whose calls give way to answers (see the module docs).
pub struct BackgroundProvider {
    inner: Arc<dyn Provider>,
    gate: Arc<Foreground>,
    pause: std::time::Duration,
}

impl BackgroundProvider {
    /// `inner`, its calls yielding to the answers counted in `gate`, each
    /// call (and each new start after an answer stopped one) beginning only
    /// once no answer has been in flight for `pause` (zero: as soon as none
    /// is): a model server on the person's machine answers one request at a
    /// time and evaluates a prompt it was sent to the end, so a call begun
    /// right after an answer would hold up the question that follows it.
    pub fn wrap(
        inner: Arc<dyn Provider>,
        gate: Arc<Foreground>,
        pause: std::time::Duration,
    ) -> Arc<dyn Provider> {
        Arc::new(BackgroundProvider { inner, gate, pause })
    }

    /// One attempt read whole; `None` when an answer started meanwhile.
    async fn attempt(
        &self,
        req: ChatRequest,
        cancel: &CancellationToken,
    ) -> Option<Result<Vec<Result<StreamEvent, ProviderError>>, ProviderError>> {
        let attempt = cancel.child_token();
        let read = async {
            let mut stream = self.inner.stream(req, attempt.clone()).await?;
            let mut events = Vec::new();
            while let Some(ev) = stream.next().await {
                let last = matches!(ev, Err(_) | Ok(StreamEvent::Done { .. }));
                events.push(ev);
                if last {
                    break;
                }
            }
            Ok(events)
        };
        tokio::select! {
            biased;
            done = read => Some(done),
            () = self.gate.busy() => {
                // Dropping `read` drops the stream; cancelling stops a
                // generation that has not handed one back yet.
                attempt.cancel();
                None
            }
        }
    }
}

#[async_trait::async_trait]
impl Provider for BackgroundProvider {
    forward_provider!();

    async fn check(&self) -> Reachability {
        self.inner.check().await
    }

    async fn models(&self) -> Result<ModelList, ModelsError> {
        self.inner.models().await
    }

    async fn window_refusal(&self, req: &ChatRequest, reply_tokens: u32) -> Option<ProviderError> {
        self.inner.window_refusal(req, reply_tokens).await
    }

    async fn stream(
        &self,
        req: ChatRequest,
        cancel: CancellationToken,
    ) -> Result<EventStream, ProviderError> {
        let cancelled = || ProviderError::Cancelled {
            provider: self.inner.name().to_owned(),
        };
        loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(cancelled()),
                () = self.gate.quiet_for(self.pause) => {}
            }
            if let Some(done) = self.attempt(req.clone(), &cancel).await {
                return done.map(|events| futures::stream::iter(events).boxed());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Answers "slow" after 300 ms per call unless cancelled; counts the
    /// calls started.
    struct Slow {
        started: AtomicUsize,
    }

    #[async_trait::async_trait]
    impl Provider for Slow {
        fn name(&self) -> &str {
            "slow"
        }
        fn default_model(&self) -> &str {
            "m"
        }
        fn context_window(&self) -> usize {
            1000
        }
        async fn check(&self) -> Reachability {
            Reachability::Reachable {
                detail: String::new(),
            }
        }
        fn count_tokens(&self, _: &str) -> Option<usize> {
            None
        }
        async fn stream(
            &self,
            _req: ChatRequest,
            cancel: CancellationToken,
        ) -> Result<EventStream, ProviderError> {
            self.started.fetch_add(1, Ordering::SeqCst);
            Ok(futures::stream::once(async move {
                tokio::select! {
                    () = cancel.cancelled() => {
                        Err(ProviderError::Cancelled { provider: "slow".into() })
                    }
                    () = tokio::time::sleep(Duration::from_millis(300)) => {
                        Ok(StreamEvent::Delta("slow".into()))
                    }
                }
            })
            .chain(futures::stream::iter([Ok(StreamEvent::Done {
                finish_reason: Some("stop".into()),
                usage: None,
            })]))
            .boxed())
        }
    }

    async fn text(s: EventStream) -> String {
        s.filter_map(|e| async move {
            match e {
                Ok(StreamEvent::Delta(d)) => Some(d),
                _ => None,
            }
        })
        .collect::<Vec<_>>()
        .await
        .concat()
    }

    /// A slow provider, a gate, the provider wrapped for answers and for
    /// memory (after `pause`), and a memory call begun in the background
    /// (its reply and when it came).
    #[allow(clippy::type_complexity)]
    fn answers_and_memory(
        pause: Duration,
    ) -> (
        Arc<Slow>,
        Arc<Foreground>,
        Arc<dyn Provider>,
        tokio::task::JoinHandle<Result<(String, tokio::time::Instant), ProviderError>>,
    ) {
        let slow = Arc::new(Slow {
            started: AtomicUsize::new(0),
        });
        let gate = Foreground::new();
        let fg = ForegroundProvider::wrap(slow.clone(), gate.clone());
        let bg = BackgroundProvider::wrap(slow.clone(), gate.clone(), pause);
        let memory = tokio::spawn(async move {
            let s = bg
                .stream(ChatRequest::default(), CancellationToken::new())
                .await?;
            Ok((text(s).await, tokio::time::Instant::now()))
        });
        (slow, gate, fg, memory)
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_stops_the_background_call_which_starts_again_after_it() {
        let (slow, gate, fg, memory) = answers_and_memory(Duration::ZERO);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(slow.started.load(Ordering::SeqCst), 1);
        // An answer starts: the background call stops at once.
        let answer = fg
            .stream(ChatRequest::default(), CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(gate.in_flight(), 1);
        let t0 = tokio::time::Instant::now();
        assert_eq!(text(answer).await, "slow");
        assert_eq!(t0.elapsed(), Duration::from_millis(300), "not held up");
        assert_eq!(gate.in_flight(), 0, "released at the answer's end");
        // The first attempt was stopped (it would have ended at 300 ms,
        // during the answer); a second one starts after the answer and its
        // whole reply comes back.
        assert_eq!(memory.await.unwrap().unwrap().0, "slow");
        assert_eq!(t0.elapsed(), Duration::from_millis(600));
        assert_eq!(slow.started.load(Ordering::SeqCst), 3);
    }

    /// With a pause, a call starts only once no answer has been in flight
    /// for that long: an answer that begins and ends while it waits starts
    /// the pause again.
    #[tokio::test(start_paused = true)]
    async fn after_a_pause_the_call_waits_for_quiet_not_just_for_the_last_answer() {
        let t0 = tokio::time::Instant::now();
        let (slow, _gate, fg, memory) = answers_and_memory(Duration::from_secs(10));
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(slow.started.load(Ordering::SeqCst), 0, "within the pause");
        // An answer of 300 ms at 4 s: the pause counts again from its end.
        let answer = fg
            .stream(ChatRequest::default(), CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(text(answer).await, "slow");
        tokio::time::sleep(Duration::from_secs(9)).await;
        assert_eq!(
            slow.started.load(Ordering::SeqCst),
            1,
            "only the answer's call: 9 s after it is still within the pause"
        );
        let (reply, at) = memory.await.unwrap().unwrap();
        assert_eq!(reply, "slow");
        assert_eq!(slow.started.load(Ordering::SeqCst), 2);
        // Started no earlier than 10 s after the answer ended (4.3 s).
        assert!(
            at - t0 >= Duration::from_millis(14_300 + 300),
            "{:?}",
            at - t0
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_background_call_waits_for_answers_in_flight_and_can_be_cancelled() {
        let slow = Arc::new(Slow {
            started: AtomicUsize::new(0),
        });
        let gate = Foreground::new();
        let bg = BackgroundProvider::wrap(slow.clone(), gate.clone(), Duration::ZERO);
        let held = gate.enter();
        let cancel = CancellationToken::new();
        let waiting = tokio::spawn({
            let (bg, cancel) = (bg.clone(), cancel.clone());
            async move { bg.stream(ChatRequest::default(), cancel).await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(slow.started.load(Ordering::SeqCst), 0, "waits");
        cancel.cancel();
        assert!(matches!(
            waiting.await.unwrap(),
            Err(ProviderError::Cancelled { .. })
        ));
        drop(held);
        // A dropped answer stream releases the gate too.
        let fg = ForegroundProvider::wrap(slow.clone(), gate.clone());
        let s = fg
            .stream(ChatRequest::default(), CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(gate.in_flight(), 1);
        drop(s);
        assert_eq!(gate.in_flight(), 0);
        let s = bg
            .stream(ChatRequest::default(), CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(text(s).await, "slow");
    }
}
