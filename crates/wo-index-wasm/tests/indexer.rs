//! The ingestion page's calls, natively: an `Indexer` fed a tree gives the
//! `index.json` and exports `wo index` / `wo pack` write for it, reuses a
//! previous index, answers search/outline/symbols/context, and refuses bad
//! arguments with a message naming them. The browser suite runs the same
//! calls through the compiled module.

use std::path::Path;

use serde_json::Value;
use wo_index::{Index, IndexOptions, Layout, PackOptions, index_directory, pack};
use wo_index_wasm::Indexer;

fn tree() -> Vec<(&'static str, &'static [u8])> {
    vec![
        (
            "README.md",
            b"# Demo\n\nCall `loginUser` to sign in.\n\n## Usage\n\nRun it.\n",
        ),
        (
            "src/app.ts",
            b"export function loginUser(name: string): string {\n  return name;\n}\n",
        ),
        (
            "src/util.js",
            b"function logoutUser(s) {\n  s.close();\n}\n",
        ),
        (
            "data/config.json",
            b"{\n  \"name\": \"demo\",\n  \"features\": [\"search\"]\n}\n",
        ),
        (
            "site/index.html",
            b"<html><body><h1>Welcome</h1><p>Static page.</p></body></html>\n",
        ),
        ("notes.txt", b"Plain notes about caching.\n"),
        ("img/logo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR"),
        (".gitignore", b"*.log\n"),
        ("debug.log", b"ignored\n"),
    ]
}

fn write_tree(root: &Path) {
    for (p, b) in tree() {
        let path = root.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b).unwrap();
    }
}

fn indexer() -> Indexer {
    let mut ix = Indexer::new("demo");
    for (p, b) in tree() {
        ix.add(p.to_string(), b.to_vec());
    }
    ix
}

#[test]
fn index_and_exports_equal_wo_index_and_wo_pack() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("demo");
    write_tree(&root);
    index_directory(&root, &IndexOptions::default(), &|_| {}).unwrap();
    let out = dir.path().join("out");
    let opts = PackOptions {
        layout: Layout::Full,
        ..PackOptions::default()
    };
    pack(&Index::open(&root).unwrap(), &out, &opts).unwrap();

    let mut ix = indexer();
    let report: Value = serde_json::from_str(&ix.build(None)).unwrap();
    assert_eq!(report["files"], 7);
    assert_eq!(
        ix.index_json().unwrap(),
        std::fs::read_to_string(root.join(".wo-index/index.json")).unwrap()
    );
    let rendered: Value = serde_json::from_str(&ix.render_exports("full").unwrap()).unwrap();
    let names: Vec<&str> = rendered["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f[0].as_str().unwrap())
        .collect();
    for name in [
        "llm.md",
        "manifest.llm.tsv",
        "chunks/c0001.md",
        "export.zip",
        "images/img/logo.png",
    ] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
    for name in names {
        assert!(
            ix.export_file(name).unwrap() == std::fs::read(out.join(name)).unwrap(),
            "{name} differs"
        );
    }
}

#[test]
fn a_second_build_reuses_unchanged_files() {
    let mut ix = indexer();
    ix.build(None);
    let first = ix.index_json().unwrap();
    let mut again = Indexer::new("demo");
    for (p, b) in tree() {
        let b = if p == "notes.txt" {
            b"Plain notes, edited.\n".as_slice()
        } else {
            b
        };
        again.add(p.to_string(), b.to_vec());
    }
    let report: Value = serde_json::from_str(&again.build(Some(first))).unwrap();
    assert_eq!(
        (
            report["files_reused"].as_u64(),
            report["files_chunked"].as_u64()
        ),
        (Some(6), Some(1))
    );
    // A previous index that cannot be used is rebuilt from scratch, with the reason.
    let mut third = indexer();
    let report: Value = serde_json::from_str(&third.build(Some("{oops".into()))).unwrap();
    assert_eq!(report["files_reused"], 0);
    assert!(
        report["rebuilt_because"]
            .as_str()
            .unwrap()
            .starts_with("previous index.json: corrupt index")
    );
}

#[test]
fn search_outline_symbols_and_context() {
    let mut ix = indexer();
    ix.build(None);
    let hits: Value =
        serde_json::from_str(&ix.search(r#"{"text":"loginUser","kind":"ts"}"#).unwrap()).unwrap();
    let hits = hits.as_array().unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0]["path"], "src/app.ts");
    let outline: Value = serde_json::from_str(&ix.outline("README.md").unwrap()).unwrap();
    assert_eq!(outline[0]["heading"], "Demo");
    let symbols: Value = serde_json::from_str(&ix.symbols("src").unwrap()).unwrap();
    assert!(
        symbols
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["symbol"] == "logoutUser"),
        "{symbols}"
    );
    let context: Value =
        serde_json::from_str(&ix.context_chunks("how do I call loginUser").unwrap()).unwrap();
    assert!(context[0]["id"].as_str().unwrap().starts_with("chunk:"));
    assert!(context[0]["label"].as_str().unwrap().contains(':'));
    let chunk: Value = serde_json::from_str(&ix.chunk("c0001").unwrap()).unwrap();
    assert_eq!(chunk["ref"], "c0001");
    assert_eq!(ix.chunk("c9999").unwrap(), "null");
}

#[test]
fn bad_arguments_are_refused_naming_them() {
    let mut ix = Indexer::new("demo");
    assert!(ix.search("{}").unwrap_err().contains("no index yet"));
    assert!(
        ix.load("[]")
            .unwrap_err()
            .starts_with("index_json: corrupt index")
    );
    ix.build(None);
    assert!(
        ix.search(r#"{"text":"x","kind":"cobol"}"#)
            .unwrap_err()
            .starts_with("query/kind")
    );
    assert!(
        ix.search(r#"{"txt":"x"}"#)
            .unwrap_err()
            .starts_with("query:")
    );
    assert!(ix.render_exports("zip").unwrap_err().starts_with("layout:"));
    assert!(
        ix.export_file("llm.md")
            .unwrap_err()
            .contains("renderExports")
    );
    ix.render_exports("auto").unwrap();
    assert!(ix.export_file("nope.md").unwrap_err().starts_with("name:"));
}
