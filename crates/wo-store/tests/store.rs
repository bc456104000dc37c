//! Behaviour of the store on real files: outside changes, refusals, limits,
//! failures and the export merge.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use wo_format::{Message, State, Timestamp, TruthEntry};
use wo_store::exports::{auto_merge, export_file_name, find_exports, write_export};
use wo_store::{Limits, OpenOptions, Store, StoreError};

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_unix(1_800_000_000 + secs)
}

fn msg(n: i64) -> Message {
    Message::new(
        "alec",
        ts(n),
        format!("m{n}"),
        format!("<p>message {n}</p>"),
    )
}

fn new_store(dir: &Path) -> Store {
    Store::create(
        dir.join("llm.json"),
        State::new(ts(0)),
        OpenOptions::default(),
    )
    .unwrap()
}

#[test]
fn saves_are_canonical_and_reloadable() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    store.transact(|s| s.push_message(msg(1))).unwrap();
    store.transact(|s| s.push_message(msg(2))).unwrap();
    let bytes = fs::read(store.path()).unwrap();
    let reloaded = Store::open(store.path(), OpenOptions::default()).unwrap();
    assert_eq!(reloaded.state(), store.state());
    assert_eq!(wo_format::to_canonical_vec(reloaded.state()), bytes);
    assert_eq!(reloaded.state().messages().len(), 2);
    let mode = fs::metadata(store.path()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn outside_changes_are_merged_not_lost() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = new_store(dir.path());
    let mut b = Store::open(a.path(), OpenOptions::default()).unwrap();
    a.transact(|s| s.push_message(msg(1))).unwrap();
    // b has not seen a's write; its own change must not clobber it.
    let (_, outcome) = b.transact(|s| s.push_message(msg(2))).unwrap();
    assert!(outcome.merged_outside_changes);
    // Unsaved edits through state_mut are merged too.
    a.state_mut().context = "<p>edited by a</p>".into();
    a.state_mut()
        .truth
        .trust
        .push(TruthEntry::new("fact", ts(3), 0.9, "<p>f</p>"));
    let outcome = a.save().unwrap();
    assert!(outcome.merged_outside_changes);
    let disk = Store::open(a.path(), OpenOptions::default()).unwrap();
    let ids: Vec<&str> = disk
        .state()
        .messages()
        .iter()
        .map(|m| m.title.as_str())
        .collect();
    assert_eq!(ids, ["m1", "m2"]);
    assert_eq!(disk.state().context, "<p>edited by a</p>");
    assert_eq!(disk.state().truth.trust.len(), 1);
}

#[test]
fn an_editor_change_to_context_survives_a_later_save() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    let mut edited = store.state().clone();
    edited.context = "<p>by hand</p>".into();
    fs::write(store.path(), wo_format::to_canonical_vec(&edited)).unwrap();
    store.transact(|s| s.push_message(msg(1))).unwrap();
    let disk = Store::open(store.path(), OpenOptions::default()).unwrap();
    assert_eq!(disk.state().context, "<p>by hand</p>");
    assert_eq!(disk.state().messages().len(), 1);
}

#[test]
fn invalid_files_are_reported_and_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llm.json");
    let original: &[u8] =
        br#"{"version": 1, "schema": "wikioracle.llm_state", "date": "nope", "messages": []}"#;
    fs::write(&path, original).unwrap();
    let err = Store::open(
        &path,
        OpenOptions {
            create_if_missing: true,
            ..Default::default()
        },
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Invalid { .. }), "{text}");
    assert!(
        text.contains("/date") && text.contains("[format]"),
        "{text}"
    );
    assert!(text.contains("llm.json"), "{text}");
    assert_eq!(fs::read(&path).unwrap(), original);

    // A valid file that turns invalid under an open store is not clobbered.
    let mut store = Store::create(
        dir.path().join("b.json"),
        State::new(ts(0)),
        OpenOptions::default(),
    )
    .unwrap();
    fs::write(store.path(), b"{ half written").unwrap();
    let err = store.transact(|s| s.push_message(msg(1))).unwrap_err();
    assert!(matches!(err, StoreError::Invalid { .. }));
    assert_eq!(fs::read(store.path()).unwrap(), b"{ half written");
}

#[test]
fn symlinks_are_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let store = new_store(dir.path());
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(store.path(), &link).unwrap();
    let err = Store::open(&link, OpenOptions::default()).unwrap_err();
    assert!(matches!(err, StoreError::Symlink { .. }), "{err}");
    let mut allowed = Store::open(
        &link,
        OpenOptions {
            allow_symlink: true,
            ..Default::default()
        },
    )
    .unwrap();
    allowed.transact(|s| s.push_message(msg(1))).unwrap();
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link itself stays"
    );
    let target = Store::open(store.path(), OpenOptions::default()).unwrap();
    assert_eq!(target.state().messages().len(), 1);
}

/// Makes `dir` refuse new files: read-only mode for ordinary users, the
/// immutable attribute for root (who ignores modes). Returns an undo guard.
struct ReadOnlyDir<'a>(&'a Path, bool);

impl<'a> ReadOnlyDir<'a> {
    fn new(dir: &'a Path) -> Self {
        let made = std::process::Command::new("chattr")
            .arg("+i")
            .arg(dir)
            .status();
        if made.is_ok_and(|s| s.success()) {
            return ReadOnlyDir(dir, true);
        }
        fs::set_permissions(dir, fs::Permissions::from_mode(0o500)).unwrap();
        ReadOnlyDir(dir, false)
    }
}

impl Drop for ReadOnlyDir<'_> {
    fn drop(&mut self) {
        if self.1 {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .arg(self.0)
                .status();
        } else {
            let _ = fs::set_permissions(self.0, fs::Permissions::from_mode(0o700));
        }
    }
}

#[test]
fn write_failure_keeps_the_original_and_maps_to_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    let before = fs::read(store.path()).unwrap();
    let err = {
        let _guard = ReadOnlyDir::new(dir.path());
        if fs::write(dir.path().join("probe"), b"").is_ok() {
            panic!("could not make a read-only directory here (chattr or chmod)");
        }
        store.transact(|s| s.push_message(msg(1))).unwrap_err()
    };
    assert_eq!(err.exit_code(), 2, "{err}");
    assert!(
        err.to_string()
            .contains("cannot write, the file is unchanged"),
        "{err}"
    );
    assert_eq!(fs::read(store.path()).unwrap(), before);
    // The store still works once the directory is writable again, and the
    // failed change was not half-applied to the file.
    store.save().unwrap();
    let reloaded = Store::open(store.path(), OpenOptions::default()).unwrap();
    assert_eq!(reloaded.state().messages().len(), 1);
}

#[test]
fn state_size_limit_is_enforced_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let store = new_store(dir.path());
    let path = store.path().to_path_buf();
    let before = fs::read(&path).unwrap();
    let opts = OpenOptions {
        limits: Limits {
            max_state_bytes: 600,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut small = Store::open(&path, opts.clone()).unwrap();
    small.state_mut().push_message(Message::new(
        "u",
        ts(5),
        "big",
        format!("<p>{}</p>", "x".repeat(1000)),
    ));
    let err = small.save().unwrap_err();
    assert!(matches!(err, StoreError::TooLarge { .. }), "{err}");
    assert_eq!(fs::read(&path).unwrap(), before);
    let tiny = OpenOptions {
        limits: Limits {
            max_state_bytes: 10,
            ..Default::default()
        },
        ..Default::default()
    };
    let err = Store::open(&path, tiny).unwrap_err();
    assert!(
        err.to_string().contains("over the state size limit"),
        "{err}"
    );
}

#[test]
fn content_limits_name_the_pointer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llm.json");
    let opts = OpenOptions {
        limits: Limits {
            max_message_bytes: 100,
            max_context_bytes: 50,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut store = Store::create(&path, State::new(ts(0)), opts).unwrap();
    let err = store
        .transact(|s| {
            s.push_message(Message::new(
                "u",
                ts(1),
                "t",
                format!("<p>{}</p>", "y".repeat(200)),
            ))
        })
        .unwrap_err();
    assert!(err.to_string().contains("/messages/0/content"), "{err}");
    let reopened = Store::open(&path, OpenOptions::default()).unwrap();
    assert!(
        reopened.state().messages().is_empty(),
        "nothing written on error"
    );
    let mut store = Store::open(
        &path,
        OpenOptions {
            limits: Limits {
                max_context_bytes: 50,
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .unwrap();
    let err = store.transact(|s| s.context = "z".repeat(51)).unwrap_err();
    assert!(err.to_string().contains("/context"), "{err}");
}

#[test]
fn missing_file_and_existing_file_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llm.json");
    let err = Store::open(&path, OpenOptions::default()).unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }));
    assert!(err.to_string().contains("wo init"));
    let created = Store::open(
        &path,
        OpenOptions {
            create_if_missing: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(path.exists());
    assert!(created.state().messages().is_empty());
    let err = Store::create(&path, State::new(ts(0)), OpenOptions::default()).unwrap_err();
    assert!(matches!(err, StoreError::Exists { .. }));
}

#[test]
fn exports_beside_the_file_merge_once_and_are_renamed() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    store.transact(|s| s.push_message(msg(1))).unwrap();
    let mut phone = store.state().clone();
    phone.push_message(msg(2));
    phone
        .truth
        .trust
        .push(TruthEntry::new("from phone", ts(2), 0.5, "<p>p</p>"));
    let export = write_export(&phone, dir.path()).unwrap();
    let name = export.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("llm_") && name.ends_with(".json"),
        "{name}"
    );
    fs::write(dir.path().join("llm_broken.json"), b"{").unwrap();
    assert_eq!(find_exports(store.path()).len(), 2);

    let dry = auto_merge(&mut store, true).unwrap();
    assert_eq!(dry.len(), 2);
    assert!(export.exists(), "dry run renames nothing");
    assert_eq!(
        Store::open(store.path(), OpenOptions::default())
            .unwrap()
            .state()
            .messages()
            .len(),
        1
    );

    let done = auto_merge(&mut store, false).unwrap();
    let ok: Vec<_> = done.iter().filter(|f| f.result.is_ok()).collect();
    assert_eq!(ok.len(), 1);
    let report = ok[0].result.as_ref().unwrap();
    assert_eq!(report.messages_added.len(), 1);
    assert_eq!(report.truth_added.len(), 1);
    assert!(!export.exists());
    assert!(
        ok[0]
            .renamed_to
            .as_ref()
            .unwrap()
            .to_string_lossy()
            .ends_with(".json.merged")
    );
    let broken = done.iter().find(|f| f.result.is_err()).unwrap();
    assert!(broken.path.ends_with("llm_broken.json"));
    assert!(
        dir.path().join("llm_broken.json").exists(),
        "invalid exports are left alone"
    );

    // Merging the same content again changes nothing.
    let again = write_export(&phone, dir.path()).unwrap();
    let before = Store::open(store.path(), OpenOptions::default())
        .unwrap()
        .state()
        .clone();
    let second = wo_store::exports::merge_files(&mut store, &[again], false, true).unwrap();
    assert!(second[0].result.as_ref().unwrap().is_empty());
    let after = Store::open(store.path(), OpenOptions::default())
        .unwrap()
        .state()
        .clone();
    assert_eq!(after.messages(), before.messages());
    assert_eq!(after.truth, before.truth);
}

#[test]
fn export_names_follow_the_spec() {
    let t = time::macros::datetime!(2026-02-22 09:05 +01:00);
    assert_eq!(export_file_name(t), "llm_2026.02.22.0905.json");
}
