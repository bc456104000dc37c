//! Dense recall (`wo_engine::dense`, `wo_engine::embed_file`) with a
//! deterministic stand-in for the embedding model (words hashed into a
//! vector, synonyms folded together): the embeddings sidecar is a cache that
//! never changes an answer — missing, damaged, cut short, written for
//! another model, or stale after edits and new turns, the context assembled
//! after topping it up is the one a store rebuilt from the transcript
//! gives; fusion is deterministic; a message found by meaning alone is
//! recalled; and without dense recall the context is BM25's.

use std::collections::HashSet;
use std::sync::Arc;

use wo_engine::embed_file::FileEnd;

use wo_engine::assemble::estimate_tokens;
use wo_engine::dense::{self, DenseRecall, EmbeddingStore};
use wo_engine::embed_file::{self, Loaded};
use wo_engine::{Assembled, AssemblyOptions, SourceKind, assemble};
use wo_format::{Message, State, Timestamp};
use wo_providers::embed::{Embedder, normalize};

const NOW: i64 = 1_800_000_000;
const DIM: usize = 64;

/// Words hashed into `DIM` buckets; "ceramics" and "pottery", "lessons"
/// and "classes", "when" and "tuesdays" are one word to it (what a
/// sentence model knows and BM25 does not).
struct Hashed {
    id: String,
}

impl Embedder for Hashed {
    fn id(&self) -> &str {
        &self.id
    }
    fn dim(&self) -> usize {
        DIM
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; DIM];
                for w in t
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| w.len() > 3)
                {
                    let w = w.to_lowercase();
                    let w = match w.as_str() {
                        "ceramics" => "pottery".to_owned(),
                        "lessons" => "classes".to_owned(),
                        "when" => "tuesdays".to_owned(),
                        _ => w,
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

fn embedder() -> Arc<dyn Embedder> {
    Arc::new(Hashed {
        id: "hashed-test:1".into(),
    })
}

const TOPICS: &[&str] = &[
    "the garden needs watering every morning",
    "we drove to the coast for the weekend",
    "my sister started a new job at the bank",
    "the concert tickets sold out in minutes",
    "I signed up for pottery classes on tuesdays",
    "the dog chewed another shoe yesterday",
    "we are painting the kitchen walls blue",
];

fn state_of(n: usize) -> State {
    let mut s = State::new(Timestamp::from_unix(NOW));
    for i in 0..n {
        let text = format!("{} ({i})", TOPICS[i % TOPICS.len()]);
        s.push_message(Message::new(
            ["Caroline", "Melanie"][i % 2],
            Timestamp::from_unix(NOW - 1_000_000 + 60 * i as i64),
            text.clone(),
            format!("<p>{text}</p>"),
        ));
    }
    s
}

fn with_store(store: EmbeddingStore) -> DenseRecall {
    DenseRecall {
        embedder: embedder(),
        store: Arc::new(store),
        params: dense::DENSE_PARAMS,
        query: None,
    }
}

fn rebuilt(state: &State) -> DenseRecall {
    let e = embedder();
    let mut store = EmbeddingStore::new(e.id(), e.dim());
    store.fill(e.as_ref(), state.messages(), None).unwrap();
    with_store(store)
}

fn context(state: &State, dense: Option<DenseRecall>, query: &str) -> Assembled {
    let mut opts = AssemblyOptions::new(state, 400, 64);
    opts.now = Timestamp::from_unix(NOW);
    opts.dense = dense;
    assemble(state, query, &opts, &estimate_tokens, &[]).unwrap()
}

fn assert_same(a: &Assembled, b: &Assembled) {
    assert_eq!(a.system, b.system);
    assert_eq!(a.turns, b.turns);
    assert_eq!(a.included, b.included);
    assert_eq!(a.dropped, b.dropped);
}

fn recalled_ids(a: &Assembled) -> HashSet<String> {
    a.included
        .iter()
        .filter(|p| p.kind == SourceKind::EarlierMessage)
        .filter_map(|p| p.id.clone())
        .collect()
}

const QUERY: &str = "When are Caroline's ceramics lessons?";

/// Loads the sidecar, tops it up and writes it back, as `wo context embed`
/// does; returns how it was loaded and the dense recall.
fn load_fill_save(path: &std::path::Path, state: &State) -> (Loaded, DenseRecall) {
    let (mut d, prepared) =
        wo_engine::embed_file::prepare(embedder(), path, state.messages(), None);
    wo_engine::embed_file::persist(&mut d, path, state, &prepared, None).unwrap();
    (prepared.loaded, d)
}

#[test]
fn the_sidecar_never_changes_an_answer() {
    let dir = tempfile::tempdir().unwrap();
    let llm = dir.path().join("llm.json");
    let path = embed_file::sidecar_path(&llm);
    assert_eq!(path, dir.path().join(".llm.json.embed"));
    let mut state = state_of(60);
    let want = context(&state, Some(rebuilt(&state)), QUERY);

    // Missing: embedded, written; read back as written.
    let (loaded, d) = load_fill_save(&path, &state);
    assert_eq!(loaded, Loaded::Missing);
    assert_same(&context(&state, Some(d), QUERY), &want);
    let (loaded, d) = load_fill_save(&path, &state);
    assert_eq!(loaded, Loaded::Read(60));
    assert_same(&context(&state, Some(d), QUERY), &want);
    let good = std::fs::read(&path).unwrap();
    assert!(good.starts_with(embed_file::MAGIC));

    // Damaged, cut short, empty, for another model: unusable, rebuilt.
    let mut damaged = good.clone();
    damaged[40] ^= 0x55;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("damaged", damaged),
        ("cut", good[..good.len() / 2].to_vec()),
        ("empty", Vec::new()),
    ];
    for (what, bytes) in cases {
        std::fs::write(&path, &bytes).unwrap();
        let (loaded, d) = load_fill_save(&path, &state);
        assert!(matches!(loaded, Loaded::Unusable(_)), "{what}: {loaded:?}");
        assert_same(&context(&state, Some(d), QUERY), &want);
        assert_eq!(
            std::fs::read(&path).unwrap(),
            good,
            "{what}: rewritten as a rebuild writes it"
        );
    }
    let other = Arc::new(Hashed {
        id: "another-model:2".into(),
    });
    let (store, loaded) = embed_file::load(&path, other.id(), other.dim());
    assert!(matches!(loaded, Loaded::Unusable(ref why) if why.contains("another model")));
    assert!(store.is_empty());

    // Stale: a message edited, one removed, turns added. The vectors of the
    // messages unchanged are used, the rest embedded: the same answer.
    state.messages_mut()[4].content = "<p>I quit the pottery classes (4)</p>".into();
    let gone = state.messages()[10].id.clone();
    state.messages_mut().retain(|m| m.id != gone);
    state = with_new_turns(&state, 60, 10);
    let want = context(&state, Some(rebuilt(&state)), QUERY);
    let (loaded, d) = load_fill_save(&path, &state);
    assert_eq!(loaded, Loaded::Read(60));
    assert_eq!(
        d.store.len(),
        rebuilt(&state).store.len(),
        "gone messages' vectors dropped"
    );
    assert_same(&context(&state, Some(d), QUERY), &want);
    assert_eq!(*rebuilt(&state).store, {
        let (s, _) = embed_file::load(&path, "hashed-test:1", DIM);
        s
    });
}

#[test]
fn fusion_is_deterministic_and_finds_by_meaning() {
    let state = state_of(60);
    let first = context(&state, Some(rebuilt(&state)), QUERY);
    for _ in 0..5 {
        assert_same(&context(&state, Some(rebuilt(&state)), QUERY), &first);
    }
    // "ceramics" is in no message: BM25 finds Caroline's messages by name
    // only; the dense ranking finds the pottery classes (message 4 and
    // every 7th after it), and they are sent.
    let pottery: HashSet<String> = state
        .messages()
        .iter()
        .filter(|m| m.content.contains("pottery"))
        .map(|m| m.id.clone())
        .collect();
    let words_only = context(&state, None, QUERY);
    assert!(recalled_ids(&words_only).is_disjoint(&pottery));
    assert!(
        !recalled_ids(&first).is_disjoint(&pottery),
        "{:?}",
        first.included
    );
}

#[test]
fn an_unrelated_question_still_recalls_nothing() {
    let state = state_of(60);
    let a = context(
        &state,
        Some(rebuilt(&state)),
        "How do I rebase a branch in git?",
    );
    assert!(recalled_ids(&a).is_empty(), "{:?}", a.included);
}

/// The long-lived faces' path (`wo serve`, `wo chat`: `LiveEmbeddings`
/// read once, topped up in the background): a damaged sidecar — a byte
/// flipped among the vectors, cut short, with bytes appended — or a stale
/// one (messages edited, removed, added since it was written) gives, once
/// topped up, the answers and the file a rebuild gives.
#[test]
fn a_live_store_from_a_damaged_or_stale_sidecar_answers_as_a_rebuild() {
    use wo_engine::setup::LiveEmbeddings;
    let dir = tempfile::tempdir().unwrap();
    let path = embed_file::sidecar_path(&dir.path().join("llm.json"));
    let mut state = state_of(60);
    let want = context(&state, Some(rebuilt(&state)), QUERY);
    load_fill_save(&path, &state);
    let good = std::fs::read(&path).unwrap();
    let live_context = |state: &State| {
        let (live, loaded) = LiveEmbeddings::open(embedder(), path.clone());
        live.top_up(live.pending(state, usize::MAX), None).unwrap();
        (loaded, context(state, live.for_question(QUERY), QUERY))
    };
    let (loaded, got) = live_context(&state);
    assert_eq!(loaded, Loaded::Read(60));
    assert_same(&got, &want);

    let mut last_flipped = good.clone();
    let n = last_flipped.len();
    last_flipped[n - 5] ^= 0x01;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("a component flipped", last_flipped),
        ("cut short", good[..good.len() - 100].to_vec()),
    ];
    for (what, bytes) in cases {
        std::fs::write(&path, &bytes).unwrap();
        let (loaded, got) = live_context(&state);
        assert!(matches!(loaded, Loaded::Unusable(_)), "{what}: {loaded:?}");
        assert_same(&got, &want);
        assert_eq!(std::fs::read(&path).unwrap(), good, "{what}: rebuilt");
    }
    // Bytes after the checked part that are no whole block (an append cut
    // short by a crash): what came before them is read, the same answers.
    let mut appended = good.clone();
    appended.extend_from_slice(&[0; 76]);
    std::fs::write(&path, &appended).unwrap();
    let (loaded, got) = live_context(&state);
    assert_eq!(loaded, Loaded::Read(60));
    assert_same(&got, &want);
    std::fs::write(&path, &good).unwrap();

    // Stale: an edit, a removal, new turns.
    state.messages_mut()[4].content = "<p>I quit the pottery classes (4)</p>".into();
    let gone = state.messages()[11].id.clone();
    state.messages_mut().retain(|m| m.id != gone);
    state = with_new_turns(&state, 60, 6);
    let want = context(&state, Some(rebuilt(&state)), QUERY);
    let (loaded, got) = live_context(&state);
    assert_eq!(loaded, Loaded::Read(60));
    assert_same(&got, &want);
    let (on_disk, _) = embed_file::load(&path, "hashed-test:1", DIM);
    assert_eq!(on_disk, *rebuilt(&state).store, "the file a rebuild writes");
}

/// A project folder whose sidecar holds the vectors of `n` messages
/// (written by a full top-up), its path, and the state.
fn sidecar_of(n: usize) -> (tempfile::TempDir, std::path::PathBuf, State) {
    let dir = tempfile::tempdir().unwrap();
    let path = embed_file::sidecar_path(&dir.path().join("llm.json"));
    let state = state_of(n);
    load_fill_save(&path, &state);
    (dir, path, state)
}

/// `n` more turns after `state`'s messages.
fn with_new_turns(state: &State, from: usize, n: usize) -> State {
    let mut s = state.clone();
    for i in from..from + n {
        let text = format!("{} ({i})", TOPICS[i % TOPICS.len()]);
        s.push_message(Message::new(
            "Melanie",
            Timestamp::from_unix(NOW - 900 + i as i64),
            text.clone(),
            format!("<p>{text}</p>"),
        ));
    }
    s
}

/// What `wo ask` does: the sidecar read before the turn (nothing embedded
/// yet), then after it the missing vectors embedded and written.
fn ask_then_persist(path: &std::path::Path, after: &State) -> bool {
    let (mut d, prepared) = embed_file::prepare(embedder(), path, &[], None);
    embed_file::persist(&mut d, path, after, &prepared, None).unwrap()
}

/// The bytes a rebuild writes for `state`.
fn rebuilt_bytes(state: &State) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".x.embed");
    embed_file::save(&path, &rebuilt(state).store).unwrap();
    std::fs::read(path).unwrap()
}

/// A turn's new vectors are appended to the file as one checked block — the
/// bytes before them are left as they were — and the file reads back as a
/// rebuild; a second turn appends a second block.
#[test]
fn new_vectors_are_appended_and_read_back_as_a_rebuild() {
    let (_dir, path, state) = sidecar_of(60);
    let good = std::fs::read(&path).unwrap();
    let record = 12 + DIM;

    let two = with_new_turns(&state, 60, 2);
    assert!(ask_then_persist(&path, &two));
    let after = std::fs::read(&path).unwrap();
    assert_eq!(after.len(), good.len() + 8 + 2 * record, "one block of two");
    assert_eq!(after[..good.len()], good[..], "what was there is untouched");
    let (store, loaded, end) = embed_file::load_with_end(&path, "hashed-test:1", DIM);
    assert_eq!(loaded, Loaded::Read(62));
    assert_eq!(store, *rebuilt(&two).store);
    assert_eq!(
        end,
        Some(FileEnd {
            len: after.len() as u64,
            rows: 62,
            blocks: 1
        })
    );
    assert_same(
        &context(&two, Some(with_store(store)), QUERY),
        &context(&two, Some(rebuilt(&two)), QUERY),
    );

    let four = with_new_turns(&two, 62, 2);
    assert!(ask_then_persist(&path, &four));
    let (store, _, end) = embed_file::load_with_end(&path, "hashed-test:1", DIM);
    assert_eq!(store, *rebuilt(&four).store);
    assert_eq!(end.map(|e| e.blocks), Some(2));
    // Nothing new: nothing written.
    let before = std::fs::read(&path).unwrap();
    assert!(!ask_then_persist(&path, &four));
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

/// The end of a one-shot turn (`wo ask`): a few messages without a vector
/// are embedded and appended, as [`embed_file::persist`] would; more than
/// the limit (an import) leave the file and the store as they were, for a
/// background run.
#[test]
fn a_turns_end_embeds_a_few_and_leaves_many_for_later() {
    let (_dir, path, state) = sidecar_of(30);
    let good = std::fs::read(&path).unwrap();

    let many = with_new_turns(&state, 30, 9);
    let (mut d, prepared) = embed_file::prepare(embedder(), &path, &[], None);
    let held = d.store.clone();
    let got = embed_file::persist_few(&mut d, &path, &many, &prepared, 8).unwrap();
    assert_eq!(got, None, "9 missing, 8 allowed");
    assert_eq!(std::fs::read(&path).unwrap(), good, "the file untouched");
    assert_eq!(*d.store, *held, "nothing embedded");

    let few = with_new_turns(&state, 30, 2);
    let got = embed_file::persist_few(&mut d, &path, &few, &prepared, 8).unwrap();
    assert_eq!(got, Some(true));
    let after = std::fs::read(&path).unwrap();
    assert_eq!(after.len(), good.len() + 8 + 2 * (12 + DIM), "appended");
    let (store, loaded) = embed_file::load(&path, "hashed-test:1", DIM);
    assert_eq!(loaded, Loaded::Read(32));
    assert_eq!(store, *rebuilt(&few).store);
    // Nothing missing, nothing gone: nothing written.
    let (mut d, prepared) = embed_file::prepare(embedder(), &path, &[], None);
    let got = embed_file::persist_few(&mut d, &path, &few, &prepared, 8).unwrap();
    assert_eq!(got, Some(false));
    assert_eq!(std::fs::read(&path).unwrap(), after);
    // An edit within the limit: the edited message embedded, its old
    // vector dropped, the file rewritten as a rebuild.
    let mut edited = few.clone();
    edited.messages_mut()[3].content = "<p>an edited message</p>".into();
    let got = embed_file::persist_few(&mut d, &path, &edited, &prepared, 8).unwrap();
    assert_eq!(got, Some(true));
    assert_eq!(std::fs::read(&path).unwrap(), rebuilt_bytes(&edited));
}

/// An append cut short at any byte (a crash in the middle of it) reads as
/// the file before the append — never another vector — and the next write
/// rewrites the whole file as a rebuild does.
#[test]
fn an_append_cut_at_any_byte_reads_as_the_file_before_it() {
    let (_dir, path, state) = sidecar_of(30);
    let good = std::fs::read(&path).unwrap();
    let two = with_new_turns(&state, 30, 2);
    assert!(ask_then_persist(&path, &two));
    let full = std::fs::read(&path).unwrap();
    let before = rebuilt(&state);
    for cut in good.len()..full.len() {
        std::fs::write(&path, &full[..cut]).unwrap();
        let (store, loaded, end) = embed_file::load_with_end(&path, "hashed-test:1", DIM);
        assert_eq!(loaded, Loaded::Read(30), "cut at {cut}");
        assert_eq!(store, *before.store, "cut at {cut}");
        assert_eq!(end.is_some(), cut == good.len(), "cut at {cut}");
    }
    // A block whose checksum does not hold is not read either.
    let mut flipped = full.clone();
    flipped[good.len() + 20] ^= 0x10;
    std::fs::write(&path, &flipped).unwrap();
    let (store, loaded, end) = embed_file::load_with_end(&path, "hashed-test:1", DIM);
    assert_eq!((loaded, end), (Loaded::Read(30), None));
    assert_eq!(store, *before.store);
    // The next turn rewrites the file: a rebuild's bytes.
    std::fs::write(&path, &full[..full.len() - 3]).unwrap();
    let three = with_new_turns(&two, 32, 1);
    assert!(ask_then_persist(&path, &three));
    assert_eq!(std::fs::read(&path).unwrap(), rebuilt_bytes(&three));
}

/// The whole file is rewritten, not appended to, when vectors are dropped
/// (a message edited) or when the file changed since it was read (another
/// writer): never a block after a file it was not read from.
#[test]
fn an_edit_or_another_writer_rewrites_the_whole_file() {
    let (_dir, path, state) = sidecar_of(30);
    let mut edited = with_new_turns(&state, 30, 2);
    edited.messages_mut()[3].content = "<p>an edited message</p>".into();
    assert!(ask_then_persist(&path, &edited));
    assert_eq!(std::fs::read(&path).unwrap(), rebuilt_bytes(&edited));

    // Read, then the file replaced by another writer before the write.
    let (mut d, prepared) = embed_file::prepare(embedder(), &path, &[], None);
    let other = state_of(10);
    embed_file::save(&path, &rebuilt(&other).store).unwrap();
    let next = with_new_turns(&edited, 32, 1);
    embed_file::persist(&mut d, &path, &next, &prepared, None).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), rebuilt_bytes(&next));
}

/// Several writers at once, appending and rewriting: whatever lands, the
/// file reads, and every vector in it is the one a rebuild computes for
/// its key.
#[test]
fn concurrent_appends_leave_a_file_of_right_vectors() {
    let (_dir, path, state) = sidecar_of(30);
    let everything = with_new_turns(&state, 30, 40);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let path = path.clone();
            // Half append every new vector (the same keys as each other),
            // half hold only their own turns (their writes drop the rest:
            // whole rewrites racing the appends).
            let mine = if t % 2 == 0 {
                everything.clone()
            } else {
                with_new_turns(&state, 30 + t * 5, 5)
            };
            std::thread::spawn(move || ask_then_persist(&path, &mine))
        })
        .collect();
    for t in threads {
        // Whether it wrote: one that read the file after another wrote
        // every vector has nothing to add.
        t.join().unwrap();
    }
    let (store, loaded, _) = embed_file::load_with_end(&path, "hashed-test:1", DIM);
    assert!(matches!(loaded, Loaded::Read(n) if n >= 35), "{loaded:?}");
    let all = rebuilt(&everything);
    for (key, v) in store.iter() {
        let want = all.store.get_key(key).expect("a key of these messages");
        assert_eq!((v.scale, v.q), (want.scale, want.q));
    }
}
