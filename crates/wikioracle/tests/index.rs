//! `wo index`, `wo search`, `wo pack` and their use by `wo init` and `wo ask`.

mod common;

use common::Project;

fn project_with_files() -> Project {
    let p = Project::new();
    let w = |rel: &str, text: &str| {
        let path = p.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    w(
        "src/kiln.rs",
        "/// Fires the kiln to a target cone.\npub fn fire_kiln(cone: u32) -> u32 {\n    cone * 100\n}\n\npub struct GlazeRecipe {\n    pub name: String,\n}\n",
    );
    w(
        "docs/guide.md",
        "# Guide\n\nIntro text.\n\n## Firing schedule\n\nRamp slowly to cone 10 in reduction.\n",
    );
    w(
        "data/settings.json",
        "{\"kiln\": {\"max_cone\": 10}, \"owner\": \"alec\"}\n",
    );
    w(".gitignore", "secret.txt\n");
    w("secret.txt", "the firing password is hunter2\n");
    p
}

#[test]
fn index_search_pack_round() {
    let p = project_with_files();
    let out = p.ok(&["index"]);
    assert!(out.contains("indexed") && out.contains("chunks"), "{out}");
    let hits = p.ok(&["search", "firing schedule", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&hits).unwrap();
    let paths: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths[0], "docs/guide.md", "{paths:?}");
    assert!(!paths.contains(&"secret.txt"), ".gitignore is honoured");
    let sym = p.ok(&["search", "--symbols", "src/"]);
    assert!(
        sym.contains("fire_kiln") && sym.contains("GlazeRecipe"),
        "{sym}"
    );
    let outline = p.ok(&["search", "--outline", "docs/"]);
    assert!(outline.contains("Firing schedule"), "{outline}");
    let first_ref = v[0]["ref"].as_str().unwrap().to_owned();
    let chunk = p.ok(&["search", "--get", &first_ref]);
    assert!(chunk.contains("Ramp slowly"), "{chunk}");
    let kind = p.ok(&["search", "kiln", "--kind", "rust"]);
    assert!(
        kind.contains("src/kiln.rs") && !kind.contains("guide.md"),
        "{kind}"
    );
    let bad = p.run(&["search", "x", "--kind", "cobol"]);
    assert_eq!(bad.code, 1);
    assert!(bad.stderr.contains("--kind"), "{}", bad.stderr);
    // Incremental: nothing changed → every file reused.
    assert!(p.ok(&["index"]).contains("0 re-read"));
    // Pack twice: identical bytes.
    p.ok(&["pack", "--out", "pack1"]);
    p.ok(&["pack", "--out", "pack2"]);
    for f in ["llm.md", "llms.txt", "AGENTS.md", "export.zip"] {
        assert_eq!(
            std::fs::read(p.path().join("pack1").join(f)).unwrap(),
            std::fs::read(p.path().join("pack2").join(f)).unwrap(),
            "{f} differs"
        );
    }
    let no_index = Project::new();
    let r = no_index.run(&["search", "x"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("wo index"), "{}", r.stderr);
}

#[test]
fn search_reads_through_its_sidecar_and_never_believes_a_bad_one() {
    let p = project_with_files();
    p.ok(&["index"]);
    let sidecar = p.path().join(".wo-index/search.bin");
    let args = ["search", "kiln cone", "--json"];
    let first = p.ok(&args);
    assert!(sidecar.is_file(), "the first search writes the sidecar");
    assert!(first.contains("src/kiln.rs"), "{first}");
    let human = p.ok(&["search", "kiln cone"]);
    assert_eq!(
        p.ok(&args),
        first,
        "read back from the sidecar: the same answer"
    );
    // Damaged, truncated or foreign: the same answer, and a good sidecar again.
    let good = std::fs::read(&sidecar).unwrap();
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0xff;
    for bad in [
        flipped,
        good[..good.len() / 3].to_vec(),
        b"not a sidecar".to_vec(),
    ] {
        std::fs::write(&sidecar, &bad).unwrap();
        assert_eq!(p.ok(&args), first);
        assert_eq!(p.ok(&["search", "kiln cone"]), human);
    }
    // A changed tree: the next index makes the sidecar stale; the answer is the new index's.
    std::fs::write(
        p.path().join("docs/kilns.md"),
        "# Kilns\n\nEvery kiln needs a cone pack: kiln cone kiln cone.\n",
    )
    .unwrap();
    p.ok(&["index"]);
    let after = p.ok(&args);
    assert!(after.contains("docs/kilns.md"), "{after}");
    // The cache's .gitignore keeps the sidecar out of git, with the rest of the cache.
    let ignore = std::fs::read_to_string(p.path().join(".wo-index/.gitignore")).unwrap();
    assert_eq!(ignore.trim(), "*");
}

#[test]
fn init_drafts_the_synopsis_and_answers_cite_chunks() {
    let p = project_with_files();
    let out = p.ok(&["init", "--index", "--context", "Pottery project"]);
    assert!(out.contains("drafted the context's synopsis"), "{out}");
    let ctx = p.ok(&["context", "show", "--text"]);
    assert!(
        ctx.contains("Pottery project") && ctx.contains("src/kiln.rs"),
        "{ctx}"
    );

    // A canned OpenAI-compatible answer: the prompt must carry the chunk.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let seen2 = seen.clone();
    std::thread::spawn(move || {
        use std::io::{BufRead, BufReader, Read, Write};
        let (mut s, _) = listener.accept().unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut len = 0;
        loop {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body).unwrap();
        *seen2.lock().unwrap() = String::from_utf8_lossy(&body).into_owned();
        s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"Cone 10.\"}}]}\n\ndata: [DONE]\n\n").unwrap();
    });
    let cfg = p.path().join("config.toml");
    std::fs::write(&cfg, format!("[providers.t]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"m\"\n")).unwrap();
    let out = p
        .cmd(&["ask", "-p", "t", "what firing schedule?"])
        .env("WO_CONFIG", &cfg)
        .output()
        .unwrap();
    common::assert_success(&out);
    let body = seen.lock().unwrap().clone();
    assert!(
        body.contains("Ramp slowly to cone 10"),
        "the chunk was sent: {body}"
    );
    assert!(
        body.contains("docs/guide.md"),
        "with its provenance: {body}"
    );
    let s = p.state();
    let sources = s.messages()[1].sources.clone().unwrap();
    assert!(
        sources.iter().any(|id| id.starts_with("chunk:")),
        "{sources:?}"
    );
    // --no-rag leaves chunks (and truth) out.
    let a = p
        .cmd(&["ask", "-p", "t", "--no-rag", "--show-context", "firing?"])
        .env("WO_CONFIG", &cfg)
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&a.stderr).contains("## Files"));
}
