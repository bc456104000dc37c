//! Times the embedding model: loading it, and embedding short and long
//! texts (`cargo run -p wo-providers --features local --example embed_speed`;
//! `WO_EMBED_THREADS` sets llama.cpp's threads).
use std::time::Instant;

use wo_providers::embed::{Embedder, LocalEmbedder, default_embedding_model_path};

fn main() {
    let path = default_embedding_model_path(&wo_providers::config::Env::process())
        .expect("a data directory");
    let t = Instant::now();
    let e = LocalEmbedder::open(&path).expect("the model (scripts/install-model.sh)");
    println!("open: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    let short = "What did Caroline research after the support group?";
    let long = "I went to the LGBTQ support group yesterday and it was so powerful. ".repeat(4);
    for (name, text) in [("short", short), ("long", long.as_str())] {
        for round in 0..3 {
            let t = Instant::now();
            e.embed(&[text]).unwrap();
            println!("{name} #{round}: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
        }
    }
    let texts: Vec<&str> = std::iter::repeat_n(long.as_str(), 32).collect();
    let t = Instant::now();
    e.embed(&texts).unwrap();
    println!(
        "32 long in one call: {:.1} ms each",
        t.elapsed().as_secs_f64() * 1e3 / 32.0
    );
}
