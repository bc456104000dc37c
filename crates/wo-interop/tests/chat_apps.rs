//! The chat-app importers on fixtures written in each tool's real format:
//! branches, roles, usernames, times, attachments, titles, what is kept
//! under `x_import`, idempotence, and malformed input.

mod common;

use std::path::Path;

use common::{fixture, opts};
use serde_json::Value;
use wo_format::{Message, Role, State, Timestamp};
use wo_interop::detect::{self, Format};
use wo_interop::{Imported, InteropError, X_IMPORT_KEY, chatgpt, export};

fn x(m: &Message) -> Value {
    m.extra[X_IMPORT_KEY].to_value()
}

fn by_source_id<'a>(s: &'a State, id: &str) -> &'a Message {
    s.messages()
        .iter()
        .find(|m| x(m)["id"] == id)
        .unwrap_or_else(|| panic!("no message imported from {id}"))
}

fn text(m: &Message) -> String {
    wo_interop::markdown::message_markdown(&m.content)
}

/// Merges into an empty state twice: the second must add nothing.
fn assert_idempotent(imported: &Imported) -> State {
    let admitted = imported.clone().admit().expect("admissible");
    let mut state = State::new(Timestamp::parse("2020-01-01T00:00:00Z").unwrap());
    let first = admitted.imported.merge_into(&mut state);
    assert_eq!(first.messages_added.len(), imported.state.messages().len());
    let second = admitted.imported.merge_into(&mut state);
    assert!(
        second.messages_added.is_empty() && second.messages_replaced.is_empty(),
        "second import changed something: {second:?}"
    );
    state
}

fn import(path: &Path) -> (Format, Imported) {
    detect::import(path, None, &opts()).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn chatgpt_tree_roles_times_and_parts() {
    let (format, imported) = import(&fixture("chatgpt/conversations.json"));
    assert_eq!(format, Format::Chatgpt);
    let s = &imported.state;
    // root (null) and the empty hidden system node are skipped: 10 - 2 + 2.
    assert_eq!(s.messages().len(), 10, "{:#?}", s.messages());

    // Custom instructions: a system message (the author role kept).
    let ctx = by_source_id(s, "ctx-1");
    assert_eq!(
        (ctx.role, ctx.username.as_str()),
        (Some(Role::System), "system")
    );
    assert_eq!(x(ctx)["fields"]["role"], "user");
    assert!(text(ctx).contains("The user is an SRE."));
    // Its time was not recorded: derived after the conversation start.
    assert_eq!(x(ctx)["time_derived"], true);
    assert_eq!(ctx.title, "Rolling back a deploy");
    assert_eq!(x(ctx)["title"], "Rolling back a deploy");
    assert_eq!(x(ctx)["current"], "a-3");
    assert_eq!(
        x(ctx)["conversation_fields"]["safe_urls"][0],
        "https://helm.sh"
    );
    assert_eq!(
        x(ctx)["conversation"],
        "6a1f0000-0000-4000-8000-000000000001"
    );

    let u1 = by_source_id(s, "u-1");
    assert_eq!(u1.username, "alec");
    assert_eq!(u1.timestamp.as_str(), "2023-11-14T22:13:21.5Z");
    assert_eq!(u1.parent.as_deref(), Some(ctx.id.as_str()));
    assert_eq!(
        text(u1),
        "How do I roll back the staging deploy?\nIt is on helm."
    );

    // The regenerated answer is a sibling branch; each names its model.
    let a1 = by_source_id(s, "a-1");
    let a1b = by_source_id(s, "a-1b");
    assert_eq!(a1.parent.as_deref(), Some(u1.id.as_str()));
    assert_eq!(a1b.parent.as_deref(), Some(u1.id.as_str()));
    assert_eq!(
        (a1.username.as_str(), a1.model.as_deref()),
        ("gpt-4o", Some("gpt-4o"))
    );
    assert_eq!(a1b.username, "o1");
    assert_eq!(a1.provider.as_deref(), Some("openai"));
    assert_eq!(a1.role, Some(Role::Assistant));
    assert_eq!(a1.timestamp.as_str(), "2023-11-14T22:13:25.123456Z");
    assert!(a1.content.contains("<pre><code class=\"language-bash\">"));
    assert!(text(a1).contains("```bash\nhelm rollback staging 3\n```"));
    assert_eq!(
        x(a1)["fields"]["metadata"]["finish_details"]["type"],
        "stop"
    );

    // Multimodal: the image and the file are noted by name.
    let u2 = by_source_id(s, "u-2");
    assert_eq!(u2.parent.as_deref(), Some(a1b.id.as_str()));
    let t = text(u2);
    assert!(t.contains("[image: error-screen.png]"), "{t}");
    assert!(t.contains("[file: values.yaml]"), "{t}");
    assert!(t.contains("Here is the error screen."), "{t}");
    assert_eq!(
        x(u2)["fields"]["content"]["parts"][0]["asset_pointer"],
        "file-service://file-Abc123"
    );

    // Code and tool output are fenced; the tool is a system message.
    let a2 = by_source_id(s, "a-2");
    assert!(
        text(a2).starts_with("```python\nimport yaml"),
        "{}",
        text(a2)
    );
    let t2 = by_source_id(s, "t-2");
    assert_eq!(
        (t2.role, t2.username.as_str()),
        (Some(Role::System), "python")
    );
    assert_eq!(x(t2)["fields"]["role"], "tool");
    let a3 = by_source_id(s, "a-3");
    assert_eq!(a3.parent.as_deref(), Some(t2.id.as_str()));
    assert_eq!(a3.timestamp.as_str(), "2023-11-14T22:15:11.000001Z");
    assert_eq!(x(a3)["time_derived"], true);

    // The second conversation: its default model names the answer.
    let a4 = by_source_id(s, "a-4");
    assert_eq!(a4.username, "gpt-4o-mini");
    assert!(a4.content.contains("<ol>"));
    assert!(
        imported
            .warnings
            .iter()
            .any(|w| w.message.contains("1 empty message"))
    );
    assert_idempotent(&imported);
}

#[test]
fn chatgpt_zip_reads_the_entry_and_names_it_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let zip_path = dir.path().join("export.zip");
    let json = std::fs::read(fixture("chatgpt/conversations.json")).unwrap();
    wo_testkit::write_zip(
        &zip_path,
        &[
            ("chat.html", b"<html></html>"),
            ("conversations.json", &json),
        ],
    );
    let (format, from_zip) = import(&zip_path);
    assert_eq!(format, Format::Chatgpt);
    let (_, from_json) = import(&fixture("chatgpt/conversations.json"));
    let ids = |s: &State| {
        s.messages()
            .iter()
            .map(|m| m.id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&from_zip.state), ids(&from_json.state));

    let bad_zip = dir.path().join("bad.zip");
    wo_testkit::write_zip(&bad_zip, &[("conversations.json", b"[{\"mapping\": {}, ")]);
    let e = detect::import(&bad_zip, None, &opts()).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("bad.zip:conversations.json:1:"), "{msg}");
    assert!(msg.contains("invalid JSON"), "{msg}");
}

#[test]
fn chatgpt_malformed_files_name_file_and_pointer() {
    let cases: [(&str, &str); 4] = [
        ("chatgpt/bad_mapping.json", "at /1/mapping"),
        (
            "chatgpt/bad_role.json",
            "at /0/mapping/n1/message/author/role",
        ),
        (
            "chatgpt/no_mapping.json",
            "at /0: a conversation without `mapping`",
        ),
        ("chatgpt/truncated.json", "truncated.json:"),
    ];
    for (file, expected) in cases {
        let e = chatgpt::import(&fixture(file), &opts()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(file.rsplit('/').next().unwrap()), "{msg}");
        assert!(msg.contains(expected), "{file}: {msg}");
        assert!(!msg.contains("--force"), "{msg}");
    }
    // Not a known shape at all: detection says so and names --format.
    let e = detect::import(&fixture("chatgpt/no_mapping.json"), None, &opts()).unwrap_err();
    assert!(matches!(e, InteropError::UnknownFormat { .. }), "{e}");
    assert!(e.to_string().contains("--format"), "{e}");
}

#[test]
fn chatgpt_export_round_trips_through_the_importer() {
    let (_, imported) = import(&fixture("chatgpt/conversations.json"));
    let state = assert_idempotent(&imported);
    let exported = chatgpt::export(&state);
    let convs = exported.as_array().unwrap();
    assert_eq!(convs.len(), 2);
    assert_eq!(convs[0]["title"], "Rolling back a deploy");
    assert!(convs[0]["mapping"].as_object().unwrap().len() > 8);
    // Another tool reads the plain fields: the parts hold Markdown.
    let a1 = state
        .messages()
        .iter()
        .find(|m| x(m)["id"] == "a-1")
        .unwrap();
    let node = &convs[0]["mapping"][a1.id.as_str()];
    assert_eq!(node["message"]["author"]["role"], "assistant");
    assert_eq!(node["message"]["metadata"]["model_slug"], "gpt-4o");
    assert!(
        node["message"]["content"]["parts"][0]
            .as_str()
            .unwrap()
            .contains("```bash")
    );

    // Our own importer gives back the same messages, byte for byte.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("conversations.json");
    std::fs::write(&path, serde_json::to_vec(&exported).unwrap()).unwrap();
    let (format, back) = import(&path);
    assert_eq!(format, Format::Chatgpt);
    let mut again = state.clone();
    let report = back.admit().unwrap().imported.merge_into(&mut again);
    assert!(
        report.messages_added.is_empty() && report.messages_replaced.is_empty(),
        "{report:?}"
    );
    assert_eq!(back_count(&path), state.messages().len());

    // Text edited by another tool wins over the embedded record.
    let mut edited = exported.clone();
    let node = &mut edited[0]["mapping"][a1.id.as_str()]["message"]["content"]["parts"][0];
    *node = Value::String("Edited elsewhere.".into());
    std::fs::write(&path, serde_json::to_vec(&edited).unwrap()).unwrap();
    let (_, back) = import(&path);
    let changed = back
        .state
        .messages()
        .iter()
        .find(|m| text(m) == "Edited elsewhere.")
        .expect("the edited text is imported");
    assert_eq!(changed.username, "gpt-4o");
    assert_ne!(changed.id, a1.id);
}

fn back_count(path: &Path) -> usize {
    import(path).1.state.messages().len()
}

#[test]
fn claude_linear_and_tree_exports_with_attachments() {
    let (format, imported) = import(&fixture("claude/conversations.json"));
    assert_eq!(format, Format::Claude);
    let s = &imported.state;
    assert_eq!(s.messages().len(), 5);
    let q = by_source_id(s, "m-0001");
    assert_eq!(q.username, "alec");
    assert_eq!(q.title, "Reviewing a contract");
    assert_eq!(q.timestamp.as_str(), "2024-03-05T18:37:06.611234Z");
    let t = text(q);
    assert!(t.starts_with("Can you check clause 4 of this?"), "{t}");
    assert!(t.contains("4. The tenant pays rent monthly."), "{t}");
    assert!(
        t.contains("[file: contract.txt]\n```\n4. The tenant"),
        "{t}"
    );
    assert!(t.contains("[file: scan.pdf]"), "{t}");
    let a = by_source_id(s, "m-0002");
    assert_eq!(a.parent.as_deref(), Some(q.id.as_str()));
    assert_eq!(
        (a.username.as_str(), a.provider.as_deref()),
        ("local-model", Some("anthropic"))
    );
    assert!(a.content.contains("<strong>rent period</strong>"));

    // The newer export's tree: two answers to one question.
    let n1 = by_source_id(s, "n-1");
    let n2 = by_source_id(s, "n-2");
    let n3 = by_source_id(s, "n-3");
    assert_eq!(n2.parent.as_deref(), Some(n1.id.as_str()));
    assert_eq!(n3.parent.as_deref(), Some(n1.id.as_str()));
    assert_eq!(n1.parent, None);
    // An empty conversation name: the first sentence titles it (wo_format::title
    // drops the closing period).
    assert_eq!(n1.title, "Name a prime");
    assert_eq!(text(n2), "[used calculator]\n\n7 is prime.");
    assert_eq!(
        x(n2)["fields"]["content"][0]["thinking"],
        "Small primes: 2, 3, 5."
    );
    assert_idempotent(&imported);

    let e = detect::import(
        &fixture("claude/bad_messages.json"),
        Some(Format::Claude),
        &opts(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("at /0/chat_messages"), "{e}");
}

#[test]
fn open_webui_history_tree_and_old_message_lists() {
    let (format, imported) = import(&fixture("openwebui/export.json"));
    assert_eq!(format, Format::OpenWebui);
    let s = &imported.state;
    assert_eq!(s.messages().len(), 5);
    let q1 = by_source_id(s, "q1");
    assert_eq!(q1.title, "Explain borrowing");
    assert!(text(q1).contains("[file: notes.md]"));
    assert_eq!(q1.timestamp.as_str(), "2024-07-03T09:46:40Z");
    assert_eq!(x(q1)["current"], "a2");
    let a1 = by_source_id(s, "a1");
    let a2 = by_source_id(s, "a2");
    assert_eq!(a1.parent.as_deref(), Some(q1.id.as_str()));
    assert_eq!(a2.parent.as_deref(), Some(q1.id.as_str()));
    assert_eq!(a1.username, "llama3.1:8b");
    assert_eq!(a2.username, "qwen2.5:7b");
    assert!(text(a1).contains("```rust\nlet r = &x;\n```"));
    assert!(text(a2).contains("Borrowing lends access"));
    assert!(!a2.content.contains("<details"));
    assert_eq!(x(a1)["fields"]["info"]["eval_count"], 42);
    let o2 = by_source_id(s, "o2");
    let o1 = by_source_id(s, "o1");
    assert_eq!(o2.parent.as_deref(), Some(o1.id.as_str()));
    assert_eq!(o2.username, "mistral");
    assert_idempotent(&imported);

    let e = detect::import(&fixture("openwebui/bad_history.json"), None, &opts()).unwrap_err();
    assert!(e.to_string().contains("at /0/chat/history/messages"), "{e}");
}

#[test]
fn librechat_nested_and_flat_exports() {
    let (format, imported) = import(&fixture("librechat/tree.json"));
    assert_eq!(format, Format::Librechat);
    let s = &imported.state;
    assert_eq!(s.messages().len(), 5);
    let m1 = by_source_id(s, "m1");
    let m2 = by_source_id(s, "m2");
    let m3 = by_source_id(s, "m3");
    let m4 = by_source_id(s, "m4");
    let m5 = by_source_id(s, "m5");
    assert_eq!(m1.title, "Virtualenv activation");
    assert_eq!(m2.parent.as_deref(), Some(m1.id.as_str()));
    assert_eq!(m3.parent.as_deref(), Some(m2.id.as_str()));
    assert_eq!(m5.parent.as_deref(), Some(m2.id.as_str()));
    assert_eq!(m4.parent.as_deref(), Some(m3.id.as_str()));
    assert_eq!(
        (m2.username.as_str(), m2.provider.as_deref()),
        ("gpt-4-turbo", Some("openAI"))
    );
    // No createdAt: 1 µs after the parent.
    assert_eq!(m3.timestamp.as_str(), "2024-05-01T16:35:12.604001Z");
    let usage = m4.usage.as_ref().unwrap();
    assert_eq!(
        (usage.prompt_tokens, usage.completion_tokens),
        (Some(586), Some(7))
    );
    assert_idempotent(&imported);

    let (_, flat) = import(&fixture("librechat/flat.json"));
    let f2 = by_source_id(&flat.state, "f2");
    assert_eq!(f2.username, "claude-3-5-sonnet");
    assert!(f2.content.contains("<strong>12–16 hours</strong>"));
    assert_eq!(x(f2)["fields"]["content"][0]["think"], "short");

    let e = detect::import(
        &fixture("librechat/bad_message.json"),
        Some(Format::Librechat),
        &opts(),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("at /messages/0: a message without `messageId`"),
        "{e}"
    );
}

#[test]
fn jan_threads_from_the_data_folder() {
    for path in [
        fixture("jan"),
        fixture("jan/threads"),
        fixture("jan/threads/jan_1700000000/messages.jsonl"),
    ] {
        let (format, _) = import(&path);
        assert_eq!(format, Format::Jan, "{}", path.display());
    }
    let (_, imported) = import(&fixture("jan"));
    let s = &imported.state;
    assert_eq!(s.messages().len(), 4);
    let q = by_source_id(s, "01HF0000000000000000000001");
    let a = by_source_id(s, "01HF0000000000000000000002");
    assert_eq!(q.title, "Tomatoes in pots");
    assert_eq!(q.timestamp.as_str(), "2023-11-14T22:13:30Z");
    assert_eq!(a.parent.as_deref(), Some(q.id.as_str()));
    assert_eq!(a.username, "llama3.2-3b-instruct");
    assert!(a.content.contains("<ul>"));
    assert_eq!(x(a)["fields"]["metadata"]["token_speed"], 31.5);
    // Seconds, not milliseconds, in the other thread; `*` names no model.
    let m2 = by_source_id(s, "m2");
    assert_eq!(m2.timestamp.as_str(), "2023-11-14T22:21:51Z");
    assert_eq!(m2.username, "local-model");
    assert_idempotent(&imported);

    let e = detect::import(&fixture("jan_bad"), None, &opts()).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("messages.jsonl:2:"), "{msg}");
}

#[test]
fn aichat_sessions_without_times_stay_idempotent_as_they_grow() {
    let (format, imported) = import(&fixture("aichat/sessions"));
    assert_eq!(format, Format::Aichat);
    let s = &imported.state;
    assert_eq!(s.messages().len(), 9);
    let first = by_source_id(s, "0");
    assert_eq!(first.role, Some(Role::User));
    assert!(text(first).contains("What is a lifetime?"));
    let answer = s
        .messages()
        .iter()
        .find(|m| m.content.contains("language-rust"))
        .unwrap();
    assert_eq!(
        (answer.username.as_str(), answer.provider.as_deref()),
        ("gpt-4o-mini", Some("openai"))
    );
    let image_q = s
        .messages()
        .iter()
        .find(|m| text(m).contains("What does this error mean?"))
        .unwrap();
    assert!(text(image_q).contains("[image]"));
    // No times in the file: derived, a second apart, ending at the
    // fallback time; marked so.
    let short: Vec<&Message> = s
        .messages()
        .iter()
        .filter(|m| x(m)["conversation"] == "short")
        .collect();
    assert_eq!(short.len(), 2);
    assert_eq!(short[1].timestamp.as_str(), "2025-01-01T00:00:00Z");
    assert_eq!(short[0].timestamp.as_str(), "2024-12-31T23:59:59Z");
    assert!(short.iter().all(|m| x(m)["time_derived"] == true));
    let mut state = assert_idempotent(&imported);

    // The session grows and its file time moves: only the new turn is added.
    let dir = tempfile::tempdir().unwrap();
    let grown = dir.path().join("short.yml");
    let mut yaml = std::fs::read_to_string(fixture("aichat/sessions/short.yml")).unwrap();
    yaml.push_str("- role: user\n  content: and again\n");
    std::fs::write(&grown, yaml).unwrap();
    let mut o = opts();
    o.fallback_time = Some(Timestamp::parse("2025-06-01T00:00:00Z").unwrap());
    let (_, again) = detect::import(&grown, None, &o).unwrap();
    let report = again.admit().unwrap().imported.merge_into(&mut state);
    assert_eq!(report.messages_added.len(), 1, "{report:?}");
    let new = state.message(&report.messages_added[0]).unwrap();
    assert_eq!(text(new), "and again");
    let parent = state.message(new.parent.as_deref().unwrap()).unwrap();
    assert_eq!(text(parent), "hello");

    let e = detect::import(&fixture("aichat_bad"), None, &opts()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("broken.yaml") && msg.contains("invalid YAML"),
        "{msg}"
    );
}

fn llm_db(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("logs.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(&std::fs::read_to_string(fixture("llm/logs.sql")).unwrap())
        .unwrap();
    path
}

#[test]
fn llm_logs_db_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = llm_db(dir.path());
    let before = std::fs::read(&db).unwrap();
    let (format, imported) = import(&db);
    assert_eq!(format, Format::LlmDb);
    assert_eq!(std::fs::read(&db).unwrap(), before, "logs.db was written");
    // Only logs.db: no journal or WAL files left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["logs.db"]);

    let s = &imported.state;
    assert_eq!(s.messages().len(), 6);
    let q1 = by_source_id(s, "01j0resp0000000000000000a1:prompt");
    let a1 = by_source_id(s, "01j0resp0000000000000000a1:response");
    let q2 = by_source_id(s, "01j0resp0000000000000000a2:prompt");
    assert_eq!(q1.title, "Ten facts about pelicans");
    assert_eq!(q1.timestamp.as_str(), "2024-07-01T10:00:00.123456Z");
    assert!(text(q1).contains("[attachment: /home/alec/pelican.jpg (image/jpeg)]"));
    assert_eq!(x(q1)["fields"]["system"], "Be terse.");
    assert_eq!(a1.parent.as_deref(), Some(q1.id.as_str()));
    assert_eq!(a1.timestamp.as_str(), "2024-07-01T10:00:01.653457Z");
    assert_eq!(a1.username, "gpt-4o-mini-2024-07-18");
    let u = a1.usage.as_ref().unwrap();
    assert_eq!((u.prompt_tokens, u.completion_tokens), (Some(12), Some(40)));
    assert_eq!(q2.parent.as_deref(), Some(a1.id.as_str()));
    let b1 = by_source_id(s, "01j0resp0000000000000000b1:prompt");
    assert!(text(b1).contains("[fragment: git diff]"));
    let b1a = by_source_id(s, "01j0resp0000000000000000b1:response");
    assert!(b1a.content.contains("language-diff"));
    assert_idempotent(&imported);

    // Not llm's database: the table is named.
    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x TEXT);")
        .unwrap();
    let e = detect::import(&other, None, &opts()).unwrap_err();
    assert!(e.to_string().contains("(table responses)"), "{e}");
}

#[test]
fn exports_read_by_people() {
    let (_, imported) = import(&fixture("chatgpt/conversations.json"));
    let state = assert_idempotent(&imported);
    let doc = export::markdown_document(&state);
    assert!(
        doc.starts_with("# Conversations\n\n## Rolling back a deploy\n"),
        "{doc}"
    );
    assert!(
        doc.contains("```bash\nhelm rollback staging 3\n```"),
        "{doc}"
    );
    assert!(
        doc.contains("### gpt-4o (assistant) · 2023-11-14 22:13:25 UTC"),
        "{doc}"
    );
    assert!(doc.contains("*Another branch: answers alec at"), "{doc}");
    let files = export::markdown_files(&state);
    assert_eq!(files.len(), 2);
    assert!(
        files[0].0.ends_with("-rolling-back-a-deploy.md"),
        "{}",
        files[0].0
    );
    let lines = export::jsonl(&state);
    assert_eq!(lines.lines().count(), state.messages().len());
    for l in lines.lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        assert!(v["conversation"].is_string() && v["text"].is_string());
    }
}

/// Bad input is an error, never a panic: each JSON fixture with one value
/// somewhere replaced by a value of another type (deterministic, many
/// times over), through detection and every importer that takes JSON.
#[test]
fn mutated_exports_never_panic() {
    fn count(v: &Value) -> usize {
        1 + match v {
            Value::Array(a) => a.iter().map(count).sum(),
            Value::Object(o) => o.values().map(count).sum(),
            _ => 0,
        }
    }
    // Replaces the n-th value (pre-order) by `with`.
    fn replace(v: &mut Value, n: &mut usize, with: &Value) -> bool {
        if *n == 0 {
            *v = with.clone();
            return true;
        }
        *n -= 1;
        match v {
            Value::Array(a) => a.iter_mut().any(|x| replace(x, n, with)),
            Value::Object(o) => o.values_mut().any(|x| replace(x, n, with)),
            _ => false,
        }
    }
    let odd = [
        Value::Null,
        Value::Bool(true),
        serde_json::json!(-1e300),
        serde_json::json!(253402300800u64),
        serde_json::json!(""),
        serde_json::json!("\u{0}<script>x</script>"),
        serde_json::json!([]),
        serde_json::json!({}),
        serde_json::json!([{"x": 1}]),
    ];
    let mut rng = wo_testkit::Rng::new(0x2545_f491_4f6c_dd1d);
    let dir = tempfile::tempdir().unwrap();
    for file in [
        "chatgpt/conversations.json",
        "claude/conversations.json",
        "openwebui/export.json",
        "librechat/tree.json",
        "librechat/flat.json",
    ] {
        let original: Value =
            serde_json::from_slice(&std::fs::read(fixture(file)).unwrap()).unwrap();
        let n = count(&original);
        for _ in 0..300 {
            let mut v = original.clone();
            let mut at = rng.below(n as u64) as usize;
            let with = &odd[rng.below(odd.len() as u64) as usize];
            replace(&mut v, &mut at, with);
            let path = dir.path().join("m.json");
            std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
            // Detected or not, imported or refused: no panic, and what is
            // imported passes the gate or is refused by it.
            if let Ok((_, imported)) = detect::import(&path, None, &opts()) {
                let _ = imported.admit();
            }
            for f in [
                Format::Chatgpt,
                Format::Claude,
                Format::OpenWebui,
                Format::Librechat,
            ] {
                let _ = detect::import(&path, Some(f), &opts());
            }
        }
    }
}
