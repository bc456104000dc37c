//! How long a large ChatGPT export takes to import, against the floor of
//! reading and parsing its JSON alone.
//!
//! Generates a `conversations.json` of `WO_BENCH_MB` MB (default 100) in the
//! real shape (mapping trees with regenerated answers as branches, hidden
//! system nodes, multimodal parts, code and Markdown answers), then times,
//! best of `WO_BENCH_RUNS` (default 3):
//!
//! - **floor**: `std::fs::read` + `serde_json::from_slice::<Value>`;
//! - **import**: `wo_interop::chatgpt::import` (read, parse, convert);
//! - **import + admit + merge + serialise**: what `wo import` does before
//!   its write: the import, `Imported::admit` (validation, sanitising), the
//!   merge into an empty state and the canonical bytes.
//!
//! `cargo bench -p wo-interop --bench chatgpt_import` (`WO_BENCH_FILE=PATH`
//! keeps the generated export at PATH).

use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wo_format::{State, Timestamp};
use wo_interop::{ImportOptions, chatgpt};

// The `wo` binary's allocator, so the times are the ones `wo import` sees.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

// A deterministic generator, so every run sees the same file.
use wo_testkit::Rng;

const WORDS: &[&str] = &[
    "deploy", "cluster", "rollback", "the", "a", "of", "config", "service", "latency", "cache",
    "index", "query", "retry", "timeout", "and", "with", "because", "error", "function", "value",
    "test", "release", "branch", "merge", "token", "model", "prompt", "answer", "garden", "soil",
];

fn sentence(r: &mut Rng, n: usize) -> String {
    let mut s: Vec<&str> = (0..n).map(|_| r.pick(WORDS)).collect();
    s[0] = "Please";
    format!("{}.", s.join(" "))
}

fn answer(r: &mut Rng) -> String {
    let mut a = format!("## {}\n\n{}\n\n", sentence(r, 4), sentence(r, 40));
    a.push_str(&format!(
        "- {}\n- **{}**\n- `{}`\n\n",
        sentence(r, 8),
        sentence(r, 5),
        r.pick(WORDS)
    ));
    a.push_str(&format!(
        "```python\ndef {}(x):\n    return x * {}\n```\n\n{}",
        r.pick(WORDS),
        r.next() % 100,
        sentence(r, 60)
    ));
    a
}

fn generate(target_bytes: usize) -> Vec<u8> {
    let mut r = Rng::new(0x9e37_79b9_7f4a_7c15);
    let mut out = Vec::with_capacity(target_bytes + (1 << 20));
    out.push(b'[');
    let mut conv = 0u64;
    let mut t = 1_700_000_000.0f64;
    while out.len() < target_bytes {
        let mut mapping = serde_json::Map::new();
        let root = format!("root-{conv}");
        let sys = format!("sys-{conv}");
        mapping.insert(
            root.clone(),
            json!({"id": root, "message": null, "parent": null, "children": [sys]}),
        );
        mapping.insert(
            sys.clone(),
            json!({"id": sys, "parent": root, "children": [], "message": {
            "id": sys, "author": {"role": "system", "name": null, "metadata": {}},
            "create_time": null, "content": {"content_type": "text", "parts": [""]},
            "status": "finished_successfully", "weight": 0.0,
            "metadata": {"is_visually_hidden_from_conversation": true}, "recipient": "all"}}),
        );
        let mut parent = sys;
        let turns = 6 + r.next() % 10;
        for k in 0..turns {
            t += 1.0 + (r.next() % 1000) as f64 / 1000.0;
            let u = format!("u-{conv}-{k}");
            let content = if k == 0 && r.next().is_multiple_of(4) {
                json!({"content_type": "multimodal_text", "parts": [
                    {"content_type": "image_asset_pointer", "asset_pointer": format!("file-service://file-{conv}"),
                     "size_bytes": 12345, "width": 800, "height": 600},
                    sentence(&mut r, 20)]})
            } else {
                json!({"content_type": "text", "parts": [sentence(&mut r, 25)]})
            };
            mapping.insert(
                u.clone(),
                json!({"id": u, "parent": parent, "children": [], "message": {
                "id": u, "author": {"role": "user", "name": null, "metadata": {}},
                "create_time": t, "update_time": null, "content": content,
                "status": "finished_successfully", "end_turn": null, "weight": 1.0,
                "metadata": {"request_id": format!("req-{conv}-{k}"), "timestamp_": "absolute"},
                "recipient": "all", "channel": null}}),
            );
            // One in five turns has a regenerated answer: a branch.
            let answers = if r.next().is_multiple_of(5) { 2 } else { 1 };
            let mut last = String::new();
            for b in 0..answers {
                t += 2.5;
                let a = format!("a-{conv}-{k}-{b}");
                mapping.insert(
                    a.clone(),
                    json!({"id": a, "parent": u, "children": [], "message": {
                    "id": a, "author": {"role": "assistant", "name": null, "metadata": {}},
                    "create_time": t, "update_time": null,
                    "content": {"content_type": "text", "parts": [answer(&mut r)]},
                    "status": "finished_successfully", "end_turn": true, "weight": 1.0,
                    "metadata": {"model_slug": "gpt-4o", "finish_details": {"type": "stop"},
                                 "citations": [], "is_complete": true},
                    "recipient": "all", "channel": null}}),
                );
                last = a;
            }
            parent = last;
        }
        let c = json!({
            "title": sentence(&mut r, 4), "create_time": t - 100.0, "update_time": t,
            "mapping": mapping, "moderation_results": [], "current_node": parent,
            "plugin_ids": null, "conversation_id": format!("conv-{conv}"),
            "conversation_template_id": null, "gizmo_id": null, "is_archived": false,
            "safe_urls": [], "default_model_slug": "gpt-4o", "id": format!("conv-{conv}")
        });
        if conv > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, &c).expect("serialise");
        conv += 1;
    }
    out.push(b']');
    out
}

fn best(runs: usize, mut f: impl FnMut()) -> Duration {
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn main() {
    let mb: usize = std::env::var("WO_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let runs: usize = std::env::var("WO_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);
    let dir = tempfile::tempdir().expect("tempdir");
    // WO_BENCH_FILE keeps the generated export there (to try `wo import` on it).
    let path = std::env::var_os("WO_BENCH_FILE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.path().join("conversations.json"));
    let bytes = generate(mb << 20);
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(&bytes))
        .expect("write");
    let size = bytes.len();
    drop(bytes);
    let opts = ImportOptions {
        username: "alec".into(),
        fallback_time: Some(Timestamp::parse("2025-01-01T00:00:00Z").expect("time")),
        ..Default::default()
    };

    let floor = best(runs, || {
        let b = std::fs::read(&path).expect("read");
        let v: Value = serde_json::from_slice(&b).expect("parse");
        std::hint::black_box(v);
    });
    let mut messages = 0;
    let import = best(runs, || {
        let imported = chatgpt::import(&path, &opts).expect("import");
        messages = imported.state.messages().len();
        std::hint::black_box(imported);
    });
    let mut out_bytes = 0;
    let full = best(runs, || {
        let imported = chatgpt::import(&path, &opts).expect("import");
        let admitted = imported.admit().expect("admit");
        let mut state = State::new(Timestamp::parse("2025-01-01T00:00:00Z").expect("time"));
        admitted.imported.merge_into(&mut state);
        let written = wo_format::to_canonical_vec(&state);
        out_bytes = written.len();
        std::hint::black_box(written);
    });
    let secs = |d: Duration| d.as_secs_f64();
    println!(
        "chatgpt_import: {:.1} MB export, {messages} messages, {} threads, best of {runs}",
        size as f64 / (1 << 20) as f64,
        rayon::current_num_threads()
    );
    println!("  floor (read + serde_json::Value): {:.3} s", secs(floor));
    println!(
        "  import (read, parse, convert):    {:.3} s  ({:.2}x the floor)",
        secs(import),
        secs(import) / secs(floor)
    );
    println!(
        "  + admit + merge + serialise:      {:.3} s  ({:.2}x the floor; {:.1} MB llm.json)",
        secs(full),
        secs(full) / secs(floor),
        out_bytes as f64 / (1 << 20) as f64
    );
}
