//! A turn's set-up (`wo_engine::setup`), the step every face uses between
//! building the request and running the turn: file chunks behind the `rag`
//! tool, the memory step and its failures as notes, the stop policy,
//! recall by meaning from a long-lived process's vectors (the question
//! embedded on the answer's path, new messages only after), words alone
//! without the model, and retrieval prefs refused with their pointer.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use wo_engine::assemble::{ChunkCandidate, estimate_tokens};
use wo_engine::chat::TurnRequest;
use wo_engine::embed_file::{self, Loaded};
use wo_engine::setup::{
    Dense, LiveEmbeddings, TurnSetup, check_prefs, embedder_or_note, memory_step,
};
use wo_engine::{AssemblyOptions, SourceKind, assemble};
use wo_format::{Message, RetrievalPrefs, State, Timestamp};
use wo_providers::config::{Config, Env};
use wo_providers::embed::{Embedder, normalize};
use wo_providers::{Cancel, ChatRequest, EventStream, Provider, ProviderError, Reachability};

const NOW: i64 = 1_800_000_000;
const DIM: usize = 64;

/// Words hashed into `DIM` buckets, "ceramics"/"pottery" and
/// "lessons"/"classes" folded together (what a sentence model knows and
/// BM25 does not); counts the texts it embeds.
struct Hashed {
    embedded: AtomicUsize,
}

impl Embedder for Hashed {
    fn id(&self) -> &str {
        "hashed-test:1"
    }
    fn dim(&self) -> usize {
        DIM
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        self.embedded.fetch_add(texts.len(), Ordering::SeqCst);
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; DIM];
                for w in t
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| w.len() > 3)
                {
                    let w = match w.to_lowercase().as_str() {
                        "ceramics" => "pottery".to_owned(),
                        "lessons" => "classes".to_owned(),
                        w => w.to_owned(),
                    };
                    let h = w
                        .bytes()
                        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(b.into()));
                    v[(h as usize) % DIM] += 1.0;
                }
                normalize(&mut v);
                v
            })
            .collect())
    }
}

fn hashed() -> Arc<Hashed> {
    Arc::new(Hashed {
        embedded: AtomicUsize::new(0),
    })
}

fn message(i: usize, text: &str) -> Message {
    Message::new(
        ["Caroline", "Melanie"][i % 2],
        Timestamp::from_unix(NOW - 1_000_000 + 60 * i as i64),
        text,
        format!("<p>{text}</p>"),
    )
}

/// Sixty turns of small talk; message 20 is about pottery classes.
fn state() -> State {
    let mut s = State::new(Timestamp::from_unix(NOW));
    for i in 0..60 {
        let text = match i {
            20 => "I signed up for pottery classes on tuesdays".to_owned(),
            _ => format!("we talked about the weather and the garden ({i})"),
        };
        s.push_message(message(i, &text));
    }
    s
}

const QUESTION: &str = "When are the ceramics lessons?";

fn request(prompt: &str) -> TurnRequest {
    TurnRequest {
        prompt: prompt.into(),
        username: "Caroline".into(),
        // No recent turns: every earlier message is a recall candidate.
        new_conversation: true,
        ..TurnRequest::default()
    }
}

fn chunk(id: &str) -> ChunkCandidate {
    ChunkCandidate {
        id: id.into(),
        label: format!("{id}.md:1-2"),
        text: "pottery kiln notes".into(),
    }
}

fn recalled(state: &State, req: &TurnRequest) -> Vec<String> {
    let mut opts = AssemblyOptions::new(state, 400, 64);
    opts.now = Timestamp::from_unix(NOW);
    opts.dense = req.dense.clone();
    opts.new_conversation = req.new_conversation;
    let a = assemble(state, &req.prompt, &opts, &estimate_tokens, &[]).unwrap();
    a.included
        .iter()
        .filter(|p| p.kind == SourceKind::EarlierMessage)
        .filter_map(|p| p.id.clone())
        .collect()
}

/// A provider that is never asked anything here.
struct Idle;

#[async_trait::async_trait]
impl Provider for Idle {
    fn name(&self) -> &str {
        "api"
    }
    fn default_model(&self) -> &str {
        "m"
    }
    fn context_window(&self) -> usize {
        8192
    }
    async fn stream(&self, _: ChatRequest, _: Cancel) -> Result<EventStream, ProviderError> {
        unreachable!("the set-up never calls the model")
    }
    async fn check(&self) -> Reachability {
        unreachable!("the set-up never calls the model")
    }
    fn count_tokens(&self, _: &str) -> Option<usize> {
        None
    }
}

fn config(interpreter: &str) -> Config {
    let text = format!(
        "[providers.api]\nkind = \"openai\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\n[interpreter]\n{interpreter}\n"
    );
    Config::from_toml(
        &text,
        Path::new("/c.toml"),
        Env::from_pairs::<&str, &str>([]),
    )
    .unwrap()
}

#[test]
fn the_set_up_fills_chunks_memory_stop_policy_and_recall() {
    let dir = tempfile::tempdir().unwrap();
    let s = state();
    let e = hashed();
    let sidecar = embed_file::sidecar_path(&dir.path().join("llm.json"));
    let (live, loaded) = LiveEmbeddings::open(e.clone(), sidecar.clone());
    assert_eq!(loaded, Loaded::Missing);
    let pending = live.pending(&s, usize::MAX);
    assert_eq!(pending.len(), 60);
    assert_eq!(live.top_up(pending, None).unwrap(), 60);
    assert!(sidecar.exists(), "the vectors are kept beside the file");
    e.embedded.store(0, Ordering::SeqCst);

    let cfg = config("mode = \"after\"");
    let answered_by: Arc<dyn Provider> = Arc::new(Idle);
    let (memory, note) = memory_step(&cfg, &answered_by, Ok(None), None);
    assert!(memory.is_some() && note.is_none(), "{note:?}");

    let mut req = request(QUESTION);
    TurnSetup {
        index: None,
        client_chunks: vec![chunk("a"), chunk("b")],
        memory,
        keep_partial: true,
        dense: Dense::Live(&live),
    }
    .apply(&mut req);
    let ids: Vec<&str> = req.chunks.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(req.memory.as_ref().map(|m| m.by.as_str()), Some("api/m"));
    assert!(req.keep_partial);
    let pottery = s.messages()[20].id.clone();
    assert!(
        recalled(&s, &req).contains(&pottery),
        "found by meaning: {:?}",
        recalled(&s, &req)
    );
    // Only the question was embedded on the answer's path (on a thread of
    // its own started by the set-up: counted once the ranking has it).
    assert_eq!(e.embedded.load(Ordering::SeqCst), 1);
    // By words alone, the question shares no word with it.
    let mut words = request(QUESTION);
    TurnSetup {
        index: None,
        client_chunks: Vec::new(),
        memory: None,
        keep_partial: false,
        dense: Dense::Off,
    }
    .apply(&mut words);
    assert!(words.dense.is_none() && !words.keep_partial && words.memory.is_none());
    assert!(!recalled(&s, &words).contains(&pottery));
}

#[test]
fn without_the_rag_tool_no_chunk_is_sent_but_recall_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (live, _) = LiveEmbeddings::open(hashed(), dir.path().join(".llm.json.embed"));
    let mut req = request(QUESTION);
    req.no_rag = true;
    TurnSetup {
        index: None,
        client_chunks: vec![chunk("a")],
        memory: None,
        keep_partial: true,
        dense: Dense::Live(&live),
    }
    .apply(&mut req);
    assert!(req.chunks.is_empty());
    assert!(
        req.dense.is_some(),
        "recall of messages is not the rag tool"
    );
}

#[test]
fn new_messages_are_embedded_after_the_turn_and_found_by_words_until_then() {
    let dir = tempfile::tempdir().unwrap();
    let sidecar = dir.path().join(".llm.json.embed");
    let mut s = state();
    s.messages_mut().remove(20);
    let e = hashed();
    let (live, _) = LiveEmbeddings::open(e.clone(), sidecar.clone());
    live.top_up(live.pending(&s, usize::MAX), None).unwrap();
    // A turn adds the message about pottery: no vector yet, so the next
    // question asked by its words still finds it (BM25), and one asked by
    // meaning does not until it is embedded.
    let new = message(60, "I signed up for pottery classes on tuesdays");
    s.push_message(new.clone());
    let by_meaning = |live: &LiveEmbeddings| {
        let mut req = request(QUESTION);
        TurnSetup {
            index: None,
            client_chunks: Vec::new(),
            memory: None,
            keep_partial: false,
            dense: Dense::Live(live),
        }
        .apply(&mut req);
        recalled(&s, &req)
    };
    let mut words = request("pottery classes");
    words.dense = live.for_question("pottery classes");
    assert!(
        recalled(&s, &words).contains(&new.id),
        "stale: found by words"
    );
    assert!(!by_meaning(&live).contains(&new.id));
    let before = e.embedded.load(Ordering::SeqCst);
    assert_eq!(
        live.top_up(live.pending_new(std::slice::from_ref(&new)), None)
            .unwrap(),
        1
    );
    assert_eq!(
        e.embedded.load(Ordering::SeqCst),
        before + 1,
        "only the new one"
    );
    assert!(by_meaning(&live).contains(&new.id));
    // Kept: a process started later reads all the vectors back.
    let (again, loaded) = LiveEmbeddings::open(hashed(), sidecar);
    assert_eq!(loaded, Loaded::Read(60));
    assert_eq!(again.len(), 60);
    assert!(live.pending(&s, usize::MAX).is_empty());
}

#[test]
fn without_the_embedding_model_recall_is_by_words_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-model.gguf");
    let env = Env::from_pairs([("WO_EMBEDDING_MODEL", missing.as_os_str())]);
    let (embedder, note) = embedder_or_note(&env);
    assert!(embedder.is_none());
    let note = note.unwrap();
    assert!(note.contains("words only (BM25)"), "{note}");
    assert!(
        note.contains("no-such-model.gguf") || note.contains("built without llama.cpp"),
        "says where it looked, or why it cannot: {note}"
    );
}

#[test]
fn a_memory_step_that_cannot_be_set_up_costs_the_memory_with_a_note() {
    let answered_by: Arc<dyn Provider> = Arc::new(Idle);
    let on = config("mode = \"after\"\nprovider = \"api\"");
    let (step, note) = memory_step(&on, &answered_by, Err("connection refused".into()), None);
    assert!(step.is_none());
    let note = note.unwrap();
    assert!(
        note.contains("[interpreter] provider \"api\"") && note.contains("connection refused"),
        "{note}"
    );
    // Off, a provider that could not be built is no concern of the turn.
    let off = config("mode = \"off\"\nprovider = \"api\"");
    assert!(matches!(
        memory_step(&off, &answered_by, Err("connection refused".into()), None),
        (None, None)
    ));
    // A project prompt that cannot be read is named.
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(project.path().join("prompts/interpreter.md")).unwrap();
    let (step, note) = memory_step(&on, &answered_by, Ok(None), Some(project.path()));
    assert!(step.is_none());
    assert!(note.unwrap().contains("interpreter.md"));
}

#[test]
fn retrieval_prefs_out_of_range_are_refused_with_their_pointer() {
    assert_eq!(check_prefs(&RetrievalPrefs::spec_defaults()), Ok(()));
    let cases = [
        (
            RetrievalPrefs {
                min_certainty: Some(1.5),
                ..Default::default()
            },
            "/retrieval_prefs/min_certainty",
        ),
        (
            RetrievalPrefs {
                certainty_weight: Some(-0.1),
                ..Default::default()
            },
            "/retrieval_prefs/certainty_weight",
        ),
        (
            RetrievalPrefs {
                recency_weight: Some(f64::NAN),
                ..Default::default()
            },
            "/retrieval_prefs/recency_weight",
        ),
    ];
    for (prefs, pointer) in cases {
        let e = check_prefs(&prefs).unwrap_err();
        assert_eq!(e.pointer(), pointer);
        assert!(!e.message.is_empty());
    }
}
