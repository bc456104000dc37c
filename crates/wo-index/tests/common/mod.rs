// Shared fixture builder for the integration tests (included with `mod common;`).
#![allow(dead_code)]

use std::path::Path;

/// A tiny PNG (1×1, with NUL bytes like any real image).
pub const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89,
];

pub fn write(root: &Path, rel: &str, bytes: impl AsRef<[u8]>) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// Writes a small mixed project.
pub fn project(root: &Path) {
    write(
        root,
        "README.md",
        "# Demo\n\nA demo project for search.\n\n## Usage\n\nCall `loginUser` to sign in.\n",
    );
    write(
        root,
        "docs/guide.md",
        "# Guide\n\nIntro.\n\n## Authentication\n\nTokens expire hourly.\n\n### Refresh\n\nUse the refresh endpoint.\n\n# Appendix\n\nMisc notes.\n",
    );
    write(
        root,
        "src/app.js",
        "import x from 'y';\n\nexport function loginUser(name) {\n  return name;\n}\n\nfunction logoutUser(session) {\n  session.close();\n}\n",
    );
    write(
        root,
        "src/lib.rs",
        "pub struct Parser;\n\nimpl Parser {\n    pub fn parse_config(&self) {}\n}\n\npub fn tokenize_input(s: &str) -> Vec<String> {\n    vec![s.to_string()]\n}\n",
    );
    write(
        root,
        "data/config.json",
        "{\n  \"name\": \"demo\",\n  \"features\": [\"search\", \"export\"]\n}\n",
    );
    write(
        root,
        "site/index.html",
        "<html><head><script>var hidden = 1;</script></head><body>\n<h1>Welcome</h1>\n<p>Static site page.</p>\n</body></html>\n",
    );
    write(
        root,
        "notes.txt",
        "Plain notes.\n\nSecond paragraph about caching.\n",
    );
    write(root, "img/logo.png", PNG);
    write(root, "blob.dat", b"\x00\x01\x02binary\x00");
    write(root, ".gitignore", "build/\n*.log\n");
    write(root, "build/out.js", "function ignoredBuild() {}\n");
    write(root, "debug.log", "ignored log\n");
}

/// Copies a directory tree (files only).
pub fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// All files under `dir` as (relative path, bytes), sorted.
pub fn snapshot_dir(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    fn rec(base: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let p = entry.path();
            if entry.file_type().unwrap().is_dir() {
                rec(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    rec(dir, dir, &mut out);
    out.sort();
    out
}

/// `index.json` and every pack file (full layout with both zips, named
/// `project_name`) of `root`, indexed with `opts`: what the golden tests pin.
pub fn index_and_pack(
    root: &Path,
    opts: &wo_index::IndexOptions,
    project_name: &str,
) -> Vec<(String, Vec<u8>)> {
    use wo_index::{Index, Layout, PackOptions, index_directory, pack};
    index_directory(root, opts, &|_| {}).expect("index");
    let mut out = vec![(
        "index.json".to_string(),
        std::fs::read(root.join(".wo-index/index.json")).unwrap(),
    )];
    let pack_dir = tempfile::tempdir().unwrap();
    let index = Index::open(root).unwrap();
    let pack_opts = PackOptions {
        layout: Layout::Full,
        zips: true,
        project_name: Some(project_name.into()),
        ..PackOptions::default()
    };
    pack(&index, pack_dir.path(), &pack_opts).expect("pack");
    for (rel, bytes) in snapshot_dir(pack_dir.path()) {
        out.push((format!("pack/{rel}"), bytes));
    }
    out
}

/// One line per file: a digest prefix, the length, the name.
pub fn digests(files: &[(String, Vec<u8>)]) -> String {
    files
        .iter()
        .map(|(name, bytes)| {
            format!(
                "{} {:>7} {name}\n",
                &wo_index::sha256_hex(bytes)[..16],
                bytes.len()
            )
        })
        .collect()
}
