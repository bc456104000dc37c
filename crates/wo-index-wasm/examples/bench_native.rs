//! The native side of `scripts/bench-ingest.mjs`: reads a tree into memory
//! (folders starting with `.` not read, as the ingestion page does), then
//! times the same `Indexer` calls the page makes — `build` (index_files)
//! and `renderExports("full")` — natively. Prints one JSON line:
//! `{"files", "bytes", "build_ms": [..], "exports_ms": [..]}` (each run
//! after one untimed warm-up). `RAYON_NUM_THREADS=1` gives the browser's
//! one thread.
//!
//! `cargo run --release -p wo-index-wasm --example bench_native -- DIR [RUNS]`

use std::path::Path;
use std::time::Instant;

use wo_index_wasm::Indexer;

fn read_tree(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        let kind = e.file_type()?;
        if kind.is_dir() {
            if !name.starts_with('.') {
                read_tree(root, &path, out)?;
            }
        } else if kind.is_file() {
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            out.push((rel, std::fs::read(&path)?));
        }
    }
    Ok(())
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next() else {
        eprintln!("usage: bench_native DIR [RUNS]");
        std::process::exit(2);
    };
    let runs: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(3);
    let root = Path::new(&dir);
    let mut files = Vec::new();
    if let Err(e) = read_tree(root, root, &mut files) {
        eprintln!("{dir}: {e}");
        std::process::exit(1);
    }
    let name = root
        .file_name()
        .map_or("tree".into(), |n| n.to_string_lossy().into_owned());
    let (mut build_ms, mut exports_ms) = (Vec::new(), Vec::new());
    for run in 0..=runs {
        let mut ix = Indexer::new(&name);
        for (p, b) in &files {
            ix.add(p.clone(), b.clone());
        }
        let t = Instant::now();
        ix.build(None);
        let built = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        if let Err(e) = ix.render_exports("full") {
            eprintln!("exports: {e}");
            std::process::exit(1);
        }
        let exported = t.elapsed().as_secs_f64() * 1e3;
        if run > 0 {
            build_ms.push(built);
            exports_ms.push(exported);
        }
    }
    let bytes: usize = files.iter().map(|(_, b)| b.len()).sum();
    println!(
        "{}",
        serde_json::json!({ "files": files.len(), "bytes": bytes, "build_ms": build_ms, "exports_ms": exports_ms })
    );
}
