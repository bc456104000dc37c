//! The profiles layout's (product §9) `profiles/` tree: import, including damaged trees.

mod common;

use common::{copy_tree, fixture, opts};
use serde_json::Value;
use wo_format::{Message, Role};
use wo_interop::{InteropError, PROFILES_KEY, Warning, profiles};

fn origin(m: &Message) -> Value {
    m.extra[PROFILES_KEY].to_value()
}

fn chat<'a>(ms: &'a [Message], p: &str, c: &str) -> Vec<&'a Message> {
    let mut v: Vec<&Message> = ms
        .iter()
        .filter(|m| origin(m)["profile"] == p && origin(m)["chat"] == c)
        .collect();
    v.sort_by_key(|m| origin(m)["line"].as_u64());
    v
}

#[test]
fn a_clean_tree_imports_without_warnings() {
    let imported = profiles::import_with(&fixture("profiles_clean"), &opts()).unwrap();
    assert!(imported.warnings.is_empty(), "{:#?}", imported.warnings);
    let ms = imported.state.messages();
    // A/A 4 + A/B 5 + B's 28 chats of 2 lines.
    assert_eq!(ms.len(), 4 + 5 + 28 * 2);

    let backend = chat(ms, "A", "B");
    let [plan, answer, image, vision, thanks] = backend[..] else {
        panic!("A/B has {} messages", backend.len())
    };
    assert_eq!(
        (plan.role, plan.username.as_str()),
        (Some(Role::User), "alec")
    );
    assert_eq!(plan.content, "<p>plan database indexing</p>");
    // Local 05:14 PM at +01:00 is 16:14Z; the second line of that minute is
    // one second later, so file order survives the state's time order.
    assert_eq!(plan.timestamp.as_str(), "2025-12-06T16:14:00Z");
    assert_eq!(answer.timestamp.as_str(), "2025-12-06T16:14:01Z");
    // The chat's model_override names the assistant.
    assert_eq!(answer.username, "qwen2.5-coder:14b");
    assert_eq!(answer.model.as_deref(), Some("qwen2.5-coder:14b"));
    assert_eq!(answer.role, Some(Role::Assistant));
    // One branch per chat.
    assert_eq!(plan.parent, None);
    assert_eq!(answer.parent.as_deref(), Some(plan.id.as_str()));
    assert_eq!(thanks.parent.as_deref(), Some(vision.id.as_str()));
    // Original ts, ids, images and unknown fields are kept for export.
    assert_eq!(origin(plan)["fields"]["ts"], "Dec 06, 2025 05:14 PM");
    assert_eq!(origin(image)["fields"]["image"], "KJ221_thumb.jpg");
    assert_eq!(origin(image)["fields"]["id"], "KJ221");
    assert_eq!(origin(thanks)["fields"]["judge"]["conflict_score"], 2.5);
    assert_eq!(origin(thanks)["fields"]["edited_by"], "alec");
    assert_eq!(
        origin(image)["keys"],
        serde_json::json!(["role", "text", "image", "ts", "id"])
    );

    // The profile's model_override applies where the chat has none.
    let study = chat(ms, "B", "A");
    assert_eq!(study[1].username, "llama3.1:8b");
    // The 27th and 28th chats.
    assert_eq!(
        chat(ms, "B", "AA")[0].content,
        "<p>Explain fuzzing in two sentences.</p>"
    );
    assert_eq!(chat(ms, "B", "AB").len(), 2);

    // Text the XHTML cannot reproduce exactly (a trailing newline) is kept.
    let kickoff = chat(ms, "A", "A");
    assert_eq!(
        origin(kickoff[3])["fields"]["text"],
        "Yes — FastAPI with Postgres is a good fit.\n"
    );
    assert!(origin(kickoff[2])["fields"].get("text").is_none());
    assert_eq!(
        kickoff[2].content,
        "<p>Use &lt;FastAPI&gt; &amp; Postgres?</p>"
    );

    // Folder and meta records.
    let tree = &imported.state.extra[PROFILES_KEY].to_value()["profiles"];
    assert_eq!(tree["A"]["meta"]["display_name"], "WebApp Project");
    assert_eq!(tree["B"]["meta"]["theme"], "dark");
    assert_eq!(tree["B"]["chats"]["C"]["style"], "compact");
    assert_eq!(tree["B"]["chats"]["F"]["style"], "python-utf8");
    assert_eq!(tree["B"]["chats"]["A"]["style"], "python");
    assert_eq!(tree["B"]["chats"]["D"]["final_newline"], false);
    assert_eq!(tree["C"]["chats_dir"], false);
    // Only the hand-edited line needed its bytes kept.
    let raws: Vec<_> = ms
        .iter()
        .filter(|m| origin(m).get("raw").is_some())
        .collect();
    assert_eq!(raws.len(), 1);
    assert_eq!(raws[0].content, "<p>hand edited</p>");
}

#[test]
fn imported_trees_are_valid_llm_json() {
    for rel in ["profiles_clean", "profiles_damaged"] {
        let state = profiles::import_with(&fixture(rel), &opts()).unwrap().state;
        let bytes = wo_format::to_canonical_vec(&state);
        let (errors, _) = wo_format::validate_bytes(&bytes);
        assert!(errors.is_empty(), "{rel}: {errors:#?}");
        assert_eq!(wo_format::parse(&bytes).unwrap(), state);
    }
}

fn find<'a>(ws: &'a [Warning], file_end: &str, line: Option<usize>, needle: &str) -> &'a Warning {
    ws.iter()
        .find(|w| w.path.ends_with(file_end) && w.line == line && w.message.contains(needle))
        .unwrap_or_else(|| panic!("no warning {file_end}:{line:?} {needle:?} in {ws:#?}"))
}

#[test]
fn damage_is_recovered_with_warnings_naming_file_and_line() {
    let imported = profiles::import_with(&fixture("profiles_damaged"), &opts()).unwrap();
    let ws = &imported.warnings;
    let a = "A/chats/A/messages.jsonl";
    find(ws, a, Some(8), "truncated last line");
    find(ws, a, Some(2), "not JSON");
    find(ws, a, Some(3), "not valid UTF-8");
    let no_text = find(ws, a, Some(5), "no \"text\"");
    assert_eq!(no_text.pointer.as_deref(), Some("/text"));
    find(ws, a, Some(6), "unknown role \"tool\"");
    find(ws, a, Some(7), "ZZ999_thumb.jpg");
    find(ws, "A/meta.json", None, "no meta.json");
    find(ws, "A/chats/B/meta.json", None, "no meta.json");
    find(ws, "A/chats/B/messages.jsonl", Some(2), "is not a time");
    find(ws, "A/chats/B/messages.jsonl", Some(3), "no ts");
    find(ws, "B/meta.json", Some(1), "not JSON");
    // Display names file:line and pointer for the CLI.
    assert!(
        no_text
            .to_string()
            .ends_with("A/chats/A/messages.jsonl:5 at /text: line has no \"text\"; skipped"),
        "{no_text}"
    );

    let ms = imported.state.messages();
    let texts: Vec<String> = chat(ms, "A", "A")
        .iter()
        .map(|m| m.content.clone())
        .collect();
    assert_eq!(
        texts,
        [
            "<p>plan database indexing</p>",
            "<p>Index the foreign keys first.</p>",
            "<p>rows=1200</p>",
            "<p>[Image] and this one?</p>",
        ]
    );
    let tool = chat(ms, "A", "A")[2];
    assert_eq!((tool.role, tool.username.as_str()), (None, "tool"));
    assert_eq!(origin(tool)["fields"]["role"], "tool");

    // Undated lines follow the line before, one second apart.
    let b = common::times(chat(ms, "A", "B"));
    assert_eq!(
        b,
        [
            "2025-12-06T17:00:00Z",
            "2025-12-06T17:00:01Z",
            "2025-12-06T17:00:02Z"
        ]
    );
    assert_eq!(
        chat(ms, "B", "A").len(),
        1,
        "a corrupt profile meta.json does not stop its chats"
    );
    // The corrupt meta's text is kept so an export restores it.
    let tree = &imported.state.extra[PROFILES_KEY].to_value()["profiles"];
    assert_eq!(tree["B"]["meta_raw"], "{\"id\": \"B\", \"display_name\": ");
    assert!(tree["A"].get("meta").is_none());
}

#[test]
fn a_truncated_last_line_alone_is_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let chat_dir = dir.path().join("A/chats/A");
    std::fs::create_dir_all(&chat_dir).unwrap();
    std::fs::write(
        chat_dir.join("messages.jsonl"),
        "{\"role\": \"user\", \"text\": \"hi\", \"ts\": \"Dec 06, 2025 05:14 PM\"}\n{\"role\": \"assis",
    )
    .unwrap();
    let imported = profiles::import_with(dir.path(), &opts()).unwrap();
    assert_eq!(imported.state.messages().len(), 1);
    let w = find(
        &imported.warnings,
        "A/chats/A/messages.jsonl",
        Some(2),
        "truncated last line",
    );
    assert!(w.to_string().contains("messages.jsonl:2"), "{w}");
}

#[test]
fn many_lines_in_one_minute_keep_file_order() {
    let dir = tempfile::tempdir().unwrap();
    let chat_dir = dir.path().join("A/chats/A");
    std::fs::create_dir_all(&chat_dir).unwrap();
    let lines: String = (0..150)
        .map(|i| {
            format!(
                "{{\"role\": \"user\", \"text\": \"n{i}\", \"ts\": \"Dec 06, 2025 05:14 PM\"}}\n"
            )
        })
        .collect();
    std::fs::write(chat_dir.join("messages.jsonl"), lines).unwrap();
    let imported = profiles::import_with(dir.path(), &opts()).unwrap();
    let ms = imported.state.messages();
    assert_eq!(ms.len(), 150);
    let order: Vec<String> = ms.iter().map(|m| m.content.clone()).collect();
    let expected: Vec<String> = (0..150).map(|i| format!("<p>n{i}</p>")).collect();
    assert_eq!(order, expected, "state order is file order");
    assert_eq!(ms[0].timestamp.as_str(), "2025-12-06T16:14:00Z");
    assert_eq!(ms[59].timestamp.as_str(), "2025-12-06T16:14:59Z");
    assert_eq!(ms[60].timestamp.as_str(), "2025-12-06T16:14:59.000001Z");
    assert_eq!(ms[149].timestamp.as_str(), "2025-12-06T16:14:59.00009Z");

    // Appending lines to the minute moves none of the imported ones.
    let more: String = (150..170)
        .map(|i| {
            format!(
                "{{\"role\": \"user\", \"text\": \"n{i}\", \"ts\": \"Dec 06, 2025 05:14 PM\"}}\n"
            )
        })
        .collect();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(chat_dir.join("messages.jsonl"))
        .unwrap();
    std::io::Write::write_all(&mut f, more.as_bytes()).unwrap();
    let again = profiles::import_with(dir.path(), &opts()).unwrap();
    assert_eq!(&again.state.messages()[..150], ms);
    let mut base = imported.state.clone();
    let report = again.merge_into(&mut base);
    assert_eq!(base.messages().len(), 170, "{report:?}");
}

#[test]
fn the_same_words_at_the_same_minute_in_two_chats_both_survive() {
    let dir = tempfile::tempdir().unwrap();
    for c in ["A", "B"] {
        let chat_dir = dir.path().join(format!("A/chats/{c}"));
        std::fs::create_dir_all(&chat_dir).unwrap();
        std::fs::write(
            chat_dir.join("messages.jsonl"),
            "{\"role\": \"user\", \"text\": \"hello\", \"ts\": \"Dec 06, 2025 05:14 PM\"}\n",
        )
        .unwrap();
    }
    let imported = profiles::import_with(dir.path(), &opts()).unwrap();
    assert_eq!(imported.state.messages().len(), 2);
}

#[test]
fn a_parent_folder_of_profiles_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(
        &fixture("profiles_clean"),
        &dir.path().join("data/profiles"),
    );
    let direct = profiles::import_with(&fixture("profiles_clean"), &opts()).unwrap();
    let via_parent = profiles::import_with(&dir.path().join("data"), &opts()).unwrap();
    assert_eq!(direct.state.messages(), via_parent.state.messages());
}

#[test]
fn a_missing_or_wrong_root_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let err = profiles::import_with(&missing, &opts()).unwrap_err();
    assert!(matches!(err, InteropError::NotFound { .. }), "{err:?}");
    assert_eq!(err.path(), missing);
    assert!(err.to_string().contains("data/profiles"), "{err}");

    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let err = profiles::import_with(&file, &opts()).unwrap_err();
    assert!(matches!(err, InteropError::NotADirectory { .. }), "{err:?}");
}

#[test]
fn credentials_in_unknown_fields_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let chat_dir = dir.path().join("A/chats/A");
    std::fs::create_dir_all(&chat_dir).unwrap();
    std::fs::write(
        dir.path().join("A/meta.json"),
        r#"{"id": "A", "display_name": "x", "created_at": "2025-12-06 04:52 PM", "model_override": null, "api_key": "sk-secret-1"}"#,
    )
    .unwrap();
    std::fs::write(
        chat_dir.join("messages.jsonl"),
        "{\"role\": \"user\", \"text\": \"hi\", \"ts\": \"Dec 06, 2025 05:14 PM\", \"token\": \"sk-secret-2\"}\n",
    )
    .unwrap();
    let imported = profiles::import_with(dir.path(), &opts()).unwrap();
    let text = String::from_utf8(wo_format::to_canonical_vec(&imported.state)).unwrap();
    assert!(!text.contains("sk-secret"), "{text}");
    assert_eq!(
        imported
            .warnings
            .iter()
            .filter(|w| w.message.contains("credential"))
            .count(),
        2
    );
}

#[test]
fn the_system_offset_is_used_or_its_absence_reported() {
    // Test threads make the `time` crate refuse the local offset on Linux;
    // either way the import works and says what it did.
    let mut o = opts();
    o.offset = wo_interop::LocalOffset::System;
    let imported = profiles::import_with(&fixture("profiles_clean"), &o).unwrap();
    assert_eq!(imported.state.messages().len(), 65);
    let offset_warnings = imported
        .warnings
        .iter()
        .filter(|w| w.message.contains("offset"))
        .count();
    assert!(offset_warnings <= 1, "{:#?}", imported.warnings);
}

#[test]
fn an_undated_first_line_takes_the_chat_creation_time() {
    let dir = tempfile::tempdir().unwrap();
    let chat_dir = dir.path().join("A/chats/A");
    std::fs::create_dir_all(&chat_dir).unwrap();
    std::fs::write(
        chat_dir.join("meta.json"),
        r#"{"id": "A", "display_name": "x", "created_at": "2025-12-06 05:12 PM", "model_override": null}"#,
    )
    .unwrap();
    std::fs::write(
        chat_dir.join("messages.jsonl"),
        "{\"role\": \"user\", \"text\": \"no time\"}\n{\"role\": \"assistant\", \"text\": \"none either\"}\n",
    )
    .unwrap();
    let imported = profiles::import_with(dir.path(), &opts()).unwrap();
    let times = common::times(imported.state.messages());
    // 05:12 PM at +01:00, then one second per line.
    assert_eq!(times, ["2025-12-06T16:12:00Z", "2025-12-06T16:12:01Z"]);
}
