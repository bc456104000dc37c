//! Streaming a turn to the client as Server-Sent Events: the turn's task
//! writes its frames into one shared buffer, which becomes the response
//! body; when the client goes away (the body is dropped), the turn's
//! cancellation token fires so the model stops (the local chat then keeps
//! the question and the answer so far, marked stopped; other turns save
//! nothing).
//!
//! Why a buffer and not a channel of frames: a streamed turn writes one
//! frame per token. A channel cost an allocation per frame (the frame's
//! `String`, its `Bytes`, the channel's slot) and a wake-up of the
//! connection's task per frame; here a frame is serialised straight into
//! the buffer (no allocation once the buffer has grown), the connection's
//! task is woken only when it waits for data, and everything written
//! between two of its polls leaves as one body chunk (one write to the
//! socket).

use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use serde::Serialize;
use wo_providers::Cancel;
use wo_wire::{ErrorEvent, ServerEvent};

/// What the turn's sinks and the response body share.
#[derive(Default)]
struct Pipe {
    /// Frames written and not yet taken by the body.
    buf: Vec<u8>,
    /// Live [`EventSink`]s: the body ends when the last one is dropped.
    senders: usize,
    /// The body is gone (the client left): writes are dropped.
    closed: bool,
    /// The body's task, when it waits for frames.
    waker: Option<Waker>,
}

/// A poisoned lock only means a panic in another writer; the buffer holds
/// whole frames only (a frame is serialised into it under the lock, and a
/// serialiser that fails leaves it as it was), so it is still usable.
fn lock(pipe: &Mutex<Pipe>) -> MutexGuard<'_, Pipe> {
    pipe.lock().unwrap_or_else(|p| p.into_inner())
}

/// The sending half, handed to the task that runs the turn. A write to a
/// stream whose client went away is dropped, not an error here (the
/// token fires and the turn ends as it should).
pub struct EventSink {
    pipe: Arc<Mutex<Pipe>>,
}

impl Clone for EventSink {
    fn clone(&self) -> Self {
        lock(&self.pipe).senders += 1;
        EventSink {
            pipe: self.pipe.clone(),
        }
    }
}

impl Drop for EventSink {
    fn drop(&mut self) {
        let waker = {
            let mut pipe = lock(&self.pipe);
            pipe.senders -= 1;
            if pipe.senders > 0 {
                return;
            }
            pipe.waker.take()
        };
        // The last sender: the body ends once it has sent what is left.
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl EventSink {
    /// Appends one whole frame, written by `write` into the buffer; wakes
    /// the body if it waits.
    fn write(&self, write: impl FnOnce(&mut Vec<u8>)) {
        let waker = {
            let mut pipe = lock(&self.pipe);
            if pipe.closed {
                return;
            }
            write(&mut pipe.buf);
            pipe.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Sends an event.
    pub fn event(&self, event: &ServerEvent) {
        self.write(|buf| {
            event.write_sse_frame(buf);
        });
    }

    /// Sends a custom event (`context`) with a JSON payload.
    pub fn named<T: Serialize>(&self, name: &str, data: &T) {
        self.write(|buf| {
            buf.extend_from_slice(b"event: ");
            buf.extend_from_slice(name.as_bytes());
            buf.extend_from_slice(b"\ndata: ");
            json_or_empty(buf, data);
            buf.extend_from_slice(b"\n\n");
        });
    }

    /// Sends a nameless event: `data: JSON` (the OpenAI face's frames).
    pub fn data<T: Serialize>(&self, data: &T) {
        self.write(|buf| {
            buf.extend_from_slice(b"data: ");
            json_or_empty(buf, data);
            buf.extend_from_slice(b"\n\n");
        });
    }

    /// Sends a frame as it is (`data: [DONE]\n\n`).
    pub fn raw(&self, frame: &'static str) {
        self.write(|buf| {
            buf.extend_from_slice(frame.as_bytes());
        });
    }

    /// Sends a `delta` event: one piece of the answer (no copy of it: it is
    /// escaped straight into the stream).
    pub fn delta(&self, text: &str) {
        self.write(|buf| {
            wo_wire::write_delta_frame(buf, text);
        });
    }

    /// Sends an `error` event: the turn failed after the stream began.
    pub fn error(&self, message: String, kind: Option<String>) {
        self.event(&ServerEvent::Error(ErrorEvent { message, kind }));
    }
}

/// `data` as JSON into `buf`, or `{}` if it cannot be serialised (a map
/// with non-string keys; none of ours): what the stream always did.
fn json_or_empty<T: Serialize>(buf: &mut Vec<u8>, data: &T) {
    let len = buf.len();
    if serde_json::to_writer(&mut *buf, data).is_err() {
        buf.truncate(len);
        buf.extend_from_slice(b"{}");
    }
}

/// The response body: what the sinks wrote, in chunks. Dropping it (the
/// client went away, or the stream ended) fires the turn's cancellation
/// token.
struct Frames {
    pipe: Arc<Mutex<Pipe>>,
    cancel: Cancel,
}

impl Drop for Frames {
    fn drop(&mut self) {
        let mut pipe = lock(&self.pipe);
        pipe.closed = true;
        pipe.buf = Vec::new();
        pipe.waker = None;
        drop(pipe);
        self.cancel.cancel();
    }
}

impl Frames {
    fn poll_frames(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let mut pipe = lock(&self.pipe);
        if !pipe.buf.is_empty() {
            // Everything written since the last poll leaves as one chunk;
            // the next write allocates what it needs (a delta: ~100 bytes,
            // where a buffer pre-sized for the next chunk cost an allocation
            // of kilobytes per token).
            let chunk = std::mem::take(&mut pipe.buf);
            return Poll::Ready(Some(Bytes::from(chunk)));
        }
        if pipe.senders == 0 {
            return Poll::Ready(None);
        }
        match &mut pipe.waker {
            Some(w) => w.clone_from(cx.waker()),
            None => pipe.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

/// A streaming response, its sink, and a token that fires when the client
/// disconnects. The stream ends when every sink is dropped.
pub fn channel() -> (Response, EventSink, Cancel) {
    let pipe = Arc::new(Mutex::new(Pipe {
        senders: 1,
        ..Pipe::default()
    }));
    let cancel = Cancel::new();
    let mut frames = Frames {
        pipe: pipe.clone(),
        cancel: cancel.clone(),
    };
    let stream = futures::stream::poll_fn(move |cx| {
        frames
            .poll_frames(cx)
            .map(|chunk| chunk.map(Ok::<_, std::io::Error>))
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
    (resp, EventSink { pipe }, cancel)
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
