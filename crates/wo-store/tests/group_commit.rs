//! Group commit on real files: concurrent commits all land, in fewer writes
//! than commits; a failed write or fsync fails every commit of its batch
//! (none acknowledged); hand edits made between batches survive; a change
//! that panics fails its batch but not the queue.

use std::fs;
use std::path::Path;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

mod common;

use common::{msg, ts};
use wo_format::State;
use wo_store::{GroupCommit, OpenOptions, Store, StoreError};

fn shared_store(dir: &Path) -> (Arc<Mutex<Store>>, Arc<GroupCommit>) {
    let store = Store::create(
        dir.join("llm.json"),
        State::new(ts(0)),
        OpenOptions::default(),
    )
    .unwrap();
    let group = Arc::new(GroupCommit::new(&store));
    (Arc::new(Mutex::new(store)), group)
}

fn disk(path: &Path) -> State {
    wo_format::parse(&fs::read(path).unwrap()).unwrap()
}

/// The writers' generation counter kept in the lock file: one per write.
fn writes(dir: &Path) -> u64 {
    let text = fs::read_to_string(dir.join("llm.json.lock")).unwrap();
    text.lines().next().unwrap().trim().parse().unwrap()
}

/// Spins until `n` commits are queued behind the write in progress.
fn wait_queued(group: &GroupCommit, n: usize) {
    let start = Instant::now();
    while group.queued() < n {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "only {} of {n} commits queued",
            group.queued()
        );
        thread::sleep(Duration::from_millis(1));
    }
}

/// Commits `n` messages from `n` threads: the first one's change holds its
/// write until the other `n - 1` are queued, so they form one batch. Every
/// thread runs `setup` first (per-thread test hooks). Returns each thread's
/// result.
fn commit_from_threads(
    store: &Arc<Mutex<Store>>,
    group: &Arc<GroupCommit>,
    n: i64,
    setup: fn(),
) -> Vec<Result<String, StoreError>> {
    let (started, began) = std::sync::mpsc::channel();
    let first = {
        let (store, group) = (store.clone(), group.clone());
        thread::spawn(move || {
            setup();
            let waiting = group.clone();
            group
                .commit(&store, move |s| {
                    started.send(()).unwrap();
                    wait_queued(&waiting, (n - 1) as usize);
                    s.push_message(msg(1));
                    "m1".to_owned()
                })
                .map(|(v, _)| v)
        })
    };
    // The others start once the first write is in progress.
    began.recv_timeout(Duration::from_secs(30)).unwrap();
    let barrier = Arc::new(Barrier::new((n - 1) as usize));
    let rest: Vec<_> = (2..=n)
        .map(|k| {
            let (store, group, barrier) = (store.clone(), group.clone(), barrier.clone());
            thread::spawn(move || {
                setup();
                barrier.wait();
                group
                    .commit(&store, move |s| {
                        s.push_message(msg(k));
                        format!("m{k}")
                    })
                    .map(|(v, _)| v)
            })
        })
        .collect();
    let mut out = vec![first.join().unwrap()];
    out.extend(rest.into_iter().map(|h| h.join().unwrap()));
    out
}

#[test]
fn concurrent_commits_all_land_in_fewer_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (store, group) = shared_store(dir.path());
    let before = writes(dir.path());
    let n = 32;
    let results = commit_from_threads(&store, &group, n, || {});
    for (i, r) in results.iter().enumerate() {
        assert_eq!(
            r.as_ref().unwrap(),
            &format!("m{}", i + 1),
            "each gets its own value"
        );
    }
    // One write for the first commit, one for the 31 queued behind it.
    assert_eq!(writes(dir.path()) - before, 2, "commits were grouped");
    let on_disk = disk(&dir.path().join("llm.json"));
    let mut texts: Vec<String> = on_disk
        .messages()
        .iter()
        .map(|m| m.content.clone())
        .collect();
    texts.sort();
    let mut want: Vec<String> = (1..=n).map(|k| format!("<p>message {k}</p>")).collect();
    want.sort();
    assert_eq!(texts, want, "every commit is on disk");
    // A reader opening the file now sees the same.
    let reopened = Store::open(dir.path().join("llm.json"), OpenOptions::default()).unwrap();
    assert_eq!(reopened.state().messages().len(), n as usize);
}

#[test]
fn many_unsynchronised_committers_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (store, group) = shared_store(dir.path());
    let before = writes(dir.path());
    let threads = 16;
    let each = 8;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (store, group) = (store.clone(), group.clone());
            thread::spawn(move || {
                for k in 0..each {
                    let n = t * 100 + k + 1;
                    group
                        .commit(&store, move |s| s.push_message(msg(n)))
                        .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let on_disk = disk(&dir.path().join("llm.json"));
    assert_eq!(on_disk.messages().len(), (threads * each) as usize);
    let made = writes(dir.path()) - before;
    assert!(
        (1..=(threads * each) as u64).contains(&made),
        "{made} writes for {} commits",
        threads * each
    );
}

#[test]
fn a_failed_fsync_fails_every_commit_of_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (store, group) = shared_store(dir.path());
    // The hook is per thread: every committer sets it, so whichever leads
    // a batch has its directory fsync fail.
    let results = commit_from_threads(&store, &group, 12, || wo_durable::fail_dir_syncs(true));
    for r in &results {
        match r {
            Err(e @ StoreError::NotDurable { .. }) => {
                assert!(
                    e.to_string().contains("injected directory fsync failure"),
                    "{e}"
                );
                assert!(!e.left_file_unchanged());
            }
            other => panic!("a commit of a batch whose fsync failed was acknowledged: {other:?}"),
        }
    }
    // The queue works on once the disk does.
    let (v, _) = group
        .commit(&store, |s| {
            s.push_message(msg(99));
            "after"
        })
        .unwrap();
    assert_eq!(v, "after");
    assert_eq!(disk(&dir.path().join("llm.json")).messages().len(), 13);
}

#[test]
fn a_failed_write_fails_every_commit_and_leaves_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (store, group) = shared_store(dir.path());
    let path = dir.path().join("llm.json");
    let before = fs::read(&path).unwrap();
    // Root ignores modes: the immutable attribute refuses new temp files.
    let made = std::process::Command::new("chattr")
        .arg("+i")
        .arg(dir.path())
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o500)).unwrap();
    }
    if fs::write(dir.path().join("probe"), b"").is_ok() {
        panic!("could not make a read-only directory here (chattr or chmod)");
    }
    let results = commit_from_threads(&store, &group, 6, || {});
    if made {
        std::process::Command::new("chattr")
            .arg("-i")
            .arg(dir.path())
            .status()
            .unwrap();
    } else {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
    }
    for r in &results {
        match r {
            Err(e @ StoreError::Write { .. }) => {
                assert!(e.to_string().contains("the file is unchanged"), "{e}");
                assert_eq!(e.exit_code(), 2);
            }
            other => panic!("a commit whose write failed was acknowledged: {other:?}"),
        }
    }
    assert_eq!(fs::read(&path).unwrap(), before, "the file is untouched");
}

#[test]
fn hand_edits_between_batches_survive() {
    let dir = tempfile::tempdir().unwrap();
    let (store, group) = shared_store(dir.path());
    let path = dir.path().join("llm.json");
    group.commit(&store, |s| s.push_message(msg(100))).unwrap();
    // An editor changes the context while the server holds the file.
    let mut edited = disk(&path);
    edited.context = "<p>edited by hand</p>".into();
    fs::write(&path, wo_format::to_canonical_vec(&edited)).unwrap();
    commit_from_threads(&store, &group, 4, || {})
        .into_iter()
        .for_each(|r| {
            r.unwrap();
        });
    let on_disk = disk(&path);
    assert_eq!(on_disk.context, "<p>edited by hand</p>");
    assert_eq!(on_disk.messages().len(), 5);
}

#[test]
fn a_change_that_panics_fails_its_batch_not_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let (store, group) = shared_store(dir.path());
    let path = dir.path().join("llm.json");
    // A first write holds the queue until a panicking change and a good one
    // are queued behind it, in that order: they form the next batch.
    let (started, began) = std::sync::mpsc::channel();
    let first = {
        let (store, group) = (store.clone(), group.clone());
        thread::spawn(move || {
            let waiting = group.clone();
            group.commit(&store, move |s| {
                started.send(()).unwrap();
                wait_queued(&waiting, 2);
                s.push_message(msg(1));
            })
        })
    };
    began.recv_timeout(Duration::from_secs(30)).unwrap();
    let spawn = |k: i64| {
        let (store, group) = (store.clone(), group.clone());
        thread::spawn(move || {
            group.commit(&store, move |s| {
                if k == 2 {
                    // Half done when it breaks: what it did is taken back.
                    s.push_message(msg(2));
                    panic!("a broken change");
                }
                s.push_message(msg(k));
            })
        })
    };
    let broken = spawn(2);
    wait_queued(&group, 1);
    let good = spawn(3);
    // The first committer leads on until the queue is empty, so the
    // panic surfaces in its thread (after its own change was written); both
    // members of the broken batch are told their change was not confirmed.
    assert!(
        first.join().is_err(),
        "the panic is re-raised by the leader"
    );
    for o in [broken.join(), good.join()] {
        let e = o
            .expect("a member is told, not panicked")
            .expect_err("a member of a batch that panicked was acknowledged");
        assert!(e.to_string().contains("not confirmed written"), "{e}");
    }
    assert_eq!(
        disk(&path).messages().len(),
        1,
        "only the first batch was written"
    );
    // The queue goes on.
    group.commit(&store, |s| s.push_message(msg(4))).unwrap();
    let texts: Vec<String> = disk(&path)
        .messages()
        .iter()
        .map(|m| m.content.clone())
        .collect();
    assert_eq!(
        texts,
        ["<p>message 1</p>", "<p>message 4</p>"],
        "nothing of the broken batch is written later"
    );
    assert_eq!(lock_store(&store).state(), &disk(&path));
}

fn lock_store(store: &Mutex<Store>) -> std::sync::MutexGuard<'_, Store> {
    store.lock().unwrap_or_else(|p| p.into_inner())
}

#[test]
fn submitted_changes_are_written_by_one_leader_and_each_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let (store, group) = shared_store(dir.path());
    let before = writes(dir.path());
    let (tx, rx) = std::sync::mpsc::channel();
    let mut leaders = 0;
    for k in 1..=10 {
        let tx = tx.clone();
        let must_lead = group.submit(
            move |s: &mut State| {
                s.push_message(msg(k));
                k
            },
            move |verdict| tx.send(verdict.map(|(v, _)| v)).unwrap(),
        );
        leaders += usize::from(must_lead);
    }
    assert_eq!(leaders, 1, "only the first submitter is told to lead");
    assert!(
        rx.try_recv().is_err(),
        "nothing is acknowledged before the write"
    );
    group.lead(&store);
    let mut told: Vec<i64> = rx.try_iter().map(Result::unwrap).collect();
    told.sort();
    assert_eq!(told, (1..=10).collect::<Vec<_>>());
    assert_eq!(writes(dir.path()) - before, 1, "one write for all ten");
    assert_eq!(disk(&dir.path().join("llm.json")).messages().len(), 10);
    // Leadership was handed back: the next submitter leads again.
    assert!(group.submit(|s: &mut State| s.push_message(msg(11)), |_| {}));
    group.lead(&store);
    assert_eq!(disk(&dir.path().join("llm.json")).messages().len(), 11);
}

#[test]
fn lead_then_shows_each_batch_as_written_before_any_committer_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let (store, group) = shared_store(dir.path());
    // What the hook saw, appended as each batch ends: the messages in the
    // store, and how many verdicts had been delivered by then.
    let seen: Arc<Mutex<Vec<(usize, usize)>>> = Arc::default();
    let told = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for k in 1..=5 {
        let told = told.clone();
        group.submit(
            move |s: &mut State| s.push_message(msg(k)),
            move |verdict| {
                verdict.unwrap();
                told.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            },
        );
    }
    let hook = {
        let (seen, told) = (seen.clone(), told.clone());
        move |s: &Store| {
            let told = told.load(std::sync::atomic::Ordering::SeqCst);
            seen.lock()
                .unwrap()
                .push((s.state().messages().len(), told));
        }
    };
    group.lead_then(&store, &hook);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(5, 0)],
        "one batch: the hook saw all five written, before any verdict"
    );
    assert_eq!(told.load(std::sync::atomic::Ordering::SeqCst), 5);

    // After a failed write too (the store as the failure left it), still
    // before the committer hears of the failure.
    wo_durable::fail_dir_syncs(true);
    let failed = group.submit(
        |s: &mut State| s.push_message(msg(6)),
        |v| {
            assert!(v.is_err(), "a batch whose fsync failed was acknowledged");
        },
    );
    assert!(failed);
    group.lead_then(&store, &hook);
    wo_durable::fail_dir_syncs(false);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2, "the hook runs after a failed write too");
}
