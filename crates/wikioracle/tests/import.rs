//! `wo import` and `wo export` of the chat apps' formats through the real
//! binary: detection, dry runs that write nothing, a second import that
//! adds nothing, malformed input that leaves llm.json byte for byte, and
//! the Markdown / JSONL / ChatGPT exports (the last read back by
//! `wo import`).

mod common;

use std::path::{Path, PathBuf};

use common::Project;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../wo-interop/tests/fixtures")
        .join(rel)
}

fn chatgpt_zip(dir: &Path) -> PathBuf {
    let path = dir.join("chatgpt-export.zip");
    let json = std::fs::read(fixture("chatgpt/conversations.json")).unwrap();
    wo_testkit::write_zip(
        &path,
        &[
            ("chat.html", b"<html></html>"),
            ("conversations.json", &json),
        ],
    );
    path
}

fn init(p: &Project) {
    p.ok(&["init"]);
}

#[test]
fn chatgpt_zip_dry_run_import_and_import_again() {
    let p = Project::new();
    init(&p);
    let zip = chatgpt_zip(p.path());
    let zip_arg = zip.to_str().unwrap();
    let before = std::fs::read(p.state_path()).unwrap();

    let dry = p.run(&["import", zip_arg, "--dry-run", "--username", "alec"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(dry.stdout.contains("would import"), "{}", dry.stdout);
    assert!(dry.stdout.contains("a ChatGPT export"), "{}", dry.stdout);
    assert!(dry.stdout.contains("messages: 10 added"), "{}", dry.stdout);
    assert!(
        dry.stdout.contains("Rolling back a deploy  (+8)"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout.contains("Weeknight pasta  (+2)"),
        "{}",
        dry.stdout
    );
    assert_eq!(
        std::fs::read(p.state_path()).unwrap(),
        before,
        "dry run wrote"
    );

    let first = p.ok(&["import", zip_arg, "--username", "alec"]);
    assert!(
        first.contains("imported") && first.contains("messages: 10 added"),
        "{first}"
    );
    let state = p.state();
    assert_eq!(state.messages().len(), 10);
    assert!(state.messages().iter().any(|m| m.username == "o1"));
    assert!(state.messages().iter().any(|m| m.username == "alec"));

    let after_first = std::fs::read(p.state_path()).unwrap();
    let second = p.ok(&["import", zip_arg, "--username", "alec"]);
    assert!(
        second.contains("messages: 0 added, 0 replaced, 10 already present"),
        "{second}"
    );
    assert_eq!(
        std::fs::read(p.state_path()).unwrap().len(),
        after_first.len(),
        "a second import changed the file"
    );
    assert_eq!(p.state().messages(), state.messages());

    // Each imported conversation stays its own (its first message is marked
    // as starting one), not chained to the one imported before it.
    let listed = p.ok(&["log", "--conversations"]);
    let titles: Vec<&str> = listed
        .lines()
        .map(|l| l.rsplit("  ").next().unwrap())
        .collect();
    assert_eq!(
        titles,
        ["Weeknight pasta", "Rolling back a deploy"],
        "newest first: {listed}"
    );

    // `wo log` keeps the answer's code block fenced.
    let log = p.ok(&["log", "--grep", "helm rollback"]);
    assert!(
        log.contains("  ```bash\n  helm rollback staging 3\n  ```"),
        "{log}"
    );
}

#[test]
fn every_format_is_detected_and_imported() {
    let cases: Vec<(PathBuf, &str, usize)> = vec![
        (fixture("claude/conversations.json"), "a Claude export", 5),
        (fixture("openwebui/export.json"), "an Open WebUI export", 5),
        (fixture("librechat/tree.json"), "a LibreChat export", 5),
        (fixture("jan"), "Jan threads", 4),
        (fixture("aichat/sessions"), "aichat sessions", 9),
    ];
    for (path, what, n) in cases {
        let p = Project::new();
        init(&p);
        let out = p.ok(&["import", path.to_str().unwrap()]);
        assert!(out.contains(what), "{}: {out}", path.display());
        assert!(
            out.contains(&format!("messages: {n} added")),
            "{}: {out}",
            path.display()
        );
        let again = p.ok(&["import", path.to_str().unwrap()]);
        assert!(
            again.contains("messages: 0 added"),
            "{}: {again}",
            path.display()
        );
    }
}

/// A file with SQLite's header that is no database of llm's (llm's own
/// are exercised in wo-interop's tests, which build one with SQLite).
fn rusqlite_free_db(path: &Path) {
    let mut bytes = b"SQLite format 3\0".to_vec();
    bytes.resize(4096, 0);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn malformed_input_changes_nothing_and_names_where() {
    let p = Project::new();
    init(&p);
    let before = std::fs::read(p.state_path()).unwrap();
    let cases: Vec<(PathBuf, Vec<&str>, &str)> = vec![
        (fixture("chatgpt/bad_mapping.json"), vec![], "at /1/mapping"),
        (
            fixture("chatgpt/truncated.json"),
            vec!["--format", "chatgpt"],
            "invalid JSON",
        ),
        (
            fixture("chatgpt/no_mapping.json"),
            vec!["--format", "chatgpt"],
            "a conversation without `mapping`",
        ),
        (fixture("chatgpt/no_mapping.json"), vec![], "--format"),
        (
            fixture("claude/bad_messages.json"),
            vec!["--format", "claude"],
            "at /0/chat_messages",
        ),
        (fixture("jan_bad"), vec![], "messages.jsonl:2:"),
        (fixture("aichat_bad"), vec![], "invalid YAML"),
    ];
    for (path, extra, expected) in cases {
        let mut args = vec!["import", path.to_str().unwrap()];
        args.extend(extra);
        let r = p.run(&args);
        assert_eq!(r.code, 1, "{args:?}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(expected), "{args:?}: {}", r.stderr);
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(
            r.stderr.contains(name),
            "{args:?} does not name the file: {}",
            r.stderr
        );
        assert!(!r.stderr.contains("--force"), "{}", r.stderr);
        assert_eq!(
            std::fs::read(p.state_path()).unwrap(),
            before,
            "{args:?} wrote"
        );
    }
    let db = p.path().join("logs.db");
    rusqlite_free_db(&db);
    let r = p.run(&["import", db.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(r.stderr.contains("(table responses)"), "{}", r.stderr);
    assert_eq!(std::fs::read(p.state_path()).unwrap(), before);
}

#[test]
fn exports_markdown_jsonl_and_chatgpt_round_trip() {
    let p = Project::new();
    init(&p);
    p.ok(&[
        "import",
        fixture("chatgpt/conversations.json").to_str().unwrap(),
        "--username",
        "alec",
    ]);

    // An imported conversation is listed by its own title (x_import),
    // not its first message's.
    let listed = p.ok(&["log", "--conversations"]);
    assert!(listed.contains("Rolling back a deploy"), "{listed}");

    let doc = p.ok(&["export", "--format", "markdown"]);
    assert!(doc.contains("## Rolling back a deploy"), "{doc}");
    assert!(
        doc.contains("```bash\nhelm rollback staging 3\n```"),
        "{doc}"
    );

    let out = p.path().join("notes");
    let split = [
        "export",
        "--format",
        "markdown",
        "--split",
        "--out",
        out.to_str().unwrap(),
    ];
    p.ok(&split);
    assert_eq!(
        wo_testkit::sorted_names(&out),
        [
            "2023-11-14-rolling-back-a-deploy.md",
            "2023-11-16-weeknight-pasta.md"
        ]
    );
    // Again without --overwrite: refused, nothing touched.
    let again = p.run(&split);
    assert_eq!(again.code, 1);
    // It never suggests the flag that replaces files.
    assert!(
        again.stderr.contains("nothing was written") && !again.stderr.contains("--overwrite"),
        "{}",
        again.stderr
    );

    let jsonl = p.ok(&["export", "--format", "jsonl"]);
    assert_eq!(jsonl.lines().count(), 10);

    let cg = p.path().join("conversations.json");
    p.ok(&[
        "export",
        "--format",
        "chatgpt",
        "--out",
        cg.to_str().unwrap(),
    ]);
    let refused = p.run(&[
        "export",
        "--format",
        "chatgpt",
        "--out",
        cg.to_str().unwrap(),
    ]);
    assert_eq!(refused.code, 1, "{}", refused.stdout);

    // Another machine imports our ChatGPT-shaped export: the same messages.
    let q = Project::new();
    init(&q);
    let imported = q.ok(&["import", cg.to_str().unwrap()]);
    assert!(imported.contains("messages: 10 added"), "{imported}");
    assert_eq!(q.state().messages(), p.state().messages());
}

/// On a terminal a large import shows its progress (a pty through
/// `script`); piped, it prints none of it. The input is padded to the size
/// that brings the bar (8 MB) with JSON whitespace, so it stays quick.
#[test]
fn large_imports_show_progress_on_a_terminal_only() {
    let p = Project::new();
    init(&p);
    let mut big = std::fs::read(fixture("chatgpt/conversations.json")).unwrap();
    big.resize(big.len() + (9 << 20), b' ');
    let big_path = p.path().join("big.json");
    std::fs::write(&big_path, &big).unwrap();

    let piped = p.run(&["import", big_path.to_str().unwrap()]);
    assert_eq!(piped.code, 0, "{}", piped.stderr);
    assert!(!piped.stderr.contains("converting"), "{}", piped.stderr);

    let q = Project::new();
    init(&q);
    let wo = common::wo_bin();
    let line = format!("'{}' import '{}'", wo.display(), big_path.display());
    let tty = std::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(q.path())
        .env_remove("WO_STATE")
        .env("TERM", "xterm")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("`script` (util-linux, in Debian's essential bsdutils) gives the test its pty");
    let shown = String::from_utf8_lossy(&tty.stdout);
    assert!(tty.status.success(), "{shown}");
    assert!(shown.contains("converting"), "{shown}");
    assert!(shown.contains("2/2 conversations"), "{shown}");
    assert!(shown.contains("messages: 10 added"), "{shown}");
    // The warning is printed on a line of its own, not after a bar frame.
    let warning_lines: Vec<&str> = shown
        .split(['\r', '\n'])
        .filter(|l| l.contains("warning:"))
        .collect();
    assert!(!warning_lines.is_empty(), "{shown}");
    for l in warning_lines {
        assert!(
            l.trim_start_matches("\x1b[2K").starts_with("warning: "),
            "{l:?}"
        );
    }
    assert_eq!(q.state().messages().len(), 10);
}

/// A message over the per-message limit stops the import before any write,
/// naming it as the export knows it, and says which limit to raise.
#[test]
fn an_oversized_message_is_named_and_nothing_is_written() {
    let p = Project::new();
    init(&p);
    let before = std::fs::read(p.state_path()).unwrap();
    let r = p
        .cmd(&["import", fixture("librechat/tree.json").to_str().unwrap()])
        .env("WO_MAX_MESSAGE_BYTES", "60")
        .output()
        .unwrap();
    let r = common::to_run(r);
    assert_eq!(r.code, 1, "{}", r.stdout);
    r.says(&["message \"m1\" of conversation"]);
    assert!(r.stderr.contains("WO_MAX_MESSAGE_BYTES"), "{}", r.stderr);
    assert_eq!(std::fs::read(p.state_path()).unwrap(), before);
}
