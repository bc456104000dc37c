//! End to end: the `openai` provider against a real OpenAI-compatible
//! server — llama-cpp-python serving SmolLM2 on loopback, started here.
//!
//! Needs the model (`scripts/install-model.sh`) and the server
//! (`CMAKE_ARGS="-DGGML_NATIVE=OFF" python3 -m pip install "llama-cpp-python[server]"`).
//! If either is missing this test fails and says so; it never skips.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use wo_providers::config::{self, Env};
use wo_providers::openai::OpenAiProvider;
use wo_providers::{ChatMessage, ChatRequest, ErrorKind, Provider, RemoteConfig, StreamEvent};

struct Server {
    child: Child,
    log: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

fn model_path() -> PathBuf {
    let path = config::default_model_path(&Env::process())
        .expect("cannot locate the model directory: HOME is unset");
    assert!(
        path.is_file(),
        "the SmolLM2 model is not installed at {}; run scripts/install-model.sh",
        path.display()
    );
    path
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

fn require_llama_cpp_server() {
    let ok = Command::new(python())
        .args(["-c", "import llama_cpp.server.app"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        ok,
        "llama-cpp-python's server is not installed for {}; run: \
         CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" python3 -m pip install \"llama-cpp-python[server]\"",
        python()
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn start_server() -> (Server, String) {
    require_llama_cpp_server();
    let model = model_path();
    let port = free_port();
    let log = std::env::temp_dir().join(format!("wo-llamacpp-{port}.log"));
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(python())
        .args(["-m", "llama_cpp.server", "--model"])
        .arg(&model)
        .args(["--model_alias", "smollm2", "--host", "127.0.0.1", "--port"])
        .arg(port.to_string())
        .args(["--n_threads", "2", "--n_ctx", "2048"])
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("start python3 -m llama_cpp.server");
    let mut server = Server { child, log };
    let base = format!("http://127.0.0.1:{port}/v1");
    let probe =
        OpenAiProvider::new(RemoteConfig::new("llamacpp", base.clone(), "smollm2", 2048)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if probe.check().await.is_reachable() {
            break;
        }
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!("llama_cpp.server exited ({status}):\n{}", server.log_tail());
        }
        assert!(
            Instant::now() < deadline,
            "llama_cpp.server did not answer within 120 s:\n{}",
            server.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    (server, base)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_provider_against_real_llama_cpp_server() {
    let (server, base) = start_server().await;
    let p = OpenAiProvider::new(RemoteConfig::new("llamacpp", base, "smollm2", 2048)).unwrap();
    assert!(p.check().await.is_reachable());

    // 1. A real streamed answer.
    let req = ChatRequest::new(vec![
        ChatMessage::system("You are a helpful assistant. Answer in one short sentence."),
        ChatMessage::user("What is the capital of France?"),
    ])
    .with_temperature(0.0)
    .with_max_tokens(40);
    let started = Instant::now();
    let mut s = p.stream(req, CancellationToken::new()).await.unwrap();
    let mut text = String::new();
    let mut deltas = 0;
    let mut done = None;
    while let Some(ev) = s.next().await {
        match ev.unwrap_or_else(|e| panic!("{e}\n{}", server.log_tail())) {
            StreamEvent::Delta(t) => {
                deltas += 1;
                text.push_str(&t);
            }
            d @ StreamEvent::Done { .. } => done = Some(d),
        }
    }
    eprintln!(
        "llama-cpp-python answered in {:?} with {deltas} deltas: {text:?}",
        started.elapsed()
    );
    assert!(deltas >= 2, "streamed in pieces, got {deltas}");
    assert!(!text.trim().is_empty());
    assert!(text.to_lowercase().contains("paris"), "{text:?}");
    let Some(StreamEvent::Done { finish_reason, .. }) = done else {
        panic!("no Done")
    };
    assert_eq!(finish_reason.as_deref(), Some("stop"));

    // 2. max_tokens is respected and reported as `length`.
    let req = ChatRequest::new(vec![ChatMessage::user(
        "Write a long story about a dragon.",
    )])
    .with_max_tokens(5)
    .with_temperature(0.0);
    let events: Vec<_> = p
        .stream(req, CancellationToken::new())
        .await
        .unwrap()
        .collect()
        .await;
    let last = events.last().unwrap().as_ref().unwrap();
    assert!(
        matches!(last, StreamEvent::Done { finish_reason: Some(r), .. } if r == "length"),
        "{last:?}"
    );
    assert!(events.len() <= 6 + 1, "{events:?}");

    // 3. Cancellation in the middle of a real generation.
    let req =
        ChatRequest::new(vec![ChatMessage::user("Count from 1 to 300.")]).with_max_tokens(400);
    let cancel = CancellationToken::new();
    let mut s = p.stream(req, cancel.clone()).await.unwrap();
    assert!(matches!(s.next().await, Some(Ok(StreamEvent::Delta(_)))));
    cancel.cancel();
    let e = s.next().await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled);
    drop(s);

    // 4. The server still answers afterwards.
    let req = ChatRequest::new(vec![ChatMessage::user("Say hi.")]).with_max_tokens(8);
    let events: Vec<_> = p
        .stream(req, CancellationToken::new())
        .await
        .unwrap()
        .collect()
        .await;
    assert!(matches!(events.last(), Some(Ok(StreamEvent::Done { .. }))));
    drop(server);
}
