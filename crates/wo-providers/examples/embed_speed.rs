//! Times the embedding model: loading it, and embedding a short question
//! (what the server does on a turn's path) and longer texts (`cargo run -p
//! wo-providers --features local --example embed_speed`; env
//! `WO_EMBED_THREADS` sets llama.cpp's threads, `REPEAT` the questions
//! timed). Prints the median and the fastest wall time, and the CPU time
//! the process spent per question (every thread's, from
//! `/proc/self/task/*/schedstat`), which a loaded machine inflates less.
use std::time::{Duration, Instant};

use wo_providers::embed::{Embedder, LocalEmbedder, default_embedding_model_path};

/// Nanoseconds every thread of this process has run so far (Linux; 0
/// elsewhere).
fn cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let repeat: usize = std::env::var("REPEAT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let path = default_embedding_model_path(&wo_providers::config::Env::process())
        .expect("a data directory");
    let t = Instant::now();
    let e = LocalEmbedder::open(&path).expect("the model (scripts/install-model.sh)");
    println!("open: {:.1} ms", ms(t.elapsed()));
    let short = "What did Caroline research after the support group?";
    let long = "I went to the LGBTQ support group yesterday and it was so powerful. ".repeat(4);
    let t = Instant::now();
    e.embed(&[short]).unwrap();
    println!("first question: {:.1} ms", ms(t.elapsed()));
    for (name, text, n) in [
        ("short", short, repeat),
        ("long", long.as_str(), repeat.div_ceil(3)),
    ] {
        let mut walls = Vec::with_capacity(n);
        let cpu = cpu_ns();
        for _ in 0..n {
            let t = Instant::now();
            e.embed(&[text]).unwrap();
            walls.push(t.elapsed());
        }
        let cpu = (cpu_ns() - cpu) as f64 / 1e6 / n as f64;
        walls.sort();
        println!(
            "{name}: p50 {:.2} ms, min {:.2} ms, CPU {cpu:.2} ms a text ({n} texts)",
            ms(walls[n / 2]),
            ms(walls[0]),
        );
    }
    let texts: Vec<&str> = std::iter::repeat_n(long.as_str(), 32).collect();
    let t = Instant::now();
    e.embed(&texts).unwrap();
    println!("32 long in one call: {:.1} ms each", ms(t.elapsed()) / 32.0);
}
