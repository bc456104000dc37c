//! One-shot writers (a `wo` command that opens, appends and saves): a file
//! exactly as a store wrote it is re-used byte for byte (no serialising),
//! anything else — a hand edit, a forged or missing record, a damaged file —
//! takes the full path, and the result is the full path's either way.

use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use wo_format::{State, parse, to_canonical_vec};
use wo_store::{OpenOptions, Store, StoreError};

mod common;
use common::{msg, ts};

/// A store-written file with `n` messages.
fn written(dir: &Path, n: i64) -> PathBuf {
    let mut state = State::new(ts(0));
    for i in 1..=n {
        state.push_message(msg(i));
    }
    let store = Store::create(dir.join("llm.json"), state, OpenOptions::default()).unwrap();
    store.path().to_path_buf()
}

/// One CLI run: open, append message `n`, save. Returns how many messages
/// the open found re-usable.
fn one_shot(path: &Path, n: i64) -> usize {
    let mut store = Store::open(path, OpenOptions::default()).unwrap();
    let reused = store.reusable_messages();
    store.transact(|s| s.push_message(msg(n))).unwrap();
    reused
}

/// The file is canonical (what the full path would write for its state)
/// and holds these messages' ids.
fn assert_canonical_with(path: &Path, ids: &[String]) {
    let bytes = fs::read(path).unwrap();
    let state = parse(&bytes).unwrap();
    assert!(to_canonical_vec(&state) == bytes, "not the canonical bytes");
    let got: Vec<&str> = state.messages().iter().map(|m| m.id.as_str()).collect();
    assert_eq!(got, ids);
}

/// The id message `n` gets when it is added.
fn id_of(n: i64) -> String {
    let m = msg(n);
    wo_format::ids::message_id(&m.username, m.timestamp.as_str(), &m.content)
}

fn lock_path(path: &Path) -> PathBuf {
    path.with_file_name("llm.json.lock")
}

#[test]
fn a_file_the_store_wrote_is_reused_and_the_result_is_canonical() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 5);
    assert_eq!(one_shot(&path, 6), 5);
    assert_eq!(one_shot(&path, 7), 6);
    let ids: Vec<String> = (1..=7).map(id_of).collect();
    assert_canonical_with(&path, &ids);
}

#[test]
fn a_hand_edit_between_two_one_shot_appends_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 5);
    assert_eq!(one_shot(&path, 6), 5);
    // Same length, one message's content changed: only the checksum can
    // tell (the length matches the record).
    let text = fs::read_to_string(&path).unwrap();
    let edited = text.replace("<p>message 3</p>", "<p>MESSAGE 3</p>");
    assert_eq!(edited.len(), text.len());
    assert_ne!(edited, text);
    fs::write(&path, &edited).unwrap();
    assert_eq!(
        one_shot(&path, 7),
        0,
        "a hand-edited file must not be re-used"
    );
    let after = fs::read_to_string(&path).unwrap();
    assert!(after.contains("<p>MESSAGE 3</p>"), "the hand edit was lost");
    assert!(!after.contains("<p>message 3</p>"));
    let state = parse(after.as_bytes()).unwrap();
    assert_eq!(state.messages().len(), 7);
    assert!(to_canonical_vec(&state) == after.as_bytes());
    // And the next run re-uses what this one wrote, edit included.
    assert_eq!(one_shot(&path, 8), 7);
    assert!(
        fs::read_to_string(&path)
            .unwrap()
            .contains("<p>MESSAGE 3</p>")
    );
}

#[test]
fn a_hand_reformatted_file_is_rewritten_canonically() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 3);
    // Valid JSON, same data, other whitespace (and another length).
    let state = parse(&fs::read(&path).unwrap()).unwrap();
    let compact = serde_json::to_vec(
        &serde_json::from_slice::<serde_json::Value>(&fs::read(&path).unwrap()).unwrap(),
    )
    .unwrap();
    fs::write(&path, &compact).unwrap();
    assert_eq!(one_shot(&path, 4), 0);
    let mut ids: Vec<String> = state.messages().iter().map(|m| m.id.clone()).collect();
    ids.push(id_of(4));
    assert_canonical_with(&path, &ids);
}

#[test]
fn a_forged_or_missing_record_takes_the_full_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 4);
    let len = fs::metadata(&path).unwrap().len();
    // The right length with a wrong checksum.
    let mut lock = fs::OpenOptions::new()
        .write(true)
        .open(lock_path(&path))
        .unwrap();
    lock.seek(SeekFrom::Start(32)).unwrap();
    writeln!(lock, "{len:020} {:08x}", 0xdead_beefu32).unwrap();
    drop(lock);
    assert_eq!(one_shot(&path, 5), 0);
    // An older lock file (generation and pid only).
    let lock = fs::OpenOptions::new()
        .write(true)
        .open(lock_path(&path))
        .unwrap();
    lock.set_len(32).unwrap();
    drop(lock);
    assert_eq!(one_shot(&path, 6), 0);
    // Garbage in the record.
    fs::write(lock_path(&path), b"not a lock file at all, not at all\n").unwrap();
    assert_eq!(one_shot(&path, 7), 0);
    // No lock file.
    fs::remove_file(lock_path(&path)).unwrap();
    assert_eq!(one_shot(&path, 8), 0);
    let ids: Vec<String> = (1..=8).map(id_of).collect();
    assert_canonical_with(&path, &ids);
    // Each full-path save wrote the record again: the next run re-uses.
    assert_eq!(one_shot(&path, 9), 8);
}

#[test]
fn a_damaged_file_gets_its_error_with_file_and_pointer() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 4);
    let text = fs::read_to_string(&path).unwrap();
    // Same length (the record's), a wrong type in the third message.
    let at = text
        .match_indices("\"username\": \"alec\"")
        .nth(2)
        .unwrap()
        .0;
    let mut damaged = text.clone().into_bytes();
    damaged[at + 12..at + 18].copy_from_slice(b"123456");
    fs::write(&path, &damaged).unwrap();
    let err = Store::open(&path, OpenOptions::default()).unwrap_err();
    match &err {
        StoreError::Invalid { path: p, issues } => {
            assert_eq!(p, &path);
            assert!(
                issues.iter().any(|i| i.pointer == "/messages/2/username"),
                "{err}"
            );
        }
        other => panic!("expected Invalid, got {other}"),
    }
    assert!(err.to_string().contains("llm.json"), "{err}");
    // Truncated: also the full path's error, and the file is untouched.
    fs::write(&path, &text.as_bytes()[..text.len() / 2]).unwrap();
    let err = Store::open(&path, OpenOptions::default()).unwrap_err();
    assert!(matches!(err, StoreError::Invalid { .. }), "{err}");
    assert_eq!(fs::read(&path).unwrap(), &text.as_bytes()[..text.len() / 2]);
}

/// Past the two-thread parse's threshold (4096 messages), where the
/// store's own file is read element by element in its canonical layout.
const BIG: i64 = 4200;

/// A hand edit to a big file the store wrote — same length or not, in the
/// middle or inside the last message — is read, kept by the next one-shot
/// append, and the result is the full path's bytes.
#[test]
fn hand_edits_to_a_big_file_survive_a_one_shot_append() {
    type Edit = fn(&str) -> String;
    let edits: [(&str, Edit, &str); 3] = [
        (
            "same length, middle",
            |t| t.replacen("<p>message 2000</p>", "<p>MESSAGE 2000</p>", 1),
            "<p>MESSAGE 2000</p>",
        ),
        (
            "same length, last message",
            |t| {
                t.replacen(
                    &format!("<p>message {BIG}</p>"),
                    &format!("<p>messagE {BIG}</p>"),
                    1,
                )
            },
            "<p>messagE 4200</p>",
        ),
        (
            "longer, with an escape",
            |t| t.replacen("<p>message 7</p>", "<p>message \\\"7\\\" é</p>", 1),
            "<p>message \\\"7\\\" é</p>",
        ),
    ];
    for (what, edit, kept) in edits {
        let dir = tempfile::tempdir().unwrap();
        let path = written(dir.path(), BIG);
        assert_eq!(one_shot(&path, BIG + 1), BIG as usize, "{what}");
        let text = fs::read_to_string(&path).unwrap();
        let edited = edit(&text);
        assert_ne!(edited, text, "{what}: the edit applies");
        fs::write(&path, &edited).unwrap();
        assert_eq!(one_shot(&path, BIG + 2), 0, "{what}: not re-used");
        let after = fs::read_to_string(&path).unwrap();
        assert!(after.contains(kept), "{what}: the hand edit was lost");
        // The full path's bytes: what serialising the edited file plus the
        // append gives, dated as the write dated it.
        let mut expected = parse(edited.as_bytes()).unwrap();
        expected.push_message(msg(BIG + 2));
        expected.date = parse(after.as_bytes()).unwrap().date;
        assert!(
            to_canonical_vec(&expected) == after.as_bytes(),
            "{what}: not the full path's bytes"
        );
        // The next run re-uses what this one wrote, edit included.
        assert_eq!(one_shot(&path, BIG + 3), BIG as usize + 2, "{what}");
        assert!(fs::read_to_string(&path).unwrap().contains(kept), "{what}");
    }
}

/// A big file's replaced version is removed on a helper thread (the new
/// version is in place first): once the store is dropped, or before its
/// next write, nothing but the file and its lock is left.
#[test]
fn the_replaced_version_of_a_big_file_is_gone_when_the_store_is() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = State::new(ts(0));
    let body = "x".repeat(3000);
    for i in 1..=2000 {
        let mut m = msg(i);
        m.content = format!("<p>{i} {body}</p>");
        state.push_message(m);
    }
    let path = Store::create(dir.path().join("llm.json"), state, OpenOptions::default())
        .unwrap()
        .path()
        .to_path_buf();
    assert!(fs::metadata(&path).unwrap().len() > 5 << 20, "big enough");
    let names = || {
        let mut names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let mut store = Store::open(&path, OpenOptions::default()).unwrap();
    for n in 2001..=2003 {
        store.transact(|s| s.push_message(msg(n))).unwrap();
        // At most the one version being removed, never more.
        assert!(names().len() <= 3, "{:?}", names());
    }
    drop(store);
    assert_eq!(names(), ["llm.json", "llm.json.lock"]);
    let state = parse(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(state.messages().len(), 2003);
    // A one-shot run leaves nothing either.
    assert_eq!(one_shot(&path, 2004), 2003);
    assert_eq!(names(), ["llm.json", "llm.json.lock"]);
    // Nor does one that ends with `close_for_exit` (its state's memory left
    // to the exit): the replaced version is still waited for and removed,
    // and the next writer goes ahead at once.
    let mut store = Store::open(&path, OpenOptions::default()).unwrap();
    store.transact(|s| s.push_message(msg(2005))).unwrap();
    store.close_for_exit();
    assert_eq!(names(), ["llm.json", "llm.json.lock"]);
    let mut next = Store::open(&path, OpenOptions::default()).unwrap();
    next.transact(|s| s.push_message(msg(2006))).unwrap();
    assert_eq!(next.state().messages().len(), 2006);
    drop(next);
    assert_eq!(
        parse(&fs::read(&path).unwrap()).unwrap().messages().len(),
        2006
    );
}
