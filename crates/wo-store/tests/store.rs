//! Behaviour of the store on real files: outside changes, refusals, limits,
//! failures and the export merge.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use wo_format::{Message, State, TruthEntry};
use wo_store::exports::{auto_merge, export_file_name, find_exports, write_export};
use wo_store::{Limits, OpenOptions, Store, StoreError};

mod common;
use common::{msg, ts};

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
    // failed change was taken back: a later save does not write it.
    store.save().unwrap();
    let reloaded = Store::open(store.path(), OpenOptions::default()).unwrap();
    assert_eq!(reloaded.state().messages().len(), 0);
    assert_eq!(reloaded.state(), store.state());
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

/// Writes `state` the way an editor does: in place, no lock, no rename.
fn editor_save(path: &Path, state: &State) {
    use std::io::Write;
    let mut f = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .unwrap();
    f.write_all(&wo_format::to_canonical_vec(state)).unwrap();
}

fn disk(path: &Path) -> State {
    wo_format::parse(&fs::read(path).unwrap()).unwrap()
}

/// A store that stays open (a server, a slow `wo ask`) writes
/// only its own changes; renames (id kept) and deletions made by hand
/// meanwhile survive its next save.
#[test]
fn hand_edits_made_while_a_store_is_open_survive_its_saves() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    store
        .transact(|s| {
            for n in 1..=4 {
                s.push_message(msg(n));
            }
            s.add_truth(TruthEntry::new("keep me", ts(1), 0.5, "<p>a</p>"));
            s.add_truth(TruthEntry::new("delete me", ts(2), 0.5, "<p>b</p>"));
        })
        .unwrap();
    let path = store.path().to_path_buf();

    // The editor: renames message 2 and the first entry, deletes message 3
    // and the second entry.
    let mut edited = disk(&path);
    let renamed_id = edited.messages()[1].id.clone();
    let deleted_id = edited.messages()[2].id.clone();
    edited.messages_mut()[1].title = "renamed by hand".into();
    edited.messages_mut().remove(2);
    edited.truth.trust[0].title = "renamed entry".into();
    let gone_entry = edited.truth.trust.remove(1).id;
    editor_save(&path, &edited);

    // The store's next turn (as `wo serve` does it: inside a transaction).
    let (_, outcome) = store.transact(|s| s.push_message(msg(10))).unwrap();
    assert!(outcome.merged_outside_changes);
    let after = disk(&path);
    assert_eq!(after.message(&renamed_id).unwrap().title, "renamed by hand");
    assert!(
        after.message(&deleted_id).is_none(),
        "hand deletion came back"
    );
    assert_eq!(after.truth.trust.len(), 1, "hand-deleted entry came back");
    assert_eq!(after.truth.trust[0].title, "renamed entry");
    assert!(after.truth_entry(&gone_entry).is_none());
    assert!(after.messages().iter().any(|m| m.title == "m10"));
    assert_eq!(after.messages().len(), 4);

    // A slow `wo ask`: its change waits in memory while the editor saves
    // again; then it saves. Same outcome.
    store.state_mut().push_message(msg(11));
    store.state_mut().context = "<p>the store's context</p>".into();
    let mut edited = disk(&path);
    edited.messages_mut()[0].title = "renamed again".into();
    let first = edited.messages()[0].id.clone();
    let removed = edited.messages_mut().remove(1).id;
    editor_save(&path, &edited);
    store.save().unwrap();
    let after = disk(&path);
    assert_eq!(after.message(&first).unwrap().title, "renamed again");
    assert!(after.message(&removed).is_none());
    assert!(after.messages().iter().any(|m| m.title == "m11"));
    assert_eq!(after.context, "<p>the store's context</p>");
    assert_eq!(after.truth.trust[0].title, "renamed entry");
    assert_eq!(store.state(), &after);
}

/// A change both sides made to one truth entry keeps each
/// side's own fields (the editor's title, the store's certainty).
#[test]
fn a_truth_entry_changed_on_both_sides_keeps_both_changes() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    let ((), _) = store
        .transact(|s| {
            s.add_truth(TruthEntry::new("entry", ts(1), 0.5, "<p>a</p>"));
        })
        .unwrap();
    let id = store.state().truth.trust[0].id.clone();
    let mut edited = disk(store.path());
    edited.truth.trust[0].title = "hand title".into();
    editor_save(store.path(), &edited);
    store
        .transact(|s| {
            s.edit_truth(
                &id,
                wo_format::TruthEdit {
                    certainty: Some(0.9),
                    ..Default::default()
                },
                ts(100),
            );
        })
        .unwrap();
    let e = disk(store.path()).truth.trust[0].clone();
    assert_eq!(e.title, "hand title");
    assert_eq!(e.certainty, 0.9);
}

/// Readers never wait for a writer; a writer waits at most the
/// lock timeout, names the holder's pid, exits 2 and changes nothing.
#[test]
fn readers_never_wait_and_writers_give_up_naming_the_holder() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    store.transact(|s| s.push_message(msg(1))).unwrap();
    let before = fs::read(store.path()).unwrap();
    // Someone holds the lock (pid 4242 recorded, as a writer records its own).
    let lock_path = dir.path().join("llm.json.lock");
    let mut lock = fs::OpenOptions::new().write(true).open(&lock_path).unwrap();
    lock.write_all(b"00000000000000000007\n      4242\n")
        .unwrap();
    lock.lock().unwrap();

    let reader = Store::open(store.path(), OpenOptions::default()).unwrap();
    assert_eq!(reader.state().messages().len(), 1);

    let opts = OpenOptions {
        lock_timeout: Some(std::time::Duration::from_millis(200)),
        ..OpenOptions::default()
    };
    let mut writer = Store::open(store.path(), opts).unwrap();
    let err = writer.transact(|s| s.push_message(msg(2))).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::LockTimeout {
                holder: Some(4242),
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.exit_code(), 2);
    let text = err.to_string();
    assert!(text.contains("process 4242"), "{text}");
    assert!(text.contains("nothing was changed"), "{text}");
    assert!(text.contains("WO_LOCK_TIMEOUT"), "{text}");
    assert_eq!(fs::read(store.path()).unwrap(), before);
    lock.unlock().unwrap();
    writer.transact(|s| s.push_message(msg(2))).unwrap();
    assert_eq!(disk(store.path()).messages().len(), 2);
    // The writer recorded its own pid for the next one to wait on.
    let text = fs::read_to_string(&lock_path).unwrap();
    assert_eq!(
        text.lines().nth(1).map(str::trim),
        Some(std::process::id().to_string().as_str())
    );
}

/// A symbolic link at the lock's name is refused, and its
/// target is left alone.
#[test]
fn a_symlinked_lock_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    let before = fs::read(store.path()).unwrap();
    let victim = dir.path().join("victim");
    fs::write(&victim, b"precious").unwrap();
    let lock_path = dir.path().join("llm.json.lock");
    fs::remove_file(&lock_path).unwrap();
    std::os::unix::fs::symlink(&victim, &lock_path).unwrap();
    let err = store.transact(|s| s.push_message(msg(1))).unwrap_err();
    assert!(matches!(err, StoreError::BadLock { .. }), "{err}");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(err.exit_code(), 2);
    assert_eq!(fs::read(&victim).unwrap(), b"precious");
    assert_eq!(fs::read(store.path()).unwrap(), before);
    // Reading still works: readers do not use the lock.
    Store::open(store.path(), OpenOptions::default()).unwrap();
    // The attack-suite count: refused, target intact, file intact.
    println!("item 6: 3/3 held");
}

/// Many first runs at once all succeed, on one file.
#[test]
fn concurrent_first_runs_all_open_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llm.json");
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let path = path.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let mut store = Store::open(
                    &path,
                    OpenOptions {
                        create_if_missing: true,
                        ..OpenOptions::default()
                    },
                )
                .unwrap_or_else(|e| panic!("first run {i}: {e}"));
                store.transact(|s| s.push_message(msg(i))).unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(disk(&path).messages().len(), 8);
}

/// No error message suggests a command that destroys data.
#[test]
fn error_hints_never_suggest_starting_fresh() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llm.json");
    fs::write(&path, b"{ not json").unwrap();
    let invalid = Store::open(&path, OpenOptions::default()).unwrap_err();
    let dir2 = tempfile::tempdir().unwrap();
    let store = new_store(dir2.path());
    let exists =
        Store::create(store.path(), State::new(ts(0)), OpenOptions::default()).unwrap_err();
    // Creating races with another first run: nothing to force.
    assert!(!exists.to_string().contains("--force"), "{exists}");
    // An invalid file: fixing it is what the error suggests; it never
    // suggests a command that replaces the file.
    let text = invalid.to_string();
    assert!(text.contains("fix them in an editor"), "{text}");
    assert!(!text.contains("--force"), "{text}");
}

/// The invalid-file backup is complete or absent, never partial.
#[test]
fn backups_are_complete_and_durable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llm.json");
    let bytes = vec![b'x'; 100_000];
    fs::write(&path, &bytes).unwrap();
    let backup = wo_store::backup_invalid(&path).unwrap();
    assert_eq!(fs::read(&backup).unwrap(), bytes);
    let names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "no temp file left: {names:?}");
    // A failure (here: no such file) is a write error with exit code 2.
    let err = wo_store::backup_invalid(&dir.path().join("missing.json")).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("nothing was changed"), "{err}");
}

/// Discovery refuses a parent directory's file owned by someone
/// else, naming it and how to use it anyway.
#[test]
fn discovery_refuses_another_users_file() {
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("a/b");
    fs::create_dir_all(&deep).unwrap();
    let theirs = dir.path().join("llm.json");
    fs::write(&theirs, b"{}").unwrap();
    // SAFETY: plain libc calls on a path we own.
    let me = unsafe { libc::geteuid() };
    if me != 0 {
        eprintln!("skipped: giving a file to another user needs root");
        return;
    }
    std::os::unix::fs::chown(&theirs, Some(54_321), None).unwrap();
    let err = wo_store::discover_state(&deep).unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&theirs.display().to_string()), "{text}");
    assert!(text.contains("--state"), "{text}");
    assert_eq!(
        wo_store::discover_state_path(&deep).filter(|p| p == &theirs),
        None
    );
    // Root's files are trusted (a system-wide default is not an attack).
    std::os::unix::fs::chown(&theirs, Some(0), None).unwrap();
    assert_eq!(wo_store::discover_state(&deep).unwrap(), Some(theirs));
    // The attack-suite count: refused with the path and a
    // `--state` hint, and never returned by the silent lookup.
    println!("item 7: 2/2 held");
}

/// Many exports at once, more than there are cores: each is merged in file
/// order, with the report and sanitised pointers it would have on its own
/// turn (the repeats of the state counted as skipped), and the result is the
/// merge of the fully admitted files one after another.
#[test]
fn many_exports_merge_in_order_with_the_reports_of_a_sequential_merge() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    store
        .transact(|s| {
            for n in 1..=50 {
                s.push_message(msg(n));
            }
        })
        .unwrap();
    let base = store.state().clone();
    let mut files = Vec::new();
    for k in 0..7i64 {
        let mut e = base.clone();
        // Every export also carries the one before's new message, so what
        // counts as added depends on the order of the merges.
        for j in [k, k + 1] {
            e.push_message(msg(1000 + j));
        }
        if k == 3 {
            e.push_message(Message::new(
                "alec",
                ts(2000),
                "hostile",
                "<p>x<script>alert(1)</script></p>",
            ));
        }
        let p = dir.path().join(format!("llm_{k}.json"));
        fs::write(&p, wo_format::to_canonical_vec(&e)).unwrap();
        files.push(p);
    }
    let broken = dir.path().join("llm_5b.json");
    fs::write(&broken, b"{\"version\": 1").unwrap();
    files.insert(6, broken.clone());

    // What merging the fully admitted files one after another gives.
    let mut expected = base.clone();
    let mut expected_reports = Vec::new();
    for f in &files {
        if let Ok(a) = wo_format::admit::admit_bytes(&fs::read(f).unwrap()) {
            expected_reports.push(Some((
                wo_format::merge::merge_into(&mut expected, &a.state),
                a.sanitised,
            )));
        } else {
            expected_reports.push(None);
        }
    }

    let out = wo_store::exports::merge_files(&mut store, &files, false, false).unwrap();
    assert_eq!(out.len(), files.len());
    for (o, want) in out.iter().zip(&expected_reports) {
        match (&o.result, want) {
            (Ok(report), Some((r, sanitised))) => {
                assert_eq!(report, r, "{}", o.path.display());
                assert_eq!(&o.sanitised, sanitised, "{}", o.path.display());
            }
            (Err(_), None) => assert_eq!(o.path, broken),
            (got, _) => panic!("{}: {got:?}", o.path.display()),
        }
    }
    let first = out[0].result.as_ref().unwrap();
    assert_eq!(first.messages_added.len(), 2);
    assert_eq!(first.messages_skipped, 50, "the state's own messages");
    let hostile = out.iter().find(|o| o.path.ends_with("llm_3.json")).unwrap();
    assert_eq!(hostile.sanitised, vec!["/messages/52/content".to_owned()]);
    let on_disk = Store::open(store.path(), OpenOptions::default()).unwrap();
    assert_eq!(
        wo_format::to_canonical_vec(on_disk.state()),
        wo_format::to_canonical_vec(&expected)
    );
    assert_eq!(on_disk.state().messages().len(), 50 + 8 + 1);
}
