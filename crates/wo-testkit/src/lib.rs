//! Test support shared across crates' integration tests (a dev-dependency
//! only): [`LlamaServer`] starts llama-cpp-python's OpenAI-compatible server
//! on a free loopback port running the offline SmolLM2 model, and stops it
//! on drop; [`heavy`] decides whether a test that needs such a heavy
//! prerequisite (the model, the server, Chromium) runs.
//!
//! A plain `cargo test` on a machine without them reports each such test as
//! skipped, with the reason and the command that installs what is missing.
//! `bash .ci/run` installs everything and sets `WO_REQUIRE_HEAVY_TESTS=1`,
//! under which a missing prerequisite fails the test instead: CI never
//! passes by skipping.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The model alias the server answers to.
pub const MODEL_ALIAS: &str = "smollm2";
/// File name of the offline model (scripts/install-model.sh).
pub const MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// A heavy prerequisite of a test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// The offline SmolLM2 GGUF (`scripts/install-model.sh`).
    Model,
    /// Recall's sentence-embedding model, all-MiniLM-L6-v2 as GGUF
    /// (`scripts/install-model.sh` installs it too).
    EmbeddingModel,
    /// llama-cpp-python's OpenAI-compatible server (and the model).
    LlamaServer,
    /// Node.js, Debian's Chromium and playwright-core in `tests/browser`.
    Browser,
    /// The official Python MCP SDK (the `mcp` package), the client `wo mcp`'s
    /// tests drive it with.
    PythonMcp,
    /// Node.js and the official MCP TypeScript SDK (`@modelcontextprotocol/sdk`)
    /// in `tests/mcp-node`.
    NodeMcp,
    /// The official Python OpenAI SDK (the `openai` package), the client
    /// `wo serve`'s OpenAI-compatible endpoint is tested with.
    PythonOpenai,
    /// simonw/llm (the `llm` package: its CLI, `python3 -m llm`), an
    /// OpenAI client people point at `wo serve`.
    PythonLlm,
}

/// The `openai` package version `.ci/run` installs.
pub const OPENAI_SDK: &str = "3.57.0";

/// The `llm` package version `.ci/run` installs.
pub const LLM_CLI: &str = "0.36";

/// Set to `1` by `.ci/run`: a missing prerequisite is then a failure.
pub const REQUIRE_ENV: &str = "WO_REQUIRE_HEAVY_TESTS";

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Chromium the browser tests drive (`$CHROMIUM`, else Debian's).
pub fn chromium() -> PathBuf {
    std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"))
}

fn python_imports(module: &str) -> bool {
    Command::new(python())
        .args(["-c", &format!("import {module}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Why `need` is not met (with the command that installs it), or `None`.
pub fn missing(need: Need) -> Option<String> {
    let model = || {
        let path = model_path();
        (!path.is_file()).then(|| {
            format!(
                "the SmolLM2 model is not installed at {} (run: scripts/install-model.sh)",
                path.display()
            )
        })
    };
    match need {
        Need::Model => model(),
        Need::EmbeddingModel => {
            let path = embedding_model_path();
            (!path.is_file()).then(|| {
                format!(
                    "the embedding model is not installed at {} (run: scripts/install-model.sh)",
                    path.display()
                )
            })
        }
        Need::LlamaServer => model().or_else(|| {
            (!python_imports("llama_cpp.server.app")).then(|| {
                format!(
                    "llama-cpp-python's server is not installed for {} (run: \
                     CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" python3 -m pip install \
                     \"llama-cpp-python[server]==0.3.36\")",
                    python()
                )
            })
        }),
        Need::PythonMcp => (!python_imports("mcp.client.stdio")).then(|| {
            format!(
                "the official Python MCP SDK is not installed for {} (run: python3 -m pip install \"mcp==2.3.0\")",
                python()
            )
        }),
        Need::PythonLlm => (!python_imports("llm.cli")).then(|| {
            format!(
                "simonw/llm is not installed for {} (run: python3 -m pip install \"llm=={LLM_CLI}\")",
                python()
            )
        }),
        Need::PythonOpenai => (!python_imports("openai")).then(|| {
            format!(
                "the official Python OpenAI SDK is not installed for {} (run: python3 -m pip install \"openai=={OPENAI_SDK}\")",
                python()
            )
        }),
        Need::NodeMcp => {
            if !node_runs() {
                Some("Node.js is not installed (run: apt-get install nodejs npm)".into())
            } else if !repo_root()
                .join("tests/mcp-node/node_modules/@modelcontextprotocol/sdk")
                .is_dir()
            {
                Some(
                    "the MCP TypeScript SDK is not installed (run: npm ci --prefix tests/mcp-node)"
                        .into(),
                )
            } else {
                None
            }
        }
        Need::Browser => {
            let node = node_runs();
            if !node {
                Some("Node.js is not installed (run: apt-get install nodejs npm)".into())
            } else if !chromium().is_file() {
                Some(format!(
                    "no Chromium at {} (run: apt-get install chromium, or set $CHROMIUM)",
                    chromium().display()
                ))
            } else if !repo_root()
                .join("tests/browser/node_modules/playwright-core")
                .is_dir()
            {
                Some("playwright-core is not installed (run: npm ci --prefix tests/browser)".into())
            } else {
                None
            }
        }
    }
}

/// Whether `node --version` runs.
fn node_runs() -> bool {
    Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether the calling test, needing `needs`, runs: `true` when all are
/// met. Otherwise it prints `SKIPPED <test>: <reason>` straight to stderr
/// (past the test harness's capture, so a plain `cargo test` shows it) and
/// returns `false` — or, under `WO_REQUIRE_HEAVY_TESTS=1`, fails the test
/// with the reason. The test's name is its thread's: libtest names each
/// test's thread after the test.
pub fn heavy(needs: &[Need]) -> bool {
    let Some(reason) = needs.iter().find_map(|&n| missing(n)) else {
        return true;
    };
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("this test");
    if std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1") {
        panic!("{test}: {reason} ({REQUIRE_ENV}=1, so this is a failure, not a skip)");
    }
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: {reason}; `bash .ci/run` installs everything and runs it"
    );
    false
}

/// A tiny deterministic generator (xorshift64*) for tests and benchmarks:
/// the same seed gives the same sequence on every machine.
pub struct Rng(u64);

impl Rng {
    /// A generator starting from `seed` (0 is replaced: xorshift stays at 0).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// Seeded from the environment variable `var` when set, otherwise from
    /// the clock; the seed is printed so a failure can be replayed.
    pub fn from_env(var: &str) -> Rng {
        let seed = std::env::var(var)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        eprintln!("seed: {var}={seed}");
        Rng::new(seed)
    }

    /// The next 64 random bits.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// One of `xs` (which must not be empty).
    pub fn pick<'a, T: ?Sized>(&mut self, xs: &[&'a T]) -> &'a T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// A made-up embedding of `text` with `dim` components in [-1, 1]: the same
/// text gives the same vector everywhere, different texts unrelated ones.
/// For benchmarks that need a sidecar of realistic size without running the
/// embedding model on every message (callers normalise it as vectors are).
pub fn made_up_vector(text: &str, dim: usize) -> Vec<f32> {
    let mut h = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    (0..dim)
        .map(|_| {
            h ^= h << 13;
            h ^= h >> 7;
            h ^= h << 17;
            (h % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// Writes a zip archive at `path` holding `entries` (name, bytes), stored
/// uncompressed (what readers must accept; no compression backend needed).
pub fn write_zip(path: &Path, entries: &[(&str, &[u8])]) {
    let mut w = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, bytes) in entries {
        w.start_file(*name, options).unwrap();
        w.write_all(bytes).unwrap();
    }
    w.finish().unwrap();
}

/// One HTTP request read from `stream`: headers plus a `content-length`
/// body; for anything else (a TLS hello), whatever arrives within a second.
pub fn read_request(stream: &mut TcpStream) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let len = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                break;
            }
        }
    }
    buf
}

/// Deterministic prose for benchmarks: a Zipf-distributed vocabulary of
/// 5,000 made-up words with `domain` words at mid-frequency ranks, so that,
/// as in real transcripts, common words are common and a query's words
/// appear in a minority of messages.
pub struct ZipfText {
    vocab: Vec<String>,
    /// Cumulative Zipf weights.
    cdf: Vec<f64>,
}

impl ZipfText {
    /// The vocabulary with `domain` placed at ranks 40, 65, 90, ….
    pub fn new(domain: &[&str]) -> ZipfText {
        let syllables = [
            "ka", "lo", "mi", "re", "su", "ten", "vo", "xi", "pra", "den", "ul", "gor",
        ];
        let mut vocab: Vec<String> = (0..5000usize)
            .map(|i| {
                let (mut w, mut n) = (String::new(), i + 7);
                for _ in 0..(2 + i % 3) {
                    w.push_str(syllables[n % syllables.len()]);
                    n = n / syllables.len() + i;
                }
                w
            })
            .collect();
        for (k, d) in domain.iter().enumerate() {
            vocab[40 + k * 25] = (*d).to_owned();
        }
        let mut acc = 0.0;
        let cdf = (1..=vocab.len())
            .map(|rank| {
                acc += 1.0 / rank as f64;
                acc
            })
            .collect();
        ZipfText { vocab, cdf }
    }

    /// The XHTML of the `i`th message of a generated transcript: two
    /// paragraphs, of 24 and 16 words.
    pub fn message_xhtml(&self, i: usize) -> String {
        format!(
            "<p>{}</p><p>{}</p>",
            self.sentence(i, 24),
            self.sentence(i + 7, 16)
        )
    }

    /// `words` words drawn from the distribution; the same `seed` gives
    /// the same sentence.
    pub fn sentence(&self, seed: usize, words: usize) -> String {
        let total = *self.cdf.last().unwrap();
        let mut x = seed as u64 ^ 0x9E37_79B9_7F4A_7C15;
        (0..words)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let r = (x % 1_000_000) as f64 / 1_000_000.0 * total;
                let i = self.cdf.partition_point(|&c| c < r);
                self.vocab[i.min(self.vocab.len() - 1)].as_str()
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The names of the entries of `dir`, sorted.
pub fn sorted_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A running `python3 -m llama_cpp.server`.
pub struct LlamaServer {
    child: Child,
    log: PathBuf,
    /// `http://127.0.0.1:PORT/v1`.
    pub base_url: String,
    /// The loopback port it listens on.
    pub port: u16,
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where scripts/install-model.sh puts the model (`$WO_MODEL` overrides).
pub fn model_path() -> PathBuf {
    if let Some(p) = std::env::var_os("WO_MODEL").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    models_dir().join(MODEL_FILE)
}

/// File name of recall's embedding model (scripts/install-embedding-model.sh).
pub const EMBEDDING_MODEL_FILE: &str = "all-MiniLM-L6-v2.F32.gguf";

/// Where scripts/install-model.sh puts the embedding model
/// (`$WO_EMBEDDING_MODEL` overrides).
pub fn embedding_model_path() -> PathBuf {
    if let Some(p) = std::env::var_os("WO_EMBEDDING_MODEL").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    models_dir().join(EMBEDDING_MODEL_FILE)
}

/// `$XDG_DATA_HOME/wikioracle/models`, else `~/.local/share/wikioracle/models`.
fn models_dir() -> PathBuf {
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is unset")).join(".local/share")
        });
    data.join("wikioracle/models")
}

/// The Python that runs the server (`$PYTHON`, else `python3`).
pub fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl LlamaServer {
    /// Starts the server and waits (up to two minutes) until it answers.
    pub fn start() -> LlamaServer {
        if let Some(reason) = missing(Need::LlamaServer) {
            panic!("{reason}");
        }
        let model = model_path();
        let port = free_port();
        let log = std::env::temp_dir().join(format!("wo-llamacpp-{port}.log"));
        let out = std::fs::File::create(&log).expect("create the server log");
        let child = Command::new(python())
            .args(["-m", "llama_cpp.server", "--model"])
            .arg(&model)
            .args([
                "--model_alias",
                MODEL_ALIAS,
                "--host",
                "127.0.0.1",
                "--port",
            ])
            .arg(port.to_string())
            .args(["--n_threads", "2", "--n_ctx", "2048"])
            .stdout(out.try_clone().expect("clone the log handle"))
            .stderr(out)
            .spawn()
            .expect("start python3 -m llama_cpp.server");
        let mut server = LlamaServer {
            child,
            log,
            base_url: format!("http://127.0.0.1:{port}/v1"),
            port,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        while !server.answers() {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("llama_cpp.server exited ({status}):\n{}", server.log_tail());
            }
            assert!(
                Instant::now() < deadline,
                "llama_cpp.server did not answer within 120 s:\n{}",
                server.log_tail()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        server
    }

    /// Whether `GET /v1/models` answers 200.
    fn answers(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let req = format!(
            "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
            self.port
        );
        if s.write_all(req.as_bytes()).is_err() {
            return false;
        }
        let mut head = [0u8; 12];
        s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200")
    }

    /// The last lines of the server's log, for failure messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}
