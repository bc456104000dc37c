//! Manual driver: `cargo run --release -p wo-index --example wo_index_demo -- <root> [query] [out]`
//! Indexes `<root>`, prints the report, runs `query` if given, and packs into `out` if given.

use std::path::Path;
use std::time::Instant;

use wo_index::{Index, IndexOptions, PackOptions, Query, index_directory, pack};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = Path::new(args.first().map_or(".", String::as_str));
    let mut opts = IndexOptions::default();
    // WO_MAX_TOTAL_BYTES lifts the 50 MB total cap for benchmarking large trees.
    if let Some(max) = std::env::var("WO_MAX_TOTAL_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        opts.max_total_bytes = max;
    }
    let report = index_directory(root, &opts, &|_| {})?;
    println!(
        "indexed {} files ({} chunked, {} reused, {} removed), {} chunks, {} bytes -> index {} bytes, {} warnings in {:?}",
        report.files,
        report.files_chunked,
        report.files_reused,
        report.files_removed,
        report.chunks,
        report.bytes,
        report.index_bytes,
        report.warnings.len(),
        report.elapsed
    );
    let t = Instant::now();
    let index = Index::open(root)?;
    println!("opened index in {:?}", t.elapsed());
    if let Some(q) = args.get(1).filter(|q| !q.is_empty()) {
        let t = Instant::now();
        let hits = index.search(&Query::new(q.as_str()));
        println!("search took {:?}", t.elapsed());
        for h in hits {
            println!(
                "{} {:.3} {}:{}-{} {}",
                h.chunk_ref, h.score, h.path, h.start_line, h.end_line, h.label
            );
        }
    }
    if let Some(out) = args.get(2) {
        let t = Instant::now();
        let r = pack(&index, Path::new(out), &PackOptions::default())?;
        println!(
            "packed in {:?}: {} files / {} bytes (source {} files / {} bytes), zip {} compact zip {}, tokens {} ({} computed)",
            t.elapsed(),
            r.export_files,
            r.export_bytes,
            r.source_files,
            r.source_bytes,
            r.zip_bytes,
            r.compact_zip_bytes,
            r.tokens,
            r.tokens_computed
        );
    }
    Ok(())
}
