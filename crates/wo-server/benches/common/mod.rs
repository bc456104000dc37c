//! What the server benchmarks share: the bearer token, an upstream that
//! answers at once, reading settings from the environment, percentiles.

#![allow(dead_code)] // each benchmark uses a part

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use axum::routing::post;
use serde_json::json;

pub const TOKEN: &str = "bench-token-0123456789-abcdefghijklmnop";

/// The setting `name` from the environment, else `default`.
pub fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// An OpenAI-compatible upstream streaming 16 tokens with no delay.
pub async fn upstream() -> SocketAddr {
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        post(|| async {
            let mut text = String::new();
            for i in 0..16 {
                let chunk = json!({"id": "c", "object": "chat.completion.chunk", "created": 1,
                    "model": "up", "choices": [{"index": 0, "delta": {"content": format!("tok{i} ")},
                    "finish_reason": null}]});
                text.push_str(&format!("data: {chunk}\n\n"));
            }
            let last = json!({"id": "c", "object": "chat.completion.chunk", "created": 1,
                "model": "up", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 16}});
            text.push_str(&format!("data: {last}\n\ndata: [DONE]\n\n"));
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from(text))
                .unwrap()
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

/// The two-worker runtime the benchmarks measure in (the CI machine's cores).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The `q` quantile of `v` (sorted in place).
pub fn pct(v: &mut [Duration], q: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * q) as usize]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
