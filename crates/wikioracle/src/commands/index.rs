//! `wo index`, `wo search`, `wo pack`: faces over `wo-index`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, anyhow};
use indicatif::{ProgressBar, ProgressStyle};
use wo_index::{Index, IndexOptions, Kind, Layout, PackOptions, Phase, Query};

use crate::cli::{IndexArgs, PackArgs, PackLayout, SearchArgs};

pub fn index(args: IndexArgs) -> Result<ExitCode> {
    let root = match args.dir {
        Some(d) => d,
        None => std::env::current_dir()?,
    };
    let mut opts = IndexOptions {
        full_rebuild: args.full,
        include_hidden: args.hidden,
        follow_symlinks: args.follow_symlinks,
        ..IndexOptions::default()
    };
    if let Some(n) = args.max_file_bytes {
        opts.max_file_bytes = n;
    }
    if let Some(n) = args.max_total_bytes {
        opts.max_total_bytes = n;
    }
    // indicatif draws only on a terminal; on a pipe or in CI it stays quiet.
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {prefix:>9} [{bar:30}] {pos}/{len} {wide_msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    let report = wo_index::index_directory(&root, &opts, &|p| {
        bar.set_prefix(match p.phase {
            Phase::Walking => "walking",
            Phase::Chunking => "chunking",
            Phase::Indexing => "indexing",
            Phase::Writing => "writing",
        });
        bar.set_length(p.total as u64);
        bar.set_position(p.done as u64);
        if let Some(path) = p.path {
            bar.set_message(crate::render::term(path).into_owned());
        }
    })?;
    bar.finish_and_clear();
    if args.json {
        let warnings: Vec<String> = report.warnings.iter().map(|w| w.to_string()).collect();
        outln!(
            "{}",
            crate::render::json(&serde_json::json!({
                "index": report.index_path, "files": report.files, "chunks": report.chunks,
                "files_chunked": report.files_chunked, "files_reused": report.files_reused,
                "files_removed": report.files_removed, "bytes": report.bytes,
                "index_bytes": report.index_bytes, "warnings": warnings,
                "rebuilt_because": report.rebuilt_because,
                "elapsed_ms": report.elapsed.as_millis() as u64,
            }))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    print_warnings(&report.warnings);
    if let Some(why) = &report.rebuilt_because {
        eoutln!("note: full rebuild: {why}");
    }
    outln!(
        "indexed {} files ({} re-read, {} unchanged, {} removed), {} chunks, {:.1} MB in {:.2?} → {}",
        report.files,
        report.files_chunked,
        report.files_reused,
        report.files_removed,
        report.chunks,
        report.bytes as f64 / 1e6,
        report.elapsed,
        report.index_path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Index warnings on stderr, one line each — except the files skipped
/// because `max_total_bytes` was reached, which are one summary line (a
/// large tree would otherwise print one identical line per file).
fn print_warnings(warnings: &[wo_index::Warning]) {
    let (capped, others): (Vec<&wo_index::Warning>, Vec<&wo_index::Warning>) = warnings
        .iter()
        .partition(|w| w.kind == wo_index::WarningKind::TotalBytesExceeded);
    for w in others {
        eoutln!("warning: {w}");
    }
    if let Some(first) = capped.first() {
        eoutln!(
            "warning: {}; {} file(s) not indexed (first: {})\nhint: --max-total-bytes BYTES raises the cap (wo index --json lists every file)",
            first.message.trim_end_matches("; skipped"),
            capped.len(),
            first.path
        );
    }
}

/// The index at `dir`, else the nearest one at or above the working directory.
fn open_index(dir: Option<PathBuf>) -> Result<Index> {
    Ok(Index::open(&index_root(dir)?)?)
}

/// The root of the index at `dir`, else of the nearest one at or above the working directory.
fn index_root(dir: Option<PathBuf>) -> Result<PathBuf> {
    Ok(match dir {
        Some(d) => d,
        None => {
            let cwd = std::env::current_dir()?;
            wo_engine::files::find_index_root(&cwd).ok_or_else(|| {
                anyhow!(
                    "no index in {} or its parents\nhint: run `wo index` first",
                    cwd.display()
                )
            })?
        }
    })
}

pub fn search(args: SearchArgs) -> Result<ExitCode> {
    if args.get.is_none() && args.outline.is_none() && args.symbols.is_none() {
        return query(args);
    }
    let index = open_index(args.dir.clone())?;
    if let Some(key) = &args.get {
        let rec = index
            .get_chunk(key)
            .ok_or_else(|| anyhow!("no chunk {key:?} in the index\nhint: refs look like c0001; `wo search TEXT` lists some"))?;
        if args.json {
            outln!(
                "{}",
                crate::render::json(
                    &serde_json::json!({"ref": rec.chunk_ref, "chunk": rec.chunk})
                )?
            );
        } else {
            let c = rec.chunk;
            outln!(
                "# {} {}:{}-{} {}",
                rec.chunk_ref,
                c.path,
                c.start_line,
                c.end_line,
                wo_index::chunk_label(c)
            );
            outln!("{}", c.content);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(path) = &args.outline {
        let entries = index.list_outline(path);
        for e in &entries {
            if args.json {
                outln!("{}", crate::render::json(e)?);
            } else {
                outln!(
                    "{} {}:{} {}{}",
                    e.chunk_ref,
                    e.path,
                    e.start_line,
                    "  ".repeat(e.depth.saturating_sub(1)),
                    e.heading
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(path) = &args.symbols {
        for e in index.list_symbols(path) {
            if args.json {
                outln!("{}", crate::render::json(&e)?);
            } else {
                outln!(
                    "{} {}:{}-{} {}",
                    e.chunk_ref,
                    e.path,
                    e.start_line,
                    e.end_line,
                    e.symbol
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    Ok(ExitCode::SUCCESS)
}

/// `wo search TEXT`: ranked through the index's search sidecar, which reads only the
/// postings of the query's terms and the chunks returned (`wo_index::search_root`; built or
/// rebuilt from `index.json` when missing, stale or damaged) — the same hits as loading the
/// whole index.
fn query(args: SearchArgs) -> Result<ExitCode> {
    let root = index_root(args.dir.clone())?;
    let mut q = Query::new(args.query.as_deref().unwrap_or_default());
    q.limit = args.limit;
    q.path_prefix = args.path.clone();
    q.heading_prefix = args.heading.clone();
    q.symbol_prefix = args.symbol.clone();
    if let Some(k) = &args.kind {
        q.kind = Some(Kind::parse(k).ok_or_else(|| {
            anyhow!("--kind {k:?} is not a kind\nhint: markdown, json, javascript, typescript, rust, python, go, html, text, image")
        })?);
    }
    let (hits, _sidecar) = wo_index::search_root(&root, &q)?;
    if args.json {
        outln!("{}", crate::render::json(&hits)?);
        return Ok(ExitCode::SUCCESS);
    }
    if hits.is_empty() {
        eoutln!("no matches");
    }
    for h in &hits {
        outln!(
            "{} {}:{}-{} {}  ({:.2})",
            h.chunk_ref,
            h.path,
            h.start_line,
            h.end_line,
            h.label,
            h.score
        );
        if !h.snippet.is_empty() {
            outln!("    {}", h.snippet);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn pack(args: PackArgs) -> Result<ExitCode> {
    let index = open_index(args.dir.clone())?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| index.root().join(".wo-pack"));
    let opts = PackOptions {
        layout: match args.layout {
            PackLayout::Auto => Layout::Auto,
            PackLayout::Full => Layout::Full,
            PackLayout::Compact => Layout::Compact,
            PackLayout::Archive => Layout::Archive,
        },
        zips: !args.no_zip,
        ..PackOptions::default()
    };
    let report = wo_index::pack(&index, &out, &opts)
        .with_context(|| format!("cannot pack into {}", out.display()))?;
    for w in &report.warnings {
        eoutln!("warning: {w}");
    }
    outln!(
        "packed {} chunks ({} tokens) as {:?} into {}: {} files, {:.1} KB (source: {} files, {:.1} KB)",
        report.chunks,
        report.tokens,
        report.layout,
        out.display(),
        report.export_files,
        report.export_bytes as f64 / 1e3,
        report.source_files,
        report.source_bytes as f64 / 1e3
    );
    Ok(ExitCode::SUCCESS)
}
