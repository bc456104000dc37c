//! What `wo serve`'s OpenAI-compatible endpoint adds to the first token
//! (the goal: ≤ 5 ms): the same streamed request sent to a loopback
//! upstream that answers at once (**direct**), and to
//! `POST /v1/chat/completions` of a local server whose provider is that
//! upstream (**through wo serve**: token check, prompt assembly over
//! `llm.json` with its memory, the upstream call, re-framing as
//! `chat.completion.chunk`). Requests alternate between the two paths, one
//! at a time, each on its own kept-alive connection; the first token is the
//! first frame carrying answer text. Every proxied turn is recorded, so the
//! file grows by two messages a request.
//!
//! Run: `cargo bench -p wo-server --bench openai_proxy` (env `REQUESTS`,
//! default 300; `WARMUP`, 30; `MESSAGES`, stored messages to start from,
//! default 0; `TRUTH`, truth entries, default 50).

use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::{TOKEN, env, ms, pct, upstream};
use serde_json::json;
use wo_format::{Message, State, Timestamp, TruthEntry};

/// A state with `messages` stored turns and `truth` entries.
fn seeded(messages: usize, truth: usize) -> State {
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    for i in 0..truth {
        s.add_truth(TruthEntry::new(
            format!("fact {i}"),
            Timestamp::from_unix(1_700_000_000 + i as i64),
            0.8,
            format!("<p>The kiln note number {i} says glaze firing takes time.</p>"),
        ));
    }
    for i in 0..messages {
        s.push_message(Message::new(
            if i % 2 == 0 { "ann" } else { "up" },
            Timestamp::from_unix(1_700_000_000 + i as i64),
            format!("m{i}"),
            format!("<p>message {i} about the garden and the kiln schedule</p>"),
        ));
    }
    s
}

/// Seconds until the first frame carrying answer text.
async fn first_token(client: &reqwest::Client, url: &str, bearer: Option<&str>) -> Duration {
    let body = json!({"model": "up", "stream": true, "max_tokens": 32,
        "messages": [{"role": "user", "content": "When is the kiln firing?"}]});
    let started = Instant::now();
    let mut req = client.post(url).json(&body);
    if let Some(t) = bearer {
        req = req.bearer_auth(t);
    }
    let mut resp = req.send().await.expect("request sent");
    assert!(resp.status().is_success(), "{url}: {}", resp.status());
    let mut seen = String::new();
    let mut at = None;
    while let Some(chunk) = resp.chunk().await.expect("stream read") {
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if at.is_none() && seen.contains("\"content\":\"tok") {
            at = Some(started.elapsed());
        }
    }
    // Read to the end, so the next request reuses the connection.
    at.unwrap_or_else(|| panic!("{url}: no answer text in {seen}"))
}

fn main() {
    let requests = env("REQUESTS", 300);
    let warmup = env("WARMUP", 30);
    let messages = env("MESSAGES", 0);
    let truth = env("TRUTH", 50);
    let rt = common::runtime();
    rt.block_on(async move {
        let up = upstream().await;
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("llm.json");
        std::fs::write(&state, wo_format::to_canonical_vec(&seeded(messages, truth))).unwrap();
        let text = format!(
            "[defaults]\nprovider = \"up\"\n\n[providers.up]\nkind = \"openai\"\nbase_url = \"http://{up}/v1\"\nmodel = \"up\"\n"
        );
        let config = wo_providers::Config::from_toml(
            &text,
            &dir.path().join("config.toml"),
            wo_providers::config::Env::from_pairs([("HOME", dir.path().as_os_str().to_owned())]),
        )
        .unwrap();
        let bound = wo_server::bind(wo_server::ServeOptions {
            username: "ann".into(),
            token: Some(TOKEN.into()),
            ..wo_server::ServeOptions::new(Some(state.clone()), config)
        })
        .await
        .unwrap();
        let served = bound.addr;
        // SAFETY: set before the server logs anything, on this one thread.
        unsafe { std::env::set_var("WO_SERVE_QUIET", "1") };
        tokio::spawn(bound.serve(std::future::pending()));

        let direct_url = format!("http://{up}/v1/chat/completions");
        let proxy_url = format!("http://{served}/v1/chat/completions");
        let direct_client = Arc::new(reqwest::Client::new());
        let proxy_client = Arc::new(reqwest::Client::new());
        let (mut direct, mut proxied) = (Vec::new(), Vec::new());
        for i in 0..warmup + requests {
            let d = first_token(&direct_client, &direct_url, None).await;
            let p = first_token(&proxy_client, &proxy_url, Some(TOKEN)).await;
            if i >= warmup {
                direct.push(d);
                proxied.push(p);
            }
        }
        let stored = wo_format::parse(&std::fs::read(&state).unwrap())
            .unwrap()
            .messages()
            .len();
        let (d50, d90) = (pct(&mut direct, 0.5), pct(&mut direct, 0.9));
        let (p50, p90, p99) = (
            pct(&mut proxied, 0.5),
            pct(&mut proxied, 0.9),
            pct(&mut proxied, 0.99),
        );
        println!(
            "openai_proxy: {requests} requests per path after {warmup} warm-up; llm.json from {messages} to {stored} messages, {truth} truth entries"
        );
        println!(
            "  direct (upstream)       p50 {:7.3} ms  p90 {:7.3} ms",
            ms(d50),
            ms(d90)
        );
        println!(
            "  through /v1 (wo serve)  p50 {:7.3} ms  p90 {:7.3} ms  p99 {:7.3} ms",
            ms(p50),
            ms(p90),
            ms(p99)
        );
        let added = ms(p50) - ms(d50);
        println!(
            "  added first-token latency at p50: {added:+.3} ms (ratio {:.2}x); goal <= 5 ms: {}",
            ms(p50) / ms(d50),
            if added <= 5.0 { "met" } else { "NOT met" }
        );
    });
}
