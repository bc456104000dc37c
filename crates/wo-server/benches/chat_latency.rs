//! What a local server's memory costs the first token at scale (the goal:
//! at 100k stored messages, ≤ 5 ms over stateless). One
//! loopback upstream that streams 16 OpenAI chunks at once, and three paths
//! to it, alternating one request at a time, each on its own kept-alive
//! connection:
//! * **direct**: the upstream itself;
//! * **stateless**: `POST /api/stateless/chat` of a stateless `wo serve`
//!   (the reference: the same turn with no state kept between requests —
//!   the client sends its recent window of 20 messages and the 50 truth
//!   entries);
//! * **local**: `POST /api/chat` of a local `wo serve` whose `llm.json`
//!   holds `MESSAGES` messages (default 100,000: a Zipf vocabulary, so the
//!   query's words are in a minority of messages, as in real transcripts)
//!   and the same 50 truth entries: prompt assembly with recall over the
//!   whole transcript, and the exchange recorded after the answer.
//!
//! * **local + meaning** (only with `EMBEDDING_MODEL=PATH`, the
//!   all-MiniLM-L6-v2 GGUF `scripts/install-embedding-model.sh` installs):
//!   the same local server with recall by meaning — the question embedded
//!   by that model on the answer's path, ranked against the transcript's
//!   vectors and fused with BM25. The vectors are made up (unit vectors
//!   from each message's bytes, under the model's id) and written to the
//!   embeddings sidecar before the server starts: embedding 100k messages
//!   takes the model hours on a loaded machine, and a turn's cost does not
//!   depend on what the vectors hold (every one is scored). `EMBED_ALL=1`
//!   has the server embed them all with the model instead.
//!
//! First token = the first `delta` event. Prints p50/p90 of each path and
//! local minus stateless at p50 (and local + meaning minus local).
//!
//! The provider's `context_window` is `CONTEXT_WINDOW` (default 8192, a
//! typical local model's): the local server fills that budget with recalled
//! and recent messages, so a 128k window makes it assemble — and send — a
//! prompt sixteen times larger, which costs in proportion whatever the
//! index does.
//!
//! Run: `cargo bench -p wo-server --bench chat_latency` (env `REQUESTS`,
//! default 100; `WARMUP`, 10; `MESSAGES`, 100000; `CONTEXT_WINDOW`, 8192;
//! `EMBEDDING_MODEL`, unset: with it, add `--features local`; `EMBED_ALL`).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod common;

use common::{TOKEN, env, ms, pct, upstream};
use serde_json::{Value, json};
use wo_format::{Message, State, Timestamp, TruthEntry};

const QUERY: &str = "What firing schedule did we settle on for the porcelain kiln?";

/// A state with `messages` stored turns (a chain of parent links, as the
/// server writes them) and 50 truth entries.
fn seeded(messages: usize) -> State {
    let corpus = wo_testkit::ZipfText::new(
        &"kiln glaze firing schedule cone porcelain settle clay"
            .split(' ')
            .collect::<Vec<_>>(),
    );
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    for i in 0..50 {
        s.add_truth(TruthEntry::new(
            format!("fact {i}"),
            Timestamp::from_unix(1_700_000_000 + i as i64),
            0.8,
            format!("<p>{}</p>", corpus.sentence(i * 3 + 1, 20)),
        ));
    }
    let mut list = Vec::with_capacity(messages);
    let mut parent: Option<String> = None;
    for i in 0..messages {
        let mut m = Message::new(
            if i % 2 == 0 { "ann" } else { "up" },
            Timestamp::from_unix(1_700_000_000 + i as i64 * 5),
            format!("turn {i}"),
            corpus.message_xhtml(i),
        );
        m.parent = parent.take();
        parent = Some(m.id.clone());
        list.push(m);
    }
    *s.messages_mut() = list;
    s.normalize();
    s
}

/// Time until the first `delta` event of an `/api` chat stream.
async fn first_token(req: reqwest::RequestBuilder) -> Duration {
    let started = Instant::now();
    let mut resp = req.send().await.expect("request sent");
    assert!(resp.status().is_success(), "{}", resp.status());
    let mut seen = String::new();
    let mut at = None;
    while let Some(chunk) = resp.chunk().await.expect("stream read") {
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if at.is_none() && (seen.contains("event: delta") || seen.contains("\"content\":\"tok")) {
            at = Some(started.elapsed());
        }
    }
    at.unwrap_or_else(|| panic!("no answer text in {seen}"))
}

async fn server(
    dir: &std::path::Path,
    up: SocketAddr,
    state_file: Option<std::path::PathBuf>,
    embedding_model: Option<&std::path::Path>,
) -> SocketAddr {
    let window = env("CONTEXT_WINDOW", 8192);
    let text = format!(
        "[defaults]\nprovider = \"up\"\n\n[providers.up]\nkind = \"openai\"\nbase_url = \"http://{up}/v1\"\nmodel = \"up\"\ncontext_window = {window}\n\n[interpreter]\nmode = \"off\"\n"
    );
    let config = wo_providers::Config::from_toml(
        &text,
        &dir.join("config.toml"),
        wo_providers::config::Env::from_pairs(
            [("HOME", dir.as_os_str().to_owned())]
                .into_iter()
                .chain(embedding_model.map(|m| ("WO_EMBEDDING_MODEL", m.as_os_str().to_owned()))),
        ),
    )
    .unwrap();
    let local = state_file.is_some();
    let bound = wo_server::bind(wo_server::ServeOptions {
        username: "ann".into(),
        token: local.then(|| TOKEN.into()),
        ..wo_server::ServeOptions::new(state_file, config)
    })
    .await
    .unwrap();
    let addr = bound.addr;
    tokio::spawn(bound.serve(std::future::pending()));
    addr
}

/// The embeddings sidecar of `state` for the model at `model`, with made-up
/// unit vectors (a hash of each message's bytes) in place of the model's.
fn made_up_sidecar(state: &State, model: &std::path::Path, sidecar: &std::path::Path) {
    let embedder = wo_providers::embed::open_installed(&wo_providers::config::Env::from_pairs([(
        "WO_EMBEDDING_MODEL",
        model.as_os_str().to_owned(),
    )]))
    .unwrap_or_else(|e| panic!("EMBEDDING_MODEL (build with --features local): {e}"));
    let dim = embedder.dim();
    let mut store = wo_engine::dense::EmbeddingStore::new(embedder.id(), dim);
    for m in state.messages() {
        let mut v = wo_testkit::made_up_vector(&m.content, dim);
        wo_providers::embed::normalize(&mut v);
        store.insert(
            wo_engine::dense::key(m),
            &wo_engine::dense::Quantized::new(&v),
        );
    }
    wo_engine::embed_file::save(sidecar, &store).unwrap();
}

fn main() {
    let requests = env("REQUESTS", 100);
    let warmup = env("WARMUP", 10);
    let messages = env("MESSAGES", 100_000);
    let rt = common::runtime();
    rt.block_on(async move {
        // SAFETY: set before the servers log anything, on this one thread.
        unsafe { std::env::set_var("WO_SERVE_QUIET", "1") };
        let up = upstream().await;
        let dir = tempfile::tempdir_in(".").unwrap();
        let state = seeded(messages);
        let path = dir.path().join("llm.json");
        std::fs::write(&path, wo_format::to_canonical_vec(&state)).unwrap();
        let size = std::fs::metadata(&path).unwrap().len();
        let local = server(dir.path(), up, Some(path.clone()), None).await;
        let stateless = server(dir.path(), up, None, None).await;
        // Recall by meaning: a copy of the file in a directory of its own
        // (its own embeddings sidecar), embedded before the timing begins.
        let model = std::env::var_os("EMBEDDING_MODEL").map(std::path::PathBuf::from);
        let meaning_dir = tempfile::tempdir_in(".").unwrap();
        let meaning = match &model {
            Some(model) => {
                let copy = meaning_dir.path().join("llm.json");
                std::fs::copy(&path, &copy).unwrap();
                let sidecar = meaning_dir.path().join(".llm.json.embed");
                if env("EMBED_ALL", 0) == 0 {
                    made_up_sidecar(&state, model, &sidecar);
                }
                let addr = server(meaning_dir.path(), up, Some(copy), Some(model)).await;
                let began = Instant::now();
                while !sidecar.exists() {
                    assert!(
                        began.elapsed() < Duration::from_secs(1800),
                        "the transcript was not embedded: is {} the embedding model?",
                        model.display()
                    );
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                if env("EMBED_ALL", 0) != 0 {
                    println!(
                        "chat_latency: {messages} messages embedded in {:.0} s",
                        began.elapsed().as_secs_f64()
                    );
                }
                Some(addr)
            }
            None => None,
        };
        // The stateless client's request: its recent window and the truth.
        let state_json: Value =
            serde_json::from_slice(&wo_format::to_canonical_vec(&state)).unwrap();
        let all = state_json["messages"].as_array().unwrap();
        let window: Vec<Value> = all[all.len().saturating_sub(20)..].to_vec();
        let stateless_body = json!({
            "message": QUERY, "username": "ann", "context": "",
            "truth": state_json["truth"]["trust"], "window": window, "params": {}
        });
        drop(state);
        let local_body = json!({"message": QUERY, "username": "ann", "params": {}});
        let upstream_body = json!({"model": "up", "stream": true,
            "messages": [{"role": "user", "content": QUERY}]});
        let (c_direct, c_local, c_stateless, c_meaning) = (
            reqwest::Client::new(),
            reqwest::Client::new(),
            reqwest::Client::new(),
            reqwest::Client::new(),
        );
        let (mut direct, mut loc, mut stl, mut mean) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for i in 0..warmup + requests {
            let d = first_token(
                c_direct
                    .post(format!("http://{up}/v1/chat/completions"))
                    .json(&upstream_body),
            )
            .await;
            let s = first_token(
                c_stateless
                    .post(format!("http://{stateless}/api/stateless/chat"))
                    .header("origin", format!("http://{stateless}"))
                    .json(&stateless_body),
            )
            .await;
            let l = first_token(
                c_local
                    .post(format!("http://{local}/api/chat"))
                    .bearer_auth(TOKEN)
                    .json(&local_body),
            )
            .await;
            let m = match meaning {
                Some(addr) => Some(
                    first_token(
                        c_meaning
                            .post(format!("http://{addr}/api/chat"))
                            .bearer_auth(TOKEN)
                            .json(&local_body),
                    )
                    .await,
                ),
                None => None,
            };
            if i >= warmup {
                direct.push(d);
                stl.push(s);
                loc.push(l);
                mean.extend(m);
            }
        }
        let stored = wo_format::parse(&std::fs::read(&path).unwrap())
            .unwrap()
            .messages()
            .len();
        println!(
            "chat_latency: {requests} requests per path after {warmup} warm-up; local llm.json {:.1} MB, {messages} → {stored} messages",
            size as f64 / 1e6
        );
        let row = |name: &str, v: &mut Vec<Duration>| {
            let (p50, p90) = (pct(v, 0.5), pct(v, 0.9));
            println!(
                "  {name:<28} p50 {:8.3} ms  p90 {:8.3} ms",
                ms(p50),
                ms(p90)
            );
            p50
        };
        row("direct (upstream)", &mut direct);
        let s50 = row("stateless /api/stateless/chat", &mut stl);
        let l50 = row("local /api/chat", &mut loc);
        let added = ms(l50) - ms(s50);
        println!(
            "  local over stateless at p50: {added:+.3} ms (ratio {:.2}x); goal <= 5 ms: {}",
            ms(l50) / ms(s50),
            if added <= 5.0 { "met" } else { "NOT met" }
        );
        if !mean.is_empty() {
            let m50 = row("local + meaning /api/chat", &mut mean);
            let added = ms(m50) - ms(l50);
            println!(
                "  recall by meaning over words alone at p50: {added:+.3} ms (ratio {:.2}x); goal <= 5 ms: {}",
                ms(m50) / ms(l50),
                if added <= 5.0 { "met" } else { "NOT met" }
            );
        }
    });
}
