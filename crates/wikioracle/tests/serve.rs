//! `wo serve`'s sign-in across restarts, with the real
//! binary: the link it prints survives a restart, `--new-token` ends it,
//! the kept token is 0600 in the data directory and nowhere else, and the
//! flags that make no sense together are refused.

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::Project;

/// A running `wo serve`, killed on drop.
struct Server {
    child: Child,
    url: String,
    stderr: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn port(&self) -> u16 {
        let rest = self.url.strip_prefix("http://127.0.0.1:").unwrap();
        rest[..rest.find('/').unwrap()].parse().unwrap()
    }
    fn token(&self) -> &str {
        self.url.split_once("?token=").unwrap().1
    }
    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

/// Starts `wo serve ARGS` in `p` with its data directory under `home`,
/// and waits for the URL it writes.
fn start(p: &Project, home: &Path, args: &[&str], n: usize) -> Server {
    let url_file = home.join(format!("url-{n}"));
    let stderr = home.join(format!("stderr-{n}"));
    let mut all = vec!["serve", "--port", "0", "--print-url-file"];
    all.push(url_file.to_str().unwrap());
    all.extend_from_slice(args);
    let child = p
        .cmd(&all)
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env_remove("WO_CONFIG")
        .env_remove("WO_SERVE_TOKEN")
        .env("WO_SERVE_QUIET", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let mut server = Server {
        child,
        url: String::new(),
        stderr,
    };
    let up = Instant::now();
    loop {
        if let Ok(url) = std::fs::read_to_string(&url_file)
            && url.ends_with('\n')
        {
            server.url = url.trim_end().to_owned();
            break;
        }
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!("wo serve exited ({status}): {}", server.stderr());
        }
        assert!(
            up.elapsed() < Duration::from_secs(60),
            "wo serve did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

/// One GET; returns (status, headers and body).
fn get(port: u16, path: &str, cookie: Option<&str>) -> (u16, String) {
    let cookie = cookie.map_or(String::new(), |c| format!("Cookie: {c}\r\n"));
    common::raw_http(
        port,
        &format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{cookie}Connection: close\r\n\r\n"
        ),
    )
}

/// Signs in with the server's link; the `name=value` of the cookie set.
fn sign_in(server: &Server) -> String {
    let (status, text) = get(server.port(), &format!("/?token={}", server.token()), None);
    assert_eq!(status, 303, "{text}");
    let line = text
        .lines()
        .find(|l| {
            l.to_ascii_lowercase()
                .starts_with("set-cookie: wo_session_")
                && !l.contains("Max-Age=0")
        })
        .expect("a session cookie");
    line["set-cookie: ".len()..]
        .split(';')
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn the_sign_in_link_survives_restarts_until_new_token() {
    let p = Project::new();
    let home = tempfile::tempdir().unwrap();
    let first = start(&p, home.path(), &[], 1);
    assert!(
        first.stderr().contains("stays the same across restarts"),
        "{}",
        first.stderr()
    );
    let cookie = sign_in(&first);
    assert_eq!(get(first.port(), "/api/state", Some(&cookie)).0, 200);
    let token = first.token().to_owned();
    drop(first);

    // The kept token: one file, 0600, in the data directory; not in the
    // project, the state file, or the log.
    let dir = home.path().join("data/wikioracle/serve-tokens");
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1);
    let mode = std::fs::metadata(&files[0]).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(
        std::fs::read_to_string(&files[0]).unwrap(),
        format!("{token}\n")
    );
    for entry in std::fs::read_dir(p.path()).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(&token),
            "token in the project"
        );
    }

    // Restarted (another port here, as with --port 0): the same token, and
    // the stderr says so without printing it.
    let second = start(&p, home.path(), &[], 2);
    assert_eq!(second.token(), token, "the link survives the restart");
    assert!(
        second.stderr().contains("same as last time"),
        "{}",
        second.stderr()
    );
    assert!(
        !second.stderr().contains(&token),
        "the token is only in the URL"
    );
    let cookie2 = sign_in(&second);
    assert_eq!(get(second.port(), "/api/state", Some(&cookie2)).0, 200);
    drop(second);

    // --new-token: a new link; the old one gets the sign-in page.
    let third = start(&p, home.path(), &["--new-token"], 3);
    assert_ne!(third.token(), token);
    assert!(
        third.stderr().contains("earlier links"),
        "{}",
        third.stderr()
    );
    let (status, page) = get(third.port(), &format!("/?token={token}"), None);
    assert_eq!(status, 401);
    assert!(
        page.contains("text/html") && page.contains("wo serve") && page.contains("Nothing is lost")
    );
    let old = cookie2.replace(&cookie2[cookie2.find('=').unwrap() + 1..], &token);
    assert_eq!(get(third.port(), "/api/state", Some(&old)).0, 401);
    let cookie3 = sign_in(&third);
    assert_eq!(get(third.port(), "/api/state", Some(&cookie3)).0, 200);
    assert_eq!(
        std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn new_token_is_refused_where_it_means_nothing() {
    let p = Project::new();
    let home = tempfile::tempdir().unwrap();
    let r = p.run(&["serve", "--stateless", "--new-token", "--port", "0"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("--new-token") && r.stderr.contains("--stateless"),
        "{}",
        r.stderr
    );
    let out = p
        .cmd(&["serve", "--new-token", "--port", "0"])
        .env("HOME", home.path())
        .env("XDG_DATA_HOME", home.path().join("data"))
        .env("WO_SERVE_TOKEN", "a-token-of-my-own-0123456789")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("WO_SERVE_TOKEN"), "{stderr}");
    assert!(!home.path().join("data").exists(), "nothing kept");
}

/// Heavy (the embedding model, `scripts/install-model.sh`): `wo serve`
/// recalls by meaning in `/api/chat`, as `wo ask` does. The server embeds
/// the transcript the sidecar lacks in the background at start; a question
/// worded unlike its answer (no word in common) then has that message
/// recalled, and the turn's own two messages are embedded after it is
/// saved (the sidecar grows by them).
#[test]
fn the_local_chat_recalls_by_meaning_with_the_embedding_model() {
    use std::io::Write as _;
    use wo_testkit::{Need, embedding_model_path, heavy};
    if !heavy(&[Need::EmbeddingModel]) {
        return;
    }
    let p = Project::new();
    let s = common::pottery_transcript(&p);
    let upstream = common::loopback_server(|mut stream| {
        let _ = stream.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n",
        );
        let frame = serde_json::json!({"choices":[{"index":0,"delta":{"content":"Tuesdays."},"finish_reason":null}]});
        let _ = stream.write_all(format!("data: {frame}\n\n").as_bytes());
        let _ = stream.write_all(
            b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
        );
    });
    let cfg = p.write_config(&format!(
        "[defaults]\nprovider = \"test\"\n\n[interpreter]\nmode = \"off\"\n\n[providers.test]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{upstream}/v1\"\nmodel = \"m\"\napi_key = \"sk-test-not-a-real-key\"\ntimeout_secs = 30\n"
    ));
    let model = embedding_model_path();
    let server = common::Serving::start_with_env(
        &p,
        &cfg,
        &[],
        &[("WO_EMBEDDING_MODEL", model.as_os_str())],
    );
    let sidecar = p.path().join(".llm.json.embed");
    // The vector count in the sidecar's header (magic, id, dim, count).
    let vectors = || {
        let b = std::fs::read(&sidecar).unwrap_or_default();
        let word = |at: usize| {
            b.get(at..at + 4)
                .map_or(0, |w| u32::from_le_bytes(w.try_into().unwrap()) as usize)
        };
        word(8 + 4 + word(8) + 4)
    };
    let up = Instant::now();
    while !sidecar.exists() {
        assert!(
            up.elapsed() < Duration::from_secs(120),
            "the transcript was not embedded at start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let body = r#"{"message":"When is the ceramics course?","new_conversation":true}"#;
    let port = server.port;
    let request = format!(
        "POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        server.token,
        body.len()
    );
    let (status, text) = common::raw_http(port, &request);
    assert_eq!(status, 200, "{text}");
    let context = text
        .lines()
        .skip_while(|l| l.trim_end() != "event: context")
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or_else(|| panic!("no context event: {text}"));
    let context: serde_json::Value = serde_json::from_str(context).unwrap();
    let hit = s.messages()[20].id.as_str();
    assert!(
        context["sources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|id| id == hit),
        "the message about pottery classes was not recalled: {context}"
    );
    assert!(text.contains("event: done"), "{text}");
    // The turn's two messages are embedded after it was saved.
    let up = Instant::now();
    while vectors() < 82 {
        assert!(
            up.elapsed() < Duration::from_secs(60),
            "the new messages were not embedded: {} vectors",
            vectors()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
