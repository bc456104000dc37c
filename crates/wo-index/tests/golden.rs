//! Output pinned byte for byte: speed work on the indexing core (per-thread parser caches,
//! parallel reads, fewer copies) must not change a single byte of `index.json` or of any pack
//! file. A fixture tree with every kind of file (code in each grammar, large declarations that
//! split into members, Markdown, HTML, JSON, text, an image, binary and invalid UTF-8 files,
//! over-long lines, duplicate content) is indexed single-threaded, in parallel and in memory
//! (`index_files`, the browser's entry point); all three must give the same bytes, and the
//! SHA-256 of `index.json` and of every file `pack` writes is held to a snapshot taken before
//! the speed work (`snapshots/golden__output_digests.snap`).

mod common;

use std::fmt::Write as _;
use std::path::Path;

use common::{PNG, copy_tree, digests, index_and_pack, project, snapshot_dir, write};
use wo_index::{ChunkingConfig, Index, IndexOptions, index_directory, index_files, sha256_hex};

/// A deterministic fixture with every kind of input the chunkers treat differently.
fn fixture(root: &Path) {
    project(root);
    let chunkers = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chunkers");
    std::fs::create_dir_all(root.join("fixtures")).unwrap();
    copy_tree(&chunkers, &root.join("fixtures"));
    // A Rust impl far over the chunk cap: split into its members (qualified symbols).
    let mut rust = String::from("//! Generated.\n\nuse std::fmt;\n\npub struct Big;\n\n");
    rust.push_str("impl Big {\n");
    for i in 0..120 {
        let _ = write!(
            rust,
            "    /// Method {i} computes a value.\n    pub fn method_{i}(&self, x: u64) -> u64 {{\n        let y = x * {i} + 7;\n        y.rotate_left({})\n    }}\n\n",
            i % 13
        );
    }
    rust.push_str("}\n\nfn tail() {}\n");
    write(root, "gen/big.rs", &rust);
    // Python and JavaScript classes over the cap, and a module-level glue run.
    let mut py = String::from("import os\n\nCONST = 1\n\nclass Large:\n");
    let mut js = String::from("'use strict';\nconst a = 1;\n\nclass Large {\n");
    for i in 0..150 {
        let _ = write!(
            py,
            "    def m{i}(self, v):\n        \"\"\"Doc {i}.\"\"\"\n        return v + {i}\n\n"
        );
        let _ = write!(
            js,
            "  m{i}(v) {{\n    // step {i}\n    return v + {i};\n  }}\n"
        );
    }
    js.push_str("}\n\nexport const arrow = (x) => x * 2;\n");
    write(root, "gen/large.py", &py);
    write(root, "gen/large.js", &js);
    // Markdown with nested headings and a fence longer than the target.
    let mut md = String::from("# Title\n\nIntro paragraph.\n\n");
    for s in 0..40 {
        let _ = write!(
            md,
            "## Section {s}\n\nText of section {s} about indexing speed and floors.\n\n### Sub {s}\n\n```rust\nfn f{s}() {{}}\n```\n\n"
        );
    }
    write(root, "docs/long.md", &md);
    // Text with a line over `chunk_max_chars` and repeated lines.
    let long_line = "word ".repeat(2500);
    write(
        root,
        "gen/long.txt",
        format!("head\n{long_line}\nrepeat\nrepeat\nrepeat\nrepeat\nrepeat\ntail\n"),
    );
    // Duplicate content in two files and twice in one.
    write(root, "dup/a.md", "# Same\n\nSame text.\n");
    write(root, "dup/b.md", "# Same\n\nSame text.\n");
    write(
        root,
        "gen/dups.ts",
        "export function f(): number { return 1; }\n\nexport function f(): number { return 1; }\n",
    );
    write(
        root,
        "img/nested/pic.svg",
        "<svg xmlns='http://www.w3.org/2000/svg'/>",
    );
    write(root, "img/copy.png", PNG);
    write(root, "bad/latin1.txt", b"caf\xe9 cr\xe8me\n");
    write(root, "bad/broken.rs", "fn ( {{{ struct\n");
    write(root, "bad/broken.go", "package main\nfunc (\n");
    write(root, "bom.md", "\u{feff}# With BOM\n\nBody.\n");
    write(
        root,
        "crlf.py",
        "def a():\r\n    return 1\r\n\r\ndef b():\r\n    return 2\r\n",
    );
    write(root, "empty.txt", "");
}

fn options(threads: usize) -> IndexOptions {
    IndexOptions {
        threads,
        ..IndexOptions::default()
    }
}

/// What the golden test pins for `root` indexed with `opts`.
fn outputs(root: &Path, opts: &IndexOptions) -> Vec<(String, Vec<u8>)> {
    index_and_pack(root, opts, "golden")
}

#[test]
fn output_is_pinned_and_the_same_single_threaded_parallel_and_in_memory() {
    let single = tempfile::tempdir().unwrap();
    let parallel = tempfile::tempdir().unwrap();
    fixture(single.path());
    fixture(parallel.path());
    let one = outputs(single.path(), &options(1));
    let many = outputs(parallel.path(), &options(4));
    assert!(one.len() > 20, "the pack wrote {} files", one.len());
    assert_eq!(digests(&one), digests(&many), "1 thread vs 4 threads");
    assert!(one == many, "same digests, different bytes");

    // The browser's entry point: the same files given in memory (the cache folder left out,
    // as the walk leaves it out).
    let files: Vec<(String, Vec<u8>)> = snapshot_dir(single.path())
        .into_iter()
        .filter(|(p, _)| !p.starts_with(".wo-index"))
        .collect();
    let (file, _) = index_files(&files, None, &options(1), &|_| {});
    assert!(
        serde_json::to_vec(&file).unwrap() == one[0].1,
        "index_files differs from index_directory"
    );

    insta::assert_snapshot!("output_digests", digests(&one));
}

#[test]
fn small_caps_and_an_incremental_run_keep_bytes_equal_across_thread_counts() {
    let small = ChunkingConfig {
        chunk_target_chars: 300,
        chunk_max_chars: 600,
        max_chunks_per_file: 40,
    };
    let mut per_threads = Vec::new();
    for threads in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        fixture(dir.path());
        let opts = IndexOptions {
            chunking: small,
            threads,
            ..IndexOptions::default()
        };
        index_directory(dir.path(), &opts, &|_| {}).unwrap();
        // An edit, a new file and a deletion, then an incremental run.
        write(dir.path(), "gen/large.py", "def only():\n    return 0\n");
        write(dir.path(), "added.md", "# Added\n\nNew file.\n");
        std::fs::remove_file(dir.path().join("dup/b.md")).unwrap();
        let report = index_directory(dir.path(), &opts, &|_| {}).unwrap();
        assert!(
            report.files_reused > 10 && report.files_chunked == 2,
            "{report:?}"
        );
        assert!(
            report
                .warnings
                .iter()
                .any(|w| w.kind == wo_index::WarningKind::TooManyChunks),
            "small caps cut a file: {:?}",
            report.warnings
        );
        per_threads.push(std::fs::read(dir.path().join(".wo-index/index.json")).unwrap());
    }
    assert!(per_threads[0] == per_threads[1], "1 vs 2 threads");
    insta::assert_snapshot!("small_caps_incremental", {
        let bytes = &per_threads[0];
        format!("{} {}\n", sha256_hex(bytes), bytes.len())
    });
}

#[test]
fn index_json_written_in_parallel_batches_is_what_serde_writes() {
    // More chunks and terms than one serialisation batch (4,096), so batches are joined; and
    // the empty index, whose arrays and maps are empty.
    let dir = tempfile::tempdir().unwrap();
    for i in 0..4_500 {
        write(
            dir.path(),
            &format!("notes/n{i:04}.md"),
            format!("# Note {i}\n\nword{i} \"quoted\" \\ back\u{e9}slash tab\there\n"),
        );
    }
    index_directory(dir.path(), &options(2), &|_| {}).unwrap();
    let written = std::fs::read(dir.path().join(".wo-index/index.json")).unwrap();
    let index = Index::open(dir.path()).unwrap();
    assert!(index.data().chunks.len() > 4_096 && index.data().inverted_index.len() > 4_096);
    assert!(written == serde_json::to_vec(index.data()).unwrap());

    let empty = tempfile::tempdir().unwrap();
    index_directory(empty.path(), &options(2), &|_| {}).unwrap();
    let written = std::fs::read(empty.path().join(".wo-index/index.json")).unwrap();
    let index = Index::open(empty.path()).unwrap();
    assert!(index.data().chunks.is_empty());
    assert_eq!(
        String::from_utf8(written).unwrap(),
        serde_json::to_string(index.data()).unwrap()
    );
}
