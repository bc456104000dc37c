//! The served OpenAPI document (`src/openapi.json`, `GET /api/openapi.json`)
//! is held to the wire types of `wo_wire`: its component schemas are
//! generated from them, its paths are `wo_wire::ROUTES` with the bodies
//! each route names, its stream names `wo_wire::EVENTS`, and each route is
//! served in its mode and only there. A field, route or event changed on
//! one side only fails here.
//!
//! After changing a wire type, regenerate the components with
//! `WO_BLESS_OPENAPI=1 cargo test -p wo-server --test openapi` and review
//! the diff (paths and prose stay hand-written).

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{Script, serve};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use wo_wire::routes::{Method as WireMethod, ROUTES, STREAM};

const DOC_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/openapi.json");

fn doc() -> Value {
    serde_json::from_str(wo_server::assets::OPENAPI_JSON).expect("openapi.json is JSON")
}

/// `#/$defs/X` → `#/components/schemas/X`, everywhere in `v`.
fn rewrite_refs(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get_mut("$ref")
                && let Some(name) = r.strip_prefix("#/$defs/")
            {
                *r = format!("#/components/schemas/{name}");
            }
            m.values_mut().for_each(rewrite_refs);
        }
        Value::Array(a) => a.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

/// Each wire type's schema as an OpenAPI component: no `$schema` or
/// `title` (the component's name says it), definitions it refers to are
/// components of their own.
fn generated() -> BTreeMap<String, Value> {
    let all = wo_wire::schemas();
    let names: BTreeSet<&str> = all.iter().map(|(n, _)| *n).collect();
    let mut out = BTreeMap::new();
    for (name, schema) in all {
        let mut v = schema.to_value();
        let m = v.as_object_mut().unwrap();
        m.remove("$schema");
        m.remove("title");
        if let Some(Value::Object(defs)) = m.remove("$defs") {
            for def in defs.keys() {
                assert!(
                    names.contains(def.as_str()),
                    "{name} refers to {def}, which wo_wire::schemas() does not list"
                );
            }
        }
        rewrite_refs(&mut v);
        out.insert(name.to_owned(), v);
    }
    out
}

#[test]
fn component_schemas_are_generated_from_the_wire_types() {
    let generated = generated();
    if std::env::var_os("WO_BLESS_OPENAPI").is_some() {
        let mut doc: Value = serde_json::from_slice(&std::fs::read(DOC_PATH).unwrap()).unwrap();
        let schemas = doc["components"]["schemas"].as_object_mut().unwrap();
        for (name, schema) in &generated {
            schemas.insert(name.clone(), schema.clone());
        }
        let mut text = serde_json::to_string_pretty(&doc).unwrap();
        text.push('\n');
        std::fs::write(DOC_PATH, text).unwrap();
        return;
    }
    let doc = doc();
    let documented = doc["components"]["schemas"].as_object().unwrap();
    let mut wrong = Vec::new();
    for (name, schema) in &generated {
        match documented.get(name) {
            None => wrong.push(format!("{name}: not in the document")),
            Some(d) if d != schema => wrong.push(format!(
                "{name}: the document says\n  {d}\nthe type says\n  {schema}"
            )),
            Some(_) => {}
        }
    }
    assert!(
        wrong.is_empty(),
        "openapi.json disagrees with wo_wire (regenerate with WO_BLESS_OPENAPI=1):\n{}",
        wrong.join("\n")
    );
}

/// What the document says a route takes and answers.
fn documented_bodies(op: &Value) -> (Option<String>, Option<String>) {
    let schema_ref = |v: &Value| {
        v["content"]["application/json"]["schema"]["$ref"]
            .as_str()
            .and_then(|r| r.strip_prefix("#/components/schemas/"))
            .map(str::to_owned)
    };
    let request = schema_ref(&op["requestBody"]);
    let ok = ["200", "201"]
        .iter()
        .map(|c| &op["responses"][*c])
        .find(|r| !r.is_null())
        .unwrap_or(&Value::Null);
    let response = match ok["$ref"].as_str() {
        Some(r) => r.strip_prefix("#/components/responses/").map(str::to_owned),
        None => schema_ref(ok),
    };
    (request, response)
}

#[test]
fn paths_are_the_wire_routes_with_their_bodies() {
    let doc = doc();
    let paths = doc["paths"].as_object().unwrap();
    let mut documented: BTreeSet<(String, String)> = BTreeSet::new();
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            if method != "parameters" {
                documented.insert((path.clone(), method.clone()));
            }
        }
    }
    let routed: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|r| (r.path.to_owned(), r.method.as_str().to_owned()))
        .collect();
    assert_eq!(
        documented, routed,
        "the document's operations are not wo_wire::ROUTES"
    );
    let schemas: BTreeSet<&str> = wo_wire::schemas().iter().map(|(n, _)| *n).collect();
    for r in ROUTES {
        let op = &paths[r.path][r.method.as_str()];
        let (request, response) = documented_bodies(op);
        let what = format!("{} {}", r.method.as_str(), r.path);
        assert_eq!(request.as_deref(), r.request, "{what}: request body");
        if let Some(name) = r.request {
            assert!(schemas.contains(name), "{what}: {name} is not a wire type");
        }
        match r.response {
            Some(name) => {
                assert_eq!(response.as_deref(), Some(name), "{what}: answer");
                assert!(
                    name == STREAM || schemas.contains(name),
                    "{what}: {name} is not a wire type"
                );
            }
            // Not a wire type: the document may describe it in prose or
            // with a schema of its own, but never as a wire type.
            None => assert!(
                response.as_deref().is_none_or(|n| !schemas.contains(n)),
                "{what}: documented as {response:?}, which wo_wire::ROUTES does not say"
            ),
        }
    }
}

#[test]
fn the_stream_documents_every_event() {
    let doc = doc();
    let events = &doc["components"]["responses"][STREAM]["x-sse-events"];
    let want: serde_json::Map<String, Value> = wo_wire::EVENTS
        .iter()
        .map(|(event, schema)| {
            (
                (*event).to_owned(),
                json!({"$ref": format!("#/components/schemas/{schema}")}),
            )
        })
        .collect();
    assert_eq!(events, &Value::Object(want));
}

fn method(m: WireMethod) -> Method {
    match m {
        WireMethod::Get => Method::GET,
        WireMethod::Post => Method::POST,
        WireMethod::Patch => Method::PATCH,
        WireMethod::Delete => Method::DELETE,
    }
}

/// Whether the server routes `route` at all: anything but the fallback's
/// 404 "no such path" (a handler's own 404 names what it did not find).
async fn routed(s: &common::Served, route: &wo_wire::Route) -> bool {
    let path = route
        .path
        .replace("{id}", "t_none")
        .replace("{ref}", "none");
    let mut req = s
        .program(method(route.method), &path)
        .header("origin", &s.base);
    if route.request.is_some() || route.method != WireMethod::Get {
        req = req.header("content-type", "application/json").body("{}");
    }
    let resp = req.send().await.unwrap();
    if resp.status() != StatusCode::NOT_FOUND {
        return true;
    }
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    body["error"]["message"] != "no such path"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_route_is_served_in_its_mode_and_only_there() {
    for local in [true, false] {
        let s = serve(Script::says("x"), !local).await;
        let content = |s: &common::Served| {
            let v: Value = serde_json::from_slice(&s.state_bytes()).unwrap_or(Value::Null);
            (
                v["context"].clone(),
                v["truth"].clone(),
                v["messages"].clone(),
            )
        };
        let before = content(&s);
        for r in ROUTES {
            assert_eq!(
                routed(&s, r).await,
                r.mode.served_by(local),
                "{} {} on a {} server",
                r.method.as_str(),
                r.path,
                if local { "local" } else { "stateless" }
            );
        }
        // Empty bodies add, edit and delete nothing (an empty `PATCH
        // /api/state` does move the file's `date`).
        assert_eq!(content(&s), before);
    }
}

/// Every JSON body is read by the one extractor: a body of the wrong shape
/// is refused before the handler runs, with the pointer of the field at
/// fault (OpenAI's `param` under `/v1/`), on every route that takes one, in
/// its mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_json_body_is_refused_with_a_pointer() {
    // (route path, body, pointer): a wrong type in a field of each body.
    let fields = [
        (
            wo_wire::routes::STATE_PATH,
            json!({"retrieval_prefs": {"min_certainty": "x"}}),
            "/retrieval_prefs/min_certainty",
        ),
        (
            wo_wire::routes::TRUTH_PATH,
            json!({"title": "t", "content": "c", "certainty": "sure"}),
            "/certainty",
        ),
        (
            wo_wire::routes::TRUTH_ENTRY_PATH,
            json!({"title": 5}),
            "/title",
        ),
        (
            wo_wire::routes::MESSAGE_PATH,
            json!({"title": ["x"]}),
            "/title",
        ),
        (
            wo_wire::routes::MARKDOWN_PATH,
            json!({"markdown": 1}),
            "/markdown",
        ),
        (
            wo_wire::routes::CHAT_PATH,
            json!({"message": "hi", "params": {"max_tokens": -1}}),
            "/params/max_tokens",
        ),
        (
            wo_wire::routes::CONTEXT_DRAFT_PATH,
            json!({"params": {"rag": "yes"}}),
            "/params/rag",
        ),
        (
            wo_wire::routes::CONTEXT_APPLY_PATH,
            json!({"draft": 1, "current": ""}),
            "/draft",
        ),
        (
            wo_wire::routes::STATELESS_CHAT_PATH,
            json!({"message": "hi", "window": [{"content": 5}]}),
            "/window/0/content",
        ),
        (
            wo_wire::routes::STATELESS_STOPPED_PATH,
            json!({"turn": {"message": "hi"}, "sent_at": "2026-11-26T00:00:00Z", "sources": [1]}),
            "/sources/0",
        ),
        (
            wo_wire::routes::MEMORY_UNDO_PATH,
            json!({"exchange": 7}),
            "/exchange",
        ),
        (
            wo_wire::routes::STATELESS_MEMORY_UNDO_PATH,
            json!({"exchange": "m_x", "memory_log": [], "truth": {}}),
            "/truth",
        ),
        (
            wo_wire::routes::OPENAI_CHAT_PATH,
            json!({"model": "fake", "messages": [{"role": "user", "content": 5}]}),
            "/messages/0/content",
        ),
    ];
    for local in [true, false] {
        let s = serve(Script::says("x"), !local).await;
        for r in ROUTES
            .iter()
            .filter(|r| r.request.is_some() && r.mode.served_by(local))
        {
            let path = r.path.replace("{id}", "t_none");
            let what = format!("{} {path}", r.method.as_str());
            let (_, body, pointer) = fields
                .iter()
                .find(|(p, _, _)| *p == r.path)
                .unwrap_or_else(|| panic!("{what}: no case for this body"));
            // Not an object at all, then one bad field, then trailing data.
            for (body, pointer) in [
                (json!([]).to_string(), ""),
                (body.to_string(), *pointer),
                ("{} x".to_owned(), ""),
            ] {
                let resp = s
                    .program(method(r.method), &path)
                    .header("origin", &s.base)
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{what} {body}");
                if r.path.starts_with(wo_wire::routes::OPENAI_PREFIX) {
                    // OpenAI's shape: the pointer becomes `param`.
                    let e: wo_wire::openai::OpenAiError = resp.json().await.unwrap();
                    assert_eq!(
                        e.error.code.as_deref(),
                        Some("bad_request"),
                        "{what} {body}"
                    );
                    assert_eq!(
                        e.error.param,
                        wo_wire::openai::param_of_pointer(pointer),
                        "{what} {body}: {}",
                        e.error.message
                    );
                    continue;
                }
                let e: wo_wire::ErrorBody = resp.json().await.unwrap();
                assert_eq!(e.error.kind, "bad_request", "{what} {body}");
                assert_eq!(
                    e.error.pointer.as_deref(),
                    Some(pointer),
                    "{what} {body}: {}",
                    e.error.message
                );
            }
        }
        assert_eq!(
            s.upstream
                .requests
                .load(std::sync::atomic::Ordering::SeqCst),
            0
        );
    }
}
