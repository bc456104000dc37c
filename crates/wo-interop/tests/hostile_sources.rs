//! Sources built to hurt the importer: an llm `logs.db` whose tables are
//! views (one recursive, one making a huge value), a generated column
//! making a huge value, more rows or time than allowed, a WAL-mode database
//! (nothing may appear beside it); a ChatGPT export with a long chain of
//! empty nodes above many messages (linear, not quadratic); a zip entry
//! that inflates far past its compressed size. Each is refused quickly with
//! an error naming what and where, or read in linear time.

mod common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::opts;
use serde_json::{Value, json};
use wo_interop::detect;
use wo_interop::llm_db::{self, BOUNDS, Bounds};

/// The file names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A `logs.db` made by `sql` (in a folder of its own).
fn db(dir: &Path, sql: &str) -> PathBuf {
    let path = dir.join("logs.db");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(sql)
        .unwrap();
    path
}

const RESPONSES: &str = "CREATE TABLE responses (id TEXT PRIMARY KEY, model TEXT, \
    prompt TEXT, response TEXT, conversation_id TEXT, duration_ms INTEGER, datetime_utc TEXT);";

/// `n` responses, written by SQLite itself.
fn many_responses(n: usize) -> String {
    format!(
        "{RESPONSES} WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < {n}) \
         INSERT INTO responses SELECT printf('r%06d', i), 'm', 'question ' || i, 'answer ' || i, \
         NULL, 5, printf('2024-07-01T10:%02d:%02d', (i / 60) % 60, i % 60) FROM k;"
    )
}

fn refused_within(path: &Path, secs: u64, what: &[&str]) {
    let start = Instant::now();
    let e = detect::import(path, None, &opts()).unwrap_err().to_string();
    assert!(
        start.elapsed() < Duration::from_secs(secs),
        "took {:?}",
        start.elapsed()
    );
    for w in what {
        assert!(e.contains(w), "expected {w:?} in: {e}");
    }
}

#[test]
fn a_recursive_view_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // 8 KB, and it never ends when queried: SQLite's temp files grow without
    // bound.
    let path = db(
        dir.path(),
        "CREATE VIEW responses AS WITH RECURSIVE r(id, model, prompt, response, \
         conversation_id, duration_ms, datetime_utc) AS (SELECT 'a', 'm', 'p', 'r', NULL, 1, \
         '2024-01-01T00:00:00' UNION ALL SELECT id || 'a', model, prompt, response, NULL, 1, \
         datetime_utc FROM r) SELECT * FROM r;",
    );
    refused_within(&path, 5, &["logs.db", "(table responses)", "is a view"]);
    assert_eq!(names(dir.path()), ["logs.db"]);
}

#[test]
fn huge_values_are_refused_not_built() {
    let dir = tempfile::tempdir().unwrap();
    // A view making a 900 MB value: refused as a view.
    let path = db(
        dir.path(),
        "CREATE VIEW responses AS SELECT 'a' AS id, 'm' AS model, \
         printf('%.*c', 900000000, 'x') AS prompt, 'r' AS response, NULL AS conversation_id, \
         1 AS duration_ms, '2024-01-01T00:00:00' AS datetime_utc;",
    );
    refused_within(&path, 5, &["is a view"]);
    // A real table whose generated column makes a 100 MB value: SQLite
    // refuses to build it past the value limit.
    let dir = tempfile::tempdir().unwrap();
    let path = db(
        dir.path(),
        "CREATE TABLE responses (id TEXT, prompt TEXT, \
         model TEXT GENERATED ALWAYS AS (printf('%.*c', 100000000, 'x')) VIRTUAL, \
         response TEXT, conversation_id TEXT, duration_ms INTEGER, datetime_utc TEXT); \
         INSERT INTO responses (id, prompt, response, datetime_utc) \
         VALUES ('a', 'p', 'r', '2024-01-01T00:00:00');",
    );
    refused_within(
        &path,
        5,
        &[
            "(table responses)",
            "is larger than 67108864 bytes, the limit",
        ],
    );
}

#[test]
fn virtual_tables_are_refused_and_optional_views_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(
        dir.path(),
        &format!(
            "{}; CREATE VIEW attachments AS SELECT 1 AS id; \
             CREATE TABLE prompt_attachments (response_id TEXT, attachment_id TEXT, [order] INTEGER);",
            many_responses(3)
        ),
    );
    refused_within(&path, 5, &["(table attachments)", "is a view"]);
}

#[test]
fn rows_text_and_time_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(dir.path(), &many_responses(5000));
    // Within the default bounds it imports.
    let imported = llm_db::import(&path, &opts()).unwrap();
    assert_eq!(imported.state.messages().len(), 10_000);
    let bounded = |b: Bounds| {
        llm_db::import_bounded(&path, &opts(), &b)
            .unwrap_err()
            .to_string()
    };
    let e = bounded(Bounds {
        max_rows: 100,
        ..BOUNDS
    });
    assert!(e.contains("more than 100 rows, the limit"), "{e}");
    let e = bounded(Bounds {
        max_total_bytes: 10_000,
        ..BOUNDS
    });
    assert!(e.contains("more than 10000 bytes of text"), "{e}");
    let e = bounded(Bounds {
        time: Duration::ZERO,
        ..BOUNDS
    });
    assert!(e.contains("reading took longer than 0 s"), "{e}");
    assert_eq!(names(dir.path()), ["logs.db"]);
}

#[test]
fn a_wal_mode_database_gets_nothing_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(
        dir.path(),
        &format!("PRAGMA journal_mode=WAL; {}", many_responses(3)),
    );
    // Closed: checkpointed, its -wal and -shm gone, the file still in WAL mode.
    assert_eq!(names(dir.path()), ["logs.db"]);
    let before = std::fs::read(&path).unwrap();
    let imported = detect::import(&path, None, &opts()).unwrap().1;
    assert_eq!(imported.state.messages().len(), 6);
    assert_eq!(names(dir.path()), ["logs.db"], "files created beside it");
    assert_eq!(std::fs::read(&path).unwrap(), before);

    // While llm holds it open with responses not yet checkpointed, the
    // import reads the file as it is and says what it did not read.
    let writer = rusqlite::Connection::open(&path).unwrap();
    writer
        .execute_batch(
            "PRAGMA wal_autocheckpoint=0; INSERT INTO responses VALUES \
             ('late', 'm', 'q', 'a', NULL, 1, '2024-07-02T00:00:00');",
        )
        .unwrap();
    let imported = detect::import(&path, None, &opts()).unwrap().1;
    assert_eq!(imported.state.messages().len(), 6);
    let warned = imported
        .warnings
        .iter()
        .any(|w| w.to_string().contains("logs.db-wal was not read"));
    assert!(warned, "{:?}", imported.warnings);
    drop(writer);
}

#[test]
fn a_long_chain_of_empty_nodes_is_walked_once() {
    // A message, 20,000 empty nodes below it, and 20,000 answers hanging
    // from the last: each answer's parent is the message at the top. Walked
    // once per answer, that was 400 million steps (40–61 s in a release
    // build); walked once in all, it is a fraction of a second.
    let chain = 20_000;
    let answers = 20_000;
    let mut mapping = serde_json::Map::new();
    let msg = |id: &str, role: &str, text: &str, t: f64| {
        json!({"id": id, "author": {"role": role}, "create_time": t,
               "content": {"content_type": "text", "parts": [text]}})
    };
    mapping.insert(
        "top".into(),
        json!({"id": "top", "message": msg("top", "user", "the question", 1.7e9),
               "parent": null, "children": ["e0"]}),
    );
    for i in 0..chain {
        let parent = if i == 0 {
            "top".to_owned()
        } else {
            format!("e{}", i - 1)
        };
        mapping.insert(
            format!("e{i}"),
            json!({"id": format!("e{i}"), "message": null, "parent": parent, "children": []}),
        );
    }
    let last = format!("e{}", chain - 1);
    for i in 0..answers {
        let id = format!("a{i}");
        mapping.insert(
            id.clone(),
            json!({"id": id, "message": msg(&id, "assistant", &format!("answer {i}"), 1.7e9 + 1.0 + i as f64),
                   "parent": last, "children": []}),
        );
    }
    let export = json!([{"title": "Chain", "create_time": 1.7e9, "mapping": Value::Object(mapping),
                         "current_node": "a0", "id": "c1"}]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("conversations.json");
    std::fs::write(&path, serde_json::to_vec(&export).unwrap()).unwrap();
    let start = Instant::now();
    let (_, imported) = detect::import(&path, None, &opts()).unwrap();
    let took = start.elapsed();
    let s = &imported.state;
    assert_eq!(s.messages().len(), answers + 1);
    let top = s
        .messages()
        .iter()
        .find(|m| m.content.contains("the question"))
        .unwrap();
    assert!(
        s.messages()
            .iter()
            .filter(|m| m.id != top.id)
            .all(|m| m.parent.as_deref() == Some(top.id.as_str()))
    );
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

#[test]
fn a_zip_entry_inflating_far_past_its_size_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("export.zip");
    // 100 MiB of spaces deflate to about 100 KB: over 100 times smaller, and
    // over the 64 MiB every entry may have.
    let mut w = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .large_file(false);
    w.start_file("conversations.json", options).unwrap();
    w.write_all(b"[").unwrap();
    let block = vec![b' '; 1 << 20];
    for _ in 0..100 {
        w.write_all(&block).unwrap();
    }
    w.write_all(b"]").unwrap();
    w.finish().unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() < 1 << 20);
    let start = Instant::now();
    let e = detect::import(&path, None, &opts())
        .unwrap_err()
        .to_string();
    assert!(start.elapsed() < Duration::from_secs(20));
    assert!(e.contains("export.zip:conversations.json"), "{e}");
    assert!(e.contains("over the 67108864-byte limit"), "{e}");
    assert!(e.contains("extract it and import the file instead"), "{e}");
}
