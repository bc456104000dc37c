//! Ingestion and search behaviour: ignore rules, caps, malformed inputs, stable ids and refs,
//! incremental updates and BM25 ranking.

mod common;

use std::path::Path;

use common::{project, write};
use wo_index::{
    ChunkingConfig, Index, IndexOptions, Kind, Query, WarningKind, chunk_id, chunk_ref,
    index_directory, sha256_hex,
};

fn index(root: &Path) -> wo_index::IndexReport {
    index_directory(root, &IndexOptions::default(), &|_| {}).expect("index")
}

fn index_with(root: &Path, opts: &IndexOptions) -> wo_index::IndexReport {
    index_directory(root, opts, &|_| {}).expect("index")
}

fn paths(root: &Path) -> Vec<String> {
    Index::open(root)
        .unwrap()
        .data()
        .files
        .iter()
        .map(|f| f.path.clone())
        .collect()
}

fn has_warning(report: &wo_index::IndexReport, path: &str, kind: WarningKind) -> bool {
    report
        .warnings
        .iter()
        .any(|w| w.path == path && w.kind == kind)
}

#[test]
fn walk_respects_gitignore_hidden_and_binary() {
    let dir = tempfile::tempdir().unwrap();
    project(dir.path());
    let report = index(dir.path());
    assert_eq!(
        paths(dir.path()),
        vec![
            "README.md",
            "data/config.json",
            "docs/guide.md",
            "img/logo.png",
            "notes.txt",
            "site/index.html",
            "src/app.js",
            "src/lib.rs",
        ]
    );
    assert!(has_warning(&report, "blob.dat", WarningKind::Binary));
    // The cache directory is never indexed, even on a second run.
    let again = index(dir.path());
    assert_eq!(again.files, 8);
    assert!(dir.path().join(".wo-index/index.json").exists());
    assert_eq!(
        std::fs::read_to_string(dir.path().join(".wo-index/.gitignore")).unwrap(),
        "*\n"
    );
}

/// The memory file and what WikiOracle keeps beside it are not project
/// files: indexed, the conversation came back as raw JSON beside its own
/// recall. A look-alike name stays indexed; the browser's in-memory path
/// selects exactly what the walk does.
#[test]
fn wikioracle_s_own_files_are_never_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let own = [
        "llm.json",
        "llm.json.lock",
        "llm.json.bak-20261128T151200Z",
        "llm_2026.11.28.1513.json",
        "llm_2026.11.28.1513-2.json.merged",
        "sub/llm.json",
    ];
    for name in own {
        write(
            root,
            name,
            "{\"messages\": [\"my dog is named Biscuit\"]}\n",
        );
    }
    write(root, "notes.md", "# Notes\nthe kiln fires at cone 6\n");
    write(root, "llm_config.json", "{\"temperature\": 0.2}\n");
    index(root);
    assert_eq!(paths(root), vec!["llm_config.json", "notes.md"]);
    let files: Vec<(String, Vec<u8>)> = own
        .iter()
        .chain(&["notes.md", "llm_config.json"])
        .map(|p| (p.to_string(), std::fs::read(root.join(p)).unwrap()))
        .collect();
    let (file, _) = wo_index::index_files(&files, None, &IndexOptions::default(), &|_| {});
    let in_memory: Vec<&str> = file.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(in_memory, ["llm_config.json", "notes.md"]);
}

#[test]
fn nested_ignore_files_and_negation() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".gitignore", "*.log\n!keep.log\n");
    write(root, "keep.log", "kept\n");
    write(root, "drop.log", "dropped\n");
    write(root, "sub/.gitignore", "secret.txt\n");
    write(root, "sub/secret.txt", "hidden\n");
    write(root, "sub/open.txt", "visible\n");
    write(root, "other/.ignore", "generated.txt\n");
    write(root, "other/generated.txt", "gen\n");
    write(root, ".hidden/file.txt", "dot dir\n");
    index(root);
    assert_eq!(paths(root), vec!["keep.log", "sub/open.txt"]);

    let opts = IndexOptions {
        respect_gitignore: false,
        include_hidden: true,
        ..IndexOptions::default()
    };
    index_with(root, &opts);
    let all = paths(root);
    for p in [
        "drop.log",
        "sub/secret.txt",
        "other/generated.txt",
        ".hidden/file.txt",
    ] {
        assert!(all.iter().any(|x| x == p), "{p} missing from {all:?}");
    }
}

#[test]
fn ids_and_refs_follow_the_seed() {
    let dir = tempfile::tempdir().unwrap();
    project(dir.path());
    index(dir.path());
    let idx = Index::open(dir.path()).unwrap();
    let data = idx.data();
    assert!(!data.chunks.is_empty());
    for (i, c) in data.chunks.iter().enumerate() {
        assert_eq!(c.content_hash, sha256_hex(c.content.as_bytes()));
        assert_eq!(&c.short_id, &c.id[..12]);
        assert_eq!(data.chunk_refs[&c.id], chunk_ref(i + 1));
        assert_eq!(idx.ref_at(i), chunk_ref(i + 1));
    }
    // Ordered by (path, start_line, end_line, id).
    for w in data.chunks.windows(2) {
        assert!(
            (&w[0].path, w[0].start_line, w[0].end_line, &w[0].id)
                < (&w[1].path, w[1].start_line, w[1].end_line, &w[1].id)
        );
    }
    // The id formula, with occurrence counting over identical content in one file.
    let first = &data.chunks[0];
    assert_eq!(first.id, chunk_id(&first.path, &first.content_hash, 0));
    assert_eq!(
        first.id,
        sha256_hex(format!("{}\n{}\n0", first.path, first.content_hash).as_bytes())
    );
}

#[test]
fn duplicate_content_gets_distinct_ids_by_occurrence() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "dup.md", "# Same\n\n# Same\n");
    index(dir.path());
    let idx = Index::open(dir.path()).unwrap();
    let chunks = &idx.data().chunks;
    assert_eq!(chunks.len(), 2);
    assert_eq!(chunks[0].content_hash, chunks[1].content_hash);
    let ids: Vec<String> = (0..2)
        .map(|n| chunk_id("dup.md", &chunks[0].content_hash, n))
        .collect();
    let mut got: Vec<String> = chunks.iter().map(|c| c.id.clone()).collect();
    got.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn search_ranks_symbols_and_applies_filters() {
    let dir = tempfile::tempdir().unwrap();
    project(dir.path());
    index(dir.path());
    let idx = Index::open(dir.path()).unwrap();

    let hits = idx.search(&Query::new("loginUser"));
    assert_eq!(hits[0].path, "src/app.js");
    assert_eq!(hits[0].label, "loginUser");
    // camelCase parts match too.
    let hits = idx.search(&Query::new("login user"));
    assert_eq!(hits[0].path, "src/app.js");
    // snake_case parts.
    let hits = idx.search(&Query::new("tokenize"));
    assert_eq!(hits[0].label, "tokenize_input");

    let mut q = Query::new("loginUser");
    q.kind = Some(Kind::Markdown);
    let hits = idx.search(&q);
    assert!(!hits.is_empty());
    assert!(hits.iter().all(|h| h.kind == Kind::Markdown));
    assert_eq!(hits[0].path, "README.md");

    let mut q = Query::new("tokens refresh");
    q.path_prefix = Some("docs/".into());
    q.heading_prefix = Some("auth".into());
    let hits = idx.search(&q);
    assert_eq!(hits.len(), 2, "{hits:#?}");
    assert!(hits.iter().all(|h| h.path == "docs/guide.md"));
    q.heading_prefix = Some("REFRESH".into());
    let hits = idx.search(&q);
    assert_eq!(hits.len(), 1, "{hits:#?}");
    assert_eq!(hits[0].label, "Authentication > Refresh");
    q.path_prefix = Some("src/".into());
    assert!(idx.search(&q).is_empty());

    let mut q = Query::new("");
    q.symbol_prefix = Some("parse_".into());
    let hits = idx.search(&q);
    assert_eq!(hits.len(), 1, "{hits:#?}");
    assert_eq!(hits[0].path, "src/lib.rs");
    assert_eq!(hits[0].label, "Parser");
    q.symbol_prefix = Some("parser".into());
    assert_eq!(idx.search(&q).len(), 2, "struct Parser and impl Parser");

    // Images are found by path; scripts in HTML are not indexed.
    assert_eq!(idx.search(&Query::new("logo"))[0].path, "img/logo.png");
    assert!(idx.search(&Query::new("hidden")).is_empty());
    // Ignored files never show up.
    assert!(idx.search(&Query::new("ignoredBuild")).is_empty());
}

#[test]
fn bm25_normalises_length_and_weights_query_terms() {
    let dir = tempfile::tempdir().unwrap();
    let filler = "lorem ipsum dolor sit amet ".repeat(40);
    write(dir.path(), "short.txt", "alpha beta\n");
    write(dir.path(), "long.txt", format!("alpha beta {filler}\n"));
    write(dir.path(), "gamma.txt", format!("gamma alpha {filler}\n"));
    index(dir.path());
    let idx = Index::open(dir.path()).unwrap();
    let hits = idx.search(&Query::new("alpha"));
    let order: Vec<&str> = hits.iter().map(|h| h.path.as_str()).collect();
    assert_eq!(
        order[0], "short.txt",
        "shorter document should win: {order:?}"
    );
    // Repeating a query term raises its weight.
    let once = idx.search(&Query::new("beta gamma"));
    let twice = idx.search(&Query::new("beta gamma gamma gamma"));
    let score = |hits: &[wo_index::Hit], p: &str| {
        hits.iter().find(|h| h.path == p).map(|h| h.score).unwrap()
    };
    assert!(score(&twice, "gamma.txt") > score(&once, "gamma.txt"));
}

/// The terms are `wo_text`'s, the ones chat retrieval uses: inflections meet through stems,
/// stopwords match nothing, identifier parts match words.
#[test]
fn search_uses_the_shared_tokenizer() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "notes.md",
        "# Kiln\n\nShe painted the glazes.\n",
    );
    write(
        dir.path(),
        "other.md",
        "# Other\n\nThe retrievalPrefs knob.\n",
    );
    index(dir.path());
    let idx = Index::open(dir.path()).unwrap();
    let top = |q: &str| idx.search(&Query::new(q)).first().map(|h| h.path.clone());
    assert_eq!(top("painting glaze").as_deref(), Some("notes.md"));
    assert_eq!(top("retrieval").as_deref(), Some("other.md"));
    assert!(
        idx.search(&Query::new("the she"))
            .iter()
            .all(|h| h.score == 0.0),
        "stopwords carry no score"
    );
    assert!(idx.data().inverted_index.contains_key("paint"));
    assert!(!idx.data().inverted_index.contains_key("the"));
}

/// An index written with other terms is never searched with these: it is refused with the
/// command that fixes it, and the next run rebuilds it.
#[test]
fn an_index_of_another_version_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    project(dir.path());
    index(dir.path());
    let file = wo_index::cache_dir(dir.path()).join(wo_index::INDEX_FILE);
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    v["version"] = 1.into();
    std::fs::write(&file, serde_json::to_vec(&v).unwrap()).unwrap();
    let err = Index::open(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("index version 1") && err.contains("run `wo index`"),
        "{err}"
    );
    let r = index(dir.path());
    assert_eq!(r.files_reused, 0);
    assert!(r.rebuilt_because.unwrap().contains("index version 1"));
    assert_eq!(
        Index::open(dir.path()).unwrap().data().version,
        wo_index::INDEX_VERSION
    );
}

#[test]
fn get_chunk_outline_and_symbols() {
    let dir = tempfile::tempdir().unwrap();
    project(dir.path());
    index(dir.path());
    let idx = Index::open(dir.path()).unwrap();
    let c = idx.get_chunk("c0001").expect("ref");
    assert_eq!(c.chunk_ref, "c0001");
    let by_id = idx.get_chunk(&c.chunk.id).unwrap();
    let by_short = idx.get_chunk(&c.chunk.short_id).unwrap();
    assert_eq!(by_id.chunk_ref, "c0001");
    assert_eq!(by_short.chunk_ref, "c0001");
    assert!(idx.get_chunk("zzz").is_none());

    let outline: Vec<(usize, String)> = idx
        .list_outline("docs/guide.md")
        .into_iter()
        .map(|e| (e.depth, e.heading))
        .collect();
    assert_eq!(
        outline,
        vec![
            (1, "Guide".to_string()),
            (2, "Authentication".to_string()),
            (3, "Refresh".to_string()),
            (1, "Appendix".to_string()),
        ]
    );
    let symbols: Vec<String> = idx
        .list_symbols("src")
        .into_iter()
        .map(|s| format!("{}:{}", s.path, s.symbol))
        .collect();
    assert_eq!(
        symbols,
        vec![
            "src/app.js:loginUser",
            "src/app.js:logoutUser",
            "src/lib.rs:Parser",
            "src/lib.rs:Parser::parse_config",
            "src/lib.rs:tokenize_input",
        ]
    );
}

#[test]
fn identical_trees_give_identical_index_bytes() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    project(a.path());
    project(b.path());
    index(a.path());
    let opts = IndexOptions {
        threads: 1,
        ..IndexOptions::default()
    };
    index_with(b.path(), &opts);
    let read = |d: &Path| std::fs::read(d.join(".wo-index/index.json")).unwrap();
    assert_eq!(read(a.path()), read(b.path()));
}

#[test]
fn incremental_edit_add_delete_rename() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    project(root);
    let first = index(root);
    assert_eq!(first.files_chunked, 8);
    assert_eq!(first.files_reused, 0);

    // Unchanged tree: everything reused, same bytes.
    let before = std::fs::read(root.join(".wo-index/index.json")).unwrap();
    let second = index(root);
    assert_eq!(second.files_reused, 8);
    assert_eq!(second.files_chunked, 0);
    assert_eq!(
        before,
        std::fs::read(root.join(".wo-index/index.json")).unwrap()
    );

    // Edit (same size, immediately: the mtime shortcut must not hide it), add, delete, rename.
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    write(root, "README.md", readme.replace("demo", "DEMO"));
    write(root, "src/new.py", "def fresh_function():\n    return 1\n");
    std::fs::remove_file(root.join("notes.txt")).unwrap();
    std::fs::rename(root.join("src/lib.rs"), root.join("src/core.rs")).unwrap();
    let third = index(root);
    assert_eq!(third.files_chunked, 3, "README edit, new.py, core.rs");
    assert_eq!(third.files_reused, 5);
    assert_eq!(third.files_removed, 2, "notes.txt and lib.rs");

    let idx = Index::open(root).unwrap();
    assert!(idx.search(&Query::new("caching")).is_empty());
    assert_eq!(
        idx.search(&Query::new("fresh_function"))[0].path,
        "src/new.py"
    );
    assert_eq!(
        idx.search(&Query::new("tokenize_input"))[0].path,
        "src/core.rs"
    );
    assert!(!idx.data().chunks.iter().any(|c| c.path == "src/lib.rs"));
    let mut q = Query::new("project");
    q.path_prefix = Some("README.md".into());
    assert!(idx.search(&q)[0].snippet.contains("A DEMO project"));

    // The incremental result equals a from-scratch build of the same tree.
    let incremental = std::fs::read(root.join(".wo-index/index.json")).unwrap();
    let full = IndexOptions {
        full_rebuild: true,
        ..IndexOptions::default()
    };
    let rebuilt = index_with(root, &full);
    assert_eq!(rebuilt.files_reused, 0);
    assert_eq!(
        incremental,
        std::fs::read(root.join(".wo-index/index.json")).unwrap()
    );
}

#[test]
fn changed_caps_force_a_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    project(dir.path());
    index(dir.path());
    let opts = IndexOptions {
        chunking: ChunkingConfig {
            chunk_target_chars: 10,
            chunk_max_chars: 20,
            max_chunks_per_file: 50,
        },
        ..IndexOptions::default()
    };
    let r = index_with(dir.path(), &opts);
    assert_eq!(r.files_reused, 0);
    assert_eq!(r.rebuilt_because.as_deref(), Some("chunking caps changed"));
    let idx = Index::open(dir.path()).unwrap();
    assert!(
        idx.data()
            .chunks
            .iter()
            .all(|c| c.content.chars().count() <= 20)
    );
}

#[test]
fn size_caps_produce_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.txt", "a".repeat(100));
    write(root, "b.txt", "b".repeat(100));
    write(root, "c.txt", "c".repeat(100));
    write(root, "big.txt", "x".repeat(1000));
    let opts = IndexOptions {
        max_file_bytes: 500,
        max_total_bytes: 250,
        ..IndexOptions::default()
    };
    let r = index_with(root, &opts);
    assert!(has_warning(&r, "big.txt", WarningKind::FileTooLarge));
    assert!(has_warning(&r, "c.txt", WarningKind::TotalBytesExceeded));
    assert_eq!(paths(root), vec!["a.txt", "b.txt"]);

    let many = (0..30).map(|i| format!("para {i}\n\n")).collect::<String>();
    write(root, "many.txt", many);
    let opts = IndexOptions {
        chunking: ChunkingConfig {
            chunk_target_chars: 5,
            chunk_max_chars: 10,
            max_chunks_per_file: 7,
        },
        ..IndexOptions::default()
    };
    let r = index_with(root, &opts);
    assert!(has_warning(&r, "many.txt", WarningKind::TooManyChunks));
    let idx = Index::open(root).unwrap();
    assert_eq!(
        idx.data()
            .chunks
            .iter()
            .filter(|c| c.path == "many.txt")
            .count(),
        7
    );
}

#[test]
fn malformed_inputs_become_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "bad.json", "{\"a\": [1, 2,\n\"unterminated\n");
    write(root, "latin1.txt", b"caf\xe9 au lait\n");
    write(root, "huge.js", "x".repeat(30_000));
    write(root, "empty.md", "");
    write(root, "broken.rs", "fn (((( {{{{ ]]]]\n");
    let r = index(root);
    assert!(has_warning(&r, "bad.json", WarningKind::ParseFallback));
    assert!(has_warning(&r, "latin1.txt", WarningKind::InvalidUtf8));
    assert!(has_warning(&r, "huge.js", WarningKind::LongLine));
    let idx = Index::open(root).unwrap();
    let data = idx.data();
    assert!(data.chunks.iter().any(|c| c.path == "bad.json"));
    let latin = data.chunks.iter().find(|c| c.path == "latin1.txt").unwrap();
    assert!(latin.content.contains('\u{fffd}'));
    let huge: Vec<_> = data.chunks.iter().filter(|c| c.path == "huge.js").collect();
    assert_eq!(huge.len(), 4);
    assert!(huge.iter().all(|c| c.content.chars().count() <= 8000));
    assert!(
        data.files
            .iter()
            .any(|f| f.path == "empty.md" && f.chunk_count == 0)
    );
    assert!(data.chunks.iter().any(|c| c.path == "broken.rs"));
    // Warnings are stored in the index too, and survive an incremental run.
    assert!(
        data.warnings
            .iter()
            .any(|w| w.kind == WarningKind::LongLine)
    );
    let again = index(root);
    assert!(has_warning(&again, "huge.js", WarningKind::LongLine));
}

#[cfg(unix)]
#[test]
fn symlink_loops_are_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "sub/file.txt", "content here\n");
    std::os::unix::fs::symlink(root.join("sub"), root.join("sub/loop")).unwrap();
    std::os::unix::fs::symlink(root.join("sub/file.txt"), root.join("link.txt")).unwrap();

    let r = index(root);
    assert!(has_warning(&r, "sub/loop", WarningKind::Symlink));
    assert!(has_warning(&r, "link.txt", WarningKind::Symlink));
    assert_eq!(paths(root), vec!["sub/file.txt"]);

    let follow = IndexOptions {
        follow_symlinks: true,
        ..IndexOptions::default()
    };
    let r = index_with(root, &follow);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.kind == WarningKind::SymlinkLoop),
        "{:?}",
        r.warnings
    );
    assert!(paths(root).contains(&"link.txt".to_string()));
}

#[test]
fn progress_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    project(dir.path());
    let seen = std::sync::Mutex::new(Vec::new());
    index_directory(dir.path(), &IndexOptions::default(), &|p| {
        seen.lock().unwrap().push((p.phase, p.done, p.total));
    })
    .unwrap();
    let seen = seen.into_inner().unwrap();
    let chunking: Vec<_> = seen
        .iter()
        .filter(|(ph, _, _)| *ph == wo_index::Phase::Chunking)
        .collect();
    assert_eq!(chunking.len(), 9, "8 files + the binary one");
    assert!(chunking.iter().all(|(_, _, total)| *total == 9));
    assert!(chunking.iter().any(|(_, done, _)| *done == 9));
    assert_eq!(seen.first().unwrap().0, wo_index::Phase::Walking);
    assert_eq!(seen.last().unwrap().0, wo_index::Phase::Writing);
}

#[test]
fn errors_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let err = index_directory(&missing, &IndexOptions::default(), &|_| {}).unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
    let err = Index::open(dir.path()).unwrap_err();
    assert!(err.to_string().contains("index.json"), "{err}");
    write(dir.path(), ".wo-index/index.json", "{not json");
    let err = Index::open(dir.path()).unwrap_err();
    assert!(err.to_string().contains("corrupt"), "{err}");
    // A corrupt cache is rebuilt, not fatal.
    write(dir.path(), "a.txt", "hello\n");
    let r = index(dir.path());
    assert!(r.rebuilt_because.is_some());
    assert_eq!(r.files, 1);
}

#[test]
fn a_linked_or_device_cache_is_refused_never_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let (root, outside) = (dir.path().join("project"), dir.path().join("outside"));
    write(&root, "a.txt", "hello\n");
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, root.join(".wo-index")).unwrap();
    let err = index_directory(&root, &IndexOptions::default(), &|_| {}).unwrap_err();
    assert!(
        err.to_string().contains(".wo-index: is a symbolic link"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    let err = Index::open(&root).unwrap_err();
    assert!(
        err.to_string().contains(".wo-index: is a symbolic link"),
        "{err}"
    );
    // The index file itself linked to a device: refused, not read forever.
    std::fs::remove_file(root.join(".wo-index")).unwrap();
    index(&root);
    std::fs::remove_file(root.join(".wo-index/index.json")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", root.join(".wo-index/index.json")).unwrap();
    let err = Index::open(&root).unwrap_err();
    assert!(
        err.to_string().contains("index.json: is a symbolic link"),
        "{err}"
    );
}

#[test]
fn incremental_postings_match_a_full_build_after_shifting_edits() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    project(root);
    write(
        root,
        "a.md",
        "# A\n\nalpha words\n\n# B\n\nbeta words\n\n# C\n\ngamma words\n",
    );
    index(root);
    // Insert lines above unchanged sections (their ids stay, their lines and refs move),
    // change one section, and add a file that sorts before everything.
    write(
        root,
        "a.md",
        "intro\n\nmore intro\n\n# A\n\nalpha words\n\n# B\n\nbeta changed\n\n# C\n\ngamma words\n",
    );
    write(root, "0first.txt", "zeta first file\n");
    index(root);
    let incremental = std::fs::read(root.join(".wo-index/index.json")).unwrap();
    let idx = Index::open(root).unwrap();
    assert_eq!(idx.search(&Query::new("gamma"))[0].start_line, 13);
    assert_eq!(idx.search(&Query::new("zeta"))[0].chunk_ref, "c0001");
    let full = IndexOptions {
        full_rebuild: true,
        ..IndexOptions::default()
    };
    index_with(root, &full);
    assert_eq!(
        incremental,
        std::fs::read(root.join(".wo-index/index.json")).unwrap()
    );
}
