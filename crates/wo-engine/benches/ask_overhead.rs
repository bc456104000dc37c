//! What `wo ask` adds around the model call: load the state and
//! the recall sidecar (`wo_engine::recall_file`, written by the run before),
//! assemble the prompt (BM25 over truth, recall from the transcript's
//! postings), append the turn and save, at 100k messages and 10k truth
//! entries. Goal: under 300 ms. Also printed: the first run's cost of
//! building and writing the sidecar, and the scan it replaces.
//!
//! Dense recall's share is measured after: the embeddings sidecar of every
//! message (vectors made up here, 384 components as all-MiniLM-L6-v2's)
//! read as `wo ask` reads it — on a thread beside the state's load, so it
//! is printed apart — and the assembly with the question's dense ranking
//! and fusion against the same assembly without (the question's own
//! embedding, a few milliseconds of the real model, is measured by
//! `cargo run -p wo-providers --features local --example embed_speed`);
//! then the ranking alone, and what `wo ask` does after the answer (the
//! turn's two messages embedded, the sidecar written).
//!
//! Run: `cargo bench -p wo-engine --bench ask_overhead` (env `MESSAGES`,
//! `TRUTH`, `REPEAT`; `SCAN=0` leaves out the old recall scan, which no
//! turn runs, so that a profile sees only a turn's work; `DENSE=0` the
//! dense rows).

use std::time::{Duration, Instant};

/// The same allocator as the `wo` binary, so the numbers match what users get.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use wo_engine::assemble::{AssemblyOptions, assemble_indexed, estimate_tokens};
use wo_engine::dense::EmbeddingStore;
use wo_engine::recall_file;
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

fn build(messages: usize, truth: usize) -> State {
    let corpus = wo_testkit::ZipfText::new(&"kiln glaze firing schedule cone reduction porcelain clay deploy release server cookie merge export context budget".split(' ').collect::<Vec<_>>());
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    s.context = "<div><p>This directory holds the kiln project and its notes.</p></div>".into();
    let mut list = Vec::with_capacity(messages);
    for i in 0..messages {
        let user = if i % 2 == 0 { "alec" } else { "smollm2" };
        list.push(Message::new(
            user,
            Timestamp::from_unix(1_700_000_000 + i as i64 * 5),
            format!("turn {i}"),
            corpus.message_xhtml(i),
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

/// A stand-in for the embedding model: a vector made from a text's bytes.
struct MadeUp;

fn made_up(text: &str) -> Vec<f32> {
    let mut v = wo_testkit::made_up_vector(text, 384);
    wo_providers::embed::normalize(&mut v);
    v
}

impl wo_providers::embed::Embedder for MadeUp {
    fn id(&self) -> &str {
        "made-up:384"
    }
    fn dim(&self) -> usize {
        384
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        Ok(texts.iter().map(|t| made_up(t)).collect())
    }
}

/// Dense recall's share of `wo ask` at this size (see the module's doc).
fn dense_phase(path: &std::path::Path, repeat: usize) {
    let store = Store::open(path, OpenOptions::default()).unwrap();
    let state = store.state();
    let sidecar = wo_engine::embed_file::sidecar_path(path);
    let embedder: std::sync::Arc<dyn wo_providers::embed::Embedder> = std::sync::Arc::new(MadeUp);
    let t = Instant::now();
    let mut vectors = EmbeddingStore::new(embedder.id(), embedder.dim());
    vectors
        .fill(embedder.as_ref(), state.messages(), None)
        .unwrap();
    let made = t.elapsed();
    let t = Instant::now();
    wo_engine::embed_file::save(&sidecar, &vectors).unwrap();
    println!(
        "  dense: {} vectors made up in {:.0} ms, sidecar written in {:.1} ms ({:.1} MB)",
        vectors.len(),
        made.as_secs_f64() * 1e3,
        t.elapsed().as_secs_f64() * 1e3,
        std::fs::metadata(&sidecar).unwrap().len() as f64 / 1e6
    );
    let (index, _) = recall_file::load(&recall_file::sidecar_path(path), state);
    let query = "what firing schedule did we settle on for the porcelain kiln?";
    let (mut read, mut words, mut fused) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ranked, mut after) = (Vec::new(), Vec::new());
    let skip = std::collections::HashSet::new();
    // A turn's two new messages, for what `wo ask` does after the answer.
    let mut grown = state.clone();
    for i in 0..2 {
        grown.push_message(Message::new(
            if i == 0 { "alec" } else { "smollm2" },
            Timestamp::from_unix(2_100_000_000 + i),
            format!("new turn {i}"),
            format!("<p>new message {i} about the kiln</p>"),
        ));
    }
    for _ in 0..repeat {
        let t = Instant::now();
        let (mut d, prepared) =
            wo_engine::embed_file::prepare(embedder.clone(), &sidecar, &[], Some(Instant::now()));
        d.query = Some(wo_engine::dense::QueryVector::ready(query, made_up(query)));
        assert!(matches!(
            prepared.loaded,
            wo_engine::embed_file::Loaded::Read(_)
        ));
        read.push(t.elapsed());
        let mut opts = AssemblyOptions::new(state, 8192, 512);
        let t = Instant::now();
        let a = assemble_indexed(state, Some(&index), query, &opts, &estimate_tokens, &[]).unwrap();
        words.push(t.elapsed());
        let t = Instant::now();
        let r = d
            .rank(state.messages(), state.content_keys(), query, &skip)
            .unwrap();
        ranked.push(t.elapsed());
        assert!(r.best > -1.0);
        opts.dense = Some(d.clone());
        let t = Instant::now();
        let b = assemble_indexed(state, Some(&index), query, &opts, &estimate_tokens, &[]).unwrap();
        fused.push(t.elapsed());
        assert!(b.tokens > 0 && a.tokens > 0);
        // After the answer: the turn's two messages embedded and the
        // sidecar written, as `wo ask`'s last step does it (the file is
        // restored after, so each repeat starts from the same sidecar).
        let kept = std::fs::read(&sidecar).unwrap();
        let (mut d, prepared) =
            wo_engine::embed_file::prepare(embedder.clone(), &sidecar, &[], Some(Instant::now()));
        let t = Instant::now();
        assert_eq!(
            wo_engine::embed_file::persist_few(&mut d, &sidecar, &grown, &prepared, 8).unwrap(),
            Some(true)
        );
        after.push(t.elapsed());
        std::fs::write(&sidecar, kept).unwrap();
    }
    let row = |name: &str, d: Duration| println!("  {name:<34} {:>8.1} ms", d.as_secs_f64() * 1e3);
    let (words, fused, after) = (median(words), median(fused), median(after));
    row("dense: sidecar read (beside load)", median(read));
    row("dense: rank (question vector given)", median(ranked));
    row("assemble, BM25 alone", words);
    row("assemble, BM25 + dense fused", fused);
    row("dense: after the answer (2 + write)", after);
    row(
        "dense: added to the whole run",
        fused.saturating_sub(words) + after,
    );
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
        "ask overhead: {messages} messages, {truth} truth entries, {:.1} MB; median of {repeat} cold and {repeat} warm saves",
        size as f64 / 1e6
    );
    let (mut load, mut prep, mut save_cold, mut save_warm, mut total) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut floor, mut branch, mut recall) = (Vec::new(), Vec::new(), Vec::new());
    let mut sidecar_t = Vec::new();
    let mut links_t = Vec::new();
    let (mut freed, mut closed) = (Vec::new(), Vec::new());
    // The first `wo ask` on this file: no sidecar yet, so it is built from
    // the transcript and written.
    let sidecar = recall_file::sidecar_path(&path);
    {
        let store = Store::open(&path, OpenOptions::default()).unwrap();
        let t = Instant::now();
        let (mut index, loaded) = recall_file::load(&sidecar, store.state());
        let built = t.elapsed();
        let t = Instant::now();
        assert!(recall_file::save(&sidecar, &mut index, store.state(), &loaded).unwrap());
        let written = t.elapsed();
        println!(
            "  first run only: sidecar built {:.1} ms, written {:.1} ms ({:.1} MB)",
            built.as_secs_f64() * 1e3,
            written.as_secs_f64() * 1e3,
            std::fs::metadata(&sidecar).unwrap().len() as f64 / 1e6
        );
    }
    // Each run opens the file afresh and saves once, as `wo ask` does:
    // runs alternate between a cold byte cache and one warmed first (as
    // `wo ask` warms it while the model answers). A second save by the same
    // store would wait for the first's replaced version to be removed,
    // which no `wo ask` does.
    for i in 0..repeat * 2 {
        let warm = i % 2 == 1;
        // The reference, in the same run: reading the file's bytes, which
        // any one-shot run of `wo ask` must do.
        let t = Instant::now();
        let bytes = std::fs::read(&path).unwrap();
        floor.push(t.elapsed());
        drop(bytes);
        let t0 = Instant::now();
        // As `wo ask`: the sidecar is read and checked beside the load,
        // then matched to the transcript.
        let prefetch = {
            let sidecar = sidecar.clone();
            std::thread::spawn(move || recall_file::read(&sidecar))
        };
        let mut store = Store::open(&path, OpenOptions::default()).unwrap();
        let t1 = Instant::now();
        let (mut index, loaded) = prefetch.join().unwrap().index(store.state());
        assert!(
            matches!(loaded, recall_file::Loaded::Read { .. }),
            "{loaded:?}"
        );
        sidecar_t.push(t1.elapsed());
        // The first walk of a freshly read transcript builds its branch
        // links (assembly's walk would, timed here apart).
        let tl = Instant::now();
        if let Some(last) = store.state().messages().last() {
            let _ = store.state().branch_walk(&last.id).next();
        }
        links_t.push(tl.elapsed());
        let opts = AssemblyOptions::new(store.state(), 8192, 512);
        let query = "what firing schedule did we settle on for the porcelain kiln?";
        let a = assemble_indexed(
            store.state(),
            Some(&index),
            query,
            &opts,
            &estimate_tokens,
            &[],
        )
        .unwrap();
        let t2 = Instant::now();
        let turn = CompletedTurn {
            sources: a.sources.clone(),
            context_used: None,
            ..CompletedTurn::new(
                "alec",
                query,
                "Cone 10 reduction, slow cooling.",
                ("local", "smollm2"),
                (
                    Timestamp::from_unix(2_000_000_000 + i as i64 * 10),
                    Timestamp::from_unix(2_000_000_001 + i as i64 * 10),
                ),
            )
        };
        if warm {
            store.warm_cache();
        }
        let t3 = Instant::now();
        store.transact(|s| apply_turn(s, &turn)).unwrap();
        let t4 = Instant::now();
        // What `wo ask` does last: nothing to write for two new messages.
        assert!(!recall_file::save(&sidecar, &mut index, store.state(), &loaded).unwrap());
        // Where assembly's time goes: the branch walk and the recall scan.
        let last = store.state().messages().last().unwrap().id.clone();
        let tb = Instant::now();
        let _ = store.state().branch_uncached(&last);
        branch.push(tb.elapsed());
        if env("SCAN", 1) == 1 {
            let tr = Instant::now();
            let _ = wo_engine::retrieve::recall_messages(
                store.state().messages(),
                query,
                &Default::default(),
                usize::MAX,
            );
            recall.push(tr.elapsed());
        }
        load.push(t1 - t0);
        prep.push(t2 - t1);
        if warm {
            save_warm.push(t4 - t3);
            total.push((t2 - t0) + (t4 - t3));
        } else {
            save_cold.push(t4 - t3);
        }
        // What a one-shot run no longer waits for at its end
        // (`Store::close_for_exit` leaves this to the exit): freeing the
        // state, timed against ending the store that way — after a pause
        // such as `wo ask`'s steps after the save (the turn's embeddings,
        // the caches' writes), in which the replaced version's removal, which
        // both wait for, has finished.
        std::thread::sleep(Duration::from_millis(150));
        if i % 2 == 0 {
            let t = Instant::now();
            drop(store);
            freed.push(t.elapsed());
        } else {
            let t = Instant::now();
            store.close_for_exit();
            closed.push(t.elapsed());
        }
    }
    let row = |name: &str, d: Duration| println!("  {name:<34} {:>8.1} ms", d.as_secs_f64() * 1e3);
    row("load (open + parse + validate)", median(load));
    row("sidecar + assemble (truth + recall)", median(prep));
    row("  of which: recall sidecar matched", median(sidecar_t));
    row("  of which: branch links built", median(links_t));
    row("  (a branch walk without them)", median(branch));
    if !recall.is_empty() {
        row("  (the recall scan it replaces)", median(recall));
    }
    row("append + save, cold byte cache", median(save_cold));
    row("append + save, warm byte cache", median(save_warm));
    row("the store dropped (state freed)", median(freed));
    row("the store closed for exit", median(closed));
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
    if env("DENSE", 1) == 1 {
        dense_phase(&path, repeat);
    }
}
