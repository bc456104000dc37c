//! MCP `search` and `context` latency (p50 and p90) on a 100k-message
//! `llm.json` with 2,000 truth entries, measured through a real MCP client
//! (rmcp's) talking to `WikiOracleMcp` over an in-process pipe: JSON-RPC
//! framing, the store's refresh check, retrieval and rendering included;
//! process start-up excluded (a client keeps `wo mcp` running).
//!
//! Run: `cargo bench -p wo-mcp --bench mcp_latency` (env `MESSAGES`,
//! `TRUTH`, `REPEAT`).

use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use wo_format::{Message, State, Timestamp, TruthEntry};
use wo_mcp::{McpOptions, WikiOracleMcp};
use wo_store::{OpenOptions, Store};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

const WORDS: &str = "kiln glaze firing schedule cone porcelain clay deploy release server cookie merge export budget garden tomato train ticket invoice meeting draft review weather coffee";

/// Deterministic pseudo-random text (xorshift), 12–40 words.
fn text(seed: &mut u64) -> String {
    let mut next = || {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    };
    let n = 12 + (next() % 29) as usize;
    let mut s = String::new();
    for i in 0..n {
        if i > 0 {
            s.push(' ');
        }
        let r = next();
        // Zipf-ish: a few words are common, the rest rare; plus filler.
        if r % 3 == 0 {
            let words: Vec<&str> = WORDS.split(' ').collect();
            s.push_str(words[(r as usize / 3) % words.len()]);
        } else {
            s.push_str(&format!("w{}", r % 5000));
        }
    }
    s
}

fn p(v: &mut [Duration], q: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * q) as usize]
}

fn main() {
    let messages = env("MESSAGES", 100_000);
    let truth = env("TRUTH", 2_000);
    let repeat = env("REPEAT", 30);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llm.json");
    let mut s = State::new(Timestamp::from_unix(1_700_000_000));
    let mut seed = 0x9e3779b97f4a7c15u64;
    for i in 0..messages {
        let t = text(&mut seed);
        let who = if i % 2 == 0 { "user" } else { "model" };
        s.push_message(Message::new(
            who,
            Timestamp::from_unix(1_700_000_000 + i as i64),
            t.chars().take(40).collect::<String>(),
            format!("<p>{t}</p>"),
        ));
    }
    for i in 0..truth {
        let t = text(&mut seed);
        s.add_truth(TruthEntry::new(
            format!("memory {i}"),
            Timestamp::from_unix(1_700_000_000 + i as i64),
            0.5,
            format!("<p>{t}</p>"),
        ));
    }
    let opts = OpenOptions {
        create_if_missing: true,
        ..OpenOptions::default()
    };
    Store::create(&path, s, opts.clone()).unwrap();
    let size = std::fs::metadata(&path).unwrap().len();

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let started = Instant::now();
        let server = WikiOracleMcp::open(McpOptions {
            state: path.clone(),
            open: opts,
            allow_write: false,
            index: None,
        })
        .unwrap();
        let open = started.elapsed();
        let (a, b) = tokio::io::duplex(1 << 20);
        tokio::spawn(async move {
            let running = server.serve(a).await.unwrap();
            let _ = running.waiting().await;
        });
        let client = ().serve(b).await.unwrap();
        println!(
            "mcp_latency: {messages} messages, {truth} truth entries, {:.1} MB; server open {:.0} ms",
            size as f64 / 1e6,
            open.as_secs_f64() * 1e3
        );
        for (tool, args) in [
            ("search", serde_json::json!({"query": "kiln glaze firing schedule"})),
            ("context", serde_json::json!({"query": "when is the kiln firing schedule?", "budget": 4096})),
        ] {
            let mut times = Vec::with_capacity(repeat);
            for _ in 0..repeat {
                let t = Instant::now();
                let r = client
                    .call_tool(
                        CallToolRequestParams::new(tool)
                            .with_arguments(args.as_object().cloned().unwrap_or_default()),
                    )
                    .await
                    .unwrap();
                times.push(t.elapsed());
                assert_ne!(r.is_error, Some(true), "{tool}: {r:?}");
            }
            println!(
                "  {tool:8} p50 {:7.1} ms   p90 {:7.1} ms   ({repeat} calls)",
                p(&mut times, 0.5).as_secs_f64() * 1e3,
                p(&mut times, 0.9).as_secs_f64() * 1e3
            );
        }
        let _ = client.cancel().await;
    });
}
