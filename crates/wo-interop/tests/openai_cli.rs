//! The CLI chat format's (product §9) `.ai/openai.json` import.

mod common;

use common::{fixture, opts};
use serde_json::{Value, json};
use wo_format::{Role, Timestamp};
use wo_interop::{InteropError, OPENAI_CLI_KEY, openai_cli};

fn original(rel: &str) -> Value {
    serde_json::from_slice(&std::fs::read(fixture(rel)).unwrap()).unwrap()
}

#[test]
fn the_seed_example_imports_as_one_branch() {
    let imported = openai_cli::import_with(&fixture("openai/project"), &opts()).unwrap();
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
    let ms = imported.state.messages();
    assert_eq!(ms.len(), 3);

    assert_eq!(ms[0].role, Some(Role::System));
    assert_eq!(ms[0].username, "system");
    assert_eq!(ms[1].role, Some(Role::User));
    assert_eq!(ms[1].username, "alec");
    assert_eq!(ms[1].content, "<p>First question ...</p>");
    assert_eq!(ms[1].timestamp.as_str(), "2025-10-20T12:01:00Z");
    assert_eq!(ms[1].provider, None);
    assert_eq!(ms[2].role, Some(Role::Assistant));
    assert_eq!(ms[2].username, "gpt-4o-mini");
    assert_eq!(ms[2].provider.as_deref(), Some("openai"));
    assert_eq!(ms[2].model.as_deref(), Some("gpt-4o-mini"));
    // The title rule of wo_format::title: the first sentence, its marks left out.
    assert_eq!(ms[2].title, "First answer");

    // One branch: each message follows the one before.
    assert_eq!(ms[0].parent, None);
    assert_eq!(ms[1].parent.as_deref(), Some(ms[0].id.as_str()));
    assert_eq!(ms[2].parent.as_deref(), Some(ms[1].id.as_str()));
    // Ids are the content-addressed ones of product §1.
    assert_eq!(
        ms[1].id,
        wo_format::ids::message_id("alec", "2025-10-20T12:01:00Z", "<p>First question ...</p>")
    );

    assert_eq!(
        imported.suggested_context.as_deref(),
        Some("<p>You are a helpful assistant.</p>")
    );
    assert_eq!(imported.state.context, "", "context is only suggested");
    assert_eq!(imported.state.date.as_str(), "2025-10-20T12:01:10Z");

    let fields = &imported.state.extra[OPENAI_CLI_KEY].to_value()["fields"];
    for key in [
        "provider",
        "base_url",
        "model",
        "system",
        "temperature",
        "max_tokens",
        "stream_default",
        "save_path_default",
        "env_key",
        "meta",
    ] {
        assert!(fields.get(key).is_some(), "{key} not kept");
    }
    assert_eq!(fields["env_key"], "OPENAI_API_KEY");
    assert_eq!(fields["meta"]["total_turns"], 1);
    assert!(fields.get("conversation").is_none());
}

#[test]
fn import_is_lossless() {
    for rel in ["openai/project/.ai/openai.json", "openai/odd.json"] {
        let imported = openai_cli::import_with(&fixture(rel), &opts()).unwrap();
        let rebuilt = openai_cli::reconstruct(&imported.state).unwrap();
        assert_eq!(rebuilt, original(rel), "{rel}");
    }
}

#[test]
fn undated_entries_get_deterministic_times_and_a_warning() {
    let path = fixture("openai/undated.json");
    let a = openai_cli::import_with(&path, &opts()).unwrap();
    let ms = a.state.messages();
    let times = common::times(ms);
    assert_eq!(
        times,
        [
            "2025-11-02T08:29:57Z",
            "2025-11-02T08:29:58Z",
            "2025-11-02T08:29:59Z",
            "2025-11-02T08:30:00Z"
        ]
    );
    let w: Vec<String> = a.warnings.iter().map(ToString::to_string).collect();
    assert!(
        w.iter()
            .any(|w| w.contains("4 of 4 messages had no timestamp")
                && w.contains("meta.last_updated")),
        "{w:#?}"
    );
    // Same input, same ids: re-importing never duplicates on merge.
    let b = openai_cli::import_with(&path, &opts()).unwrap();
    assert_eq!(a.state, b.state);

    // Lossy text (CR LF, trailing blank lines) is kept; reconstruction is
    // exact except for the credential.
    let mut expected = original("openai/undated.json");
    expected.as_object_mut().unwrap().remove("api_key");
    assert_eq!(openai_cli::reconstruct(&a.state).unwrap(), expected);
    assert_eq!(
        ms[1].content,
        "<p>A balanced search tree with wide nodes.<br/>Good for disks.</p>"
    );
    let usage = ms[3].usage.as_ref().expect("usage mapped");
    assert_eq!(
        (usage.prompt_tokens, usage.completion_tokens),
        (Some(31), Some(17))
    );
    assert_eq!(ms[2].content, "<p>And a &lt;trie&gt; &amp; a heap?</p>");
    // The system prompt keeps its line break in the suggestion.
    assert_eq!(
        a.suggested_context.as_deref(),
        Some("<p>Answer briefly.<br/>Cite sources when you can.</p>")
    );
}

#[test]
fn credentials_are_never_stored() {
    let imported = openai_cli::import_with(&fixture("openai/undated.json"), &opts()).unwrap();
    let bytes = wo_format::to_canonical_vec(&imported.state);
    let text = String::from_utf8(bytes).unwrap();
    assert!(!text.contains("sk-live"), "secret leaked into the state");
    assert!(
        text.contains("LOCAL_API_KEY"),
        "env_key names a variable and is kept"
    );
    let w = imported
        .warnings
        .iter()
        .find(|w| w.pointer.as_deref() == Some("/api_key"))
        .expect("a warning names the removed field");
    assert!(w.to_string().contains("credential removed"), "{w}");
    assert_eq!(
        imported.state.extra[OPENAI_CLI_KEY].to_value()["redacted"],
        json!(["/api_key"])
    );
}

#[test]
fn odd_entries_are_imported_with_warnings() {
    let imported = openai_cli::import_with(&fixture("openai/odd.json"), &opts()).unwrap();
    let ms = imported.state.messages();
    // 8 entries, one a stray string; the two identical "again" both survive.
    assert_eq!(ms.len(), 7);
    let by_text = |t: &str| {
        ms.iter()
            .find(|m| m.content == format!("<p>{t}</p>"))
            .unwrap_or_else(|| panic!("{t} missing"))
    };
    let dev = by_text("Use British spelling.");
    assert_eq!(
        (dev.role, dev.username.as_str()),
        (Some(Role::System), "developer")
    );
    assert_eq!(
        dev.timestamp.as_str(),
        "2025-10-21T07:00:00Z",
        "offset converted to UTC"
    );
    let parts = by_text("Describe this picture");
    assert_eq!(parts.role, Some(Role::User));
    let tool = by_text("a grey cat");
    assert_eq!(tool.username, "tool");
    assert_eq!(
        tool.timestamp.as_str(),
        "2025-10-21T07:00:07Z",
        "derived between neighbours"
    );
    let critic = by_text("ok");
    assert_eq!((critic.role, critic.username.as_str()), (None, "critic"));
    let agains: Vec<_> = ms.iter().filter(|m| m.content == "<p>again</p>").collect();
    assert_eq!(agains.len(), 2);
    assert_ne!(agains[0].id, agains[1].id);
    assert_eq!(agains[1].parent.as_deref(), Some(agains[0].id.as_str()));

    let pointers: Vec<&str> = imported
        .warnings
        .iter()
        .filter_map(|w| w.pointer.as_deref())
        .collect();
    for p in [
        "/conversation/2/timestamp", // no zone
        "/conversation/3/timestamp", // not a time
        "/conversation/4/role",      // unknown role
        "/conversation/5",           // not an object
        "/conversation/7",           // nudged duplicate
    ] {
        assert!(pointers.contains(&p), "no warning at {p}: {pointers:?}");
    }
    // No system setting: the last system entry named "system" would be the
    // suggestion; there is none.
    assert_eq!(imported.suggested_context, None);
}

#[test]
fn imported_states_are_valid_llm_json() {
    for rel in ["openai/project", "openai/undated.json", "openai/odd.json"] {
        let state = openai_cli::import_with(&fixture(rel), &opts())
            .unwrap()
            .state;
        let bytes = wo_format::to_canonical_vec(&state);
        let (errors, _) = wo_format::validate_bytes(&bytes);
        assert!(errors.is_empty(), "{rel}: {errors:#?}");
        assert_eq!(
            wo_format::parse(&bytes).unwrap(),
            state,
            "{rel}: parse round trip"
        );
    }
}

#[test]
fn invalid_json_is_an_error_naming_file_line_and_column() {
    let path = fixture("openai/invalid.json");
    let err = openai_cli::import_with(&path, &opts()).unwrap_err();
    match &err {
        InteropError::Json {
            path: p,
            line,
            column,
            ..
        } => {
            assert_eq!(p, &path);
            assert_eq!(*line, 4);
            assert!(*column > 0);
        }
        other => panic!("expected a JSON error, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("invalid.json:4:") && msg.contains("hint:"),
        "{msg}"
    );
}

#[test]
fn wrong_shapes_name_the_pointer() {
    let err = openai_cli::import_with(&fixture("openai/bad_shape.json"), &opts()).unwrap_err();
    match &err {
        InteropError::Shape {
            pointer, message, ..
        } => {
            assert_eq!(pointer, "/conversation");
            assert!(message.contains("expected an array"), "{message}");
        }
        other => panic!("expected a shape error, got {other:?}"),
    }
    assert!(
        err.to_string().contains("bad_shape.json at /conversation"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().join("list.json");
    std::fs::write(&top, "[1, 2]").unwrap();
    let err = openai_cli::import_with(&top, &opts()).unwrap_err();
    assert!(
        matches!(&err, InteropError::Shape { pointer, .. } if pointer.is_empty()),
        "{err:?}"
    );
}

#[test]
fn a_missing_file_is_not_found_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let err = openai_cli::import_with(dir.path(), &opts()).unwrap_err();
    assert!(matches!(err, InteropError::NotFound { .. }), "{err:?}");
    assert_eq!(err.path(), dir.path().join("openai.json"));
    assert!(err.to_string().contains(".ai/openai.json"), "{err}");
}

#[test]
fn no_dates_at_all_fall_back_to_the_given_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openai.json");
    std::fs::write(
        &path,
        r#"{"conversation": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}"#,
    )
    .unwrap();
    let imported = openai_cli::import_with(&path, &opts()).unwrap();
    let times = common::times(imported.state.messages());
    assert_eq!(times, ["2024-12-31T23:59:59Z", "2025-01-01T00:00:00Z"]);
    // No model in the file: the assistant takes the configured name.
    assert_eq!(imported.state.messages()[1].username, "local-model");
    assert!(
        imported
            .warnings
            .iter()
            .any(|w| w.message.contains("2025-01-01T00:00:00Z"))
    );
    assert_eq!(
        imported.state.date,
        Timestamp::parse("2025-01-01T00:00:00Z").unwrap()
    );
}

#[test]
fn merging_an_import_twice_adds_nothing() {
    let imported = openai_cli::import_with(&fixture("openai/undated.json"), &opts()).unwrap();
    let mut base = wo_format::State::new(Timestamp::parse("2026-01-01T00:00:00Z").unwrap());
    let first = imported.merge_into(&mut base);
    assert!(!first.is_empty());
    assert_eq!(base.messages().len(), 4);
    assert!(base.extra.contains_key(OPENAI_CLI_KEY));
    let second = imported.merge_into(&mut base);
    assert_eq!(base.messages().len(), 4);
    assert!(second.is_empty(), "{second:?}");
}

#[test]
fn reimporting_a_grown_conversation_adds_only_the_new_turns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openai.json");
    let mut doc = original("openai/undated.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    let first = openai_cli::import_with(&path, &opts()).unwrap();
    let mut base = wo_format::State::new(Timestamp::parse("2026-01-01T00:00:00Z").unwrap());
    first.merge_into(&mut base);
    let old_last = base.messages().last().unwrap().id.clone();

    // The CLI ran once more: two entries appended, last_updated moved.
    let conv = doc["conversation"].as_array_mut().unwrap();
    conv.push(json!({"role": "user", "content": "Which is faster?"}));
    conv.push(json!({"role": "assistant", "content": "It depends on the access pattern."}));
    doc["meta"]["last_updated"] = json!("2025-11-03T10:00:00Z");
    std::fs::write(&path, doc.to_string()).unwrap();
    let second = openai_cli::import_with(&path, &opts()).unwrap();
    assert_ne!(
        second.state.messages()[0].id,
        first.state.messages()[0].id,
        "derived times moved with last_updated"
    );

    second.merge_into(&mut base);
    assert_eq!(
        base.messages().len(),
        6,
        "old turns are recognised, not duplicated"
    );
    let new_user = base
        .messages()
        .iter()
        .find(|m| m.content == "<p>Which is faster?</p>")
        .unwrap();
    assert_eq!(new_user.parent.as_deref(), Some(old_last.as_str()));
    assert_eq!(new_user.timestamp.as_str(), "2025-11-03T09:59:59Z");
}
