//! The in-memory entry points (`index_files`, `render_pack`) against the directory ones: the
//! same tree gives the same `index.json` and export bytes, ignore rules select the same files,
//! a previous index is reused by content hash, and bad paths are warnings.

mod common;

use std::path::Path;

use common::{project, write};
use wo_index::{
    ChunkingConfig, Index, IndexFile, IndexOptions, PackOptions, TokenCounter, WarningKind,
    index_directory, index_files, pack, parse_index_file, render_pack,
};

/// Every file under `root` (hidden ones and the cache folder included: selection is the
/// entry point's job), as `(relative path, bytes)`.
fn read_tree(root: &Path) -> Vec<(String, Vec<u8>)> {
    fn visit(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                visit(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).unwrap().to_str().unwrap();
                out.push((rel.replace('\\', "/"), std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    visit(root, root, &mut out);
    out
}

fn native_index(root: &Path, opts: &IndexOptions) -> Vec<u8> {
    index_directory(root, opts, &|_| {}).unwrap();
    std::fs::read(root.join(".wo-index/index.json")).unwrap()
}

fn memory_index(
    files: &[(String, Vec<u8>)],
    prev: Option<IndexFile>,
) -> (Vec<u8>, wo_index::BuildReport) {
    let (file, report) = index_files(files, prev, &IndexOptions::default(), &|_| {});
    (serde_json::to_vec(&file).unwrap(), report)
}

#[test]
fn the_same_tree_gives_the_same_index_bytes() {
    let dir = tempfile::tempdir().unwrap();
    project(dir.path());
    let files = read_tree(dir.path());
    let native = native_index(dir.path(), &IndexOptions::default());
    let (memory, report) = memory_index(&files, None);
    assert_eq!(
        String::from_utf8(memory).unwrap(),
        String::from_utf8(native).unwrap()
    );
    assert_eq!(report.files, 8);
    assert_eq!(report.files_chunked, 8);
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.path == "blob.dat" && w.kind == WarningKind::Binary)
    );
    // The order files come in does not matter.
    let mut reversed = files.clone();
    reversed.reverse();
    assert_eq!(
        memory_index(&reversed, None).0,
        memory_index(&files, None).0
    );
}

#[test]
fn ignore_rules_select_what_the_walk_selects() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        ".gitignore",
        "*.log\n!keep.log\nbuild/\n/anchored.txt\n",
    );
    write(root, "keep.log", "kept\n");
    write(root, "drop.log", "dropped\n");
    write(root, "anchored.txt", "root only\n");
    write(root, "deep/anchored.txt", "not anchored here\n");
    write(root, "build/out.txt", "ignored dir\n");
    write(root, "build/keep.log", "inside an ignored dir\n");
    write(root, "src/build/gen.txt", "build/ matches at any depth\n");
    write(root, "sub/.gitignore", "secret.txt\n!again.log\n");
    write(root, "sub/secret.txt", "hidden\n");
    write(root, "sub/again.log", "re-included by the deeper file\n");
    write(root, "sub/open.txt", "visible\n");
    write(root, "other/.ignore", "generated.txt\n!note.log\n");
    write(root, "other/generated.txt", "gen\n");
    write(root, "other/note.log", ".ignore beats .gitignore\n");
    write(root, ".hidden/file.txt", "dot dir\n");
    write(root, ".git/config", "[core]\n");
    write(root, "a.md", "# A\n");
    let files = read_tree(root);
    for opts in [
        IndexOptions::default(),
        IndexOptions {
            respect_gitignore: false,
            ..IndexOptions::default()
        },
        IndexOptions {
            include_hidden: true,
            ..IndexOptions::default()
        },
    ] {
        let native = native_index(
            root,
            &IndexOptions {
                full_rebuild: true,
                ..opts.clone()
            },
        );
        let _ = std::fs::remove_dir_all(root.join(".wo-index"));
        let files: Vec<_> = files
            .iter()
            .filter(|(p, _)| !p.starts_with(".wo-index/"))
            .cloned()
            .collect();
        let (file, _) = index_files(&files, None, &opts, &|_| {});
        let memory = serde_json::to_vec(&file).unwrap();
        let names = |bytes: &[u8]| -> Vec<String> {
            let f: IndexFile = serde_json::from_slice(bytes).unwrap();
            f.files.into_iter().map(|f| f.path).collect()
        };
        assert_eq!(names(&memory), names(&native), "{opts:?}");
        assert_eq!(memory, native, "{opts:?}");
    }
    let (file, _) = index_files(&files, None, &IndexOptions::default(), &|_| {});
    let names: Vec<&str> = file.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        names,
        [
            "a.md",
            "deep/anchored.txt",
            "keep.log",
            "other/note.log",
            "sub/again.log",
            "sub/open.txt"
        ]
    );
}

#[test]
fn a_previous_index_is_reused_for_unchanged_files() {
    let dir = tempfile::tempdir().unwrap();
    project(dir.path());
    let mut files = read_tree(dir.path());
    let (first, _) = memory_index(&files, None);
    let previous = parse_index_file(&first, Path::new("index.json")).unwrap();

    let (again, report) = memory_index(&files, Some(previous.clone()));
    assert_eq!(again, first);
    assert_eq!((report.files_reused, report.files_chunked), (8, 0));

    let edited = "# Guide\n\nRewritten guide about tokens.\n";
    files
        .iter_mut()
        .find(|(p, _)| p == "docs/guide.md")
        .unwrap()
        .1 = edited.into();
    files.retain(|(p, _)| p != "notes.txt");
    let (incremental, report) = memory_index(&files, Some(previous));
    assert_eq!(
        (
            report.files_reused,
            report.files_chunked,
            report.files_removed
        ),
        (6, 1, 1)
    );
    // Equal to a fresh build of the changed tree, and to the native index of it.
    assert_eq!(incremental, memory_index(&files, None).0);
    write(dir.path(), "docs/guide.md", edited);
    std::fs::remove_file(dir.path().join("notes.txt")).unwrap();
    assert_eq!(
        incremental,
        native_index(dir.path(), &IndexOptions::default())
    );

    // Other chunking caps: the previous index is not used, and the report says why.
    let caps = IndexOptions {
        chunking: ChunkingConfig {
            chunk_target_chars: 100,
            ..ChunkingConfig::default()
        },
        ..IndexOptions::default()
    };
    let prev = parse_index_file(&incremental, Path::new("index.json")).unwrap();
    let (_, report) = index_files(&files, Some(prev), &caps, &|_| {});
    assert_eq!(report.files_reused, 0);
    assert_eq!(
        report.rebuilt_because.as_deref(),
        Some("chunking caps changed")
    );
}

#[test]
fn bad_paths_are_warnings_naming_the_path() {
    let files: Vec<(String, Vec<u8>)> = [
        "/abs.md",
        "../up.md",
        "a//b.md",
        "a/./b.md",
        "win\\path.md",
        "",
        "ok.md",
    ]
    .iter()
    .map(|p| (p.to_string(), b"# T\n".to_vec()))
    .collect();
    let (file, report) = index_files(&files, None, &IndexOptions::default(), &|_| {});
    assert_eq!(file.files.len(), 1);
    assert_eq!(file.files[0].path, "ok.md");
    for bad in [
        "/abs.md",
        "../up.md",
        "a//b.md",
        "a/./b.md",
        "win\\path.md",
        "",
    ] {
        let w = report
            .warnings
            .iter()
            .find(|w| w.path == bad)
            .unwrap_or_else(|| panic!("{bad:?}"));
        assert_eq!(w.kind, WarningKind::BadPath);
        assert!(w.message.ends_with("skipped"), "{}", w.message);
    }
}

#[test]
fn a_corrupt_or_other_version_index_is_an_error_naming_it() {
    let err = parse_index_file(b"{not json", Path::new("saved/index.json")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("saved/index.json: corrupt index"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    project(dir.path());
    let mut value: serde_json::Value =
        serde_json::from_slice(&memory_index(&read_tree(dir.path()), None).0).unwrap();
    value["version"] = 1.into();
    let err = parse_index_file(value.to_string().as_bytes(), Path::new("index.json")).unwrap_err();
    assert!(err.to_string().contains("index version 1"), "{err}");
}

#[test]
fn exports_render_in_memory_as_pack_writes_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("demo");
    project(&root);
    let files = read_tree(&root);
    index_directory(&root, &IndexOptions::default(), &|_| {}).unwrap();
    let out = dir.path().join("out");
    pack(&Index::open(&root).unwrap(), &out, &PackOptions::default()).unwrap();

    let (file, _) = index_files(&files, None, &IndexOptions::default(), &|_| {});
    let index = Index::from_file(Path::new("demo"), file);
    let opts = PackOptions {
        project_name: Some("demo".into()),
        ..PackOptions::default()
    };
    let read = |c: &wo_index::Chunk| {
        files
            .iter()
            .find(|(p, _)| *p == c.path)
            .map(|(_, b)| b.clone())
            .ok_or_else(|| "not given".to_string())
    };
    let rendered = render_pack(&index, &opts, &mut TokenCounter::in_memory(), &read).unwrap();
    let written = read_tree(&out);
    assert_eq!(rendered.files.len(), written.len());
    for (name, bytes) in &rendered.files {
        let disk = &written
            .iter()
            .find(|(p, _)| p == name)
            .unwrap_or_else(|| panic!("{name}"))
            .1;
        assert!(disk == bytes, "{name} differs");
    }
    assert!(rendered.files.iter().any(|(n, _)| n == "export.zip"));

    // A missing image is a warning, not a failure.
    let none = |_: &wo_index::Chunk| Err("not given".to_string());
    let rendered = render_pack(&index, &opts, &mut TokenCounter::in_memory(), &none).unwrap();
    assert_eq!(
        rendered.report.warnings,
        ["img/logo.png: cannot read image: not given"]
    );
}
