//! `wo-index-qlat ROOT QUERIES_FILE`: opens ROOT's index once (timed), then runs every query
//! (one per line) once as a warm-up and `REPEAT` (env, default 1) more times timed, printing
//! one JSON line: open time, per-query latencies in microseconds, hit counts.

use std::time::Instant;

use wo_index::{Index, Query};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (root, qfile) = match args.as_slice() {
        [r, q] => (r.clone(), q.clone()),
        _ => {
            eprintln!("usage: wo-index-qlat ROOT QUERIES_FILE");
            std::process::exit(2);
        }
    };
    let repeat: usize = std::env::var("REPEAT").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let queries: Vec<String> = std::fs::read_to_string(&qfile)
        .expect("read queries")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    let t = Instant::now();
    let index = Index::open(std::path::Path::new(&root)).expect("open index");
    let open_us = t.elapsed().as_micros();
    // Warm-up pass (first touch of postings pages), not counted.
    let mut hits_total = 0usize;
    for q in &queries {
        hits_total += index.search(&Query::new(q.as_str())).len();
    }
    let mut lat_us: Vec<f64> = Vec::with_capacity(queries.len() * repeat);
    for _ in 0..repeat {
        for q in &queries {
            let t = Instant::now();
            let hits = index.search(&Query::new(q.as_str()));
            lat_us.push(t.elapsed().as_nanos() as f64 / 1000.0);
            std::hint::black_box(hits);
        }
    }
    let lat: Vec<String> = lat_us.iter().map(|v| format!("{v:.1}")).collect();
    println!(
        "{{\"open_us\":{open_us},\"queries\":{},\"repeat\":{repeat},\"hits_warmup\":{hits_total},\"lat_us\":[{}]}}",
        queries.len(),
        lat.join(",")
    );
}
