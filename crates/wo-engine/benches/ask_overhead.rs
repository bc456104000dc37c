//! What `wo ask` adds around the model call (issue 3): load the state,
//! assemble the prompt (BM25 over truth and transcript), append the turn and
//! save, at 100k messages and 10k truth entries. Goal: under 300 ms.
//!
//! Run: `cargo bench -p wo-engine --bench ask_overhead` (env `MESSAGES`,
//! `TRUTH`, `REPEAT`).

use std::time::{Duration, Instant};

/// The same allocator as the `wo` binary, so the numbers match what users get.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use wo_engine::assemble::{AssemblyOptions, assemble, estimate_tokens};
use wo_engine::turn::{CompletedTurn, apply_turn};
use wo_format::{Message, State, Timestamp, TruthEntry};
use wo_store::{OpenOptions, Store};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A Zipf-distributed vocabulary of 5,000 made-up words plus the query's
/// domain words, so that, as in real transcripts, common words are common
/// and the query's words appear in a minority of messages.
struct Corpus {
    vocab: Vec<String>,
    /// Cumulative Zipf weights.
    cdf: Vec<f64>,
}

impl Corpus {
    fn new() -> Self {
        let domain: Vec<&str> =
            "kiln glaze firing schedule cone reduction porcelain clay deploy release server cookie merge export context budget"
                .split(' ')
                .collect();
        let syllables = [
            "ka", "lo", "mi", "re", "su", "ten", "vo", "xi", "pra", "den", "ul", "gor",
        ];
        let mut vocab: Vec<String> = Vec::new();
        for i in 0..5000usize {
            let mut w = String::new();
            let mut n = i + 7;
            for _ in 0..(2 + i % 3) {
                w.push_str(syllables[n % syllables.len()]);
                n /= syllables.len();
                n += i;
            }
            vocab.push(w);
        }
        // Domain words at mid-frequency ranks.
        for (k, d) in domain.iter().enumerate() {
            vocab[40 + k * 25] = (*d).to_owned();
        }
        let mut cdf = Vec::with_capacity(vocab.len());
        let mut acc = 0.0;
        for rank in 1..=vocab.len() {
            acc += 1.0 / rank as f64;
            cdf.push(acc);
        }
        Corpus { vocab, cdf }
    }

    fn sentence(&self, seed: usize, words: usize) -> String {
        let total = *self.cdf.last().unwrap();
        let mut x = seed as u64 ^ 0x9E37_79B9_7F4A_7C15;
        (0..words)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let r = (x % 1_000_000) as f64 / 1_000_000.0 * total;
                let i = self
                    .cdf
                    .partition_point(|&c| c < r)
                    .min(self.vocab.len() - 1);
                self.vocab[i].as_str()
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn build(messages: usize, truth: usize) -> State {
    let corpus = Corpus::new();
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    s.context = "<div><p>This directory holds the kiln project and its notes.</p></div>".into();
    let mut list = Vec::with_capacity(messages);
    for i in 0..messages {
        let user = if i % 2 == 0 { "alec" } else { "smollm2" };
        list.push(Message::new(
            user,
            Timestamp::from_unix(1_700_000_000 + i as i64 * 5),
            format!("turn {i}"),
            format!(
                "<p>{}</p><p>{}</p>",
                corpus.sentence(i, 24),
                corpus.sentence(i + 7, 16)
            ),
        ));
    }
    *s.messages_mut() = list;
    s.normalize();
    for i in 0..truth {
        s.truth.trust.push(TruthEntry::new(
            format!("fact {i}"),
            Timestamp::from_unix(1_700_000_000 + i as i64 * 60),
            (i % 10) as f64 / 10.0,
            format!("<p>{}</p>", corpus.sentence(i * 3 + 1, 25)),
        ));
    }
    s
}

fn main() {
    let messages = env("MESSAGES", 100_000);
    let truth = env("TRUTH", 10_000);
    let repeat = env("REPEAT", 5);
    let dir = tempfile::tempdir_in(".").unwrap();
    let path = dir.path().join("llm.json");
    let state = build(messages, truth);
    std::fs::write(&path, wo_format::to_canonical_vec(&state)).unwrap();
    drop(state);
    let size = std::fs::metadata(&path).unwrap().len();
    println!(
        "ask overhead: {messages} messages, {truth} truth entries, {:.1} MB; median of {repeat}",
        size as f64 / 1e6
    );
    let (mut load, mut prep, mut save_cold, mut save_warm, mut total) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut floor, mut branch, mut recall) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..repeat {
        // The reference, in the same run: reading the file's bytes, which
        // any one-shot run of `wo ask` must do.
        let t = Instant::now();
        let bytes = std::fs::read(&path).unwrap();
        floor.push(t.elapsed());
        drop(bytes);
        let t0 = Instant::now();
        let mut store = Store::open(&path, OpenOptions::default()).unwrap();
        let t1 = Instant::now();
        let opts = AssemblyOptions::new(store.state(), 8192, 512);
        let query = "what firing schedule did we settle on for the porcelain kiln?";
        let a = assemble(store.state(), query, &opts, &estimate_tokens, &[]).unwrap();
        let t2 = Instant::now();
        let turn = CompletedTurn {
            username: "alec".into(),
            prompt: query.into(),
            answer: "Cone 10 reduction, slow cooling.".into(),
            answer_xhtml: wo_engine::turn::answer_xhtml("Cone 10 reduction, slow cooling."),
            sent_at: Timestamp::from_unix(2_000_000_000 + i as i64 * 10),
            finished_at: Timestamp::from_unix(2_000_000_001 + i as i64 * 10),
            provider: "local".into(),
            model: "smollm2".into(),
            usage: None,
            sources: a.sources.clone(),
            parent: None,
            new_conversation: false,
            archive_after_days: None,
        };
        store.transact(|s| apply_turn(s, &turn)).unwrap();
        let t3 = Instant::now();
        // The same again with the byte cache warm, as when it is filled
        // while the model is answering.
        let turn2 = CompletedTurn {
            sent_at: Timestamp::from_unix(2_000_000_005 + i as i64 * 10),
            finished_at: Timestamp::from_unix(2_000_000_006 + i as i64 * 10),
            ..turn
        };
        let t4 = Instant::now();
        store.transact(|s| apply_turn(s, &turn2)).unwrap();
        let t5 = Instant::now();
        // Where assembly's time goes: the branch walk and the recall scan.
        let last = store.state().messages().last().unwrap().id.clone();
        let tb = Instant::now();
        let _ = store.state().branch_uncached(&last);
        branch.push(tb.elapsed());
        let tr = Instant::now();
        let _ = wo_engine::retrieve::recall_messages(
            store.state().messages(),
            query,
            &Default::default(),
            usize::MAX,
        );
        recall.push(tr.elapsed());
        load.push(t1 - t0);
        prep.push(t2 - t1);
        save_cold.push(t3 - t2);
        save_warm.push(t5 - t4);
        total.push((t2 - t0) + (t5 - t4));
    }
    let row = |name: &str, d: Duration| println!("  {name:<34} {:>8.1} ms", d.as_secs_f64() * 1e3);
    row("load (open + parse + validate)", median(load));
    row("assemble (BM25 truth + recall)", median(prep));
    row("  of which: branch walk (uncached)", median(branch));
    row("  of which: recall scan", median(recall));
    row("append + save, cold byte cache", median(save_cold));
    row("append + save, warm byte cache", median(save_warm));
    let t = median(total);
    let f = median(floor);
    row("reference: read the file's bytes", f);
    println!(
        "  overhead over the reference: {:+.1} ms ({:.2}x)",
        (t.as_secs_f64() - f.as_secs_f64()) * 1e3,
        t.as_secs_f64() / f.as_secs_f64()
    );
    println!(
        "  {:<34} {:>8.1} ms   goal 300 ms: {:.2}× of goal ({})",
        "overhead (load + assemble + warm save)",
        t.as_secs_f64() * 1e3,
        t.as_secs_f64() / 0.3,
        if t.as_secs_f64() <= 0.3 {
            "met"
        } else {
            "not met"
        }
    );
}
