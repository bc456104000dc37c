//! The `local` provider answers in-process with the real SmolLM2 model,
//! found by the same lookup as the config (`$WO_MODEL`, else the data dir).
//! Needs `scripts/install-model.sh`; without the model a plain `cargo test`
//! reports these tests as skipped (`bash .ci/run` requires them to run).

#![cfg(feature = "local")]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use wo_providers::config::{self, Config, Env};
use wo_providers::local::{LocalConfig, LocalProvider};
use wo_providers::{ChatMessage, ChatRequest, ErrorKind, Provider, StreamEvent};
use wo_testkit::Need;

fn provider() -> Arc<dyn Provider> {
    let cfg = Config::builtin(Env::process());
    let path = config::default_model_path(cfg.env()).expect("HOME is unset");
    assert!(
        path.is_file(),
        "the SmolLM2 model is not installed at {}; run scripts/install-model.sh",
        path.display()
    );
    config::build("local", &cfg).expect("build the local provider")
}

async fn ask(p: &dyn Provider, req: ChatRequest) -> (String, StreamEvent) {
    let mut s = p.stream(req, CancellationToken::new()).await.unwrap();
    let mut text = String::new();
    let mut done = None;
    while let Some(ev) = s.next().await {
        match ev.unwrap() {
            StreamEvent::Delta(t) => text.push_str(&t),
            d => done = Some(d),
        }
    }
    (text, done.expect("a Done event"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_model_answers_in_process() {
    if !wo_testkit::heavy(&[Need::Model]) {
        return;
    }
    let p = provider();
    assert_eq!(p.name(), "local");
    assert_eq!(p.default_model(), "SmolLM2-135M-Instruct.Q4_1");
    assert_eq!(
        p.context_window(),
        wo_providers::config::BUILTIN_MODEL_WINDOW,
        "the built-in model's window unless configured (its training context is 8192)"
    );
    let n = p.count_tokens("The capital of France is Paris.").unwrap();
    assert!((5..=12).contains(&n), "{n} tokens");
    let reach = p.check().await;
    assert!(reach.is_reachable(), "{reach}");

    let req = common::capital_question();
    let started = Instant::now();
    let (text, done) = ask(p.as_ref(), req).await;
    let took = started.elapsed();
    eprintln!("local answered in {took:?}: {text:?} {done:?}");
    assert!(text.to_lowercase().contains("paris"), "{text:?}");
    assert!(
        !text.contains("<|im_end|>") && !text.contains("<|im_start|>"),
        "{text:?}"
    );
    let StreamEvent::Done {
        finish_reason,
        usage: Some(usage),
    } = done
    else {
        panic!("{done:?}")
    };
    assert_eq!(finish_reason.as_deref(), Some("stop"));
    assert!(
        usage.prompt_tokens > 10 && usage.completion_tokens > 0,
        "{usage:?}"
    );
    assert!(usage.completion_tokens <= 40);

    // Sampling path (temperature > 0) and the token cap.
    let req = ChatRequest::new(vec![ChatMessage::user("Tell me a long story about a cat.")])
        .with_temperature(0.8)
        .with_max_tokens(16);
    let (text, done) = ask(p.as_ref(), req).await;
    assert!(!text.is_empty());
    assert!(
        matches!(&done, StreamEvent::Done { finish_reason: Some(r), usage: Some(u) } if r == "length" && u.completion_tokens == 16),
        "{done:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_generation_is_cancellable_and_the_model_stays_usable() {
    if !wo_testkit::heavy(&[Need::Model]) {
        return;
    }
    let p = provider();
    let long = || {
        ChatRequest::new(vec![ChatMessage::user(
            "Count from 1 to 500, one number per line.",
        )])
        .with_temperature(0.0)
        .with_max_tokens(600)
    };
    // Cancel through the token.
    let cancel = CancellationToken::new();
    let mut s = p.stream(long(), cancel.clone()).await.unwrap();
    assert!(matches!(s.next().await, Some(Ok(StreamEvent::Delta(_)))));
    cancel.cancel();
    let e = s.next().await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled);
    assert!(s.next().await.is_none());
    drop(s);

    // Drop the stream mid-generation: the thread stops and releases the
    // model, so the next request runs promptly instead of waiting for 600
    // tokens.
    let mut s = p.stream(long(), CancellationToken::new()).await.unwrap();
    assert!(matches!(s.next().await, Some(Ok(StreamEvent::Delta(_)))));
    drop(s);
    let started = Instant::now();
    let req = ChatRequest::new(vec![ChatMessage::user("Say hello.")])
        .with_temperature(0.0)
        .with_max_tokens(8);
    let (text, _) = ask(p.as_ref(), req.clone()).await;
    let after_drop = started.elapsed();
    assert!(!text.is_empty());
    // Against the same request on a model nobody else is using, in the same
    // run (the machine may be loaded): the dropped stream's 600 tokens take
    // far longer than a few times "Say hello.".
    let started = Instant::now();
    ask(p.as_ref(), req).await;
    let alone = started.elapsed();
    assert!(
        after_drop < alone * 4 + Duration::from_secs(2),
        "after the drop {after_drop:?}, alone {alone:?}"
    );
}

#[tokio::test]
async fn local_failures_are_clear() {
    // Missing model: a Config error that says how to install it.
    let e = LocalProvider::new(LocalConfig::new("local", "/nonexistent/model.gguf")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config);
    assert!(e.to_string().contains("scripts/install-model.sh"), "{e}");

    // A prompt longer than the (configured) context: refused before generating.
    if !wo_testkit::heavy(&[Need::Model]) {
        return;
    }
    let path = config::default_model_path(&Env::process()).unwrap();
    let mut lc = LocalConfig::new("tiny-ctx", path);
    lc.context_window = Some(64);
    let p = LocalProvider::new(lc).unwrap();
    assert_eq!(p.context_window(), 64);
    let req = ChatRequest::new(vec![ChatMessage::user("word ".repeat(200))]);
    let e = p.stream(req, CancellationToken::new()).await.err().unwrap();
    assert_eq!(e.kind(), ErrorKind::BadRequest);
    assert!(e.to_string().contains("context is 64"), "{e}");

    // Already-cancelled token: nothing runs.
    let cancel = CancellationToken::new();
    cancel.cancel();
    let p = provider();
    let e = p
        .stream(ChatRequest::new(vec![ChatMessage::user("hi")]), cancel)
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Cancelled);
}

/// A schema with the shapes the memory interpreter's uses: a closed
/// object, an enum, `oneOf` on a `const`, bounded strings and arrays.
fn city_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "required": ["city", "country", "facts"],
        "additionalProperties": false,
        "properties": {
            "city": {"type": "string", "minLength": 1, "maxLength": 30},
            "country": {"enum": ["France", "Spain", "Italy"]},
            "facts": {
                "type": "array",
                "maxItems": 3,
                "items": {"oneOf": [
                    {"type": "object", "required": ["kind", "text"], "additionalProperties": false,
                     "properties": {"kind": {"const": "river"}, "text": {"type": "string", "maxLength": 40}}},
                    {"type": "object", "required": ["kind", "count"], "additionalProperties": false,
                     "properties": {"kind": {"const": "people"}, "count": {"type": "integer", "minimum": 0}}}
                ]}
            }
        }
    })
}

/// Whether `v` follows [`city_schema`], checked by hand.
fn follows_city_schema(v: &serde_json::Value) -> bool {
    let Some(o) = v.as_object() else { return false };
    let city_ok = o["city"]
        .as_str()
        .is_some_and(|c| (1..=30).contains(&c.chars().count()));
    let country_ok = ["France", "Spain", "Italy"].contains(&o["country"].as_str().unwrap_or(""));
    let facts_ok = o["facts"].as_array().is_some_and(|facts| {
        facts.len() <= 3
            && facts.iter().all(|f| match f["kind"].as_str() {
                Some("river") => {
                    f.as_object().is_some_and(|f| f.len() == 2)
                        && f["text"].as_str().is_some_and(|t| t.chars().count() <= 40)
                }
                Some("people") => {
                    f.as_object().is_some_and(|f| f.len() == 2) && f["count"].as_u64().is_some()
                }
                _ => false,
            })
    });
    o.len() == 3 && city_ok && country_ok && facts_ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_structured_output_follows_the_schema() {
    if !wo_testkit::heavy(&[Need::Model]) {
        return;
    }
    let p = provider();
    for temperature in [0.0, 0.9] {
        let mut req = ChatRequest::new(vec![
            ChatMessage::system("Answer with JSON only."),
            ChatMessage::user("Tell me about Paris: its country, and a fact or two."),
        ])
        .with_temperature(temperature)
        .with_max_tokens(300);
        req.json_schema = Some(wo_providers::JsonSchema {
            name: "city".into(),
            schema: city_schema(),
        });
        let started = Instant::now();
        let (text, done) = ask(p.as_ref(), req).await;
        eprintln!("temperature {temperature}: {:?}: {text}", started.elapsed());
        let v: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text:?}"));
        assert!(follows_city_schema(&v), "{text}");
        // The schema ends the answer, not the token cap.
        assert!(
            matches!(&done, StreamEvent::Done { finish_reason: Some(r), .. } if r == "stop"),
            "{done:?}"
        );
        // Whitespace between tokens is bounded: no long runs of blank lines.
        let longest_run = text
            .split(|c: char| !c.is_whitespace())
            .map(|run| run.chars().count())
            .max()
            .unwrap_or(0);
        assert!(longest_run <= 20, "{text:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_the_local_model_cannot_follow_is_a_clear_bad_request() {
    if !wo_testkit::heavy(&[Need::Model]) {
        return;
    }
    let p = provider();
    for schema in [
        serde_json::json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}),
        serde_json::json!({"type": "no-such-type"}),
    ] {
        let mut req = ChatRequest::new(vec![ChatMessage::user("hi")]).with_max_tokens(8);
        req.json_schema = Some(wo_providers::JsonSchema {
            name: "broken".into(),
            schema,
        });
        let e = p.stream(req, CancellationToken::new()).await.err().unwrap();
        assert_eq!(e.kind(), ErrorKind::BadRequest, "{e}");
        assert!(e.to_string().contains("schema \"broken\""), "{e}");
    }
    // The model still answers after the refusals.
    let (text, _) = ask(p.as_ref(), common::capital_question()).await;
    assert!(text.to_lowercase().contains("paris"), "{text:?}");
}
