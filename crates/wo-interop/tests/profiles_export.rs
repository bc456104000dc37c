//! The profiles layout's (product §9) `profiles/` tree: export and round trips both ways.

mod common;

use common::{assert_same_tree, fixture, opts};
use serde_json::Value;
use time::macros::offset;
use wo_format::xhtml::markdown_to_xhtml;
use wo_format::{Message, Role, State, Timestamp};
use wo_interop::profiles::{self, ExportOptions};
use wo_interop::{EMBED_KEY, InteropError, LocalOffset, PROFILES_KEY, openai_cli};

fn export_opts() -> ExportOptions {
    ExportOptions {
        offset: LocalOffset::Fixed(offset!(+1)),
        ..ExportOptions::default()
    }
}

fn ts(s: &str) -> Timestamp {
    Timestamp::parse(s).unwrap()
}

/// The fields the round trip promises to keep: id, username, role, content,
/// timestamp, parent.
type Essentials = (String, String, Option<Role>, String, String, Option<String>);

fn essentials(ms: &[Message]) -> Vec<Essentials> {
    ms.iter()
        .map(|m| {
            (
                m.id.clone(),
                m.username.clone(),
                m.role,
                m.content.clone(),
                m.timestamp.to_string(),
                m.parent.clone(),
            )
        })
        .collect()
}

#[test]
fn an_imported_tree_exports_byte_for_byte() {
    let src = fixture("profiles_clean");
    let imported = profiles::import_with(&src, &opts()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("profiles");
    let report = profiles::export(
        &imported.state,
        &target,
        &ExportOptions {
            copy_files_from: Some(src.clone()),
            ..export_opts()
        },
    )
    .unwrap();
    assert!(report.warnings.is_empty(), "{:#?}", report.warnings);
    assert_eq!(report.new_chat, None);
    assert_eq!(
        (report.profiles, report.chats, report.messages),
        (3, 30, 65)
    );
    assert_same_tree(&src, &target);

    // Through llm.json on disk and back: still byte for byte.
    let bytes = wo_format::to_canonical_vec(&imported.state);
    let reread = wo_format::parse(&bytes).unwrap();
    let again = out.path().join("again");
    profiles::export(
        &reread,
        &again,
        &ExportOptions {
            copy_files_from: Some(src.clone()),
            ..export_opts()
        },
    )
    .unwrap();
    assert_same_tree(&src, &again);
}

#[test]
fn without_side_files_only_images_are_missing() {
    let src = fixture("profiles_clean");
    let imported = profiles::import_with(&src, &opts()).unwrap();
    let out = tempfile::tempdir().unwrap();
    profiles::export(&imported.state, out.path(), &export_opts()).unwrap();
    let (a, b) = (common::tree(&src), common::tree(out.path()));
    let missing: Vec<&String> = a.keys().filter(|k| !b.contains_key(*k)).collect();
    assert_eq!(
        missing,
        [
            "A/chats/B/images/",
            "A/chats/B/images/KJ221.jpg",
            "A/chats/B/images/KJ221_thumb.jpg"
        ]
    );
}

/// A question by alec at `at`, answering nothing or following `parent`.
fn question(at: &str, title: &str, body: &str, parent: Option<&Message>) -> Message {
    let mut m = Message::new("alec", ts(at), title, body);
    m.role = Some(Role::User);
    m.parent = parent.map(|p| p.id.clone());
    m
}

fn handmade_state() -> State {
    let mut s = State::new(ts("2026-02-22T21:10:00Z"));
    let q = question(
        "2026-02-22T20:11:05Z",
        "Persistence model",
        "<p>Summarize the persistence model.</p>",
        None,
    );
    let a = {
        let mut m = Message::new(
            "claude-sonnet-4.5",
            ts("2026-02-22T20:11:09.25Z"),
            "Answer",
            markdown_to_xhtml("One **file**, `llm.json`:\n\n- atomic writes\n- merge by id"),
        );
        m.role = Some(Role::Assistant);
        m.provider = Some("anthropic".into());
        m.model = Some("claude-sonnet-4.5".into());
        m.parent = Some(q.id.clone());
        m.extra.insert("x_future".into(), Value::from(42).into());
        m
    };
    // A second branch answering the same question, and a message with no
    // role and no parent.
    let b = question(
        "2026-02-22T20:12:00Z",
        "Alt",
        "<p>And über-short?</p>",
        Some(&q),
    );
    let loose = Message::new(
        "bob",
        ts("2026-02-23T08:00:00Z"),
        "Note",
        "<p>a &lt;note&gt;</p><p>two paras</p>",
    );
    for m in [q, a, b, loose] {
        assert!(s.push_message(m));
    }
    s
}

#[test]
fn a_state_exports_to_a_new_profile_and_imports_back_the_same() {
    let state = handmade_state();
    let out = tempfile::tempdir().unwrap();
    let report = profiles::export(&state, out.path(), &export_opts()).unwrap();
    assert_eq!(report.new_chat, Some(("A".into(), "A".into())));
    assert_eq!(report.messages, 4);

    let jsonl = std::fs::read_to_string(out.path().join("A/chats/A/messages.jsonl")).unwrap();
    let first: Value = serde_json::from_str(jsonl.lines().next().unwrap()).unwrap();
    assert_eq!(first["role"], "user");
    assert_eq!(first["text"], "Summarize the persistence model.");
    assert_eq!(first["ts"], "Feb 22, 2026 09:11 PM", "local time at +01:00");
    assert!(first[EMBED_KEY].is_object());
    let meta: Value =
        serde_json::from_slice(&std::fs::read(out.path().join("A/meta.json")).unwrap()).unwrap();
    assert_eq!(meta["display_name"], "WikiOracle");
    assert_eq!(meta["created_at"], "2026-02-22 09:11 PM");
    assert!(out.path().join("A/chats/A/meta.json").is_file());

    let back = profiles::import_with(out.path(), &opts()).unwrap();
    assert!(back.warnings.is_empty(), "{:#?}", back.warnings);
    assert_eq!(
        essentials(back.state.messages()),
        essentials(state.messages())
    );
    for (a, b) in back.state.messages().iter().zip(state.messages()) {
        assert_eq!(
            (&a.title, &a.provider, &a.model),
            (&b.title, &b.provider, &b.model)
        );
        assert_eq!(a.extra.get("x_future"), b.extra.get("x_future"));
    }

    // And the re-imported tree exports byte for byte again.
    let out2 = tempfile::tempdir().unwrap();
    profiles::export(&back.state, out2.path(), &export_opts()).unwrap();
    assert_same_tree(out.path(), out2.path());
}

#[test]
fn continuations_join_their_chat_and_the_rest_get_a_new_profile() {
    let src = fixture("profiles_clean");
    let mut state = profiles::import_with(&src, &opts()).unwrap().state;
    let last = state
        .messages()
        .iter()
        .filter(|m| {
            m.extra[PROFILES_KEY].to_value()["profile"] == "A"
                && m.extra[PROFILES_KEY].to_value()["chat"] == "B"
        })
        .max_by_key(|m| m.extra[PROFILES_KEY].to_value()["line"].as_u64())
        .unwrap()
        .id
        .clone();
    let mut follow = Message::new(
        "alec",
        ts("2025-12-07T08:00:00Z"),
        "More",
        "<p>one more question</p>",
    );
    follow.role = Some(Role::User);
    follow.parent = Some(last);
    let follow_id = follow.id.clone();
    state.push_message(follow);
    let openai = openai_cli::import_with(&fixture("openai/project"), &opts()).unwrap();
    openai.merge_into(&mut state);

    let out = tempfile::tempdir().unwrap();
    let report = profiles::export(
        &state,
        out.path(),
        &ExportOptions {
            copy_files_from: Some(src.clone()),
            ..export_opts()
        },
    )
    .unwrap();
    // Profiles A, B, C exist: the new one is D.
    assert_eq!(report.new_chat, Some(("D".into(), "A".into())));

    // The continued chat is the original file plus one appended line.
    let original = std::fs::read_to_string(src.join("A/chats/B/messages.jsonl")).unwrap();
    let exported = std::fs::read_to_string(out.path().join("A/chats/B/messages.jsonl")).unwrap();
    let appended = exported
        .strip_prefix(&original)
        .expect("append-only: the old lines are a prefix");
    assert_eq!(appended.lines().count(), 1);
    assert!(appended.contains("one more question") && appended.ends_with('\n'));
    let new_chat = std::fs::read_to_string(out.path().join("D/chats/A/messages.jsonl")).unwrap();
    assert_eq!(new_chat.lines().count(), 3);

    let back = profiles::import_with(out.path(), &opts()).unwrap();
    assert!(back.warnings.is_empty(), "{:#?}", back.warnings);
    assert_eq!(
        essentials(back.state.messages()),
        essentials(state.messages())
    );
    assert!(back.state.message(&follow_id).is_some());
    // The seed-001 extras travel inside the embedded messages.
    let sys = back
        .state
        .messages()
        .iter()
        .find(|m| m.username == "system")
        .unwrap();
    assert_eq!(sys.extra["import_openai_cli"].to_value()["index"], 0);
}

#[test]
fn a_non_empty_target_is_refused_unless_overwrite() {
    let state = handmade_state();
    let out = tempfile::tempdir().unwrap();
    std::fs::write(out.path().join("keep.txt"), "mine").unwrap();
    let err = profiles::export(&state, out.path(), &export_opts()).unwrap_err();
    assert!(
        matches!(err, InteropError::TargetNotEmpty { .. }),
        "{err:?}"
    );
    assert_eq!(err.path(), out.path());
    let msg = err.to_string();
    assert!(
        msg.contains(&out.path().display().to_string())
            && msg.contains("nothing was written")
            && !msg.contains("overwrite"),
        "{msg}"
    );
    assert!(!out.path().join("A").exists(), "nothing written");

    let overwriting = ExportOptions {
        overwrite: true,
        ..export_opts()
    };
    let report = profiles::export(&state, out.path(), &overwriting).unwrap();
    assert_eq!(report.messages, 4);
    assert_eq!(
        std::fs::read_to_string(out.path().join("keep.txt")).unwrap(),
        "mine"
    );
    // The new profile does not take a name already on disk… and a second
    // overwrite rewrites the same files.
    profiles::export(&state, out.path(), &overwriting).unwrap();
    assert!(out.path().join("B/chats/A/messages.jsonl").is_file());

    let file = out.path().join("keep.txt");
    let err = profiles::export(&state, &file, &export_opts()).unwrap_err();
    assert!(matches!(err, InteropError::NotADirectory { .. }), "{err:?}");
}

#[test]
fn an_empty_existing_target_is_fine() {
    let out = tempfile::tempdir().unwrap();
    profiles::export(&handmade_state(), out.path(), &export_opts()).unwrap();
    assert!(out.path().join("A/chats/A/messages.jsonl").is_file());
}

#[test]
fn a_damaged_tree_exports_clean() {
    let imported = profiles::import_with(&fixture("profiles_damaged"), &opts()).unwrap();
    let out = tempfile::tempdir().unwrap();
    profiles::export(&imported.state, out.path(), &export_opts()).unwrap();
    let jsonl = std::fs::read_to_string(out.path().join("A/chats/A/messages.jsonl")).unwrap();
    assert_eq!(jsonl.lines().count(), 4);
    assert!(jsonl.ends_with('\n'));
    // Missing meta files stay missing; the corrupt one is restored as it was.
    assert!(!out.path().join("A/meta.json").exists());
    assert!(!out.path().join("A/chats/B/meta.json").exists());
    assert_eq!(
        std::fs::read_to_string(out.path().join("B/meta.json")).unwrap(),
        "{\"id\": \"B\", \"display_name\": "
    );
    // Good lines are byte-identical to the source's.
    let src =
        std::fs::read_to_string(fixture("profiles_damaged/A/chats/B/messages.jsonl")).unwrap();
    assert_eq!(
        std::fs::read_to_string(out.path().join("A/chats/B/messages.jsonl")).unwrap(),
        src
    );

    let again = profiles::import_with(out.path(), &opts()).unwrap();
    for gone in ["truncated", "not JSON", "UTF-8", "no \"text\""] {
        assert!(
            !again
                .warnings
                .iter()
                .any(|w| w.path.ends_with("messages.jsonl") && w.message.contains(gone)),
            "{gone}: {:#?}",
            again.warnings
        );
    }
    assert_eq!(
        essentials(again.state.messages()),
        essentials(imported.state.messages())
    );
}

#[test]
fn edited_meta_records_are_rendered_in_the_seed_layout() {
    let mut state = profiles::import_with(&fixture("profiles_clean"), &opts())
        .unwrap()
        .state;
    let mut record = state.extra[PROFILES_KEY].to_value();
    *record.pointer_mut("/profiles/A/meta/display_name").unwrap() = Value::from("Café app");
    state.extra.insert(PROFILES_KEY.into(), record.into());
    let out = tempfile::tempdir().unwrap();
    profiles::export(&state, out.path(), &export_opts()).unwrap();
    assert_eq!(
        std::fs::read_to_string(out.path().join("A/meta.json")).unwrap(),
        "{\n  \"id\": \"A\",\n  \"display_name\": \"Caf\\u00e9 app\",\n  \"created_at\": \"2025-12-06 04:52 PM\",\n  \"model_override\": null\n}\n"
    );
}
