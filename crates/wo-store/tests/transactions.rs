//! The store's one transactional rule: validate, apply under a savepoint,
//! write, then publish. A transaction that is refused (a content or size
//! limit, a failing change) or whose write fails (a full disk) leaves the
//! long-lived store exactly as it was — so the next write never carries
//! it — and afterwards the store's state is the file's.

use std::fs;
use std::path::Path;
use std::sync::Mutex;

use proptest::prelude::*;
use wo_format::{Message, State, TruthEntry};
use wo_store::{GroupCommit, Limits, OpenOptions, Store, StoreError};

mod common;
use common::{msg, ts};

const MAX_MESSAGE: usize = 2_000;

fn options() -> OpenOptions {
    OpenOptions {
        limits: Limits {
            max_message_bytes: MAX_MESSAGE,
            max_state_bytes: 200_000,
            ..Limits::default()
        },
        ..OpenOptions::default()
    }
}

fn new_store(dir: &Path) -> Store {
    Store::create(dir.join("llm.json"), State::new(ts(0)), options()).unwrap()
}

fn disk(store: &Store) -> State {
    wo_format::parse(&fs::read(store.path()).unwrap()).unwrap()
}

/// The store holds what the file holds, and nothing but the file is in
/// its directory (no temp file left).
fn assert_in_step(store: &Store) {
    assert_eq!(store.state(), &disk(store), "memory equals the file");
    let leftovers: Vec<String> = fs::read_dir(store.path().parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "llm.json" && n != "llm.json.lock")
        .collect();
    assert!(leftovers.is_empty(), "left behind: {leftovers:?}");
}

fn big_truth(n: i64) -> TruthEntry {
    TruthEntry::new(
        "big",
        ts(n),
        0.5,
        format!("<p>{}</p>", "x".repeat(MAX_MESSAGE + 1)),
    )
}

fn big_message(n: i64) -> Message {
    Message::new(
        "model",
        ts(n),
        "big",
        format!("<p>{}</p>", "-".repeat(MAX_MESSAGE + 1)),
    )
}

#[test]
fn a_refused_change_is_taken_back_and_later_writes_work() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    store.transact(|s| s.push_message(msg(1))).unwrap();
    let before = store.state().clone();

    let err = store.transact(|s| s.add_truth(big_truth(2))).unwrap_err();
    assert!(matches!(err, StoreError::ContentTooLarge { .. }), "{err}");
    assert_eq!(store.state(), &before, "the refused entry is not kept");
    let err = store
        .transact(|s| {
            s.push_message(msg(3));
            s.push_message(big_message(4))
        })
        .unwrap_err();
    assert!(err.to_string().contains("/messages/2/content"), "{err}");
    assert_eq!(
        store.state(),
        &before,
        "the whole transaction is taken back"
    );
    assert_in_step(&store);

    // Not poisoned: the next writes work and carry nothing refused.
    store
        .transact(|s| s.add_truth(TruthEntry::new("ok", ts(5), 0.5, "<p>ok</p>")))
        .unwrap();
    store.transact(|s| s.push_message(msg(6))).unwrap();
    assert_in_step(&store);
    let state = disk(&store);
    assert_eq!(state.messages().len(), 2);
    assert_eq!(state.truth.trust.len(), 1);
    assert_eq!(state.truth.trust[0].title, "ok");
}

#[test]
fn a_state_over_its_size_limit_is_taken_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    store.transact(|s| s.push_message(msg(1))).unwrap();
    let before = store.state().clone();
    let err = store
        .transact(|s| {
            for n in 0..200 {
                s.push_message(Message::new(
                    "alec",
                    ts(10 + n),
                    "filler",
                    format!("<p>{}</p>", "y".repeat(1_500)),
                ));
            }
        })
        .unwrap_err();
    assert!(matches!(err, StoreError::TooLarge { .. }), "{err}");
    assert_eq!(store.state(), &before);
    store.transact(|s| s.push_message(msg(2))).unwrap();
    assert_in_step(&store);
    assert_eq!(disk(&store).messages().len(), 2);
}

#[test]
fn a_failed_change_in_try_transact_is_taken_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    store.transact(|s| s.push_message(msg(1))).unwrap();
    let before = store.state().clone();
    let refused = store
        .try_transact(|s| {
            s.push_message(msg(2));
            s.context = "<p>half done</p>".into();
            s.messages_mut().clear();
            Err::<(), _>("changed my mind")
        })
        .unwrap();
    assert_eq!(refused.unwrap_err(), "changed my mind");
    assert_eq!(store.state(), &before);
    store.transact(|s| s.push_message(msg(3))).unwrap();
    assert_in_step(&store);
    assert_eq!(disk(&store).messages().len(), 2);
    assert_eq!(disk(&store).context, "");
}

/// A full disk (ENOSPC, injected after the temp file's bytes were written):
/// the error says so and that nothing changed, no temp file is left, and
/// the next successful write does not carry the refused change.
#[test]
fn a_change_refused_on_a_full_disk_is_never_written_later() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    store.transact(|s| s.push_message(msg(1))).unwrap();
    let before = store.state().clone();
    wo_durable::fail_stages(Some(libc::ENOSPC));
    let err = store.transact(|s| s.push_message(msg(2))).unwrap_err();
    let err2 = store
        .transact(|s| s.add_truth(TruthEntry::new("lost", ts(3), 0.5, "<p>l</p>")))
        .unwrap_err();
    wo_durable::fail_stages(None);
    assert!(matches!(err, StoreError::Write { .. }), "{err}");
    assert!(matches!(err2, StoreError::Write { .. }), "{err2}");
    assert_eq!(err.exit_code(), 2);
    let text = err.to_string();
    assert!(text.contains("the file is unchanged"), "{text}");
    assert!(text.contains("free some space"), "{text}");
    assert_eq!(store.state(), &before);
    assert_in_step(&store);

    store.transact(|s| s.push_message(msg(4))).unwrap();
    assert_in_step(&store);
    let titles: Vec<String> = disk(&store)
        .messages()
        .iter()
        .map(|m| m.title.clone())
        .collect();
    assert_eq!(titles, ["m1", "m4"]);
    assert!(disk(&store).truth.trust.is_empty());
}

/// An editor saving in place right after the rename of our write (before
/// the store notes which version it wrote): that save is someone else's
/// version, and the next transaction keeps it.
#[test]
fn an_in_place_save_right_after_the_rename_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    store.transact(|s| s.push_message(msg(1))).unwrap();
    let fired = std::rc::Rc::new(std::cell::Cell::new(false));
    let f = fired.clone();
    wo_durable::after_rename(Some(Box::new(move |path: &Path| {
        if f.replace(true) {
            return;
        }
        let mut s = wo_format::parse(&fs::read(path).unwrap()).unwrap();
        s.messages_mut()[0].title = "renamed in the editor".into();
        // An in-place save: the same inode, truncated and rewritten.
        fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(path)
            .and_then(|mut f| {
                use std::io::Write;
                f.write_all(&wo_format::to_canonical_vec(&s))
            })
            .unwrap();
    })));
    store.transact(|s| s.push_message(msg(2))).unwrap();
    wo_durable::after_rename(None);
    assert!(fired.get());
    store.transact(|s| s.push_message(msg(3))).unwrap();
    let titles: Vec<String> = disk(&store)
        .messages()
        .iter()
        .map(|m| m.title.clone())
        .collect();
    assert_eq!(titles, ["renamed in the editor", "m2", "m3"]);
    assert_in_step(&store);
}

/// In one group-commit batch, an oversized change is refused alone: the
/// changes batched with it are written, and the queue goes on.
#[test]
fn an_oversized_change_in_a_batch_is_refused_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = Mutex::new(new_store(dir.path()));
    let group = GroupCommit::new(&store.lock().unwrap());
    let verdicts = std::sync::Arc::new(Mutex::new(Vec::new()));
    let mut must_lead = false;
    for (n, big) in [(1, false), (2, true), (3, false)] {
        let v = verdicts.clone();
        must_lead |= group.submit(
            move |s: &mut State| {
                if big {
                    s.push_message(big_message(n))
                } else {
                    s.push_message(msg(n))
                }
            },
            move |verdict| v.lock().unwrap().push((n, verdict.map(|_| ()))),
        );
    }
    assert!(must_lead);
    group.lead(&store);
    let verdicts = verdicts.lock().unwrap();
    let ok: Vec<(i64, bool)> = verdicts.iter().map(|(n, v)| (*n, v.is_ok())).collect();
    assert_eq!(ok, [(1, true), (2, false), (3, true)]);
    let err = verdicts[1].1.as_ref().unwrap_err();
    assert!(matches!(err, StoreError::ContentTooLarge { .. }), "{err}");
    let store = store.into_inner().unwrap();
    assert_in_step(&store);
    assert_eq!(disk(&store).messages().len(), 2);
}

/// What a step of the property test does.
#[derive(Clone, Debug)]
enum Step {
    /// A small message: accepted.
    Message,
    /// A small truth entry: accepted.
    Truth,
    /// A retitle of the first message (a replacement in place).
    Retitle,
    /// An oversized message after a small one: refused whole.
    TooLargeMessage,
    /// An oversized truth entry: refused.
    TooLargeTruth,
    /// A change that edits, then fails (`try_transact`): taken back.
    FailingChange,
    /// A small message on a full disk: refused.
    DiskFull,
    /// A batch of a small change and an oversized one.
    Batch,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        Just(Step::Message),
        Just(Step::Truth),
        Just(Step::Retitle),
        Just(Step::TooLargeMessage),
        Just(Step::TooLargeTruth),
        Just(Step::FailingChange),
        Just(Step::DiskFull),
        Just(Step::Batch),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// After any sequence of accepted and refused transactions the store's
    /// state equals the file's, which holds exactly the accepted changes.
    #[test]
    fn memory_equals_the_file_after_any_sequence(steps in prop::collection::vec(step(), 1..14)) {
        let dir = tempfile::tempdir().unwrap();
        let shared = Mutex::new(new_store(dir.path()));
        let group = GroupCommit::new(&shared.lock().unwrap());
        let (mut messages, mut truths) = (0usize, 0usize);
        for (i, step) in steps.iter().enumerate() {
            let n = 10 * i as i64 + 10;
            let mut store = shared.lock().unwrap();
            match step {
                Step::Message => {
                    store.transact(|s| s.push_message(msg(n))).unwrap();
                    messages += 1;
                }
                Step::Truth => {
                    let e = TruthEntry::new("t", ts(n), 0.5, format!("<p>{n}</p>"));
                    store.transact(|s| s.add_truth(e)).unwrap();
                    truths += 1;
                }
                Step::Retitle => {
                    store.transact(|s| {
                        if let Some(id) = s.messages().first().map(|m| m.id.clone()) {
                            s.set_message_title(&id, format!("t{n}"), ts(n));
                        }
                    }).unwrap();
                }
                Step::TooLargeMessage => {
                    let err = store.transact(|s| {
                        s.push_message(msg(n));
                        s.push_message(big_message(n + 1))
                    });
                    prop_assert!(err.is_err());
                }
                Step::TooLargeTruth => {
                    prop_assert!(store.transact(|s| s.add_truth(big_truth(n))).is_err());
                }
                Step::FailingChange => {
                    let r = store.try_transact(|s| {
                        s.push_message(msg(n));
                        if let Some(id) = s.messages().first().map(|m| m.id.clone()) {
                            s.set_message_title(&id, "never".into(), ts(n));
                        }
                        s.truth.trust.clear();
                        Err::<(), ()>(())
                    });
                    prop_assert!(r.unwrap().is_err());
                }
                Step::DiskFull => {
                    wo_durable::fail_stages(Some(libc::ENOSPC));
                    let r = store.transact(|s| s.push_message(msg(n)));
                    wo_durable::fail_stages(None);
                    prop_assert!(r.is_err());
                }
                Step::Batch => {
                    drop(store);
                    let mut lead = group.submit(move |s: &mut State| s.push_message(msg(n)), |_| ());
                    lead |= group.submit(move |s: &mut State| s.push_message(big_message(n + 1)), |_| ());
                    prop_assert!(lead);
                    group.lead(&shared);
                    messages += 1;
                    store = shared.lock().unwrap();
                }
            }
            let on_disk = disk(&store);
            prop_assert_eq!(store.state(), &on_disk);
            prop_assert_eq!(on_disk.messages().len(), messages);
            prop_assert_eq!(on_disk.truth.trust.len(), truths);
        }
        let store = shared.into_inner().unwrap();
        let reopened = Store::open(store.path(), options()).unwrap();
        prop_assert_eq!(reopened.state(), store.state());
        assert_in_step(&store);
    }
}

/// A batch checks each change's own messages only, but "its own" includes
/// an old message it edits: an edit far back in the transcript that breaks
/// a limit or a read rule is refused with that message's pointer, alone,
/// and the store and file stay as the accepted changes left them.
#[test]
fn an_old_message_edited_in_a_batch_is_still_checked() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = new_store(dir.path());
    first
        .transact(|s| {
            for n in 1..=5 {
                s.push_message(msg(n * 10));
            }
        })
        .unwrap();
    let store = Mutex::new(first);
    let group = GroupCommit::new(&store.lock().unwrap());
    let verdicts = std::sync::Arc::new(Mutex::new(Vec::new()));
    type Change = Box<dyn FnOnce(&mut State) + Send>;
    let changes: Vec<(i64, Change)> = vec![
        (
            1,
            Box::new(|s: &mut State| {
                s.push_message(msg(100));
            }),
        ),
        // The oldest message made too large.
        (
            2,
            Box::new(|s: &mut State| {
                s.messages_mut()[0].content = format!("<p>{}</p>", "-".repeat(MAX_MESSAGE));
            }),
        ),
        // The second oldest given a parent that is no id.
        (
            3,
            Box::new(|s: &mut State| s.messages_mut()[1].parent = Some("not an id".into())),
        ),
        // Inserted before the end, breaking a read rule (a blank username).
        (
            4,
            Box::new(|s: &mut State| {
                let mut m = msg(15);
                m.username = " ".into();
                s.push_message(m);
            }),
        ),
        (
            5,
            Box::new(|s: &mut State| {
                s.push_message(msg(200));
            }),
        ),
    ];
    let mut must_lead = false;
    for (n, change) in changes {
        let v = verdicts.clone();
        must_lead |= group.submit(change, move |verdict| {
            v.lock().unwrap().push((n, verdict.map(|_| ())))
        });
    }
    assert!(must_lead);
    group.lead(&store);
    let verdicts = verdicts.lock().unwrap();
    let ok: Vec<(i64, bool)> = verdicts.iter().map(|(n, v)| (*n, v.is_ok())).collect();
    assert_eq!(
        ok,
        [(1, true), (2, false), (3, false), (4, false), (5, true)]
    );
    match verdicts[1].1.as_ref().unwrap_err() {
        StoreError::ContentTooLarge { what, .. } => assert_eq!(what, "/messages/0/content"),
        e => panic!("not a size refusal: {e}"),
    }
    for (i, pointer) in [(2, "/messages/1/parent"), (3, "/messages/1/username")] {
        match verdicts[i].1.as_ref().unwrap_err() {
            StoreError::Refused { issues, .. } => {
                assert!(
                    issues.iter().any(|issue| issue.pointer == pointer),
                    "{pointer} not in {issues:?}"
                );
            }
            e => panic!("not a refusal: {e}"),
        }
    }
    let store = store.into_inner().unwrap();
    assert_in_step(&store);
    let on_disk = disk(&store);
    assert_eq!(on_disk.messages().len(), 7);
    assert!(
        on_disk
            .messages()
            .iter()
            .all(|m| m.content.len() < MAX_MESSAGE)
    );
    assert!(on_disk.messages().iter().all(|m| m.parent.is_none()));
}
