//! Streaming a turn to the client as Server-Sent Events: a channel of
//! frames becomes the response body; when the client goes away (the body is
//! dropped), the turn's cancellation token fires so the model stops (the
//! local chat then keeps the question and the answer so far, marked
//! stopped; other turns save nothing).

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use serde::Serialize;
use tokio::sync::mpsc;
use wo_providers::Cancel;
use wo_wire::{ErrorEvent, ServerEvent, write_delta_frame};

/// The sending half, handed to the task that runs the turn.
#[derive(Clone)]
pub struct EventSink {
    tx: mpsc::UnboundedSender<Bytes>,
}

impl EventSink {
    /// Sends an event; a closed stream is not an error here (the watcher
    /// cancels the turn).
    pub fn event(&self, event: &ServerEvent) {
        let mut frame = Vec::new();
        event.write_sse_frame(&mut frame);
        let _ = self.tx.send(Bytes::from(frame));
    }

    /// Sends a custom event (`context`) with a JSON payload.
    pub fn named<T: Serialize>(&self, name: &str, data: &T) {
        let json = serde_json::to_string(data).unwrap_or_else(|_| "{}".into());
        let _ = self
            .tx
            .send(Bytes::from(format!("event: {name}\ndata: {json}\n\n")));
    }

    /// Sends a nameless event: `data: JSON` (the OpenAI face's frames).
    pub fn data<T: Serialize>(&self, data: &T) {
        let json = serde_json::to_string(data).unwrap_or_else(|_| "{}".into());
        let _ = self.tx.send(Bytes::from(format!("data: {json}\n\n")));
    }

    /// Sends a frame as it is (`data: [DONE]\n\n`).
    pub fn raw(&self, frame: &'static str) {
        let _ = self.tx.send(Bytes::from_static(frame.as_bytes()));
    }

    /// Sends a `delta` event: one piece of the answer.
    pub fn delta(&self, text: &str) {
        // Escaped straight into the frame: no `DeltaEvent` (a copy of the
        // text) per token.
        let mut frame = Vec::with_capacity(text.len() + 32);
        write_delta_frame(&mut frame, text);
        let _ = self.tx.send(Bytes::from(frame));
    }

    /// Sends an `error` event: the turn failed after the stream began.
    pub fn error(&self, message: String, kind: Option<String>) {
        self.event(&ServerEvent::Error(ErrorEvent { message, kind }));
    }
}

/// Most bytes of waiting frames joined into one body chunk.
const COALESCE_BYTES: usize = 64 << 10;

/// The response body: frames from the channel. Dropping it (the client
/// went away, or the stream ended) fires the turn's cancellation token.
struct Frames {
    rx: mpsc::UnboundedReceiver<Bytes>,
    cancel: Cancel,
}

impl Drop for Frames {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// A streaming response, its sink, and a token that fires when the client
/// disconnects. The stream ends when every sink is dropped.
pub fn channel() -> (Response, EventSink, Cancel) {
    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    let cancel = Cancel::new();
    let mut frames = Frames {
        rx,
        cancel: cancel.clone(),
    };
    // Frames already waiting are sent as one body chunk: a fast model
    // yields many deltas between two polls, and a write per frame would
    // cost a syscall (and a TCP segment) each.
    let stream = futures::stream::poll_fn(move |cx| {
        frames.rx.poll_recv(cx).map(|first| {
            let first = first?;
            let Ok(second) = frames.rx.try_recv() else {
                return Some(Ok::<_, std::io::Error>(first));
            };
            let mut batch = bytes::BytesMut::with_capacity(first.len() * 8);
            batch.extend_from_slice(&first);
            batch.extend_from_slice(&second);
            while batch.len() < COALESCE_BYTES {
                match frames.rx.try_recv() {
                    Ok(more) => batch.extend_from_slice(&more),
                    Err(_) => break,
                }
            }
            Some(Ok(batch.freeze()))
        })
    });
    let mut resp = Response::new(Body::from_stream(stream));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-store"),
    );
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    (resp, EventSink { tx }, cancel)
}

/// The `done` event of a finished turn.
pub fn done_event(outcome: &wo_engine::chat::TurnOutcome, provider: String) -> ServerEvent {
    ServerEvent::Done(wo_wire::DoneEvent {
        user_message_id: outcome.user_id.clone(),
        assistant_message_id: outcome.assistant_id.clone(),
        sources: outcome.sources.clone(),
        state_patch: outcome.state_patch.clone(),
        finish_reason: outcome.finish_reason.clone(),
        usage: outcome.usage.as_ref().map(|u| wo_providers::Usage {
            prompt_tokens: u.prompt_tokens.unwrap_or(0).try_into().unwrap_or(u32::MAX),
            completion_tokens: u
                .completion_tokens
                .unwrap_or(0)
                .try_into()
                .unwrap_or(u32::MAX),
        }),
        provider: Some(provider),
        model: Some(outcome.model.clone()),
        memory_follows: outcome.memory_follows,
        ..Default::default()
    })
}

/// The `memory` event of a turn's memory step.
pub fn memory_event(remembered: &wo_engine::chat::Remembered) -> wo_wire::MemoryEvent {
    let (record, note) = match &remembered.result {
        Ok(record) => (serde_json::to_value(record).unwrap_or_default(), None),
        Err(why) => (serde_json::Value::Null, Some(why.clone())),
    };
    wo_wire::MemoryEvent {
        exchange: remembered.exchange.clone(),
        record,
        note,
        state_patch: remembered.state_patch.clone(),
        ..Default::default()
    }
}

/// The error kind of a failed turn, as the `wikioracle` provider reads it.
pub fn error_kind(e: &wo_engine::chat::TurnError) -> Option<String> {
    use wo_engine::chat::TurnError;
    use wo_providers::ErrorKind;
    match e {
        TurnError::Provider(p) => Some(
            match p.kind() {
                ErrorKind::RateLimited => "rate_limited",
                ErrorKind::Auth => "auth",
                ErrorKind::BadRequest => "bad_request",
                ErrorKind::Timeout => "timeout",
                ErrorKind::Cancelled => "cancelled",
                _ => "server",
            }
            .to_owned(),
        ),
        TurnError::Assemble(_) | TurnError::Field(_) => Some("bad_request".into()),
        TurnError::State(_) => Some("server".into()),
        TurnError::EmptyAnswer => Some("server".into()),
        TurnError::Store(_) => Some("storage".into()),
    }
}
