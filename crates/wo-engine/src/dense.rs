//! Dense recall: earlier messages found by meaning, beside BM25's words.
//!
//! Each message's speaker and text are embedded once by a local sentence
//! model ([`wo_providers::embed::Embedder`]; all-MiniLM-L6-v2 in-process)
//! and kept in an [`EmbeddingStore`] keyed by what was embedded (a checksum
//! of speaker and content, and the content's length), so an edit, an
//! insertion or a re-sort re-embeds only the messages that changed, and two
//! stores holding the same messages hold the same vectors: a store read from
//! the sidecar ([`crate::embed_file`]), topped up, answers exactly as one
//! rebuilt from the transcript. Vectors are stored at 8 bits per component
//! with a per-vector scale (384 bytes a message), all in one block.
//!
//! At a question, [`DenseRecall::rank`] embeds it (milliseconds) and ranks
//! the embedded messages by cosine similarity — the question at 16 bits
//! ([`Question`]) against each stored vector in integers, exact and so
//! independent of the order the sums are taken in, which lets the compiler
//! use SIMD multiply-adds (100k messages in a few milliseconds); only the
//! candidates above the part floor are kept, and only the best `depth` of
//! them sorted. Recall fuses that ranking
//! with BM25's by reciprocal rank ([`fuse`]) inside the same relevance floor
//! and budget (`crate::assemble`). Messages not embedded yet (a large
//! import being caught up) are found by BM25 alone. Without the model there
//! is no [`DenseRecall`] and recall is BM25's, as before.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use wo_format::Message;
use wo_format::xhtml::to_plain_text;
use wo_providers::embed::Embedder;

/// The knobs of dense recall and of its fusion with BM25 (measured on a
/// tuning half of the LoCoMo development split, BENCHMARKS.md).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DenseParams {
    /// A message less similar than this (cosine) is not a dense candidate.
    pub part: f32,
    /// A question whose best similarity reaches this relates to the
    /// transcript even when its words do not (BM25's question floor is not
    /// reached): recall then proceeds.
    pub question: f32,
    /// Dense candidates considered, best first.
    pub depth: usize,
    /// Reciprocal rank fusion's constant: a candidate at rank r (from 1)
    /// scores 1 / (k + r) in each ranking it is in.
    pub k: f64,
    /// The dense ranking's weight in the fusion (BM25's is 1).
    pub weight: f64,
    /// The second hop: the question's vector moves this far towards the
    /// mean of its `hop_from` best matches' vectors before the ranking is
    /// made (0: the question alone), so that evidence worded like the
    /// first evidence found, elsewhere in the transcript, ranks higher.
    pub hop: f32,
    /// How many of the best matches the second hop starts from.
    pub hop_from: usize,
    /// The second hop by name: the names, places and dates the best
    /// matches of both rankings mention (capitalised words and numbers not
    /// in the question) are searched for with BM25, and that ranking is
    /// fused at this weight (0: off).
    pub entities: f64,
    /// A hit's neighbouring turns rank at this fraction of its fused score
    /// (BM25 alone: half its score).
    pub neighbours: f64,
}

/// The measured parameters (see [`DenseParams`]).
pub const DENSE_PARAMS: DenseParams = DenseParams {
    part: 0.35,
    question: 0.45,
    depth: 100,
    k: 20.0,
    weight: 1.0,
    hop: 0.0,
    hop_from: 3,
    entities: 0.0,
    neighbours: 0.5,
};

impl Default for DenseParams {
    fn default() -> Self {
        DENSE_PARAMS
    }
}

/// What a message is embedded as: its speaker and its plain text.
pub fn embedded_text(m: &Message) -> String {
    format!("{}: {}", m.username, to_plain_text(&m.content))
}

/// The key of one embedded message, and of each of a transcript's: its
/// speaker and content's [`wo_format::content_keys::content_key`] (a
/// state keeps its transcript's: [`wo_format::State::content_keys`]).
pub use wo_format::content_keys::{content_key as key, content_keys as keys};

/// How an [`EmbeddingStore`] stands against a transcript
/// ([`EmbeddingStore::reconcile`]).
#[derive(Clone, Debug)]
pub struct Reconciled<'a> {
    /// The messages with no vector, newest first, each text once, with
    /// their keys.
    pub missing: Vec<(u64, &'a Message)>,
    /// Row → whether some message has that row's vector.
    used: Vec<bool>,
}

impl Reconciled<'_> {
    /// Vectors held for no message of the transcript (edited or removed).
    pub fn unused(&self) -> usize {
        self.used.iter().filter(|u| !**u).count()
    }
}

/// One vector at 8 bits a component: `scale` × q / 127 each.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantized {
    /// The largest absolute component.
    pub scale: f32,
    /// The components, scaled to −127..=127.
    pub q: Box<[i8]>,
}

impl Quantized {
    /// `v` at 8 bits (deterministic: the same `v`, the same bytes).
    pub fn new(v: &[f32]) -> Self {
        let scale = v.iter().fold(0f32, |m, x| m.max(x.abs()));
        let q = v
            .iter()
            .map(|x| {
                if scale > 0.0 {
                    (x / scale * 127.0).round().clamp(-127.0, 127.0) as i8
                } else {
                    0
                }
            })
            .collect();
        Quantized { scale, q }
    }

    /// The dot product with the full-precision `v`.
    pub fn dot(&self, v: &[f32]) -> f32 {
        self.as_ref().dot(v)
    }

    /// This vector as the store lends its own.
    pub fn as_ref(&self) -> StoredVector<'_> {
        StoredVector {
            scale: self.scale,
            q: &self.q,
        }
    }
}

/// A vector held by an [`EmbeddingStore`]: `scale` × q / 127 each.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StoredVector<'a> {
    /// The largest absolute component.
    pub scale: f32,
    /// The components, scaled to −127..=127.
    pub q: &'a [i8],
}

impl StoredVector<'_> {
    /// The dot product with the full-precision `v`.
    pub fn dot(&self, v: &[f32]) -> f32 {
        let s: f32 = self.q.iter().zip(v).map(|(q, x)| f32::from(*q) * x).sum();
        s * self.scale / 127.0
    }

    /// The dot product with a question at 16 bits: the sum is taken in
    /// integers (exact, so the same in any order and on any vector width:
    /// the compiler turns it into SIMD multiply-adds), then scaled once.
    #[inline(always)]
    pub fn score(&self, question: &Question) -> f32 {
        // i8 × i16 products summed in i32 overflow past ~516 components:
        // blocks of 512 each fit, and their sums are added in i64.
        let (mut a, mut b) = (self.q, question.q.as_slice());
        let mut dot = 0i64;
        while !a.is_empty() && !b.is_empty() {
            let n = a.len().min(b.len()).min(512);
            dot += i64::from(dot_i8_i16(&a[..n], &b[..n]));
            (a, b) = (&a[n..], &b[n..]);
        }
        dot as f32 * (self.scale / 127.0) * question.unit
    }
}

/// The integer dot product of at most 512 components. It cannot overflow
/// (|−128 × −32,767| × 512 < 2³¹), so the sum is taken with wrapping adds:
/// the same result, but a build with overflow checks (tests, the dev
/// profile the benchmarks use) vectorises it as a release build does
/// instead of checking each add.
#[inline(always)]
fn dot_i8_i16(a: &[i8], b: &[i16]) -> i32 {
    debug_assert!(a.len() <= 512 && b.len() <= 512);
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut sum = 0i32;
    for (x, y) in a.iter().zip(b) {
        sum = sum.wrapping_add(i32::from(*x).wrapping_mul(i32::from(*y)));
    }
    sum
}

/// A question's vector at 16 bits a component (`unit` × q each), so that
/// scoring it against a stored vector is an integer dot product — a
/// relative error of 1/65,534 per component, well under the stored
/// vectors' own 1/254.
#[derive(Clone, Debug, PartialEq)]
pub struct Question {
    q: Vec<i16>,
    unit: f32,
}

impl Question {
    /// `v` at 16 bits (deterministic).
    pub fn new(v: &[f32]) -> Self {
        let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
        if !(max > 0.0 && max.is_finite()) {
            return Question {
                q: vec![0; v.len()],
                unit: 0.0,
            };
        }
        Question {
            q: v.iter()
                .map(|x| (x / max * 32767.0).round().clamp(-32767.0, 32767.0) as i16)
                .collect(),
            unit: max / 32767.0,
        }
    }
}

/// Keys are CRC-32s beside lengths, already spread: hashing them again
/// (SipHash) would cost more than the look-up itself.
#[derive(Default, Clone, Copy)]
pub struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        let x = self.0 ^ (self.0 >> 32);
        let h = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^ (h >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type KeyMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<KeyHasher>>;

/// A set of [`key`]s.
pub type KeySet = HashSet<u64, std::hash::BuildHasherDefault<KeyHasher>>;

/// The vectors of a transcript's messages, by [`key`], for one model.
///
/// Held in one block (a row of `dim` components per vector, its scale in a
/// column beside): reading the sidecar is a copy, not an allocation per
/// message, and a question is scored by walking contiguous memory.
#[derive(Clone, Debug)]
pub struct EmbeddingStore {
    /// The model's [`Embedder::id`]: vectors of another are never used.
    pub model: String,
    /// Components per vector.
    pub dim: usize,
    /// Key → row.
    rows: KeyMap<u32>,
    /// Row → key.
    keys: Vec<u64>,
    /// Row → scale.
    scales: Vec<f32>,
    /// Rows of `dim` components.
    components: Vec<i8>,
}

/// Two stores are equal when they hold the same vectors under the same
/// keys for the same model, whatever the order they were added in.
impl PartialEq for EmbeddingStore {
    fn eq(&self, other: &Self) -> bool {
        self.model == other.model
            && self.dim == other.dim
            && self.len() == other.len()
            && self
                .keys
                .iter()
                .all(|k| self.get_key(*k) == other.get_key(*k))
    }
}

impl EmbeddingStore {
    /// An empty store for `model` with vectors of `dim` components.
    pub fn new(model: &str, dim: usize) -> Self {
        EmbeddingStore {
            model: model.to_owned(),
            dim,
            rows: KeyMap::default(),
            keys: Vec::new(),
            scales: Vec::new(),
            components: Vec::new(),
        }
    }

    /// Room for `n` more vectors.
    pub fn reserve(&mut self, n: usize) {
        self.rows.reserve(n);
        self.keys.reserve(n);
        self.scales.reserve(n);
        self.components.reserve(n.saturating_mul(self.dim));
    }

    /// Vectors held.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when no vector is held.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether a vector is held for `key`.
    pub fn contains_key(&self, key: u64) -> bool {
        self.rows.contains_key(&key)
    }

    /// Holds `scale` and `q` (`dim` components) as the vector of `key`,
    /// replacing any held.
    ///
    /// # Panics
    /// When `q` is not `dim` components long (a caller's bug: the
    /// embedder's and the file's lengths are checked before).
    pub fn insert_parts(&mut self, key: u64, scale: f32, q: impl IntoIterator<Item = i8>) {
        let start = self.components.len();
        self.components.extend(q);
        assert_eq!(
            self.components.len() - start,
            self.dim,
            "a vector of another length"
        );
        match self.rows.get(&key) {
            Some(&row) => {
                // Replace in place: move the new components over the old.
                let row = row as usize;
                self.components.copy_within(start.., row * self.dim);
                self.components.truncate(start);
                self.scales[row] = scale;
            }
            None => {
                let row = u32::try_from(self.keys.len()).expect("fewer than 2^32 vectors");
                self.rows.insert(key, row);
                self.keys.push(key);
                self.scales.push(scale);
            }
        }
    }

    /// Holds `v` as the vector of `key`, replacing any held.
    pub fn insert(&mut self, key: u64, v: &Quantized) {
        self.insert_parts(key, v.scale, v.q.iter().copied());
    }

    /// Keeps only the vectors whose key `keep` accepts (asked about each
    /// row once, first to last).
    pub fn retain(&mut self, mut keep: impl FnMut(u64) -> bool) {
        let dim = self.dim;
        let mut to = 0;
        for from in 0..self.keys.len() {
            let key = self.keys[from];
            if !keep(key) {
                self.rows.remove(&key);
                continue;
            }
            if to != from {
                self.keys[to] = key;
                self.scales[to] = self.scales[from];
                self.components
                    .copy_within(from * dim..(from + 1) * dim, to * dim);
                self.rows.insert(key, to as u32);
            }
            to += 1;
        }
        self.keys.truncate(to);
        self.scales.truncate(to);
        self.components.truncate(to * dim);
    }

    /// Every held vector with its key, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, StoredVector<'_>)> {
        self.keys
            .iter()
            .enumerate()
            .map(|(row, k)| (*k, self.row(row)))
    }

    /// The row holding the vector of each of `keys`.
    fn rows_of_keys(&self, keys: &[u64]) -> Vec<Option<u32>> {
        // Looked up in a loop of their own, after every key is computed:
        // the look-ups (a cache miss each at 100k messages) then overlap
        // instead of each waiting on its message's checksum.
        keys.iter().map(|k| self.rows.get(k).copied()).collect()
    }

    /// Every held vector's score against `question`, by row.
    fn scores(&self, question: &Question) -> Vec<f32> {
        if self.dim == 0 {
            return vec![0.0; self.len()];
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above), the only
            // requirement of calling a function compiled for it.
            return unsafe { self.scores_avx2(question) };
        }
        self.scores_portable(question)
    }

    /// [`Self::scores`] compiled for AVX2: the same integer sums (exact,
    /// then the same float steps: the same scores bit for bit), with bytes
    /// widened and multiplied-and-added 16 at a time (`vpmovsxbw`,
    /// `vpmaddwd`), which the baseline x86-64 build cannot — the ranking's
    /// largest step at 100k messages.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn scores_avx2(&self, question: &Question) -> Vec<f32> {
        self.scores_portable(question)
    }

    /// Plain loops, inlined into [`Self::scores_avx2`]: an iterator
    /// adaptor's out-of-line `collect` would be compiled for the baseline
    /// CPU whatever its caller is.
    #[inline(always)]
    fn scores_portable(&self, question: &Question) -> Vec<f32> {
        let mut out = vec![0f32; self.scales.len()];
        let rows = self.components.chunks_exact(self.dim);
        for ((score, q), scale) in out.iter_mut().zip(rows).zip(&self.scales) {
            *score = StoredVector { scale: *scale, q }.score(question);
        }
        out
    }

    /// Appends the vector of a key not held yet, as read from the sidecar
    /// (whose keys are unique: one look-up, not two).
    pub(crate) fn push_new(&mut self, key: u64, scale: f32, q: &[u8]) {
        debug_assert!(!self.rows.contains_key(&key) && q.len() == self.dim);
        let row = u32::try_from(self.keys.len()).expect("fewer than 2^32 vectors");
        self.rows.insert(key, row);
        self.keys.push(key);
        self.scales.push(scale);
        self.components.extend(q.iter().map(|b| *b as i8));
    }

    fn row(&self, row: usize) -> StoredVector<'_> {
        StoredVector {
            scale: self.scales[row],
            q: &self.components[row * self.dim..(row + 1) * self.dim],
        }
    }

    /// The vector held for `key`.
    pub fn get_key(&self, key: u64) -> Option<StoredVector<'_>> {
        self.rows.get(&key).map(|row| self.row(*row as usize))
    }

    /// How this store stands against the transcript `messages`: which
    /// messages have no vector yet and which vectors no message has. One
    /// pass that keys every message once ([`keys`]), then looks each key up:
    /// what [`Self::missing`], [`Self::fill`] and [`Self::retain_only`] each
    /// did on their own, for a caller that needs more than one of them.
    pub fn reconcile<'a>(&self, messages: &'a [Message]) -> Reconciled<'a> {
        self.reconcile_keyed(messages, &keys(messages))
    }

    /// [`Self::reconcile`] with the messages' [`keys`] already computed.
    ///
    /// # Panics
    /// When `keys` is not one key per message (a caller's bug).
    pub fn reconcile_keyed<'a>(&self, messages: &'a [Message], keys: &[u64]) -> Reconciled<'a> {
        assert_eq!(messages.len(), keys.len(), "one key per message");
        let rows = self.rows_of_keys(keys);
        let mut used = vec![false; self.len()];
        let mut missing = Vec::new();
        for ((m, k), row) in messages.iter().zip(keys).zip(&rows).rev() {
            match row {
                Some(row) => used[*row as usize] = true,
                None => missing.push((*k, m)),
            }
        }
        // Each text once: only the missing keys are compared (few, after
        // the first embedding of a transcript).
        if missing.len() > 1 {
            let mut seen = KeySet::with_capacity_and_hasher(missing.len(), Default::default());
            missing.retain(|(k, _)| seen.insert(*k));
        }
        Reconciled { missing, used }
    }

    /// Messages of `messages` with no vector yet, newest first (the ones a
    /// question is likeliest to need), each text once.
    pub fn missing<'a>(&self, messages: &'a [Message]) -> Vec<&'a Message> {
        self.reconcile(messages)
            .missing
            .into_iter()
            .map(|(_, m)| m)
            .collect()
    }

    /// Embeds the messages of `messages` not embedded yet, newest first,
    /// until `deadline` (none: all of them). Returns how many were added;
    /// an error of the model leaves those embedded before it.
    pub fn fill(
        &mut self,
        embedder: &dyn Embedder,
        messages: &[Message],
        deadline: Option<Instant>,
    ) -> Result<usize, String> {
        let missing = self.reconcile(messages).missing;
        self.embed_missing(embedder, &missing, deadline)
    }

    /// Embeds `missing` (from [`Self::reconcile`]: keys not held), in
    /// order, until `deadline`. Returns how many were added; an error of the
    /// model leaves those embedded before it.
    pub fn embed_missing(
        &mut self,
        embedder: &dyn Embedder,
        missing: &[(u64, &Message)],
        deadline: Option<Instant>,
    ) -> Result<usize, String> {
        const STEP: usize = 16;
        let mut added = 0;
        for group in missing.chunks(STEP) {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let texts: Vec<String> = group.iter().map(|(_, m)| embedded_text(m)).collect();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let vectors = embedder.embed(&refs)?;
            for ((k, _), v) in group.iter().zip(vectors) {
                if v.len() != self.dim {
                    return Err(format!(
                        "the embedding model gave {} components, expected {}",
                        v.len(),
                        self.dim
                    ));
                }
                self.insert(*k, &Quantized::new(&v));
                added += 1;
            }
        }
        Ok(added)
    }

    /// Drops the vectors of messages no longer in `messages` (edited or
    /// removed); returns how many.
    pub fn retain_only(&mut self, messages: &[Message]) -> usize {
        let reconciled = self.reconcile(messages);
        self.drop_unused(&reconciled)
    }

    /// Drops the vectors that no message had when `reconciled` was made
    /// (rows added since are kept); returns how many.
    pub fn drop_unused(&mut self, reconciled: &Reconciled<'_>) -> usize {
        let unused = reconciled.unused();
        if unused == 0 {
            return 0;
        }
        let used = &reconciled.used;
        let mut row = 0;
        self.retain(|_| {
            let keep = used.get(row).is_none_or(|u| *u);
            row += 1;
            keep
        });
        unused
    }

    /// The vector of `m`, when embedded.
    pub fn get(&self, m: &Message) -> Option<StoredVector<'_>> {
        self.get_key(key(m))
    }
}

/// Dense recall for assembly: the model (to embed the question), the
/// transcript's vectors, and the knobs.
#[derive(Clone)]
pub struct DenseRecall {
    /// Embeds the question.
    pub embedder: Arc<dyn Embedder>,
    /// The transcript's vectors.
    pub store: Arc<EmbeddingStore>,
    /// Floors and fusion.
    pub params: DenseParams,
    /// A question embedded ahead of time (while the state file was read,
    /// or on another thread while the turn is set up): [`Self::rank`] uses
    /// it for that question.
    pub query: Option<QueryVector>,
}

/// A question's vector, embedded ahead: given, or being computed on another
/// thread while the caller goes on ([`Self::start`]).
#[derive(Clone)]
pub struct QueryVector {
    text: String,
    vector: Arc<std::sync::OnceLock<Option<Vec<f32>>>>,
}

impl QueryVector {
    /// The vector `v` of the question `text`, already computed.
    pub fn ready(text: impl Into<String>, v: Vec<f32>) -> Self {
        QueryVector {
            text: text.into(),
            vector: Arc::new(std::sync::OnceLock::from(Some(v))),
        }
    }

    /// Starts embedding the question `text` with `embedder` on another
    /// thread: the caller's own work (the transcript keyed, words
    /// searched) overlaps it, and [`DenseRecall::rank`] waits for it.
    pub fn start(embedder: Arc<dyn Embedder>, text: &str) -> Self {
        let vector = Arc::new(std::sync::OnceLock::new());
        let (cell, model, question) = (vector.clone(), embedder.clone(), text.to_owned());
        let embed = move || {
            // Set whatever happens, so that nobody waits for ever: a
            // failed or panicking model is no vector (words alone).
            let v = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                model.embed(&[question.as_str()]).ok()?.pop()
            }))
            .unwrap_or(None);
            let _ = cell.set(v);
        };
        if std::thread::Builder::new()
            .name("wo-question".into())
            .spawn(embed)
            .is_err()
        {
            // No thread to be had: embedded here instead.
            let v = embedder.embed(&[text]).ok().and_then(|mut v| v.pop());
            let _ = vector.set(v);
        }
        QueryVector {
            text: text.to_owned(),
            vector,
        }
    }

    /// The question this vector is for.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The vector, once computed (blocks until then); `None` when the
    /// model failed.
    pub fn wait(&self) -> Option<&[f32]> {
        self.vector.wait().as_deref()
    }
}

impl std::fmt::Debug for DenseRecall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseRecall")
            .field("model", &self.store.model)
            .field("vectors", &self.store.len())
            .field("params", &self.params)
            .finish()
    }
}

/// The dense ranking of one question: candidates at or above the part
/// floor, best first (ties: earlier position), at most `depth`; and the
/// best similarity of all.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DenseRanking {
    /// (transcript position, cosine similarity), best first.
    pub hits: Vec<(usize, f32)>,
    /// The best similarity of any message outside `skip`.
    pub best: f32,
}

impl DenseRecall {
    /// Ranks `messages` (outside `skip`) by similarity to `query`. `None`
    /// when the model fails (recall is then BM25's alone).
    ///
    /// `keys` are the messages' [`key`]s (a state keeps them:
    /// [`wo_format::State::content_keys`]).
    pub fn rank(
        &self,
        messages: &[Message],
        keys: &[u64],
        query: &str,
        skip: &HashSet<&str>,
    ) -> Option<DenseRanking> {
        if self.store.model != self.embedder.id() {
            return None;
        }
        // Each message's vector found first: a question still being
        // embedded on another thread ([`QueryVector::start`]) is waited
        // for only after this pass over the transcript (and the keying,
        // done by the caller's `State::content_keys` if not kept yet).
        debug_assert_eq!(keys.len(), messages.len());
        let rows = self.store.rows_of_keys(keys);
        let q = match &self.query {
            Some(ahead) if ahead.text() == query => ahead.wait()?.to_vec(),
            _ => self.embedder.embed(&[query]).ok()?.pop()?,
        };
        if q.len() != self.store.dim {
            return None;
        }
        let question = Question::new(&q);
        let hop = self.params.hop > 0.0 && self.params.hop_from > 0;
        let mut best = f32::NEG_INFINITY;
        // Every stored vector scored in the order it is held (sequential
        // memory: several times faster than in the transcript's order,
        // which jumps about the block), then looked up per message.
        let scores = self.store.scores(&question);
        let mut scored: Vec<(usize, StoredVector<'_>, f32)> = Vec::new();
        for (i, (m, row)) in messages.iter().zip(rows).enumerate() {
            let Some(row) = row.map(|r| r as usize) else {
                continue;
            };
            let (v, s) = (self.store.row(row), scores[row]);
            // Most messages are neither a candidate nor the best so far:
            // the window's ids are looked up only for those that are.
            if !(hop || s >= self.params.part || s > best) || skip.contains(m.id.as_str()) {
                continue;
            }
            best = best.max(s);
            if hop || s >= self.params.part {
                scored.push((i, v, s));
            }
        }
        if hop && !scored.is_empty() {
            let mut top: Vec<&(usize, StoredVector<'_>, f32)> = scored.iter().collect();
            top.sort_by(|a, b| b.2.total_cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
            top.truncate(self.params.hop_from);
            let mut centre = vec![0f32; q.len()];
            for (_, v, _) in top {
                for (c, x) in centre.iter_mut().zip(v.q.iter()) {
                    *c += f32::from(*x) * v.scale / 127.0;
                }
            }
            wo_providers::embed::normalize(&mut centre);
            let mut moved: Vec<f32> = q
                .iter()
                .zip(&centre)
                .map(|(a, c)| a + self.params.hop * c)
                .collect();
            wo_providers::embed::normalize(&mut moved);
            for (_, v, s) in &mut scored {
                *s = v.dot(&moved);
            }
        }
        let mut hits: Vec<(usize, f32)> = scored
            .into_iter()
            .filter(|(_, _, s)| *s >= self.params.part)
            .map(|(i, _, s)| (i, s))
            .collect();
        // Best first, ties by position: a total order, so selecting the
        // top `depth` before sorting them gives the full sort's prefix.
        let order = |a: &(usize, f32), b: &(usize, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if hits.len() > self.params.depth {
            if self.params.depth == 0 {
                hits.clear();
            } else {
                hits.select_nth_unstable_by(self.params.depth - 1, order);
                hits.truncate(self.params.depth);
            }
        }
        hits.sort_unstable_by(order);
        Some(DenseRanking {
            hits,
            best: if best.is_finite() { best } else { 0.0 },
        })
    }
}

/// Reciprocal rank fusion: each position's score is the sum over the
/// rankings it is in of `weight / (k + rank)` (ranks from 1). Each ranking
/// is positions best first, with its weight. Returns (position, fused
/// score) in transcript order — deterministic: equal inputs, equal output.
pub fn fuse(rankings: &[(&[usize], f64)], k: f64) -> Vec<(usize, f64)> {
    let mut fused: HashMap<usize, f64> = HashMap::new();
    for (ranking, weight) in rankings {
        for (r, &i) in ranking.iter().enumerate() {
            *fused.entry(i).or_default() += weight / (k + (r + 1) as f64);
        }
    }
    let mut out: Vec<(usize, f64)> = fused.into_iter().collect();
    out.sort_unstable_by_key(|&(i, _)| i);
    out
}

/// The second hop's question ([`DenseParams::entities`]): the capitalised
/// words and the numbers of `texts` that are not in `query` nor one of
/// `speakers`, each once, in the order met.
pub fn entity_query(texts: &[String], query: &str, speakers: &HashSet<&str>) -> String {
    let asked: HashSet<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .collect();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for text in texts {
        for w in text.split(|c: char| !c.is_alphanumeric()) {
            let first = w.chars().next();
            let named = first.is_some_and(char::is_uppercase) && w.chars().count() >= 3;
            let number = first.is_some_and(|c| c.is_ascii_digit());
            if !(named || number) || speakers.contains(w) {
                continue;
            }
            let lower = w.to_lowercase();
            if !asked.contains(&lower) && seen.insert(lower) {
                out.push(w);
            }
        }
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fusion_adds_reciprocal_ranks_and_is_order_independent() {
        let p = DenseParams {
            k: 60.0,
            weight: 1.0,
            ..DENSE_PARAMS
        };
        let f = fuse(&[(&[5, 2, 9], 1.0), (&[2, 7], p.weight)], p.k);
        let get = |i: usize| f.iter().find(|x| x.0 == i).map(|x| x.1).unwrap();
        assert_eq!(f.iter().map(|x| x.0).collect::<Vec<_>>(), [2, 5, 7, 9]);
        assert_eq!(get(2), 1.0 / 62.0 + 1.0 / 61.0);
        assert_eq!(get(5), 1.0 / 61.0);
        assert_eq!(get(7), 1.0 / 62.0);
        // In both rankings beats first in one.
        assert!(get(2) > get(5));
        // The same inputs give the same bits, however often.
        for _ in 0..10 {
            assert_eq!(fuse(&[(&[5, 2, 9], 1.0), (&[2, 7], p.weight)], p.k), f);
        }
        assert!(fuse(&[], p.k).is_empty());
    }

    #[test]
    fn the_second_hop_asks_for_names_and_dates_not_asked_yet() {
        let speakers: HashSet<&str> = ["Caroline"].into();
        let q = entity_query(
            &[
                "Caroline: I went to Sweden with Mel in 2022.".into(),
                "Caroline: Sweden again, and the LGBTQ centre. I loved it".into(),
            ],
            "Where did Caroline travel with Mel?",
            &speakers,
        );
        assert_eq!(q, "Sweden 2022 LGBTQ");
    }

    /// The AVX2 build of the scores and the portable one give the same
    /// bits (384 components as the model's, and lengths that are no
    /// multiple of a vector or past one 512-component block).
    #[test]
    fn scores_are_the_same_bits_on_every_path() {
        for dim in [384, 7, 1000] {
            let mut store = EmbeddingStore::new("fixed", dim);
            for i in 0..300u64 {
                store.insert(i, &Quantized::new(&unit(i + 1, dim)));
            }
            let question = Question::new(&unit(999, dim));
            let portable: Vec<u32> = store
                .scores_portable(&question)
                .iter()
                .map(|s| s.to_bits())
                .collect();
            let used: Vec<u32> = store
                .scores(&question)
                .iter()
                .map(|s| s.to_bits())
                .collect();
            assert_eq!(used, portable, "{dim} components");
            // And the same as each vector scored alone.
            for (row, bits) in portable.iter().enumerate() {
                assert_eq!(store.row(row).score(&question).to_bits(), *bits);
            }
        }
    }

    fn unit(seed: u64, dim: usize) -> Vec<f32> {
        let mut h = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut v: Vec<f32> = (0..dim)
            .map(|_| {
                h ^= h << 13;
                h ^= h >> 7;
                h ^= h << 17;
                (h % 2001) as f32 / 1000.0 - 1.0
            })
            .collect();
        wo_providers::embed::normalize(&mut v);
        v
    }

    #[test]
    fn integer_scores_match_the_float_dot_product() {
        for dim in [4, 384, 1100] {
            let q = unit(1, dim);
            let question = Question::new(&q);
            for seed in 2..40 {
                let stored = Quantized::new(&unit(seed, dim));
                let (exact, fast) = (stored.dot(&q), stored.as_ref().score(&question));
                assert!((exact - fast).abs() < 1e-4, "{dim}: {exact} vs {fast}");
            }
        }
        // Opposite extremes in every component sum past i32 in one block
        // of a long vector: still exact.
        let long = Quantized {
            scale: 1.0,
            q: vec![127i8; 2000].into(),
        };
        let s = long.as_ref().score(&Question::new(&[1.0; 2000]));
        assert!((s - 2000.0).abs() < 0.01, "{s}");
        // The most negative byte a file can hold, against the most negative
        // question, in a full block of 512: exact, no overflow.
        let extreme = StoredVector {
            scale: 127.0,
            q: &[-128i8; 512],
        };
        let most = Question::new(&[-1.0; 512]);
        assert_eq!(dot_i8_i16(extreme.q, &most.q), 128 * 32767 * 512);
        assert!((extreme.score(&most) - 128.0 * 512.0).abs() < 0.1);
        let zero = Question::new(&[0.0; 4]);
        assert_eq!(Quantized::new(&[1.0; 4]).as_ref().score(&zero), 0.0);
    }

    struct Fixed(Vec<f32>);

    impl Embedder for Fixed {
        fn id(&self) -> &str {
            "fixed"
        }
        fn dim(&self) -> usize {
            self.0.len()
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
            Ok(texts.iter().map(|_| self.0.clone()).collect())
        }
    }

    #[test]
    fn the_ranking_is_the_best_depth_ties_by_position() {
        let dim = 16;
        let messages: Vec<Message> = (0..300)
            .map(|i| {
                Message::new(
                    "ann",
                    wo_format::Timestamp::from_unix(1_700_000_000 + i),
                    format!("m{i}"),
                    format!("<p>message {i}</p>"),
                )
            })
            .collect();
        let q = unit(7, dim);
        let mut store = EmbeddingStore::new("fixed", dim);
        for (i, m) in messages.iter().enumerate() {
            // Every third message is the question itself: many ties.
            let v = if i % 3 == 0 {
                q.clone()
            } else {
                unit(i as u64 + 100, dim)
            };
            store.insert(key(m), &Quantized::new(&v));
        }
        let skip: HashSet<&str> = [messages[0].id.as_str(), messages[5].id.as_str()].into();
        for depth in [0, 1, 7, 50, 100, 1000] {
            let d = DenseRecall {
                embedder: Arc::new(Fixed(q.clone())),
                store: Arc::new(store.clone()),
                params: DenseParams {
                    depth,
                    part: 0.2,
                    ..DENSE_PARAMS
                },
                query: None,
            };
            let got = d
                .rank(&messages, &keys(&messages), "anything", &skip)
                .unwrap();
            // The reference: every message outside `skip` scored, the
            // floor applied, all sorted.
            let question = Question::new(&q);
            let mut all: Vec<(usize, f32)> = messages
                .iter()
                .enumerate()
                .filter(|(_, m)| !skip.contains(m.id.as_str()))
                .map(|(i, m)| (i, store.get(m).unwrap().score(&question)))
                .collect();
            let best = all.iter().fold(f32::NEG_INFINITY, |b, x| b.max(x.1));
            all.retain(|x| x.1 >= 0.2);
            all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            all.truncate(depth);
            assert_eq!(got.hits, all, "depth {depth}");
            assert_eq!(got.best, best);
            if depth >= 7 {
                assert_eq!(got.hits[0].0, 3, "the first tie not skipped");
            }
        }
    }

    /// Embeds slowly, or fails, or panics: what a question embedded on
    /// another thread may meet.
    struct Moody {
        v: Vec<f32>,
        mood: &'static str,
        calls: std::sync::atomic::AtomicUsize,
    }

    impl Embedder for Moody {
        fn id(&self) -> &str {
            "fixed"
        }
        fn dim(&self) -> usize {
            self.v.len()
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
            self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            match self.mood {
                "slow" => std::thread::sleep(std::time::Duration::from_millis(100)),
                "failing" => return Err("no model".into()),
                "panicking" => panic!("the model fell over"),
                _ => {}
            }
            Ok(texts.iter().map(|_| self.v.clone()).collect())
        }
    }

    #[test]
    fn a_question_embedded_on_another_thread_ranks_as_one_given() {
        let dim = 16;
        let messages: Vec<Message> = (0..50)
            .map(|i| {
                Message::new(
                    "ann",
                    wo_format::Timestamp::from_unix(1_700_000_000 + i),
                    "t",
                    format!("<p>message {i}</p>"),
                )
            })
            .collect();
        let q = unit(7, dim);
        let mut store = EmbeddingStore::new("fixed", dim);
        for (i, m) in messages.iter().enumerate() {
            let v = if i % 5 == 0 {
                q.clone()
            } else {
                unit(i as u64 + 100, dim)
            };
            store.insert(key(m), &Quantized::new(&v));
        }
        let recall = |mood: &'static str, ahead: Option<&str>| {
            let embedder = Arc::new(Moody {
                v: q.clone(),
                mood,
                calls: Default::default(),
            });
            let d = DenseRecall {
                embedder: embedder.clone(),
                store: Arc::new(store.clone()),
                params: DenseParams {
                    part: 0.2,
                    ..DENSE_PARAMS
                },
                query: ahead.map(|text| QueryVector::start(embedder.clone(), text)),
            };
            let ranked = d.rank(&messages, &keys(&messages), "the question", &HashSet::new());
            (
                ranked,
                embedder.calls.load(std::sync::atomic::Ordering::SeqCst),
            )
        };
        let (given, _) = recall("steady", None);
        let given = given.unwrap();
        assert_eq!(
            given.hits[..10].iter().map(|h| h.0).collect::<Vec<_>>(),
            [0, 5, 10, 15, 20, 25, 30, 35, 40, 45]
        );
        // Waited for, not embedded again.
        assert_eq!(
            recall("slow", Some("the question")),
            (Some(given.clone()), 1)
        );
        // Started for another question: this one is embedded when ranked.
        assert_eq!(recall("steady", Some("another")).0, Some(given));
        // A model that fails or panics on that thread: words alone, and
        // nobody waits for ever.
        assert_eq!(recall("failing", Some("the question")).0, None);
        assert_eq!(recall("panicking", Some("the question")).0, None);
        let ready = QueryVector::ready("x", q.clone());
        assert_eq!((ready.text(), ready.wait()), ("x", Some(&q[..])));
    }

    #[test]
    fn the_store_replaces_retains_and_compares_by_content() {
        let mut a = EmbeddingStore::new("m", 4);
        let mut b = EmbeddingStore::new("m", 4);
        let (v1, v2, v3) = (
            Quantized::new(&[1.0, 0.0, 0.0, 0.0]),
            Quantized::new(&[0.0, 1.0, 0.0, 0.0]),
            Quantized::new(&[0.0, 0.0, 0.5, 0.5]),
        );
        a.insert(1, &v1);
        a.insert(2, &v2);
        a.insert(3, &v3);
        b.insert(3, &v3);
        b.insert(2, &v1);
        b.insert(1, &v1);
        assert_ne!(a, b);
        // Replaced in place: no second row.
        b.insert(2, &v2);
        assert_eq!(b.len(), 3);
        assert_eq!(a, b, "the same vectors, added in another order");
        assert_eq!(a.get_key(2), Some(v2.as_ref()));
        a.retain(|k| k != 2);
        assert_eq!((a.len(), a.get_key(2)), (2, None));
        assert_eq!(a.get_key(3), Some(v3.as_ref()));
        assert_eq!(a.get_key(1), Some(v1.as_ref()));
        a.retain(|_| false);
        assert!(a.is_empty() && a.get_key(1).is_none());
        assert_ne!(a, EmbeddingStore::new("other", 4));
    }

    #[test]
    fn reconciling_finds_the_missing_newest_first_and_the_unused() {
        let message = |i: i64, text: &str| {
            Message::new(
                "ann",
                wo_format::Timestamp::from_unix(1_700_000_000 + i),
                format!("message {i}"),
                format!("<p>{text}</p>"),
            )
        };
        let messages = vec![
            message(0, "held"),
            message(1, "new"),
            message(2, "also held"),
            message(3, "new"),
            message(4, "newest"),
        ];
        let v = Quantized::new(&[1.0, 0.0, 0.0, 0.0]);
        let mut store = EmbeddingStore::new("m", 4);
        store.insert(key(&messages[0]), &v);
        store.insert(99, &v);
        store.insert(key(&messages[2]), &v);
        store.insert(98, &v);
        assert_eq!(
            keys(&messages),
            messages.iter().map(key).collect::<Vec<_>>()
        );
        let r = store.reconcile(&messages);
        // Newest first, the repeated text once (its newest copy).
        let missing: Vec<&Message> = r.missing.iter().map(|(_, m)| *m).collect();
        assert_eq!(missing, [&messages[4], &messages[3]]);
        assert!(r.missing.iter().all(|(k, m)| *k == key(m)));
        assert_eq!(r.unused(), 2);
        assert_eq!(
            store.missing(&messages),
            [&messages[4], &messages[3]],
            "the same as reconcile's"
        );
        // Rows added after the reconciling are kept; unused ones dropped.
        let mut filled = store.clone();
        filled
            .embed_missing(&Fixed(vec![0.0, 1.0, 0.0, 0.0]), &r.missing, None)
            .unwrap();
        assert_eq!(filled.drop_unused(&r), 2);
        assert_eq!(filled.len(), 4);
        assert!(!filled.contains_key(99) && !filled.contains_key(98));
        assert!(messages.iter().all(|m| filled.get(m).is_some()));
        let mut retained = store.clone();
        assert_eq!(retained.retain_only(&messages), 2);
        assert_eq!(retained.len(), 2);
        // Nothing unused: nothing dropped, the store unchanged.
        let r = filled.reconcile(&messages);
        assert!(r.missing.is_empty());
        let before = filled.clone();
        assert_eq!(filled.drop_unused(&r), 0);
        assert_eq!(filled, before);
        assert!(
            EmbeddingStore::new("m", 4)
                .reconcile(&[])
                .missing
                .is_empty()
        );
    }

    #[test]
    fn quantized_dot_is_close_and_exact_for_the_same_input() {
        let v: Vec<f32> = (0..384)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 400.0)
            .collect();
        let mut u = v.clone();
        wo_providers::embed::normalize(&mut u);
        let q = Quantized::new(&u);
        assert!((q.dot(&u) - 1.0).abs() < 0.01, "{}", q.dot(&u));
        assert_eq!(Quantized::new(&u), q);
        assert_eq!(Quantized::new(&[0.0; 4]).dot(&[1.0; 4]), 0.0);
    }
}
