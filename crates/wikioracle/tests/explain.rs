//! `wo context explain`: what would be sent for a question, as text and
//! JSON, one question or a file of them, and its errors.

mod common;

use common::Project;
use wo_format::{Message, State, Timestamp, TruthEntry};

fn project() -> (Project, State) {
    let p = Project::new();
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    for i in 0..120i64 {
        let (who, text) = match i {
            30 => ("Gina", "We adopted two rescue dogs last spring".to_owned()),
            _ => ("Jon", format!("filler line {i} on weather and tea")),
        };
        s.push_message(Message::new(
            who,
            Timestamp::from_unix(1_700_000_000 + i * 60),
            text.clone(),
            format!("<p>{text}</p>"),
        ));
    }
    let mut fact = TruthEntry::new(
        "Dogs",
        Timestamp::from_unix(1_700_000_000),
        0.9,
        "<p>Gina has two dogs</p>",
    );
    // Distilled from the turn after the hit.
    fact.source = Some(s.messages()[31].id.clone());
    s.truth.trust.push(fact);
    p.write_state("llm.json", &s);
    (p, s)
}

#[test]
fn explains_as_text_and_json_within_the_budget() {
    let (p, s) = project();
    let hit = &s.messages()[30].id;
    let fact_source = &s.messages()[31].id;
    let before = std::fs::read(p.state_path()).unwrap();

    let text = p.ok(&[
        "context",
        "explain",
        "How many dogs did Gina adopt?",
        "--budget",
        "800",
    ]);
    assert!(text.contains("── parts ──"), "{text}");
    assert!(text.contains("recalled message"), "{text}");
    assert!(text.contains(&format!("[{hit}]")), "{text}");
    assert!(text.contains("memory"), "{text}");
    assert!(
        text.contains(&format!("→ {fact_source}")),
        "the fact names its source: {text}"
    );

    let json = p.ok(&[
        "context",
        "explain",
        "How many dogs did Gina adopt?",
        "--budget",
        "800",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["budget"], 800);
    assert!(v["tokens"].as_u64().unwrap() <= 800);
    assert_eq!(v["query"], "How many dogs did Gina adopt?");
    let parts = v["parts"].as_array().unwrap();
    assert_eq!(parts[0]["kind"], "instruction");
    assert!(
        parts
            .iter()
            .any(|p| p["kind"] == "recalled_message" && p["id"] == hit.as_str())
    );
    assert!(parts.iter().any(|p| p["kind"] == "recent_turn"));
    let artifact = parts.iter().find(|p| p["kind"] == "artifact").unwrap();
    assert_eq!(artifact["references"][0], fact_source.as_str());
    // The source is not sent again beside the fact.
    assert!(!parts.iter().any(|p| p["id"] == fact_source.as_str()));
    assert_eq!(
        v["turns"].as_array().unwrap().last().unwrap()["text"],
        "How many dogs did Gina adopt?"
    );
    assert!(
        !v["dropped"].as_array().unwrap().is_empty(),
        "a small budget drops old turns"
    );
    // Nothing was written.
    assert_eq!(std::fs::read(p.state_path()).unwrap(), before);
}

#[test]
fn a_file_of_questions_gives_one_json_line_each() {
    let (p, _) = project();
    std::fs::write(p.path().join("q.txt"), "dogs?\n\nweather and tea\n").unwrap();
    let out = p.ok(&["context", "explain", "--queries", "q.txt", "--json"]);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["query"], "dogs?");
    assert_eq!(lines[1]["query"], "weather and tea");
    assert_eq!(lines[1]["budget"], 2000);
}

#[test]
fn bad_input_is_named() {
    let (p, _) = project();
    let missing = p.run(&["context", "explain", "--queries", "nope.txt"]);
    assert_eq!(missing.code, 1);
    missing.says(&["--queries nope.txt"]);
    let tiny = p.run(&[
        "context",
        "explain",
        "a question that will not fit",
        "--budget",
        "5",
    ]);
    assert_eq!(tiny.code, 1);
    assert!(tiny.stderr.contains("budget"), "{}", tiny.stderr);
    let parent = p.run(&["context", "explain", "x", "--parent", "m_nope"]);
    assert_eq!(parent.code, 1);
    assert!(parent.stderr.contains("--parent"), "{}", parent.stderr);
    let none = p.run(&["context", "explain"]);
    assert_ne!(none.code, 0);
}

#[test]
fn without_the_embedding_model_recall_is_by_words_with_one_note() {
    // `Project` points WO_EMBEDDING_MODEL at a file that does not exist.
    let (p, s) = project();
    std::fs::write(
        p.path().join("q.txt"),
        "dogs?\nHow many dogs did Gina adopt?\n",
    )
    .unwrap();
    let r = p.run(&["context", "explain", "--queries", "q.txt", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let notes: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("recall uses words only (BM25)"))
        .collect();
    assert_eq!(
        notes.len(),
        1,
        "one note for the whole command: {}",
        r.stderr
    );
    assert!(
        notes[0].contains("scripts/install-model.sh"),
        "{}",
        notes[0]
    );
    // BM25 still finds the message by its words.
    let last: serde_json::Value = serde_json::from_str(r.stdout.lines().last().unwrap()).unwrap();
    let hit = s.messages()[30].id.as_str();
    assert!(
        last["parts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["kind"] == "recalled_message" && p["id"] == hit)
    );
    // No sidecar is written without the model.
    assert!(!p.path().join(".llm.json.embed").exists());
}

/// Heavy (the embedding model, `scripts/install-model.sh`): a question
/// worded unlike its answer finds it by meaning once `wo context embed` has
/// embedded the file, the same way every time; the sidecar is the cache
/// `wo context embed` wrote, and a damaged one gives the same answer after
/// it is rebuilt.
#[test]
fn with_the_embedding_model_a_question_finds_its_answer_by_meaning() {
    use wo_testkit::{Need, embedding_model_path, heavy};
    if !heavy(&[Need::EmbeddingModel]) {
        return;
    }
    let p = Project::new();
    let s = common::pottery_transcript(&p);
    let model = embedding_model_path();
    let run = |args: &[&str]| {
        common::to_run(
            p.cmd(args)
                .env("WO_EMBEDDING_MODEL", &model)
                .output()
                .unwrap(),
        )
    };
    let embed = run(&["context", "embed"]);
    assert_eq!(embed.code, 0, "{}", embed.stderr);
    assert!(
        embed.stderr.contains("embedded 80 messages"),
        "{}",
        embed.stderr
    );
    let ask = [
        "context",
        "explain",
        "When is the ceramics course?",
        "--json",
    ];
    let first = run(&ask);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let v: serde_json::Value = serde_json::from_str(&first.stdout).unwrap();
    let hit = s.messages()[20].id.as_str();
    assert!(
        v["parts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["kind"] == "recalled_message" && p["id"] == hit),
        "{}",
        first.stdout
    );
    // Deterministic, and the same after the sidecar is damaged and rebuilt.
    let without_seconds = |out: &str| {
        let mut v: serde_json::Value = serde_json::from_str(out).unwrap();
        v["seconds"] = serde_json::Value::Null;
        v
    };
    assert_eq!(
        without_seconds(&run(&ask).stdout),
        without_seconds(&first.stdout)
    );
    let sidecar = p.path().join(".llm.json.embed");
    let mut bytes = std::fs::read(&sidecar).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    std::fs::write(&sidecar, &bytes).unwrap();
    assert_eq!(run(&["context", "embed"]).code, 0);
    assert_eq!(
        without_seconds(&run(&ask).stdout),
        without_seconds(&first.stdout)
    );
}

#[test]
fn memory_adds_at_most_recall_tokens_whatever_the_window() {
    let p = Project::new();
    // 125 messages about glazes, ~60 tokens each (7,500 tokens that
    // relate), among 875 on other things.
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    for i in 0..1000i64 {
        let text = if i % 8 == 0 {
            format!(
                "the celadon glaze batch {i} came out {}",
                "very even and glossy ".repeat(10)
            )
        } else {
            format!("lunch note {i} about {}", "bread and soup ".repeat(10))
        };
        s.push_message(Message::new(
            "Jon",
            Timestamp::from_unix(1_700_000_000 + i * 60),
            format!("line {i}"),
            format!("<p>{text}</p>"),
        ));
    }
    p.write_state("llm.json", &s);
    let recalled = |v: &serde_json::Value| -> u64 {
        v["parts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["kind"] == "recalled_message" || p["kind"] == "recent_turn")
            .map(|p| p["tokens"].as_u64().unwrap())
            .sum()
    };
    let ask = [
        "context",
        "explain",
        "how did the celadon glaze come out?",
        "--budget",
        "100000",
        "--json",
    ];
    let none = p.write_config("");
    let by_default: serde_json::Value = serde_json::from_str(&p.ok_with(&none, &ask)).unwrap();
    let n = recalled(&by_default);
    assert!(n > 3_000 && n <= 4_000, "{n} tokens by default");
    assert!(
        by_default["dropped"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["reason"]
                .as_str()
                .unwrap()
                .starts_with("over the recall budget")),
        "{by_default}"
    );

    let more = [&ask[..], &["--recall-tokens", "20000"]].concat();
    let raised: serde_json::Value = serde_json::from_str(&p.ok_with(&none, &more)).unwrap();
    assert!(
        recalled(&raised) > 7_000,
        "{} with --recall-tokens",
        recalled(&raised)
    );

    let small = p.write_config("[memory]\nrecall_tokens = 1000\n");
    let configured: serde_json::Value = serde_json::from_str(&p.ok_with(&small, &ask)).unwrap();
    let n = recalled(&configured);
    assert!(
        n > 500 && n <= 1_000,
        "{n} tokens with recall_tokens = 1000"
    );
}
