//! The search sidecar (`search_root`) answers exactly as loading the whole index does — over
//! random indexes and queries — and a missing, stale, damaged or truncated sidecar is rebuilt,
//! never believed; errors are those of `Index::open`.

mod common;

use std::path::Path;

use proptest::prelude::*;
use wo_index::{
    Index, IndexError, IndexFile, IndexOptions, Kind, Query, SIDECAR_FILE, SidecarUse, index_files,
    search_root,
};

const WORDS: &[&str] = &[
    "alpha",
    "beta",
    "gamma",
    "delta",
    "parser",
    "config",
    "token",
    "login",
    "user",
    "cache",
    "render",
    "search",
    "index",
    "kiln",
    "firing",
    "schedule",
    "the",
    "and",
    "of",
    "src",
    "getValue",
    "set_value",
    "HTTP2",
    "résumé",
    "naïve",
    "x",
    "a1",
];

fn sidecar(root: &Path) -> std::path::PathBuf {
    root.join(".wo-index").join(SIDECAR_FILE)
}

/// Writes `file` as `wo index` would (the same bytes) to `<root>/.wo-index/index.json`,
/// through a rename, as the index writer replaces it.
fn put_index(root: &Path, file: &IndexFile) {
    let dir = root.join(".wo-index");
    std::fs::create_dir_all(&dir).unwrap();
    let tmp = dir.join("index.json.tmp");
    std::fs::write(&tmp, serde_json::to_vec(file).unwrap()).unwrap();
    std::fs::rename(tmp, dir.join("index.json")).unwrap();
}

fn build(files: &[(String, String)]) -> IndexFile {
    let files: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|(p, t)| (p.clone(), t.clone().into_bytes()))
        .collect();
    index_files(&files, None, &IndexOptions::default(), &|_| {}).0
}

/// What the full load answers, as JSON (scores compared to the bit through their text).
fn expected(root: &Path, file: &IndexFile, q: &Query) -> String {
    serde_json::to_string(&Index::from_file(root, file.clone()).search(q)).unwrap()
}

fn via_sidecar(root: &Path, q: &Query) -> (String, SidecarUse) {
    let (hits, used) = search_root(root, q).unwrap();
    (serde_json::to_string(&hits).unwrap(), used)
}

fn mixed_files() -> Vec<(String, String)> {
    let mut files = Vec::new();
    for i in 0..40 {
        let w = |k: usize| WORDS[(i * 7 + k * 3) % WORDS.len()];
        files.push((
            format!("docs/d{i}.md"),
            format!(
                "# {} {}\n\nSome {} text about {}.\n\n## {}\n\n{} {} {}\n",
                w(0),
                w(1),
                w(2),
                w(3),
                w(4),
                w(5),
                w(6),
                w(0)
            ),
        ));
        files.push((
            format!("src/m{i}.rs"),
            format!(
                "/// {} docs\npub fn {}_{i}() -> u32 {{ {} }}\n\npub struct S{i};\nimpl S{i} {{\n    pub fn {}(&self) {{}}\n}}\n",
                w(1),
                w(2).to_lowercase().replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
                i,
                w(3).to_lowercase().replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
            ),
        ));
    }
    files.push((
        "notes.txt".into(),
        "kiln firing schedule\n\nthe cache of src\n".into(),
    ));
    files
}

fn queries() -> Vec<Query> {
    let mut out = Vec::new();
    for text in [
        "kiln",
        "parser config",
        "src",
        "login user user",
        "",
        "nothing_here",
        "S3",
    ] {
        out.push(Query::new(text));
        let mut q = Query::new(text);
        q.path_prefix = Some("./src/".into());
        out.push(q);
        let mut q = Query::new(text);
        q.kind = Some(Kind::Markdown);
        q.heading_prefix = Some("AL".into());
        q.limit = 3;
        out.push(q);
        let mut q = Query::new(text);
        q.symbol_prefix = Some("s1".into());
        q.limit = 50;
        out.push(q);
    }
    out
}

#[test]
fn a_missing_sidecar_is_built_then_used_with_the_same_answers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let file = build(&mixed_files());
    put_index(root, &file);
    let mut first = true;
    let mut found = 0;
    for q in queries() {
        let (got, used) = via_sidecar(root, &q);
        assert_eq!(got, expected(root, &file, &q), "query {q:?}");
        found += usize::from(got != "[]");
        if first {
            assert_eq!(
                used,
                SidecarUse::Rebuilt {
                    reason: "missing".into()
                }
            );
            assert!(sidecar(root).is_file());
            first = false;
        } else {
            assert_eq!(used, SidecarUse::Used, "query {q:?}");
        }
    }
    assert!(found > 15, "only {found} queries found anything");
}

#[test]
fn a_stale_sidecar_is_rebuilt_for_the_new_index() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let old = build(&mixed_files());
    put_index(root, &old);
    let q = Query::new("kiln schedule");
    let _ = via_sidecar(root, &q);
    let mut files = mixed_files();
    files.push((
        "more.md".into(),
        "# Kiln\n\nkiln kiln kiln schedule\n".into(),
    ));
    let new = build(&files);
    put_index(root, &new);
    let (got, used) = via_sidecar(root, &q);
    assert_eq!(got, expected(root, &new, &q));
    assert_ne!(
        got,
        expected(root, &old, &q),
        "the test needs the answers to differ"
    );
    match used {
        SidecarUse::Rebuilt { reason } => assert!(reason.starts_with("stale"), "{reason}"),
        other => panic!("expected a rebuild, got {other:?}"),
    }
    assert_eq!(via_sidecar(root, &q).1, SidecarUse::Used);
}

#[test]
fn an_old_sidecar_kept_beside_a_new_index_is_not_believed() {
    // A sidecar copied from another index (same size of index.json is not enough: the key
    // also holds the inode, times and a CRC of the index's start).
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let a = build(&mixed_files());
    put_index(root, &a);
    let q = Query::new("firing");
    let _ = via_sidecar(root, &q);
    let kept = std::fs::read(sidecar(root)).unwrap();
    let mut files = mixed_files();
    files[0].1 = files[0].1.replace("Some", "Sane");
    let b = build(&files);
    put_index(root, &b);
    std::fs::write(sidecar(root), &kept).unwrap();
    let (got, used) = via_sidecar(root, &Query::new("sane"));
    assert_eq!(got, expected(root, &b, &Query::new("sane")));
    assert!(matches!(used, SidecarUse::Rebuilt { .. }), "{used:?}");
}

#[test]
fn damaged_sidecars_are_refused_never_believed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let file = build(&mixed_files());
    put_index(root, &file);
    let qs = [
        Query::new("kiln firing schedule"),
        {
            let mut q = Query::new("parser src");
            q.path_prefix = Some("src".into());
            q
        },
        {
            let mut q = Query::new("");
            q.heading_prefix = Some("b".into());
            q
        },
    ];
    let want: Vec<String> = qs.iter().map(|q| expected(root, &file, q)).collect();
    let _ = via_sidecar(root, &qs[0]);
    let good = std::fs::read(sidecar(root)).unwrap();
    let mut refused = 0;
    // Every byte of the header, the tables at the end, and a spread over the rest.
    let step = (good.len() / 150).max(1);
    let positions = (0..good.len()).filter(|&i| i < 180 || i % step == 0 || i + 60 > good.len());
    for pos in positions {
        let mut bad = good.clone();
        bad[pos] ^= 0x5a;
        std::fs::write(sidecar(root), &bad).unwrap();
        for (q, want) in qs.iter().zip(&want) {
            let (got, used) = via_sidecar(root, q);
            assert_eq!(&got, want, "byte {pos} flipped, query {q:?}");
            if used != SidecarUse::Used {
                refused += 1;
                // Rebuilt: the next search uses it; damage it again for the next query.
                std::fs::write(sidecar(root), &bad).unwrap();
            }
        }
    }
    assert!(refused > 150, "damage was noticed only {refused} times");
}

#[test]
fn truncated_and_empty_sidecars_are_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let file = build(&mixed_files());
    put_index(root, &file);
    let q = Query::new("login parser");
    let want = expected(root, &file, &q);
    let _ = via_sidecar(root, &q);
    let good = std::fs::read(sidecar(root)).unwrap();
    for len in [0, 1, 8, 100, 199, 200, 201, good.len() / 2, good.len() - 1] {
        std::fs::write(sidecar(root), &good[..len]).unwrap();
        let (got, used) = via_sidecar(root, &q);
        assert_eq!(got, want, "truncated to {len}");
        assert!(
            matches!(used, SidecarUse::Rebuilt { .. }),
            "{len}: {used:?}"
        );
        assert_eq!(
            std::fs::read(sidecar(root)).unwrap(),
            good,
            "rebuilt to the same bytes"
        );
    }
    // Longer than written: a sidecar with bytes appended still answers only from checked
    // ranges.
    let mut longer = good.clone();
    longer.extend_from_slice(b"trailing garbage");
    std::fs::write(sidecar(root), &longer).unwrap();
    assert_eq!(via_sidecar(root, &q).0, want);
}

#[test]
fn an_unwritable_sidecar_still_answers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let file = build(&mixed_files());
    put_index(root, &file);
    // A directory where the sidecar goes: cannot be read as one, nor replaced.
    std::fs::create_dir_all(sidecar(root).join("x")).unwrap();
    let q = Query::new("cache");
    let (got, used) = via_sidecar(root, &q);
    assert_eq!(got, expected(root, &file, &q));
    assert!(matches!(used, SidecarUse::NotWritten { .. }), "{used:?}");
    assert!(
        sidecar(root).join("x").is_dir(),
        "nothing of the user's removed"
    );
}

#[test]
fn errors_are_those_of_the_full_load() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let q = Query::new("x");
    let e = search_root(root, &q).unwrap_err();
    assert!(matches!(e, IndexError::NoIndex { .. }), "{e}");
    assert_eq!(e.to_string(), Index::open(root).unwrap_err().to_string());
    std::fs::create_dir_all(root.join(".wo-index")).unwrap();
    let file = build(&mixed_files());
    let good = serde_json::to_vec(&file).unwrap();
    let mut old_version = file.clone();
    old_version.version = 1;
    let mut text_not_string = serde_json::to_value(&file).unwrap();
    text_not_string["chunks"][0]["content"] = serde_json::json!(5);
    for bad in [
        b"".to_vec(),
        b"{".to_vec(),
        good[..good.len() / 2].to_vec(),
        serde_json::to_vec(&old_version).unwrap(),
        serde_json::to_vec(&text_not_string).unwrap(),
        b"{\"version\":2}".to_vec(),
    ] {
        std::fs::write(root.join(".wo-index/index.json"), &bad).unwrap();
        let e = search_root(root, &q).unwrap_err();
        assert!(matches!(e, IndexError::Corrupt { .. }), "{e}");
        assert_eq!(e.to_string(), Index::open(root).unwrap_err().to_string());
    }
}

#[test]
fn odd_but_readable_indexes_answer_alike() {
    // Hand-made indexes the writer never produces: postings past the last chunk, doc_lens
    // shorter than the chunks, a term with an odd-length list, escapes in chunk text.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut file = build(&mixed_files());
    file.doc_lens.truncate(file.doc_lens.len() / 2);
    file.inverted_index
        .insert("kiln".into(), vec![0, 3, 5, 1, 100_000, 2, 7]);
    file.inverted_index
        .insert("parser".into(), vec![1, u32::MAX, u32::MAX, 2, 0, 0]);
    file.chunks[0].content = "quote \" backslash \\ tab \t newline \n kiln é 😀 \u{1}".into();
    put_index(root, &file);
    for q in queries() {
        assert_eq!(via_sidecar(root, &q).0, expected(root, &file, &q), "{q:?}");
    }
}

fn word() -> impl Strategy<Value = String> {
    prop::sample::select(WORDS).prop_map(str::to_string)
}

fn file_strategy() -> impl Strategy<Value = (String, String)> {
    let name = prop::sample::select(&["a", "b", "src/c", "src/d", "docs/e", "f/g/h"][..]);
    let ext = prop::sample::select(&["md", "rs", "py", "txt", "json", "js", "html"][..]);
    (name, ext, prop::collection::vec((word(), 0u8..6), 1..60)).prop_map(|(n, e, ws)| {
        let mut text = String::new();
        for (w, shape) in ws {
            match (e, shape) {
                ("md", 0) => text.push_str(&format!("\n# {w}\n")),
                ("md", 1) => text.push_str(&format!("\n## {w} {w}\n")),
                ("rs", 0) => text.push_str(&format!("\npub fn f_{}() {{}}\n", w.len())),
                ("py", 0) => text.push_str(&format!("\ndef g_{}():\n    pass\n", w.len())),
                ("js", 0) => text.push_str(&format!("\nfunction h{}() {{}}\n", w.len())),
                ("html", 0) => text.push_str(&format!("<h2>{w}</h2>\n")),
                (_, 2) => text.push_str("\n\n"),
                _ => {
                    text.push_str(&w);
                    text.push(' ');
                }
            }
        }
        (format!("{n}.{e}"), text)
    })
}

fn query_strategy() -> impl Strategy<Value = Query> {
    (
        prop::collection::vec(word(), 0..4),
        0usize..20,
        prop::option::of(prop::sample::select(
            &["src", "./src/", "docs/e.md", "f", "zz"][..],
        )),
        prop::option::of(prop::sample::select(&Kind::ALL[..])),
        prop::option::of(prop::sample::select(&["A", "be", "", "kiln"][..])),
        prop::option::of(prop::sample::select(&["f", "G_", "h", "S"][..])),
    )
        .prop_map(|(ws, limit, path, kind, heading, symbol)| Query {
            text: ws.join(" "),
            limit,
            path_prefix: path.map(str::to_string),
            kind,
            heading_prefix: heading.map(str::to_string),
            symbol_prefix: symbol.map(str::to_string),
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Over random trees and queries, the sidecar's answers are the full load's, to the byte
    /// of their JSON — first when it is built, then when it is read from disk.
    #[test]
    fn the_sidecar_answers_as_the_full_load(
        files in prop::collection::vec(file_strategy(), 1..12),
        qs in prop::collection::vec(query_strategy(), 1..8),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let file = build(&files);
        put_index(root, &file);
        for (i, q) in qs.iter().enumerate() {
            let (got, used) = via_sidecar(root, q);
            prop_assert_eq!(&got, &expected(root, &file, q), "query {:?}", q);
            prop_assert_eq!(used == SidecarUse::Used, i > 0);
        }
    }
}
