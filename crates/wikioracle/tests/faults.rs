//! Fault tests: writers killed at random moments, and many writers at once.
//! The state file must always be valid and hold every write reported done.

// Tests report with println!; clippy.toml forbids it only for the binary's
// own output, which must go through render::term.
#![allow(clippy::disallowed_macros)]

mod common;

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Project, state_with_messages};

/// xorshift64*: a tiny deterministic generator; the seed is printed so a
/// failure can be replayed with WO_FAULT_SEED.
struct Rng(u64);

impl Rng {
    fn from_env() -> Self {
        let seed = std::env::var("WO_FAULT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        eprintln!("fault seed: WO_FAULT_SEED={seed}");
        Rng(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

#[test]
fn sigkill_at_random_moments_never_corrupts_or_loses_reported_writes() {
    let p = Project::new();
    p.ok(&["init"]);
    // A few thousand messages make each save take long enough that kills
    // land inside serialisation, the temp-file write, fsync and rename.
    let bulk = state_with_messages("bulk", 0, 2000, &"lorem ipsum ".repeat(20));
    p.write_state("bulk.json", &bulk);
    p.ok(&["import", "bulk.json"]);

    // Time one unkilled write to spread kill moments over a whole run.
    let start = Instant::now();
    p.ok(&["truth", "add", "calibration", "--content", "c"]);
    let typical = start.elapsed().as_micros().max(1000) as u64;

    let mut rng = Rng::from_env();
    let mut done: BTreeSet<String> = BTreeSet::new();
    done.insert(p.state().truth.trust[0].id.clone());
    let mut attempts = 0u32;
    let mut killed = 0u32;
    while done.len() < 201 || killed < 50 {
        attempts += 1;
        assert!(
            attempts < 5000,
            "too many attempts: {} done, {killed} killed",
            done.len()
        );
        let title = format!("write {attempts}");
        let mut child = p
            .cmd(&[
                "truth",
                "add",
                &title,
                "--content",
                &format!("body {attempts}"),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Half the time let it finish; otherwise kill somewhere in its run.
        if rng.below(2) == 0 {
            std::thread::sleep(Duration::from_micros(rng.below(typical * 3 / 2)));
            let _ = child.kill(); // SIGKILL
        }
        let out = child.wait_with_output().unwrap();
        if out.status.success() {
            let stdout = String::from_utf8_lossy(&out.stdout);
            let id = stdout
                .trim()
                .strip_prefix("added ")
                .expect("reported id")
                .to_owned();
            done.insert(id);
        } else {
            assert!(
                out.status.code().is_none(),
                "only kills may fail: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            killed += 1;
        }
        // After every run the file parses and holds every reported write.
        let bytes = std::fs::read(p.state_path()).unwrap();
        let state = wo_format::parse(&bytes)
            .unwrap_or_else(|e| panic!("corrupt after attempt {attempts}: {e}"));
        let present: BTreeSet<&str> = state.truth.trust.iter().map(|t| t.id.as_str()).collect();
        for id in &done {
            assert!(
                present.contains(id.as_str()),
                "reported write {id} lost after attempt {attempts}"
            );
        }
        assert_eq!(state.messages().len(), 2000);
    }
    eprintln!(
        "{attempts} attempts, {} reported writes, {killed} killed",
        done.len()
    );
    // The next successful write sweeps temp files killed writers left.
    p.ok(&["truth", "add", "final", "--content", "f"]);
    let temps = std::fs::read_dir(p.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .count();
    assert_eq!(temps, 0);
}

#[test]
fn concurrent_writers_lose_no_turn() {
    let p = Project::new();
    p.ok(&["init"]);
    const WRITERS: usize = 6;
    const FILES_EACH: usize = 5;
    const TURNS_PER_FILE: usize = 4;
    let mut expected = BTreeSet::new();
    let mut scripts = Vec::new();
    for w in 0..WRITERS {
        let mut files = Vec::new();
        for f in 0..FILES_EACH {
            let base = ((w * FILES_EACH + f) * 100) as i64;
            let s = state_with_messages(
                &format!("writer{w}"),
                base,
                TURNS_PER_FILE,
                &format!("file {f}"),
            );
            expected.extend(s.messages().iter().map(|m| m.id.clone()));
            files.push(p.write_state(&format!("w{w}_{f}.json"), &s));
        }
        scripts.push(files);
    }
    // Each writer process imports its files one after another, all writers
    // at once, plus truth edits interleaved to contend on the same lock.
    let handles: Vec<_> = scripts
        .into_iter()
        .enumerate()
        .map(|(w, files)| {
            let wo = common::wo_bin();
            let dir = p.path().to_path_buf();
            std::thread::spawn(move || {
                for (i, f) in files.iter().enumerate() {
                    let out = std::process::Command::new(&wo)
                        .arg("import")
                        .arg(f)
                        .current_dir(&dir)
                        .output()
                        .unwrap();
                    assert!(
                        out.status.success(),
                        "{}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    let out = std::process::Command::new(&wo)
                        .args(["truth", "add", &format!("w{w} t{i}"), "--content", "x"])
                        .current_dir(&dir)
                        .output()
                        .unwrap();
                    assert!(
                        out.status.success(),
                        "{}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let state = p.state();
    let got: BTreeSet<String> = state.messages().iter().map(|m| m.id.clone()).collect();
    assert_eq!(got, expected, "every turn present exactly once");
    assert_eq!(
        state.messages().len(),
        WRITERS * FILES_EACH * TURNS_PER_FILE
    );
    assert_eq!(state.truth.trust.len(), WRITERS * FILES_EACH);
    assert!(
        state
            .messages()
            .is_sorted_by(|a, b| a.order_key() <= b.order_key())
    );
}
