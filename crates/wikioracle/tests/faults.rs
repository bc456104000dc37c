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

    let mut rng = wo_testkit::Rng::from_env("WO_FAULT_SEED");
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
                    common::assert_success(&out);
                    let out = std::process::Command::new(&wo)
                        .args(["truth", "add", &format!("w{w} t{i}"), "--content", "x"])
                        .current_dir(&dir)
                        .output()
                        .unwrap();
                    common::assert_success(&out);
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

// ---------------------------------------------------------------------------
// A server, CLI writers and a plain-write editor at once.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A loopback OpenAI-compatible upstream: every answer is unique (a
/// counter), streamed in three chunks a few milliseconds apart.
fn fake_openai() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let counter = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let n = counter.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || answer(stream, n));
        }
    });
    port
}

fn answer(mut stream: TcpStream, n: usize) {
    if !common::drain_request(&stream) {
        return;
    }
    let _ = stream.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n",
    );
    for part in [format!("Answer number {n}"), " is".into(), " here.".into()] {
        std::thread::sleep(Duration::from_millis(15));
        let frame = serde_json::json!({"choices":[{"index":0,"delta":{"content":part},"finish_reason":null}]});
        let _ = stream.write_all(format!("data: {frame}\n\n").as_bytes());
    }
    let _ = stream.write_all(
        b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
    );
}

/// Whether a CLI writer succeeded (`true`), or gave up honestly because
/// the editor kept saving faster than it could write (`false`: exit 2,
/// "nothing was written" — then nothing of it may be in the file). Any
/// other failure fails the test.
fn written_or_honestly_refused(out: &std::process::Output) -> bool {
    if out.status.success() {
        return true;
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(2)
            && stderr.contains("kept changing while being written")
            && stderr.contains("nothing was written"),
        "{stderr}"
    );
    false
}

/// One HTTP/1.1 request to the local server; returns (status, body).
fn http(port: u16, token: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (status, text) = common::raw_http(port, &req);
    (status, common::body_of(&text))
}

/// The value of `"key":"…"` in `text` (ids in an SSE `done` frame).
fn json_field(text: &str, key: &str) -> Option<String> {
    let start = text.find(&format!("\"{key}\":\""))? + key.len() + 4;
    let end = text[start..].find('"')? + start;
    Some(text[start..end].to_owned())
}

/// The editor's view of one save: read, change titles, and write back in
/// place (truncate + write, no lock, no rename) — but, as a careful editor
/// does, never over a version it did not read.
struct Editor {
    path: std::path::PathBuf,
    /// The title the editor last gave each record (truth or message id).
    expected: BTreeMap<String, String>,
    /// A save that went into a version a writer had just replaced: the
    /// writer may have caught it (merged, so the file shows it) or not.
    raced: BTreeMap<String, String>,
    saves_landed: usize,
    saves_raced: usize,
    /// A landed save missing at the editor's next read: dropped by a writer.
    saves_lost: usize,
}

impl Editor {
    fn step(&mut self, n: usize, targets: &[String]) {
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return;
        };
        let before = file.metadata().unwrap();
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).unwrap();
        let Ok(mut state) = wo_format::parse(&bytes) else {
            // Our own save in progress cannot be seen here; a wo writer never
            // leaves a partial file. Anything else is a failure.
            panic!("the editor read an invalid file");
        };
        // Every save that landed is still there (or a later one of ours).
        for (id, title) in &self.expected {
            let now = state
                .truth_entry(id)
                .map(|t| t.title.clone())
                .or_else(|| state.message(id).map(|m| m.title.clone()));
            if now.as_deref() != Some(title.as_str()) && now.as_ref() != self.raced.get(id) {
                self.saves_lost += 1;
                eprintln!("editor save lost: {id} is {now:?}, not {title:?}");
            }
        }
        let target = &targets[n % targets.len()];
        let title = format!("edited by hand {n}");
        if let Some(t) = state.truth.trust.iter_mut().find(|t| &t.id == target) {
            t.title = title.clone();
        } else if let Some(i) = state.messages().iter().position(|m| &m.id == target) {
            state.messages_mut()[i].title = title.clone();
        } else {
            panic!("editor target {target} vanished");
        }
        let out = wo_format::to_canonical_vec(&state);
        // Open without truncating; write only into the version read.
        let mut w = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.path)
            .unwrap();
        let m = w.metadata().unwrap();
        if m.ino() != before.ino()
            || m.modified().ok() != before.modified().ok()
            || m.len() != before.len()
        {
            return; // changed since read: a careful editor reloads first
        }
        w.set_len(0).unwrap();
        w.write_all(&out).unwrap();
        drop(w);
        // Did it land at the path, or in a version a writer had replaced?
        if std::fs::metadata(&self.path).unwrap().ino() == before.ino() {
            self.saves_landed += 1;
            self.raced.remove(target);
            self.expected.insert(target.clone(), title);
        } else {
            self.saves_raced += 1;
            self.raced.insert(target.clone(), title);
        }
    }
}

#[test]
fn a_server_cli_writers_and_an_editor_lose_nothing() {
    let p = Project::new();
    p.ok(&["init"]);
    // Records the editor owns (renames, id kept), and entries the CLI edits.
    // Dated in the past (a year before the helper's default), so every
    // message dated in the future below was dated so by a writer.
    let mut seed = state_with_messages("seed", -40_000_000, 6, "hand-edited messages");
    for i in 0..4 {
        seed.add_truth(wo_format::TruthEntry::new(
            format!("editor entry {i}"),
            wo_format::Timestamp::from_unix(1_760_000_000 + i),
            0.5,
            "<p>the editor renames me</p>",
        ));
        seed.add_truth(wo_format::TruthEntry::new(
            format!("cli entry {i}"),
            wo_format::Timestamp::from_unix(1_760_000_100 + i),
            0.5,
            "<p>wo truth edit changes me</p>",
        ));
    }
    p.write_state("seed.json", &seed);
    p.ok(&["import", "seed.json"]);
    let state = p.state();
    let mut targets: Vec<String> = state
        .truth
        .trust
        .iter()
        .filter(|t| t.title.starts_with("editor entry"))
        .map(|t| t.id.clone())
        .collect();
    targets.extend(state.messages().iter().map(|m| m.id.clone()));
    let cli_entries: Vec<String> = state
        .truth
        .trust
        .iter()
        .filter(|t| t.title.starts_with("cli entry"))
        .map(|t| t.id.clone())
        .collect();

    let upstream = fake_openai();
    let cfg = p.openai_config(upstream);

    // The server, local mode, on the same file.
    let port = common::dead_port();
    let token = "concurrency-suite-token-0123456789";
    let mut server = p
        .cmd(&["serve", "--port", &port.to_string(), "--rate-limit", "0"])
        .env("WO_CONFIG", &cfg)
        .env("WO_SERVE_TOKEN", token)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let up = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            up.elapsed() < Duration::from_secs(60),
            "server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let writers_done = Arc::new(AtomicBool::new(false));
    let acked_messages = Arc::new(Mutex::new(Vec::<String>::new()));
    let acked_entries = Arc::new(Mutex::new(Vec::<String>::new()));
    let acked_prompts = Arc::new(Mutex::new(Vec::<String>::new()));
    let acked_edits = Arc::new(Mutex::new(BTreeMap::<String, String>::new()));
    // Writes refused with "nothing was written": each must be absent.
    let refused_entries = Arc::new(Mutex::new(Vec::<String>::new()));
    let refused_prompts = Arc::new(Mutex::new(Vec::<String>::new()));
    let refused_edits = Arc::new(Mutex::new(0usize));
    let mut writers = Vec::new();

    // The server's turns.
    {
        let acked = acked_messages.clone();
        writers.push(std::thread::spawn(move || {
            for i in 0..12 {
                let body = serde_json::json!({"message": format!("server turn {i}"), "params": {"provider": "test"}}).to_string();
                let (status, text) = http(port, token, "POST", "/api/chat", &body);
                assert_eq!(status, 200, "{text}");
                let user = json_field(&text, "user_message_id").unwrap_or_else(|| panic!("no done: {text}"));
                let assistant = json_field(&text, "assistant_message_id").unwrap();
                acked.lock().unwrap().extend([user, assistant]);
            }
        }));
    }
    // `wo truth add`, and `wo ask`, each in a loop.
    for w in 0..2 {
        let acked = acked_entries.clone();
        let refused = refused_entries.clone();
        let wo = common::wo_bin();
        let dir = p.path().to_path_buf();
        writers.push(std::thread::spawn(move || {
            for i in 0..10 {
                let title = format!("cli {w} {i}");
                let out = std::process::Command::new(&wo)
                    .args(["truth", "add", &title, "--content", "added"])
                    .current_dir(&dir)
                    .output()
                    .unwrap();
                if !written_or_honestly_refused(&out) {
                    refused.lock().unwrap().push(title);
                    continue;
                }
                let id = String::from_utf8_lossy(&out.stdout)
                    .trim()
                    .strip_prefix("added ")
                    .unwrap()
                    .to_owned();
                acked.lock().unwrap().push(id);
            }
        }));
    }
    for w in 0..2 {
        let acked = acked_prompts.clone();
        let refused = refused_prompts.clone();
        let wo = common::wo_bin();
        let dir = p.path().to_path_buf();
        let cfg = cfg.clone();
        writers.push(std::thread::spawn(move || {
            for i in 0..6 {
                let prompt = format!("ask {w} {i}");
                let out = std::process::Command::new(&wo)
                    .args(["ask", "--provider", "test", &prompt])
                    .env("WO_CONFIG", &cfg)
                    .current_dir(&dir)
                    .stdin(Stdio::null())
                    .output()
                    .unwrap();
                if !written_or_honestly_refused(&out) {
                    refused.lock().unwrap().push(prompt);
                    continue;
                }
                acked.lock().unwrap().push(prompt);
            }
        }));
    }
    // `wo truth edit` on the CLI's own entries.
    {
        let acked = acked_edits.clone();
        let refused = refused_edits.clone();
        let wo = common::wo_bin();
        let dir = p.path().to_path_buf();
        let entries = cli_entries.clone();
        writers.push(std::thread::spawn(move || {
            for i in 0..12 {
                let id = &entries[i % entries.len()];
                let content = format!("edit {i}");
                let out = std::process::Command::new(&wo)
                    .args(["truth", "edit", id, "--content", &content])
                    .current_dir(&dir)
                    .output()
                    .unwrap();
                if !written_or_honestly_refused(&out) {
                    *refused.lock().unwrap() += 1;
                    continue;
                }
                acked.lock().unwrap().insert(id.clone(), content);
            }
        }));
    }
    // The editor, until every writer is done.
    let editor = {
        let done = writers_done.clone();
        let path = p.state_path();
        let targets = targets.clone();
        std::thread::spawn(move || {
            let mut ed = Editor {
                path,
                expected: BTreeMap::new(),
                raced: BTreeMap::new(),
                saves_landed: 0,
                saves_raced: 0,
                saves_lost: 0,
            };
            let mut n = 0;
            while !done.load(Ordering::SeqCst) {
                ed.step(n, &targets);
                n += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            ed
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    writers_done.store(true, Ordering::SeqCst);
    let ed = editor.join().unwrap();
    // The server's next turn after the editor stopped must keep its edits.
    let (status, text) = http(
        port,
        token,
        "POST",
        "/api/chat",
        &serde_json::json!({"message": "last turn", "params": {"provider": "test"}}).to_string(),
    );
    assert_eq!(status, 200, "{text}");
    let _ = server.kill();
    let _ = server.wait();

    let bytes = std::fs::read(p.state_path()).unwrap();
    let state = wo_format::parse(&bytes).expect("the file parses");
    let mut acked_lost = 0;
    for id in acked_messages.lock().unwrap().iter() {
        if state.message(id).is_none() {
            eprintln!("lost server message {id}");
            acked_lost += 1;
        }
    }
    for id in acked_entries.lock().unwrap().iter() {
        if state.truth_entry(id).is_none() {
            eprintln!("lost truth entry {id}");
            acked_lost += 1;
        }
    }
    for prompt in acked_prompts.lock().unwrap().iter() {
        if !state
            .messages()
            .iter()
            .any(|m| m.content.contains(prompt.as_str()))
        {
            eprintln!("lost ask {prompt:?}");
            acked_lost += 1;
        }
    }
    for (id, content) in acked_edits.lock().unwrap().iter() {
        let now = state.truth_entry(id).map(|t| t.content.clone());
        if !now.as_deref().is_some_and(|c| c.contains(content.as_str())) {
            eprintln!("lost truth edit of {id}: {now:?}, not {content:?}");
            acked_lost += 1;
        }
    }
    // Told "nothing was written": nothing of that write is in the file.
    let mut refused_but_written = 0;
    for title in refused_entries.lock().unwrap().iter() {
        if state.truth.trust.iter().any(|t| &t.title == title) {
            eprintln!("refused truth add {title:?} is in the file");
            refused_but_written += 1;
        }
    }
    // (A refused `wo ask` may have saved its question before the answer's
    // write was refused: that write is the one said not to be written.)
    let refusals = refused_entries.lock().unwrap().len()
        + refused_prompts.lock().unwrap().len()
        + *refused_edits.lock().unwrap();
    let mut reverted = 0;
    for (id, title) in &ed.expected {
        let now = state
            .truth_entry(id)
            .map(|t| t.title.clone())
            .or_else(|| state.message(id).map(|m| m.title.clone()));
        if now.as_deref() != Some(title.as_str()) && now.as_ref() != ed.raced.get(id) {
            eprintln!("hand edit reverted: {id} is {now:?}, not {title:?}");
            reverted += 1;
        }
    }
    let horizon = wo_format::Timestamp::from_unix(wo_format::Timestamp::now().unix_seconds() + 60);
    let future = state
        .messages()
        .iter()
        .filter(|m| m.timestamp > horizon)
        .count();
    eprintln!(
        "concurrency suite: {} acked server messages, {} truth adds, {} asks, {} truth edits; editor: {} saves landed, {} raced a rename (not counted), renames held: {}\n\
         CLI writes refused with nothing written (the editor outpaced them): {refusals}\n\
         acked writes lost: {acked_lost}\nrefused writes found written: {refused_but_written}\nhand edits reverted: {reverted}\neditor saves lost: {}\nmessages dated in the future: {future}",
        acked_messages.lock().unwrap().len(),
        acked_entries.lock().unwrap().len(),
        acked_prompts.lock().unwrap().len(),
        acked_edits.lock().unwrap().len(),
        ed.saves_landed,
        ed.saves_raced,
        ed.expected.len(),
        ed.saves_lost,
    );
    assert!(ed.saves_landed > 0, "the editor never saved");
    assert_eq!(acked_lost, 0, "acked writes lost");
    assert_eq!(refused_but_written, 0, "refused writes were written");
    assert!(
        !acked_entries.lock().unwrap().is_empty() && !acked_prompts.lock().unwrap().is_empty(),
        "no CLI write ever landed"
    );
    assert_eq!(reverted, 0, "hand edits reverted");
    assert_eq!(ed.saves_lost, 0, "editor saves lost");
    assert_eq!(future, 0, "messages dated in the future");
}

/// `wo log` never waits for a writer; a writer gives up after
/// WO_LOCK_TIMEOUT, naming the holder's pid, exit 2, file unchanged.
#[test]
fn readers_never_wait_and_writers_time_out_with_exit_2() {
    let p = Project::new();
    p.ok(&["init"]);
    p.ok(&["truth", "add", "one", "--content", "x"]);
    let before = std::fs::read(p.state_path()).unwrap();
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(p.path().join("llm.json.lock"))
        .unwrap();
    {
        use std::os::unix::fs::FileExt;
        lock.write_all_at(b"00000000000000000009\n     31337\n", 0)
            .unwrap();
    }
    lock.lock().unwrap();
    let log = p.run(&["truth", "list"]);
    assert_eq!(log.code, 0, "{}", log.stderr);
    assert!(log.stdout.contains("one"));
    let r = common::to_run(
        p.cmd(&["truth", "add", "two", "--content", "y"])
            .env("WO_LOCK_TIMEOUT", "1.5")
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("31337"), "{}", r.stderr);
    assert!(r.stderr.contains("nothing was changed"), "{}", r.stderr);
    assert_eq!(std::fs::read(p.state_path()).unwrap(), before);
    lock.unlock().unwrap();
    p.ok(&["truth", "add", "two", "--content", "y"]);
}

/// `wo init --force` on a full disk (a file-size limit here)
/// leaves no partial backup, exits 2, and changes nothing.
#[test]
fn init_force_on_a_full_disk_leaves_no_partial_backup() {
    use std::os::unix::process::CommandExt;
    let p = Project::new();
    let junk = vec![b'{'; 200_000];
    std::fs::write(p.state_path(), &junk).unwrap();
    let mut cmd = p.cmd(&["init", "--force"]);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 64 * 1024,
                rlim_max: 64 * 1024,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let r = common::to_run(cmd.output().unwrap());
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("nothing was changed"), "{}", r.stderr);
    assert_eq!(std::fs::read(p.state_path()).unwrap(), junk);
    let names: Vec<String> = std::fs::read_dir(p.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains(".bak")),
        "a partial backup was left: {names:?}"
    );
    // With room, it works and the backup is whole.
    let out = p.ok(&["init", "--force"]);
    assert!(out.contains("backed it up"), "{out}");
    let backup = std::fs::read_dir(p.path())
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().contains(".bak-"))
        .unwrap();
    assert_eq!(std::fs::read(backup.path()).unwrap(), junk);
}

/// Eight first-run `wo ask` at once in a directory without
/// llm.json all succeed, on one file.
#[test]
fn eight_first_runs_at_once_all_succeed() {
    let p = Project::new();
    let upstream = fake_openai();
    let cfg = p.openai_config(upstream);
    let children: Vec<_> = (0..8)
        .map(|i| {
            p.cmd(&["ask", "--provider", "test", &format!("first run {i}")])
                .env("WO_CONFIG", &cfg)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(!err.contains("--force"), "{err}");
    }
    assert_eq!(p.state().messages().len(), 16);
}
