//! Fixture loading shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// One fixture file and, for the failing kinds, the issue it must produce.
pub struct Fixture {
    pub name: String,
    pub bytes: Vec<u8>,
    /// `(pointer, rule)` from the sidecar `NAME.expect` (`(root)` is `""`).
    pub expect: Option<(String, String)>,
}

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixtures_dir(kind: &str) -> PathBuf {
    crate_dir().join("tests/fixtures").join(kind)
}

/// All `*.json` fixtures of one kind, sorted by name, with their `.expect`
/// sidecars. Panics on a sidecar without a fixture, or the other way round
/// when `with_expect` is set.
pub fn load(kind: &str, with_expect: bool) -> Vec<Fixture> {
    let dir = fixtures_dir(kind);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut out = Vec::new();
    for file in &names {
        if let Some(stem) = file.strip_suffix(".expect") {
            assert!(
                names.contains(&format!("{stem}.json")),
                "{kind}/{file} has no fixture"
            );
            assert!(with_expect, "{kind}/{file}: this kind takes no .expect");
            continue;
        }
        let stem = file
            .strip_suffix(".json")
            .unwrap_or_else(|| panic!("{kind}/{file}: unexpected file"));
        let bytes = std::fs::read(dir.join(file)).unwrap();
        let expect = with_expect.then(|| {
            let path = dir.join(format!("{stem}.expect"));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let line = text.trim_end_matches('\n');
            let (pointer, rule) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("{}: want `POINTER RULE`", path.display()));
            let pointer = if pointer == "(root)" { "" } else { pointer };
            (pointer.to_owned(), rule.to_owned())
        });
        out.push(Fixture {
            name: format!("{kind}/{stem}"),
            bytes,
            expect,
        });
    }
    out
}

/// `(pointer, rule)` pairs of a list of issues.
pub fn pairs(issues: &[wo_format::Issue]) -> Vec<(String, String)> {
    issues
        .iter()
        .map(|i| (i.pointer.clone(), i.rule.to_owned()))
        .collect()
}

pub mod strategies;

/// proptest case count: `default` (kept modest so the suite stays fast in
/// debug builds), or `PROPTEST_CASES` when set, for a deeper run.
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
