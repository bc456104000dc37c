//! The floors a full index is measured against, driven by
//! `bench/index/floor.sh`:
//!
//! - `index_floor parse DIR [THREADS]`: the tree-sitter parse floor. The files the index would
//!   take (the same walk and caps as `wo index` with the caps lifted) that have a grammar are
//!   read into memory first (untimed), then parsed — `Parser::parse`, nothing else — with the
//!   same grammars the chunker uses, spread over THREADS threads (default 2) pulling files from
//!   a shared counter. Prints `parse_s`, code files and bytes, and all files and bytes.
//! - `index_floor index DIR [THREADS]`: one full index of DIR (`index_directory` with
//!   `full_rebuild`, the function `wo index --full` calls; caps lifted as the peers have none),
//!   written to `DIR/.wo-index/`. Prints `index_s`, files, bytes, chunks and `index.json`'s size.
//!
//! Output is `key=value` lines, for the script to read.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use tree_sitter::{Language, Parser};
use wo_index::{IndexOptions, Kind, index_directory, walk};

fn language(kind: Kind, path: &str) -> Option<Language> {
    // The same choice as the chunker's (crates/wo-index/src/chunk/code.rs).
    Some(match kind {
        Kind::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
        Kind::TypeScript if path.to_ascii_lowercase().ends_with(".tsx") => {
            tree_sitter_typescript::LANGUAGE_TSX.into()
        }
        Kind::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
        Kind::Rust => tree_sitter_rust::LANGUAGE.into(),
        Kind::Python => tree_sitter_python::LANGUAGE.into(),
        Kind::Go => tree_sitter_go::LANGUAGE.into(),
        _ => return None,
    })
}

/// CPU seconds (user + system) this process has used so far, from `/proc/self/stat` (Linux);
/// 0 where it cannot be read. Wall time on a shared machine depends on the load; CPU time
/// much less, so both are printed.
fn cpu_s() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may contain spaces), from field 3 on.
    let Some((_, rest)) = stat.rsplit_once(") ") else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 (indexes 11 and 12 here), in clock ticks of
    // 1/100 s on Linux (USER_HZ).
    (ticks(11) + ticks(12)) / 100.0
}

fn options(threads: usize) -> IndexOptions {
    IndexOptions {
        max_total_bytes: u64::MAX,
        full_rebuild: true,
        threads,
        ..IndexOptions::default()
    }
}

fn parse_floor(dir: &Path, threads: usize) -> Result<(), String> {
    let opts = options(threads);
    let (candidates, _) = walk::walk(dir, &opts);
    let mut all_bytes = 0u64;
    let mut all_files = 0usize;
    let mut code: Vec<(Language, String)> = Vec::new();
    for cand in &candidates {
        if cand.size > opts.max_file_bytes {
            continue;
        }
        all_files += 1;
        all_bytes += cand.size;
        let kind = walk::kind_for_path(&cand.rel);
        let Some(lang) = language(kind, &cand.rel) else {
            continue;
        };
        let bytes = std::fs::read(&cand.abs).map_err(|e| format!("{}: {e}", cand.abs.display()))?;
        if walk::looks_binary(&bytes) {
            continue;
        }
        code.push((lang, String::from_utf8_lossy(&bytes).into_owned()));
    }
    let code_bytes: usize = code.iter().map(|(_, t)| t.len()).sum();
    let next = AtomicUsize::new(0);
    let cpu0 = cpu_s();
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                let mut parser = Parser::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((lang, text)) = code.get(i) else {
                        break;
                    };
                    if parser.set_language(lang).is_ok() {
                        std::hint::black_box(parser.parse(text, None));
                    }
                }
            });
        }
    });
    let parse_s = started.elapsed().as_secs_f64();
    println!("parse_s={parse_s:.3}");
    println!("parse_cpu_s={:.2}", cpu_s() - cpu0);
    println!("threads={}", threads.max(1));
    println!("code_files={}", code.len());
    println!("code_bytes={code_bytes}");
    println!("files={all_files}");
    println!("bytes={all_bytes}");
    Ok(())
}

fn index(dir: &Path, threads: usize) -> Result<(), String> {
    let cpu0 = cpu_s();
    let started = Instant::now();
    let report = index_directory(dir, &options(threads), &|_| {}).map_err(|e| e.to_string())?;
    let index_s = started.elapsed().as_secs_f64();
    println!("index_s={index_s:.3}");
    println!("index_cpu_s={:.2}", cpu_s() - cpu0);
    println!("files={}", report.files);
    println!("bytes={}", report.bytes);
    println!("chunks={}", report.chunks);
    println!("index_json_bytes={}", report.index_bytes);
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: index_floor parse|index DIR [THREADS]";
    let (Some(mode), Some(dir)) = (args.first(), args.get(1)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let threads = match args.get(2).map(|t| t.parse::<usize>()) {
        None => 2,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            eprintln!("THREADS must be a number\n{usage}");
            std::process::exit(2);
        }
    };
    let dir = Path::new(dir);
    let result = match mode.as_str() {
        "parse" => parse_floor(dir, threads),
        "index" => index(dir, threads),
        _ => Err(usage.to_string()),
    };
    if let Err(e) = result {
        eprintln!("index_floor: {e}");
        std::process::exit(1);
    }
}
