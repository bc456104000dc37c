//! `wo mcp` driven by a real client — the official Python MCP SDK over
//! stdio and streamable HTTP (`tests/mcp/client.py`), on both generations
//! of the protocol (the `initialize` handshake, and 2026-07-28's
//! `server/discover` with self-contained requests): every tool with its
//! structured result checked against its `outputSchema`, annotations, the
//! resources and prompts, a read-only server listing only read tools,
//! bad arguments (clear errors, the file byte for byte unchanged), and
//! concurrent writers — MCP `remember` while `wo ask` and `wo truth add`
//! write (nothing lost). Also `wo mcp --print-config` (each snippet parses
//! in its client's format and names the state file absolutely) and `wo
//! agents-md` (written, then updated in place).

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{Project, Serving, wo_bin};
use serde_json::Value;
use wo_format::{EffortStatus, TruthKind};
use wo_testkit::{Need, heavy, python};

fn client_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py")
}

/// The protocol generations the Python client is run in: `legacy` (the
/// `initialize` handshake) and `auto` (`server/discover`, then
/// 2026-07-28).
const MODES: [&str; 2] = ["legacy", "auto"];

/// Runs the Python client's `scenario` against `wo mcp` in `p`; its JSON.
fn drive(p: &Project, scenario: &str, extra: &[&str]) -> Value {
    drive_in(p, "legacy", scenario, extra)
}

/// [`drive`] in protocol `mode`.
fn drive_in(p: &Project, mode: &str, scenario: &str, extra: &[&str]) -> Value {
    let out = Command::new(python())
        .arg(client_script())
        .env("MCP_MODE", mode)
        .arg(wo_bin())
        .arg(p.path())
        .arg(scenario)
        .args(extra)
        .env_remove("WO_STATE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client {scenario} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn project_with_fact() -> (Project, String) {
    let p = Project::new();
    p.ok(&["init", "."]);
    let out = p.ok(&[
        "truth",
        "add",
        "Kangaroos live in Australia",
        "--content",
        "The kangaroo habitat is grassland",
        "--certainty",
        "0.95",
        "--kind",
        "fact",
    ]);
    let id = out.trim().strip_prefix("added ").unwrap().to_owned();
    (p, id)
}

/// Each `(case, message)`: the call `case` in `results` failed, saying
/// `message`.
fn assert_refused(results: &Value, cases: &[(&str, &str)]) {
    for (case, msg) in cases {
        let r = &results[case];
        assert_eq!(r["ok"], false, "{case}: {r}");
        assert!(
            r["text"].as_str().unwrap().contains(msg),
            "{case}: expected {msg:?} in {r}"
        );
    }
}

/// The `readonly` scenario's results: every write refused with `hint` on
/// how to allow it, reads still working.
fn assert_only_reads(ro: &Value, hint: &str, fact: &str) {
    for tool in ["remember", "resolve", "log_exchange"] {
        assert_eq!(ro[tool]["ok"], false, "{tool}: {}", ro[tool]);
        assert!(
            ro[tool]["text"].as_str().unwrap().contains(hint),
            "{tool} says how to allow it: {}",
            ro[tool]
        );
    }
    assert_eq!(
        ok_json(&ro["read_truth"], "reads still work")["item"]["id"],
        fact
    );
}

/// A successful call's structured result, which the client checked
/// against the tool's `outputSchema`; its text content is the same JSON.
fn ok_json(v: &Value, what: &str) -> Value {
    assert_eq!(v["ok"], true, "{what}: {v}");
    assert!(v.get("schema_error").is_none(), "{what}: {v}");
    let text: Value = serde_json::from_str(v["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        text, v["structured"],
        "{what}: text and structured content agree"
    );
    v["structured"].clone()
}

/// The tools listed: names in order, each described, with an input and an
/// output schema and all four annotations.
fn check_tools(out: &Value, expected: &[&str]) {
    assert_eq!(out["tool_order"], serde_json::json!(expected), "{out}");
    for (name, t) in out["tools"].as_object().unwrap() {
        assert!(
            t["description"].as_str().is_some_and(|d| d.len() > 20),
            "{name} has no description"
        );
        assert_eq!(t["schema"]["type"], "object", "{name}'s input schema");
        assert_eq!(
            t["output_schema"]["type"], "object",
            "{name}'s output schema"
        );
        let a = &t["annotations"];
        for hint in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ] {
            assert!(a[hint].is_boolean(), "{name} lacks {hint}: {a}");
        }
        assert_eq!(a["destructiveHint"], false, "{name}: nothing is deleted");
        assert_eq!(
            a["openWorldHint"], false,
            "{name}: memory is a closed world"
        );
        let writes = ["log_exchange", "remember", "resolve"].contains(&name.as_str());
        assert_eq!(a["readOnlyHint"], !writes, "{name}");
    }
}

const ALL_TOOLS: [&str; 7] = [
    "context",
    "log_exchange",
    "read",
    "recent",
    "remember",
    "resolve",
    "search",
];
const READ_TOOLS: [&str; 4] = ["context", "read", "recent", "search"];

/// The ids of a page's items.
fn ids(page: &Value) -> Vec<&str> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["id"].as_str())
        .collect()
}

#[test]
fn every_tool_works_through_the_python_sdk() {
    if !heavy(&[Need::PythonMcp]) {
        return;
    }
    for (mode, protocol) in MODES.into_iter().zip(["2025-11-25", "2026-07-28"]) {
        let (p, fact) = project_with_fact();
        let out = drive_in(&p, mode, "full", &["m_none", &fact]);
        assert_eq!(out["protocol"], protocol, "{mode}");
        check_full_scenario(&p, &fact, &out);
    }
}

/// What the `full` scenario must have seen and left in the file, whatever
/// the transport.
fn check_full_scenario(p: &Project, fact: &str, out: &Value) {
    let fact = fact.to_owned();
    assert_eq!(out["server"], "wikioracle");
    check_tools(out, &ALL_TOOLS);
    assert_eq!(
        out["tools"]["remember"]["schema"]["required"],
        serde_json::json!(["content"]),
        "remember needs only the text"
    );

    let search = ok_json(&out["search"], "search");
    assert_eq!(search["items"][0]["id"], fact.as_str());
    assert_eq!(search["items"][0]["kind"], "memory");
    assert_eq!(
        search["items"][0]["uri"],
        format!("wikioracle://memory/{fact}")
    );
    if out["protocol"] != "2025-03-26" {
        assert!(
            out["search"]["links"]
                .as_array()
                .unwrap()
                .contains(&Value::from(format!("wikioracle://memory/{fact}"))),
            "search results link their resources: {}",
            out["search"]
        );
    }
    let filtered = ok_json(&out["search_truth_only"], "search with filters");
    assert_eq!(ids(&filtered), [fact.as_str()]);
    let ctx = ok_json(&out["context"], "context");
    assert_eq!(ctx["budget"], 2000);
    assert!(ctx["tokens"].as_u64().unwrap() <= 2000);
    assert!(
        ids(&ctx).contains(&fact.as_str()),
        "the relevant fact is in the context: {ctx}"
    );
    assert!(
        !ctx.to_string().contains("helpful assistant"),
        "no chat persona: {ctx}"
    );
    let recent = ok_json(&out["recent"], "recent");
    assert_eq!(recent["items"][0]["id"], fact.as_str());
    // Paging by one: the second page follows the first.
    let page1 = ok_json(&out["recent_page1"], "recent, page 1");
    let page2 = ok_json(&out["recent_page2"], "recent, page 2");
    assert_eq!(page1["items"].as_array().unwrap().len(), 1);
    assert_ne!(ids(&page1), ids(&page2));

    let remembered = ok_json(&out["remember"], "remember");
    let effort = remembered["added"].as_str().unwrap().to_owned();
    assert_eq!(remembered["title"], "Deploys happen on Fridays");
    let minimal = ok_json(&out["remember_minimal"], "remember with only content");
    assert_eq!(
        minimal["title"], "The staging server is called tuatara",
        "the title is the content's first sentence"
    );
    assert_eq!(
        ok_json(&out["resolve"], "resolve")["resolved"],
        effort.as_str()
    );
    let logged = ok_json(&out["log_exchange"], "log_exchange");
    let read_msg = ok_json(&out["read_message"], "read a message");
    assert_eq!(read_msg["item"]["id"], logged["question"]);
    assert_eq!(read_msg["item"]["text"], "What is the wombat's diet?");
    let read_truth = ok_json(&out["read_truth"], "read truth by prefix");
    assert_eq!(read_truth["item"]["id"], effort.as_str());
    assert_eq!(read_truth["record"]["status"], "resolved");
    assert_eq!(
        out["resources"],
        serde_json::json!(["wikioracle://context"]),
        "no directory index here, so no llm.md"
    );
    assert_eq!(
        out["templates"],
        serde_json::json!(["wikioracle://memory/{id}", "wikioracle://message/{id}"])
    );
    assert_eq!(
        out["resource_memory"],
        "Kangaroos live in Australia\n\nThe kangaroo habitat is grassland"
    );
    assert_eq!(
        out["prompts"],
        serde_json::json!(["recall", "open_efforts"])
    );
    assert!(
        out["prompt_recall"].as_str().unwrap().contains(&fact),
        "{}",
        out["prompt_recall"]
    );
    assert!(
        out["prompt_efforts"]
            .as_str()
            .unwrap()
            .contains("no open efforts"),
        "the one effort was resolved: {}",
        out["prompt_efforts"]
    );

    // What the file now holds: written through the store, with provenance.
    let s = p.state();
    let e = s.truth.trust.iter().find(|t| t.id == effort).unwrap();
    assert_eq!(e.kind, Some(TruthKind::Effort));
    assert_eq!(e.status, Some(EffortStatus::Resolved));
    assert_eq!(e.resolution.as_deref(), Some("moved to Mondays"));
    assert_eq!(e.tags.as_deref(), Some(&["ops".to_owned()][..]));
    assert!(e.updated.is_some());
    let prov = e.extra["x_provenance"].to_value();
    assert_eq!(prov["by"], "pytest-agent");
    assert_eq!(prov["resolved_by"], "pytest-agent");
    let m = s
        .truth
        .trust
        .iter()
        .find(|t| t.id == minimal["added"].as_str().unwrap())
        .unwrap();
    assert_eq!(m.kind, Some(TruthKind::Note), "the default kind");
    assert_eq!(m.certainty, 0.7, "the default certainty, as `wo truth add`");
    assert_eq!(m.tags, None);
    let q = s.message(logged["question"].as_str().unwrap()).unwrap();
    let a = s.message(logged["answer"].as_str().unwrap()).unwrap();
    assert_eq!(a.parent.as_deref(), Some(q.id.as_str()));
    assert_eq!(a.model.as_deref(), Some("agent-model"));
    assert_eq!(a.extra["x_provenance"].to_value()["by"], "pytest-agent");
    p.ok(&["validate", "llm.json"]);
}

/// Runs the TypeScript SDK's client (`tests/mcp-node/client.mjs`) against
/// `target` (the `wo` binary, or `/mcp`'s URL) in `scenario`; its JSON.
fn drive_node(target: &str, place: &str, scenario: &str) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp-node/client.mjs");
    let out = Command::new("node")
        .arg(script)
        .arg(target)
        .arg(place)
        .arg(scenario)
        .env_remove("WO_STATE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "node client {scenario} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// What the TypeScript client must have seen: the tools (annotated, with
/// an output schema), each call's structured result (the SDK checked it
/// against the schema), bad arguments refused as tool errors.
fn check_node(out: &Value, tools: &[&str]) {
    assert_eq!(out["server"], "wikioracle");
    let listed: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed, tools);
    for t in out["tools"].as_array().unwrap() {
        assert_eq!(t["hasOutputSchema"], true, "{t}");
        assert!(t["annotations"]["readOnlyHint"].is_boolean(), "{t}");
    }
    for (name, call) in out["calls"].as_object().unwrap() {
        assert_eq!(call["ok"], true, "{name}: {call}");
        assert!(call["structured"].is_object(), "{name}: {call}");
    }
    assert_eq!(out["calls"].as_object().unwrap().len(), tools.len());
    for (call, r) in out["bad"].as_object().unwrap() {
        assert_eq!(r["ok"], false, "{call}: {r}");
        assert!(
            !r["text"].as_str().unwrap().starts_with("threw"),
            "{call}: {r}"
        );
    }
    assert_eq!(
        out["templates"],
        serde_json::json!(["wikioracle://memory/{id}", "wikioracle://message/{id}"])
    );
    assert_eq!(
        out["prompts"],
        serde_json::json!(["recall", "open_efforts"])
    );
}

#[test]
fn every_tool_works_through_the_typescript_sdk() {
    if !heavy(&[Need::NodeMcp]) {
        return;
    }
    // Over stdio: read-only lists and calls only read tools, and writes nothing.
    let (p, _) = project_with_fact();
    let before = std::fs::read(p.state_path()).unwrap();
    let wo = wo_bin().display().to_string();
    let place = p.path().display().to_string();
    check_node(&drive_node(&wo, &place, "readonly"), &READ_TOOLS);
    assert_eq!(std::fs::read(p.state_path()).unwrap(), before);
    // With --allow-write: `remember` with only its content, the others too.
    check_node(&drive_node(&wo, &place, "write"), &ALL_TOOLS);
    let s = p.state();
    let numbat = s
        .truth
        .trust
        .iter()
        .find(|t| t.title == "The build server is called numbat")
        .expect("remembered with only its content");
    assert_eq!(numbat.extra["x_provenance"].to_value()["by"], "node-agent");
    assert!(
        !s.truth.trust.iter().any(|t| t.title == "x"),
        "a refused call writes nothing"
    );
    p.ok(&["validate", "llm.json"]);

    // Over streamable HTTP on `wo serve`.
    let (p, _) = project_with_fact();
    let server = Serving::start(&p, &p.write_config(""), &["--mcp-allow-write"]);
    let url = format!("{}/mcp", server.base());
    check_node(&drive_node(&url, &server.token, "write"), &ALL_TOOLS);
    let (p, _) = project_with_fact();
    let before = std::fs::read(p.state_path()).unwrap();
    let server = Serving::start(&p, &p.write_config(""), &[]);
    let url = format!("{}/mcp", server.base());
    check_node(&drive_node(&url, &server.token, "readonly"), &READ_TOOLS);
    assert_eq!(std::fs::read(p.state_path()).unwrap(), before);
}

/// Runs the Python client's `scenario` against `wo serve`'s `/mcp`.
fn drive_http(server: &Serving, scenario: &str, extra: &[&str]) -> Value {
    drive_http_in(server, "legacy", scenario, extra)
}

/// [`drive_http`] in protocol `mode`.
fn drive_http_in(server: &Serving, mode: &str, scenario: &str, extra: &[&str]) -> Value {
    let out = Command::new(python())
        .arg(client_script())
        .env("MCP_MODE", mode)
        .arg(format!("{}/mcp", server.base()))
        .arg(&server.token)
        .arg(scenario)
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client {scenario} over HTTP failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// One raw HTTP/1.1 request to `wo serve`; (status, body).
fn http(port: u16, request: &str) -> (u16, String) {
    let (status, text) = common::raw_http(port, request);
    (status, common::body_of(&text))
}

#[test]
fn every_tool_works_over_streamable_http_on_wo_serve() {
    if !heavy(&[Need::PythonMcp]) {
        return;
    }
    for (mode, protocol) in MODES.into_iter().zip(["2025-11-25", "2026-07-28"]) {
        let (p, fact) = project_with_fact();
        let server = Serving::start(&p, &p.write_config(""), &["--mcp-allow-write"]);
        let out = drive_http_in(&server, mode, "full", &["m_none", &fact]);
        assert_eq!(out["protocol"], protocol, "{mode}");
        check_full_scenario(&p, &fact, &out);
    }
    let (p, fact) = project_with_fact();
    let server = Serving::start(&p, &p.write_config(""), &["--mcp-allow-write"]);

    // Bad arguments: clear errors, nothing written.
    let before = std::fs::read(p.state_path()).unwrap();
    let bad = drive_http(&server, "bad", &[&fact]);
    assert_refused(
        &bad["bad"],
        &[
            ("certainty", "certainty: 1.5 is outside 0..=1"),
            ("kind", "unknown variant `rumour`"),
            ("missing", "missing field `content`"),
            ("unknown_field", "unknown field `colour`"),
            ("log_empty", "question: must not be empty"),
        ],
    );
    assert_eq!(std::fs::read(p.state_path()).unwrap(), before);

    // No token, a wrong one, or the browser's cookie: refused before MCP.
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#;
    let post = |auth: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{auth}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{init}",
            server.port,
            init.len()
        )
    };
    for auth in [
        String::new(),
        "Authorization: Bearer wrong-token-0123456789\r\n".to_owned(),
        format!(
            "Cookie: wo_session_{}_abcdef={}\r\n",
            server.port, server.token
        ),
    ] {
        let (status, body) = http(server.port, &post(&auth));
        assert_eq!(status, 401, "{auth:?}: {body}");
        assert!(body.contains("Bearer"), "{body}");
    }
    // A foreign Host (DNS rebinding) is refused even with the token.
    let rebound = post(&format!("Authorization: Bearer {}\r\n", server.token)).replace(
        &format!("Host: 127.0.0.1:{}", server.port),
        "Host: evil.example",
    );
    assert_eq!(http(server.port, &rebound).0, 403);
    let (status, body) = http(
        server.port,
        &post(&format!("Authorization: Bearer {}\r\n", server.token)),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("wikioracle"), "{body}");
    assert_eq!(std::fs::read(p.state_path()).unwrap(), before);
}

#[test]
fn wo_serve_refuses_mcp_writes_without_its_flag() {
    if !heavy(&[Need::PythonMcp]) {
        return;
    }
    let (p, fact) = project_with_fact();
    let before = std::fs::read(p.state_path()).unwrap();
    let server = Serving::start(&p, &p.write_config(""), &[]);
    for mode in MODES {
        let ro = drive_http_in(&server, mode, "readonly", &["m_none", &fact]);
        check_tools(&ro, &READ_TOOLS);
        assert_only_reads(&ro, "wo serve --mcp-allow-write", &fact);
    }
    assert_eq!(std::fs::read(p.state_path()).unwrap(), before);
}

#[test]
fn writes_are_refused_without_allow_write_and_bad_arguments_write_nothing() {
    if !heavy(&[Need::PythonMcp]) {
        return;
    }
    let (p, fact) = project_with_fact();
    let before = std::fs::read(p.state_path()).unwrap();

    for mode in MODES {
        let ro = drive_in(&p, mode, "readonly", &["m_none", &fact]);
        check_tools(&ro, &READ_TOOLS);
        assert_only_reads(&ro, "--allow-write", &fact);
        assert_eq!(std::fs::read(p.state_path()).unwrap(), before);
    }

    let bad = drive_in(&p, "auto", "bad", &[&fact]);
    assert_refused(
        &bad["bad"],
        &[
            ("certainty", "certainty: 1.5 is outside 0..=1"),
            ("kind", "unknown variant `rumour`"),
            ("missing", "missing field `content`"),
            ("empty_title", "title: must not be empty"),
            ("empty_content", "content: must not be empty"),
            ("unknown_field", "unknown field `colour`"),
            ("limit", "limit: 0 is outside 1..=100"),
            ("budget", "budget: 5 is outside 100..=100000"),
            ("cursor", "cursor: \"not-a-cursor\" is not a cursor"),
            ("read_missing", "t_ffffffffffffffff"),
            ("resolve_not_effort", "not an effort"),
            ("log_empty", "question: must not be empty"),
        ],
    );
    assert_eq!(
        std::fs::read(p.state_path()).unwrap(),
        before,
        "refused calls leave llm.json byte for byte"
    );
}

#[test]
fn mcp_writes_and_cli_writers_at_once_lose_nothing() {
    if !heavy(&[Need::PythonMcp]) {
        return;
    }
    let (p, _) = project_with_fact();
    const N: usize = 15;
    // More MCP writes than CLI ones, so the client is still writing while
    // the CLI loop runs (its start-up takes longer than a `wo` command's).
    const M: usize = 4 * N;
    let dir = p.path().to_path_buf();
    let client = std::thread::spawn(move || {
        let out = Command::new(python())
            .arg(client_script())
            .arg(wo_bin())
            .arg(&dir)
            .arg("writer")
            .arg(M.to_string())
            .env_remove("WO_STATE")
            .output()
            .unwrap();
        common::assert_success(&out);
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    });
    let port = answering_server();
    let cfg = p.openai_config(port);
    for i in 0..N {
        p.ok(&[
            "truth",
            "add",
            &format!("cli fact {i}"),
            "--content",
            &format!("cli writer fact {i}"),
        ]);
        let r = p.run_with(
            &cfg,
            &["ask", "--provider", "test", &format!("question number {i}")],
        );
        assert_eq!(r.code, 0, "wo ask {i}: {}{}", r.stdout, r.stderr);
    }
    let out = client.join().unwrap();
    for w in out["writes"].as_array().unwrap() {
        assert_eq!(w["ok"], true, "{w}");
    }
    let s = p.state();
    let titles: Vec<String> = (0..N)
        .map(|i| format!("cli fact {i}"))
        .chain((0..M).map(|i| format!("mcp fact {i}")))
        .collect();
    for title in &titles {
        assert!(
            s.truth.trust.iter().any(|t| &t.title == title),
            "{title} was lost"
        );
    }
    assert_eq!(s.truth.trust.len(), 1 + N + M);
    for i in 0..N {
        let q = format!("question number {i}");
        let m = s
            .messages()
            .iter()
            .find(|m| m.title == q)
            .unwrap_or_else(|| panic!("{q} was lost"));
        assert!(
            s.messages()
                .iter()
                .any(|a| a.parent.as_deref() == Some(m.id.as_str())),
            "the answer to {q} was lost"
        );
    }
    assert_eq!(s.messages().len(), 2 * N);
}

/// A loopback OpenAI-compatible server that answers every request with one
/// short streamed answer, for `wo ask` to write while MCP writes too.
fn answering_server() -> u16 {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            common::drain_request(&stream);
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
data: {\"choices\":[{\"delta\":{\"content\":\"Kilns are hot.\"}}]}\n\n\
data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
data: [DONE]\n\n",
            );
        }
    });
    port
}

#[test]
fn print_config_snippets_parse_in_each_clients_format() {
    let p = Project::new();
    for client in ["claude", "cursor", "vscode"] {
        let out = p.ok(&[
            "mcp",
            "--print-config",
            client,
            "--state",
            "my llm.json",
            "--allow-write",
        ]);
        let v: Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{client}: {e}\n{out}"));
        let key = if client == "vscode" {
            "servers"
        } else {
            "mcpServers"
        };
        let server = &v[key]["wikioracle"];
        assert_eq!(
            server["command"],
            wo_bin().display().to_string(),
            "{client}"
        );
        let args: Vec<&str> = server["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(args[0], "mcp");
        assert_eq!(args[1], "--state");
        assert!(args[2].ends_with("my llm.json") && PathBuf::from(args[2]).is_absolute());
        assert_eq!(args[3], "--allow-write");
        if client == "vscode" {
            assert_eq!(server["type"], "stdio");
        }
    }
    // A global config names the state file absolutely (the client starts
    // the server from a directory of its own), and says it is global.
    p.ok(&["init", "."]);
    let r = p.run(&["mcp", "--print-config", "codex"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("global"), "{}", r.stderr);
    let doc: toml_edit::DocumentMut = r
        .stdout
        .parse()
        .unwrap_or_else(|e| panic!("{e}\n{}", r.stdout));
    let server = &doc["mcp_servers"]["wikioracle"];
    assert_eq!(server["command"].as_str(), Some(wo_bin().to_str().unwrap()));
    let args: Vec<&str> = server["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[..2], ["mcp", "--state"]);
    assert_eq!(
        std::fs::canonicalize(args[2]).unwrap(),
        std::fs::canonicalize(p.state_path()).unwrap()
    );
    assert_eq!(args.len(), 3);
    for client in ["claude", "cursor", "vscode"] {
        let r = p.run(&["mcp", "--print-config", client]);
        assert!(r.stderr.contains("scope"), "{client}: {}", r.stderr);
    }

    let bad = p.run(&["mcp", "--print-config", "emacs"]);
    assert_ne!(bad.code, 0);
    bad.says(&["emacs", "claude"]);
}

/// `--install` writes the snippet into the client's own file, keeping the
/// rest of it; a file it cannot read is left as it was.
#[test]
fn install_merges_the_snippet_into_each_clients_file() {
    let p = Project::new();
    p.ok(&["init", "."]);
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = p.cmd(args).env("HOME", home.path()).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let codex = home.path().join(".codex/config.toml");
    std::fs::create_dir_all(codex.parent().unwrap()).unwrap();
    std::fs::write(
        &codex,
        "model = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\"\n",
    )
    .unwrap();
    let (code, out, err) = run(&["mcp", "--print-config", "codex", "--install"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("config.toml"), "{out}");
    let doc: toml_edit::DocumentMut = std::fs::read_to_string(&codex).unwrap().parse().unwrap();
    assert_eq!(doc["model"].as_str(), Some("o3"));
    assert_eq!(doc["mcp_servers"]["other"]["command"].as_str(), Some("x"));
    assert_eq!(
        doc["mcp_servers"]["wikioracle"]["command"].as_str(),
        Some(wo_bin().to_str().unwrap())
    );
    let (_, out, _) = run(&["mcp", "--print-config", "codex", "--install"]);
    assert!(out.contains("up to date"), "{out}");

    // The project's own files for Claude Code and VS Code.
    for (client, file, key) in [
        ("claude", ".mcp.json", "mcpServers"),
        ("vscode", ".vscode/mcp.json", "servers"),
    ] {
        let (code, out, err) = run(&[
            "mcp",
            "--print-config",
            client,
            "--install",
            "--allow-write",
        ]);
        assert_eq!(code, Some(0), "{client}: {out}{err}");
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(p.path().join(file)).unwrap()).unwrap();
        assert_eq!(v[key]["wikioracle"]["args"][3], "--allow-write", "{client}");
    }

    // A file that is not JSON: refused by name, left byte for byte.
    let cursor = home.path().join(".cursor/mcp.json");
    std::fs::create_dir_all(cursor.parent().unwrap()).unwrap();
    std::fs::write(&cursor, "{ half a file").unwrap();
    let (code, _, err) = run(&["mcp", "--print-config", "cursor", "--install"]);
    assert_ne!(code, Some(0));
    assert!(
        err.contains("mcp.json") && err.contains("nothing was written"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&cursor).unwrap(), "{ half a file");
    // --install without --print-config is a usage error.
    let (code, _, _) = run(&["mcp", "--install"]);
    assert_ne!(code, Some(0));
}

/// VS Code's file is JSON with comments: `--install` edits it in place
/// (the comments, the other servers and the entry's own `env` stay) and
/// says what is left to do in the client; Claude Code's file is plain
/// JSON, so a comment there is refused and the file left as it was.
#[test]
fn install_edits_a_commented_file_in_place_and_names_the_next_step() {
    let p = Project::new();
    p.ok(&["init", "."]);
    let vscode = p.path().join(".vscode/mcp.json");
    std::fs::create_dir_all(vscode.parent().unwrap()).unwrap();
    std::fs::write(
        &vscode,
        "{\n  // team servers\n  \"servers\": {\n    \"wikioracle\": {\"type\": \"stdio\", \"command\": \"/old/wo\", \"env\": {\"WO_X\": \"1\"}},\n    \"other\": {\"type\": \"stdio\", \"command\": \"x\"},\n  },\n}\n",
    )
    .unwrap();
    let out = p.ok(&["mcp", "--print-config", "vscode", "--install"]);
    assert!(out.contains("MCP: List Servers"), "{out}");
    let now = std::fs::read_to_string(&vscode).unwrap();
    assert!(now.contains("// team servers"), "{now}");
    assert!(now.contains("\"WO_X\": \"1\""), "{now}");
    assert!(
        now.contains(&format!("\"command\": \"{}\"", wo_bin().display())),
        "{now}"
    );
    assert!(
        now.contains("\"other\": {\"type\": \"stdio\", \"command\": \"x\"},"),
        "{now}"
    );
    assert!(!now.contains("/old/wo"), "{now}");

    let out = p.ok(&["mcp", "--print-config", "claude", "--install"]);
    assert!(out.contains("approve"), "{out}");
    let claude = p.path().join(".mcp.json");
    let commented = "{\"mcpServers\": {} // mine\n}\n";
    std::fs::write(&claude, commented).unwrap();
    let r = p.run(&["mcp", "--print-config", "claude", "--install"]);
    assert_ne!(r.code, 0);
    r.says(&[
        ".mcp.json",
        "Comments are not allowed",
        "nothing was written",
    ]);
    assert_eq!(std::fs::read_to_string(&claude).unwrap(), commented);
}

/// Every shell command the AGENTS.md block teaches an agent runs as
/// written (an agent copies them verbatim).
#[test]
fn agents_md_shell_commands_run_as_written() {
    let p = Project::new();
    p.ok(&["init", "."]);
    p.ok(&["index", "."]);
    p.ok(&["agents-md"]);
    let text = std::fs::read_to_string(p.path().join("AGENTS.md")).unwrap();
    let commands: Vec<&str> = text
        .split('`')
        .skip(1)
        .step_by(2)
        // `wo mcp` is the server a client starts, not a command to run.
        .filter(|c| c.starts_with("wo ") && *c != "wo mcp")
        .collect();
    assert!(commands.len() >= 6, "{commands:?}");
    let bin_dir = wo_bin().parent().unwrap().to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(bin_dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let scratch = tempfile::tempdir().unwrap();
    for c in commands {
        let out = Command::new("sh")
            .arg("-c")
            .arg(c)
            .current_dir(p.path())
            .env("PATH", &path)
            .env_remove("WO_STATE")
            .env("XDG_STATE_HOME", scratch.path())
            .env("WO_EMBEDDING_MODEL", scratch.path().join("none.gguf"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{c}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A global config works from anywhere: the command and arguments the
/// Codex snippet names, started in another directory (as a client starts
/// it), serve this project's memory.
#[test]
fn a_global_snippet_serves_the_project_from_any_directory() {
    use std::io::{BufRead, Write};
    let (p, fact) = project_with_fact();
    let out = p.ok(&["mcp", "--print-config", "codex"]);
    let doc: toml_edit::DocumentMut = out.parse().unwrap();
    let server = &doc["mcp_servers"]["wikioracle"];
    let command = server["command"].as_str().unwrap().to_owned();
    let args: Vec<String> = server["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    let elsewhere = tempfile::tempdir().unwrap();
    let mut child = Command::new(command)
        .args(&args)
        .current_dir(elsewhere.path())
        .env_remove("WO_STATE")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = |line: Value| -> Value {
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        loop {
            let answer: Value =
                serde_json::from_str(&lines.next().expect("an answer").unwrap()).unwrap();
            if answer.get("id") == line.get("id") {
                return answer;
            }
        }
    };
    let init = ask(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "codex", "version": "1"}}}),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "wikioracle", "{init}");
    let found = ask(
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": "kangaroo"}}}),
    );
    assert_eq!(
        found["result"]["structuredContent"]["items"][0]["id"], fact,
        "{found}"
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn agents_md_is_written_then_updated_in_place() {
    let p = Project::new();
    let out = p.ok(&["agents-md"]);
    assert!(out.starts_with("wrote"), "{out}");
    let first = std::fs::read_to_string(p.path().join("AGENTS.md")).unwrap();
    assert!(first.contains("wo mcp") && first.contains("`remember`"));

    // The person's own text around the block survives; the block is replaced.
    let path = p.path().join("CLAUDE.md");
    std::fs::write(&path, "# Notes\n\nRun `make test`.\n").unwrap();
    p.ok(&["agents-md", "--file", "CLAUDE.md"]);
    let stale = std::fs::read_to_string(&path)
        .unwrap()
        .replace("portable memory", "STALE")
        + "\n## After\nkept\n";
    std::fs::write(&path, &stale).unwrap();
    let out = p.ok(&["agents-md", "--file", "CLAUDE.md"]);
    assert!(out.starts_with("updated"), "{out}");
    let now = std::fs::read_to_string(&path).unwrap();
    assert!(now.starts_with("# Notes\n\nRun `make test`.\n\n<!-- wikioracle:begin"));
    assert!(now.ends_with("\n## After\nkept\n"));
    assert!(!now.contains("STALE"));
    assert_eq!(now.matches("wikioracle:begin").count(), 1);
    assert!(
        p.ok(&["agents-md", "--file", "CLAUDE.md"])
            .contains("up to date")
    );

    // A half-deleted block is refused, and the file is left alone.
    let broken = "x\n<!-- wikioracle:end -->\n";
    std::fs::write(&path, broken).unwrap();
    let r = p.run(&["agents-md", "--file", "CLAUDE.md"]);
    assert_ne!(r.code, 0);
    r.says(&["CLAUDE.md", "unbalanced"]);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), broken);
}

#[test]
fn help_teaches_and_a_missing_state_file_is_named() {
    let p = Project::new();
    for cmd in [["mcp", "--help"], ["agents-md", "--help"]] {
        let out = p.ok(&cmd);
        assert!(out.contains("Examples:"), "{cmd:?}:\n{out}");
    }
    let r = p.run(&["mcp"]);
    assert_ne!(r.code, 0, "no llm.json: nothing to serve");
    r.says(&["llm.json", "wo init"]);
    assert_eq!(
        r.stderr.matches("hint:").count(),
        1,
        "one hint, not two: {}",
        r.stderr
    );
    assert!(
        r.stdout.is_empty(),
        "stdout is the protocol channel: {}",
        r.stdout
    );
    assert!(!p.state_path().exists(), "wo mcp creates no file");
}

#[test]
fn chunks_of_the_directory_index_are_searched_read_and_described() {
    if !heavy(&[Need::PythonMcp]) {
        return;
    }
    let (p, _) = project_with_fact();
    std::fs::create_dir(p.path().join("docs")).unwrap();
    std::fs::write(
        p.path().join("docs/wombat.md"),
        "# Wombats\n\nThe wombat digs a burrow with strong claws.\n",
    )
    .unwrap();
    p.ok(&["index"]);
    let out = drive(&p, "index", &[]);
    let search = ok_json(&out["search"], "search chunks");
    let hit = &search["items"][0];
    assert_eq!(hit["kind"], "chunk");
    assert_eq!(hit["path"], "docs/wombat.md");
    let read = ok_json(&out["read_chunk"], "read chunk:<id>");
    assert_eq!(read["item"]["id"], hit["id"]);
    assert!(
        read["item"]["text"]
            .as_str()
            .unwrap()
            .contains("strong claws")
    );
    assert_eq!(
        ok_json(&out["read_ref"], "read c0001")["item"]["id"],
        hit["id"]
    );
    assert_eq!(out["bad_chunk_kind"]["ok"], false);
    assert!(
        out["bad_chunk_kind"]["text"]
            .as_str()
            .unwrap()
            .contains("chunk_kind")
    );
    assert_eq!(
        out["resources"],
        serde_json::json!(["wikioracle://context", "wikioracle://llm.md"])
    );
    assert!(out["llm_md"].as_str().unwrap().contains("docs/wombat.md"));
}
