//! A write past the process's file size limit (`ulimit -f`) is a failed
//! write like a full disk: exit 2 with a message saying what happened and
//! that nothing changed, the file as it was, no temp file left — never a
//! silent death by SIGXFSZ.

mod common;

use std::process::Command;

use common::{Project, state_with_messages, wo_bin};

#[test]
fn a_write_over_ulimit_f_fails_cleanly_and_changes_nothing() {
    let p = Project::new();
    // About 40 KiB: over the 8 KiB limit below, so any rewrite exceeds it.
    let bulk = state_with_messages("bulk", 0, 100, &"lorem ipsum ".repeat(20));
    p.write_state("llm.json", &bulk);
    let before = std::fs::read(p.state_path()).unwrap();
    assert!(before.len() > 16 * 1024);

    let out = Command::new("bash")
        .arg("-c")
        .arg(r#"ulimit -f 8 && exec "$0" "$@""#)
        .arg(wo_bin())
        .args(["truth", "add", "limited", "--content", "never written"])
        .current_dir(p.path())
        .env_remove("WO_STATE")
        .env("XDG_STATE_HOME", p.state_home.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "status {:?}: {stderr}",
        out.status
    );
    assert!(stderr.contains("llm.json"), "{stderr}");
    assert!(stderr.contains("the file is unchanged"), "{stderr}");
    assert!(stderr.contains("ulimit -f"), "{stderr}");
    assert_eq!(std::fs::read(p.state_path()).unwrap(), before);
    let temps: Vec<String> = std::fs::read_dir(p.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(temps.is_empty(), "temp files left: {temps:?}");

    // Without the limit the same command works.
    p.ok(&["truth", "add", "limited", "--content", "written"]);
    assert_eq!(p.state().truth.trust.len(), 1);
}
