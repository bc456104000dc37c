//! Helpers for running the real `wo` binary in a temporary project.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use wo_format::{Message, State, Timestamp};

pub fn wo_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_wo"))
}

/// A temporary project directory with helpers to run `wo` in it.
pub struct Project {
    pub dir: tempfile::TempDir,
    /// `$XDG_STATE_HOME` for the commands run here (where `wo ask` keeps
    /// this machine's current conversation): never the tester's own.
    pub state_home: tempfile::TempDir,
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Project {
    pub fn new() -> Self {
        Project {
            dir: tempfile::tempdir().unwrap(),
            state_home: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn state_path(&self) -> PathBuf {
        self.dir.path().join("llm.json")
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(wo_bin());
        c.args(args)
            .current_dir(self.dir.path())
            .env_remove("WO_STATE")
            .env("XDG_STATE_HOME", self.state_home.path())
            .env_remove("EDITOR")
            .env_remove("VISUAL")
            // Recall by words alone unless a test asks for the embedding
            // model (a heavy prerequisite): answers stay the same whether
            // or not it is installed.
            .env(
                "WO_EMBEDDING_MODEL",
                self.state_home.path().join("no-embedding-model.gguf"),
            )
            .stdin(Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Run {
        to_run(self.cmd(args).output().unwrap())
    }

    pub fn run_stdin(&self, args: &[&str], input: &str) -> Run {
        to_run(feed(&mut self.cmd(args), input.as_bytes()))
    }

    /// Runs and asserts success.
    pub fn ok(&self, args: &[&str]) -> String {
        let r = self.run(args);
        assert_eq!(r.code, 0, "wo {args:?} failed:\n{}{}", r.stdout, r.stderr);
        r.stdout
    }

    pub fn state(&self) -> State {
        wo_format::parse(&std::fs::read(self.state_path()).unwrap()).unwrap()
    }

    /// Writes `toml` as the project's `config.toml`, mode 0600 (`wo`
    /// refuses a config others can read when it holds keys).
    pub fn write_config(&self, toml: &str) -> PathBuf {
        let cfg = self.dir.path().join("config.toml");
        std::fs::write(&cfg, toml).unwrap();
        std::fs::set_permissions(&cfg, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        cfg
    }

    /// A config whose provider `test` is the OpenAI-compatible server on
    /// loopback `port`.
    pub fn openai_config(&self, port: u16) -> PathBuf {
        // The background interpreter starts at once after an answer (the
        // tests wait for it), not after the pause people get by default.
        self.write_config(&format!(
            "[interpreter]\npause_seconds = 0\n\n[providers.test]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"m\"\napi_key = \"sk-test-not-a-real-key\"\ntimeout_secs = 30\n"
        ))
    }

    /// Runs `wo args` with `cfg` as its config.
    pub fn run_with(&self, cfg: &Path, args: &[&str]) -> Run {
        to_run(self.cmd(args).env("WO_CONFIG", cfg).output().unwrap())
    }

    /// Runs `wo args` with `cfg` as its config and asserts success.
    pub fn ok_with(&self, cfg: &Path, args: &[&str]) -> String {
        let r = self.run_with(cfg, args);
        assert_eq!(r.code, 0, "wo {args:?} failed:\n{}{}", r.stdout, r.stderr);
        r.stdout
    }

    pub fn write_state(&self, name: &str, state: &State) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, wo_format::to_canonical_vec(state)).unwrap();
        p
    }
}

/// Runs `cmd` with `input` on its stdin, capturing its output.
pub fn feed(cmd: &mut Command, input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// A loopback server on a fresh port: each connection, its request drained
/// (see [`drain_request`]), goes to `answer`. Returns the port.
pub fn loopback_server(answer: impl Fn(std::net::TcpStream) + Send + 'static) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            drain_request(&stream);
            answer(stream);
        }
    });
    port
}

/// Sends `request` (a whole HTTP/1.1 request, `Connection: close`) to the
/// loopback `port` and reads to the end: the status and the whole response
/// text (headers and body).
pub fn raw_http(port: u16, request: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// The body of a response text [`raw_http`] read.
pub fn body_of(text: &str) -> String {
    text.split_once("\r\n\r\n").map_or("", |b| b.1).to_owned()
}

/// A loopback server on a fresh port handing each connection, unread, to
/// `answer` on a thread of its own. Returns the port.
pub fn connection_server(answer: impl Fn(std::net::TcpStream) + Send + Sync + 'static) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let answer = std::sync::Arc::new(answer);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let answer = answer.clone();
            std::thread::spawn(move || answer(stream));
        }
    });
    port
}

/// A loopback port nobody listens on (bound, then released).
pub fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Asserts that a finished command succeeded, showing its stderr if not.
pub fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Run {
    /// Asserts that stderr says each of `parts`.
    pub fn says(&self, parts: &[&str]) {
        for part in parts {
            assert!(
                self.stderr.contains(part),
                "expected {part:?} in stderr:\n{}",
                self.stderr
            );
        }
    }
}

pub fn to_run(o: Output) -> Run {
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// A state holding `n` messages by `user`, starting at `base` seconds.
pub fn state_with_messages(user: &str, base: i64, n: usize, body: &str) -> State {
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    for i in 0..n {
        s.push_message(Message::new(
            user,
            Timestamp::from_unix(1_800_000_000 + base + i as i64),
            format!("{user} {i}"),
            format!("<p>{user} says {i}: {body}</p>"),
        ));
    }
    s
}

/// A transcript whose message 20 answers "When is the ceramics course?"
/// without a word in common with it (BM25 cannot find it; meaning can).
#[allow(dead_code)] // used by the files that test recall by meaning
pub fn pottery_transcript(p: &Project) -> State {
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    for i in 0..80i64 {
        let text = match i {
            20 => "I signed up for pottery classes, they are on Tuesday evenings".to_owned(),
            _ => format!("filler line {i} on weather and tea"),
        };
        s.push_message(Message::new(
            if i % 2 == 0 { "Gina" } else { "Jon" },
            Timestamp::from_unix(1_700_000_000 + i * 60),
            text.clone(),
            format!("<p>{text}</p>"),
        ));
    }
    p.write_state("llm.json", &s);
    s
}

/// Reads one HTTP request (headers, then a `Content-Length` body) from a
/// loopback fake server's connection. `false` when the client hung up
/// before the headers ended.
#[allow(dead_code)] // not every test file runs a fake server
pub fn drain_request(stream: &std::net::TcpStream) -> bool {
    read_request(stream).is_some()
}

/// Reads one HTTP/1.1 request from a loopback fake server's connection:
/// its request line and body (by `content-length`). `None` when the client
/// hung up before the headers ended.
pub fn read_request(stream: &std::net::TcpStream) -> Option<(String, Vec<u8>)> {
    use std::io::{BufRead, BufReader, Read};
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return None;
    }
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; len];
    let _ = reader.read_exact(&mut body);
    Some((request_line, body))
}

/// A `wo serve` (local mode) running in a project, killed on drop.
#[allow(dead_code)] // not every test file runs a server
pub struct Serving {
    child: std::process::Child,
    pub port: u16,
    pub token: String,
}

#[allow(dead_code)]
impl Serving {
    /// Starts `wo serve` in `p` with `extra` flags and the config at `cfg`,
    /// on a free port with a fixed token; waits until it accepts
    /// connections.
    pub fn start(p: &Project, cfg: &Path, extra: &[&str]) -> Serving {
        Self::start_with_env(p, cfg, extra, &[])
    }

    /// [`Serving::start`] with more environment variables (they win over
    /// the project's: e.g. `WO_EMBEDDING_MODEL` for the installed model).
    pub fn start_with_env(
        p: &Project,
        cfg: &Path,
        extra: &[&str],
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Serving {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let token = "tools-test-token-0123456789abcdef".to_owned();
        let port_arg = port.to_string();
        let mut args = vec!["serve", "--port", &port_arg, "--rate-limit", "0"];
        args.extend_from_slice(extra);
        let mut cmd = p.cmd(&args);
        cmd.envs(env.iter().copied());
        let mut child = cmd
            .env("WO_CONFIG", cfg)
            .env("WO_SERVE_TOKEN", &token)
            .env("WO_SERVE_QUIET", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let up = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                use std::io::Read;
                let _ = child.stderr.take().unwrap().read_to_string(&mut err);
                panic!("wo serve exited ({status}): {err}");
            }
            assert!(
                up.elapsed() < std::time::Duration::from_secs(60),
                "wo serve did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Serving { child, port, token }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
