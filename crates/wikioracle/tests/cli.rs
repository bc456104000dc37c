//! The file commands end to end, as a user runs them.

mod common;

use common::{Project, state_with_messages};
use wo_format::{Timestamp, TruthEntry};

#[test]
fn init_refuses_to_clobber_and_force_backs_up_invalid_files() {
    let p = Project::new();
    assert!(
        p.ok(&["init", "--context", "Garden notes"])
            .contains("created")
    );
    assert_eq!(p.state().context, "<div><p>Garden notes</p></div>");
    // A valid file: said so, success, untouched.
    let before = std::fs::read(p.state_path()).unwrap();
    let again = p.run(&["init"]);
    assert_eq!(again.code, 0);
    assert!(
        again.stdout.contains("already exists and is valid"),
        "{}",
        again.stdout
    );
    assert_eq!(std::fs::read(p.state_path()).unwrap(), before);

    std::fs::write(p.state_path(), b"{\"version\": 1, oops").unwrap();
    let refused = p.run(&["init"]);
    assert_eq!(refused.code, 1);
    assert!(refused.stderr.contains("json-syntax"), "{}", refused.stderr);
    // An error never suggests a command that replaces the file.
    assert!(!refused.stderr.contains("--force"), "{}", refused.stderr);
    assert!(refused.stderr.contains("wo validate"), "{}", refused.stderr);
    assert_eq!(
        std::fs::read(p.state_path()).unwrap(),
        b"{\"version\": 1, oops"
    );

    let forced = p.ok(&["init", "--force"]);
    assert!(forced.contains("backed it up to"), "{forced}");
    let backup = std::fs::read_dir(p.path())
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("llm.json.bak-"))
        .expect("a backup file");
    assert_eq!(
        std::fs::read(backup.path()).unwrap(),
        b"{\"version\": 1, oops"
    );
    assert!(p.state().messages().is_empty());
}

#[test]
fn commands_on_an_invalid_file_fail_without_touching_it() {
    let p = Project::new();
    let bad = br#"{"version": 1, "schema": "wikioracle.llm_state", "date": "2026-01-01T00:00:00Z", "messages": [{"title": 3}]}"#;
    std::fs::write(p.state_path(), bad).unwrap();
    let r = p.run(&["truth", "add", "x", "--content", "y"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("/messages/0/title"), "{}", r.stderr);
    assert!(r.stderr.contains("[type]"), "{}", r.stderr);
    assert_eq!(std::fs::read(p.state_path()).unwrap(), bad);
}

#[test]
fn state_is_found_in_parent_directories_or_named_explicitly() {
    let p = Project::new();
    p.ok(&["init"]);
    let sub = p.path().join("a/b");
    std::fs::create_dir_all(&sub).unwrap();
    let out = p
        .cmd(&["truth", "add", "found", "--content", "parent"])
        .current_dir(&sub)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(p.state().truth.trust.len(), 1);

    let other = p.path().join("elsewhere.json");
    p.ok(&["--state", other.to_str().unwrap(), "init"]);
    p.ok(&[
        "--state",
        other.to_str().unwrap(),
        "truth",
        "add",
        "t",
        "--content",
        "c",
    ]);
    assert_eq!(
        p.state().truth.trust.len(),
        1,
        "the default file is untouched"
    );
    let missing = p.run(&["--state", "nope.json", "log"]);
    assert_eq!(missing.code, 1);
    missing.says(&["nope.json", "wo init"]);
}

#[test]
fn truth_add_edit_rm_with_tombstones() {
    let p = Project::new();
    p.ok(&["init"]);
    let added = p.ok(&[
        "truth",
        "add",
        "Deploys",
        "--content",
        "We deploy <b>Fridays</b>",
        "--certainty",
        "0.6",
        "--kind",
        "fact",
        "--tag",
        "ops",
    ]);
    let id = added.trim().strip_prefix("added ").unwrap().to_owned();
    let t = &p.state().truth.trust[0];
    assert_eq!(t.id, id);
    assert_eq!(
        t.content, "<p>We deploy &lt;b&gt;Fridays&lt;/b&gt;</p>",
        "text is escaped"
    );
    assert_eq!(t.tags.as_deref(), Some(&["ops".to_string()][..]));

    let html = p.run_stdin(
        &[
            "truth",
            "add",
            "Link",
            "--format",
            "html",
            "--certainty",
            "0.9",
        ],
        "<p onclick=x>see <a href='https://example.org'>this</a><script>bad()</script></p>",
    );
    assert_eq!(html.code, 0, "{}", html.stderr);
    let list = p.ok(&["truth", "list"]);
    let lines: Vec<&str> = list.lines().collect();
    assert!(
        lines[0].contains("0.90") && lines[1].contains("0.60"),
        "sorted by certainty: {list}"
    );
    let link = p
        .state()
        .truth
        .trust
        .iter()
        .find(|t| t.title == "Link")
        .unwrap()
        .clone();
    assert_eq!(
        link.content,
        "<p>see <a href=\"https://example.org\">this</a></p>"
    );

    p.ok(&[
        "truth",
        "edit",
        &id[..6],
        "--certainty",
        "0.95",
        "--content",
        "Thursdays now",
    ]);
    let edited = p
        .state()
        .truth
        .trust
        .iter()
        .find(|t| t.id == id)
        .unwrap()
        .clone();
    assert_eq!(edited.certainty, 0.95);
    assert_eq!(edited.content, "<p>Thursdays now</p>");
    assert!(edited.updated.is_some());

    let ambiguous = p.run(&["truth", "rm", "t_"]);
    assert_eq!(ambiguous.code, 1);
    ambiguous.says(&["ambiguous"]);
    let before = std::fs::read(p.state_path()).unwrap();
    let bad = p.run(&["truth", "edit", &id, "--certainty", "1.5"]);
    assert_eq!(bad.code, 1);
    assert_eq!(
        std::fs::read(p.state_path()).unwrap(),
        before,
        "a refused edit writes nothing"
    );

    // Export, delete, then merge the older export: the entry stays deleted.
    let exported = p.ok(&["export"]);
    let export_path = exported
        .trim()
        .strip_prefix("exported ")
        .unwrap()
        .to_owned();
    p.ok(&["truth", "rm", &id]);
    assert_eq!(p.state().truth.deleted[0].id, id);
    let merged = p.ok(&["merge", &export_path]);
    assert!(merged.contains("memory: 0 added"), "{merged}");
    assert!(
        p.state().truth.trust.iter().all(|t| t.id != id),
        "not resurrected"
    );
}

#[test]
fn merge_auto_detects_exports_dry_run_and_renames() {
    let p = Project::new();
    p.ok(&["init"]);
    let phone = state_with_messages("phone", 0, 3, "hello");
    let export = p.write_state("llm_2026.02.22.2241.json", &phone);
    let dry = p.ok(&["merge", "--dry-run"]);
    assert!(
        dry.contains("would merge") && dry.contains("3 added"),
        "{dry}"
    );
    assert!(export.exists());
    assert!(p.state().messages().is_empty());
    let done = p.ok(&["merge"]);
    assert!(
        done.contains("merged") && done.contains("renamed to"),
        "{done}"
    );
    assert!(!export.exists());
    assert!(p.path().join("llm_2026.02.22.2241.json.merged").exists());
    assert_eq!(p.state().messages().len(), 3);
    assert!(p.ok(&["merge"]).contains("nothing to merge"));
    // Merging the same content again adds nothing.
    let again = p.write_state("copy.json", &phone);
    let out = p.ok(&["merge", again.to_str().unwrap()]);
    assert!(
        out.contains("0 added") && out.contains("3 already present"),
        "{out}"
    );
    assert!(again.exists(), "explicitly named files are not renamed");
    // An invalid export is reported, the state untouched, exit 1.
    std::fs::write(p.path().join("llm_bad.json"), "[]").unwrap();
    let r = p.run(&["merge"]);
    assert_eq!(r.code, 1);
    r.says(&["llm_bad.json", "expected an object"]);
}

#[test]
fn log_filters_and_json() {
    let p = Project::new();
    p.ok(&["init"]);
    let a = state_with_messages("alec", 0, 3, "about rust");
    let b = state_with_messages("bot", 100, 2, "about json");
    p.write_state("a.json", &a);
    p.write_state("b.json", &b);
    p.ok(&["import", "a.json"]);
    p.ok(&["import", "b.json"]);
    let all = p.ok(&["log"]);
    assert_eq!(
        all.matches("  [user]").count() + all.matches("  [assistant]").count(),
        5,
        "{all}"
    );
    let grep = p.ok(&["log", "--grep", "JSON", "--json"]);
    let lines: Vec<serde_json::Value> = grep
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["username"], "bot");
    assert!(lines[0]["text"].as_str().unwrap().contains("about json"));
    let user = p.ok(&["log", "--user", "alec", "-n", "1", "--json"]);
    assert_eq!(user.lines().count(), 1);
    assert!(user.contains("alec 2"));
    let since = Timestamp::from_unix(1_800_000_100);
    let dated = p.ok(&["log", "--since", since.as_str(), "--json"]);
    assert_eq!(dated.lines().count(), 2);
    let bad = p.run(&["log", "--since", "last tuesday"]);
    assert_eq!(bad.code, 1);
    bad.says(&["--since", "YYYY-MM-DD"]);
}

#[test]
fn context_show_and_edit() {
    let p = Project::new();
    p.ok(&["init"]);
    p.ok(&[
        "context",
        "edit",
        "--set",
        "# Rules\n\nBe *brief*.",
        "--format",
        "markdown",
    ]);
    assert_eq!(
        p.ok(&["context", "show", "--xhtml"]).trim(),
        "<h1>Rules</h1>\n<p>Be <em>brief</em>.</p>"
    );
    // As written: Markdown, never markup.
    assert_eq!(p.ok(&["context", "show"]).trim(), "# Rules\n\nBe *brief*.");
    // Text typed as text comes back exactly.
    p.ok(&["context", "edit", "--set", "Plain rules.\nTwo lines."]);
    assert_eq!(
        p.ok(&["context", "show"]).trim(),
        "Plain rules.\nTwo lines."
    );
    p.ok(&[
        "context",
        "edit",
        "--set",
        "# Rules\n\nBe *brief*.",
        "--format",
        "markdown",
    ]);
    assert_eq!(
        p.ok(&["context", "show", "--text"]).trim(),
        "Rules\n\nBe brief."
    );
    // $EDITOR is used when no --set/--file is given.
    let script = p.path().join("ed.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nprintf '<p>from editor</p><script>x()</script>' > \"$1\"\n",
    )
    .unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(&script).unwrap().permissions(),
        0o755,
    );
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = p
        .cmd(&["context", "edit"])
        .env("EDITOR", &script)
        .output()
        .unwrap();
    common::assert_success(&out);
    assert_eq!(p.state().context, "<p>from editor</p>");
    let no_editor = p.run(&["context", "edit"]);
    assert_eq!(no_editor.code, 1);
    assert!(no_editor.stderr.contains("$EDITOR"), "{}", no_editor.stderr);
}

#[test]
fn validate_reports_pointers_rules_and_json() {
    let p = Project::new();
    p.ok(&["init"]);
    let mut s = p.state();
    s.truth.trust.push(TruthEntry::new(
        "x",
        Timestamp::from_unix(1_800_000_000),
        0.5,
        "<p>ok</p>",
    ));
    let good = p.write_state("good.json", &s);
    let bad = p.path().join("bad.json");
    std::fs::write(&bad, r#"{"version": 1, "schema": "wikioracle.llm_state", "date": "2026-01-01T00:00:00Z", "messages": [{"title": "t", "username": "u", "timestamp": "2026-01-01T00:00:00Z", "content": "<p onclick=\"x\">hi</p>"}], "truth": {"trust": [{"title": "t", "timestamp": "2026-01-01T00:00:00Z", "certainty": -1, "content": ""}]}}"#).unwrap();
    let r = p.run(&["validate", good.to_str().unwrap(), bad.to_str().unwrap()]);
    assert_eq!(r.code, 1);
    assert!(r.stdout.contains("good.json: valid"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("/truth/trust/0/certainty: -1 is outside [0, 1] [range]"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("/messages/0/content") && r.stdout.contains("[xhtml-allowlist]"),
        "{}",
        r.stdout
    );
    let j = p.run(&["validate", "--json", bad.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(j.stdout.trim()).unwrap();
    assert_eq!(v["valid"], false);
    assert_eq!(v["errors"][0]["pointer"], "/truth/trust/0/certainty");
    let missing = p.run(&["validate", "absent.json"]);
    assert_eq!(missing.code, 1);
    assert!(missing.stdout.contains("cannot read"), "{}", missing.stdout);
}

#[test]
fn usage_errors_exit_1_and_help_teaches() {
    let p = Project::new();
    let r = p.run(&["truth", "add"]);
    assert_eq!(r.code, 1, "clap usage errors map to 1, not 2");
    for cmd in [
        vec!["init", "--help"],
        vec!["validate", "--help"],
        vec!["merge", "--help"],
        vec!["export", "--help"],
        vec!["import", "--help"],
        vec!["log", "--help"],
        vec!["truth", "add", "--help"],
        vec!["truth", "edit", "--help"],
        vec!["truth", "rm", "--help"],
        vec!["truth", "list", "--help"],
        vec!["context", "show", "--help"],
        vec!["context", "edit", "--help"],
    ] {
        let out = p.ok(&cmd);
        assert!(
            out.contains("Examples:"),
            "{cmd:?} --help has no examples:\n{out}"
        );
    }
}

#[test]
fn symlinked_state_is_refused_unless_allowed() {
    let p = Project::new();
    let real = p.path().join("real.json");
    p.ok(&["--state", real.to_str().unwrap(), "init"]);
    std::os::unix::fs::symlink(&real, p.state_path()).unwrap();
    let r = p.run(&["truth", "add", "a", "--content", "b"]);
    assert_eq!(r.code, 1);
    r.says(&["symbolic link", "--allow-symlink"]);
    p.ok(&["--allow-symlink", "truth", "add", "a", "--content", "b"]);
    let real_state = wo_format::parse(&std::fs::read(&real).unwrap()).unwrap();
    assert_eq!(real_state.truth.trust.len(), 1);
}

#[test]
fn write_failure_exits_2_and_keeps_the_file() {
    // A file-size limit makes the write fail with EFBIG as it would on a full
    // disk; this works for root too, on any filesystem.
    let p = Project::new();
    p.ok(&["init"]);
    let big = state_with_messages("u", 0, 50, &"x".repeat(200));
    p.write_state("big.json", &big);
    let before = std::fs::read(p.state_path()).unwrap();
    let mut cmd = p.cmd(&["import", "big.json"]);
    use std::os::unix::process::CommandExt;
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: 4096,
                rlim_max: 4096,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot write, the file is unchanged"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(p.state_path()).unwrap(), before);
    let leftovers: Vec<String> = std::fs::read_dir(p.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn interop_fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../wo-interop/tests/fixtures")
        .join(name)
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

fn tree_files(root: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let rel = e
                    .path()
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read(e.path()).unwrap());
            }
        }
    }
    out
}

#[test]
fn import_a_cli_chat_file_and_adopt_its_system_prompt() {
    let p = Project::new();
    p.ok(&["init"]);
    std::fs::create_dir_all(p.path().join(".ai")).unwrap();
    std::fs::write(
        p.path().join(".ai/openai.json"),
        r#"{"provider": "openai", "base_url": "https://api.example.invalid/v1", "model": "gpt-4o-mini",
            "system": "You are terse.", "temperature": 0.7, "env_key": "OPENAI_API_KEY",
            "conversation": [
              {"role": "system", "content": "You are terse.", "timestamp": "2025-10-20T12:00:00Z"},
              {"role": "user", "content": "First question <b>?", "timestamp": "2025-10-20T12:01:00Z"},
              {"role": "assistant", "content": "First answer", "timestamp": "2025-10-20T12:01:10Z"}
            ],
            "meta": {"last_updated": "2025-10-20T12:01:10Z", "total_turns": 1}}"#,
    )
    .unwrap();
    let dry = p.ok(&[
        "import",
        ".ai/openai.json",
        "--dry-run",
        "--username",
        "alec",
    ]);
    assert!(
        dry.contains("would import") && dry.contains("3 added"),
        "{dry}"
    );
    assert!(p.state().messages().is_empty());
    let out = p.ok(&["import", ".ai/openai.json", "--username", "alec"]);
    assert!(
        out.contains("3 added") && out.contains("set it to the file's system prompt"),
        "{out}"
    );
    let s = p.state();
    let users: Vec<&str> = s.messages().iter().map(|m| m.username.as_str()).collect();
    assert!(
        users.contains(&"alec") && users.contains(&"gpt-4o-mini"),
        "{users:?}"
    );
    assert!(
        s.messages()
            .iter()
            .any(|m| m.content == "<p>First question &lt;b&gt;?</p>")
    );
    assert!(
        p.ok(&["context", "show", "--text"])
            .contains("You are terse.")
    );
    // Importing again adds nothing.
    let again = p.ok(&["import", ".ai/openai.json", "--username", "alec"]);
    assert!(again.contains("0 added"), "{again}");
    // A malformed file is a clear error naming it.
    std::fs::write(p.path().join("bad.json"), r#"{"conversation": 5}"#).unwrap();
    let r = p.run(&["import", "bad.json"]);
    assert_eq!(r.code, 1);
    r.says(&["bad.json", "/conversation"]);
}

#[test]
fn profiles_tree_round_trips_through_llm_json() {
    let p = Project::new();
    p.ok(&["init"]);
    let src = p.path().join("data/profiles");
    copy_tree(&interop_fixture("profiles_clean"), &src);
    let out = p.ok(&["import", "data"]);
    assert!(out.contains("imported") && out.contains("added"), "{out}");
    let n = p.state().messages().len();
    assert!(n > 20, "{n}");
    // Export the state back as a tree: byte-identical to what came in.
    let back = p.path().join("back");
    let exported = p.ok(&[
        "export",
        "--layout",
        "profiles",
        "--out",
        back.to_str().unwrap(),
        "--copy-files-from",
        src.to_str().unwrap(),
    ]);
    assert!(
        exported.contains(&format!("exported {n} messages")),
        "{exported}"
    );
    let (a, b) = (tree_files(&src), tree_files(&back));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (k, v) in &a {
        assert_eq!(v, &b[k], "{k} differs");
    }
    // The target must be empty unless --overwrite.
    let again = p.run(&[
        "export",
        "--layout",
        "profiles",
        "--out",
        back.to_str().unwrap(),
    ]);
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("back"), "{}", again.stderr);
    p.ok(&[
        "export",
        "--layout",
        "profiles",
        "--out",
        back.to_str().unwrap(),
        "--overwrite",
    ]);
    // A damaged tree imports with warnings, never fails.
    let damaged = p.path().join("damaged/profiles");
    copy_tree(&interop_fixture("profiles_damaged"), &damaged);
    let r = p.run(&["import", "damaged", "--format", "profiles"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("warning:"), "{}", r.stderr);
}

/// No way in can leave a file wo cannot open again. A too-deep
/// export is refused by `wo import` and by `wo merge` (auto-detected beside
/// the file) with its pointer and nothing written; hostile XHTML is
/// sanitised on the way in and reported, and the file still validates.
#[test]
fn import_and_merge_admit_only_what_wo_can_open_again() {
    let p = Project::new();
    p.ok(&["init"]);
    let before = std::fs::read(p.state_path()).unwrap();

    let mut deep = "\"leaf\"".to_owned();
    for _ in 0..130 {
        deep = format!("{{\"x\":{deep}}}");
    }
    let deep_export = format!(
        r#"{{"version":1,"schema":"wikioracle.llm_state","date":"2026-01-01T00:00:00Z","context":"",
"messages":[{{"id":"m_00000000000000aa","title":"t","username":"u","timestamp":"2026-01-01T00:00:00Z","content":"<p>deep</p>","x_deep":{deep}}}],
"truth":{{"trust":[]}}}}"#
    );
    std::fs::write(p.path().join("deep.json"), &deep_export).unwrap();
    let r = p.run(&["import", "deep.json"]);
    assert_ne!(r.code, 0, "a too-deep export was imported: {}", r.stdout);
    assert!(r.stderr.contains("/messages/0"), "{}", r.stderr);
    assert_eq!(std::fs::read(p.state_path()).unwrap(), before);

    std::fs::write(p.path().join("llm_2026.01.01.0000.json"), &deep_export).unwrap();
    let r = p.run(&["merge"]);
    assert_ne!(r.code, 0, "a too-deep export was merged: {}", r.stdout);
    assert_eq!(std::fs::read(p.state_path()).unwrap(), before);
    std::fs::remove_file(p.path().join("llm_2026.01.01.0000.json")).unwrap();

    let hostile = r#"{"version":1,"schema":"wikioracle.llm_state","date":"2026-01-01T00:00:00Z","context":"<p>ok</p>",
"messages":[{"id":"m_00000000000000bb","title":"t","username":"u","timestamp":"2026-01-01T00:00:00Z",
"content":"<p onclick=\"alert(1)\">hi<script>alert(2)</script><a href=\"javascript:alert(3)\">x</a></p>"}],
"truth":{"trust":[]}}"#;
    std::fs::write(p.path().join("hostile.json"), hostile).unwrap();
    let r = p.run(&["import", "hostile.json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("sanitised"), "{}", r.stderr);
    let text = std::fs::read_to_string(p.state_path()).unwrap();
    assert!(text.contains("hi"), "{text}");
    for bad in ["script", "onclick", "javascript:"] {
        assert!(!text.contains(bad), "{bad} stored: {text}");
    }
    let v = p.run(&["validate", "llm.json"]);
    assert_eq!(
        v.code, 0,
        "wo's own file fails validation: {}{}",
        v.stdout, v.stderr
    );
}
