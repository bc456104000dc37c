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
