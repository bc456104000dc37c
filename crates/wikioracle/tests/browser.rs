//! The web client in a real browser: `tests/browser/run.mjs` drives Debian's
//! Chromium through playwright-core against the real `wo serve` (local and
//! stateless modes) and a real model server (llama-cpp-python running
//! SmolLM2, started here). It covers sending, streaming, stop, branching,
//! the prefs cookie, export → import, dropped-file merge, truth edits,
//! context update, stateless reload, a draft that survives reload, following
//! the stream with Jump to latest, Retry after a failure, conversations
//! (New chat, the list and its filter), Copy / Regenerate / Edit & resend,
//! the phone layout (1280×800 and 390×844), what memory remembered under an
//! answer with Undo, keyboard-only use (Tab reaches every action, focus
//! visible, panels by keyboard), the sign-in across a server restart and
//! after `--new-token` (the stale-link page), axe-core on every screen shot
//! (light and dark; serious or critical violations fail), an XSS corpus that must not run, and app.js's
//! re-implementation of the format held to the Rust golden vectors
//! (`tests/browser/golden.json`). It writes a screenshot of every screen it
//! visits to `$WO_SCREENSHOTS` (default `target/browser-screenshots/`).
//!
//! Needs `node`, `/usr/bin/chromium` (or `$CHROMIUM`), `npm ci` in
//! tests/browser and llama-cpp-python; `bash .ci/run` installs them all and
//! requires this test to run. A plain `cargo test` without them reports it
//! as skipped, with the reason ([`wo_testkit::heavy`]).

// Tests report with println!; clippy.toml forbids it only for the binary's
// own output, which must go through render::term.
#![allow(clippy::disallowed_macros)]

use std::path::PathBuf;
use std::process::Command;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn web_client_in_chromium() {
    use wo_testkit::Need;
    if !wo_testkit::heavy(&[Need::Browser, Need::LlamaServer]) {
        return;
    }
    let suite = repo_root().join("tests/browser");
    let chromium = wo_testkit::chromium();
    let llama = wo_testkit::LlamaServer::start();
    let out = Command::new("node")
        .arg(suite.join("run.mjs"))
        .env("WO_BIN", env!("CARGO_BIN_EXE_wo"))
        .env("WO_OPENAI_BASE_URL", &llama.base_url)
        .env("CHROMIUM", &chromium)
        .output()
        .expect("run node (install Node.js)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stdout}");
    assert!(
        out.status.success(),
        "browser scenarios failed ({}):\n{stdout}\n{stderr}\nmodel server log:\n{}",
        out.status,
        llama.log_tail()
    );
    let passed = stdout.lines().filter(|l| l.starts_with("ok - ")).count();
    assert!(passed >= 10, "only {passed} scenarios ran:\n{stdout}");
    assert!(!stdout.contains("not ok"), "{stdout}");
}
