//! Helpers shared by the integration tests.
#![allow(dead_code)] // each test binary uses its own subset

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use time::macros::offset;
use wo_format::{Message, Timestamp};
use wo_interop::{ImportOptions, LocalOffset};

pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// Explicit options so results do not depend on the machine.
pub fn opts() -> ImportOptions {
    ImportOptions {
        username: "alec".into(),
        assistant_name: "local-model".into(),
        offset: LocalOffset::Fixed(offset!(+1)),
        fallback_time: Some(Timestamp::parse("2025-01-01T00:00:00Z").unwrap()),
        progress: Default::default(),
    }
}

/// Every file (bytes) and folder under `root`, by relative path.
pub fn tree(root: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Option<Vec<u8>>>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            out.insert(format!("{rel}/"), None);
            walk(root, &p, out);
        } else {
            out.insert(rel, Some(std::fs::read(&p).unwrap()));
        }
    }
}

/// Asserts two trees are identical, naming the first difference.
pub fn assert_same_tree(expected: &Path, actual: &Path) {
    let (a, b) = (tree(expected), tree(actual));
    for (k, v) in &a {
        match b.get(k) {
            None => panic!("{k} is missing from {}", actual.display()),
            Some(w) if w != v => panic!(
                "{k} differs:\n--- expected\n{}\n--- actual\n{}",
                String::from_utf8_lossy(v.as_deref().unwrap_or_default()),
                String::from_utf8_lossy(w.as_deref().unwrap_or_default())
            ),
            _ => {}
        }
    }
    for k in b.keys() {
        assert!(a.contains_key(k), "{k} is extra in {}", actual.display());
    }
}

pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dst = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_tree(&p, &dst);
        } else {
            std::fs::copy(&p, &dst).unwrap();
        }
    }
}

/// The timestamps of `messages`, in order.
pub fn times<'a>(messages: impl IntoIterator<Item = &'a Message>) -> Vec<&'a str> {
    messages.into_iter().map(|m| m.timestamp.as_str()).collect()
}
