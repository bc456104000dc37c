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
//! with a per-vector scale (384 bytes a message).
//!
//! At a question, [`DenseRecall::rank`] embeds it (milliseconds) and ranks
//! the embedded messages by cosine similarity; recall fuses that ranking
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

/// The key of one embedded message: a CRC-32 of its speaker and content
/// (0xFF, never in UTF-8, between them) and the content's length.
pub fn key(m: &Message) -> u64 {
    let mut crc = crc32fast::Hasher::new();
    crc.update(m.username.as_bytes());
    crc.update(&[0xff]);
    crc.update(m.content.as_bytes());
    (u64::from(crc.finalize()) << 32) | (m.content.len() as u64 & 0xffff_ffff)
}

/// One stored vector: components at 8 bits, `scale` × q / 127 each.
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
        let s: f32 = self.q.iter().zip(v).map(|(q, x)| f32::from(*q) * x).sum();
        s * self.scale / 127.0
    }
}

/// The vectors of a transcript's messages, by [`key`], for one model.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddingStore {
    /// The model's [`Embedder::id`]: vectors of another are never used.
    pub model: String,
    /// Components per vector.
    pub dim: usize,
    pub(crate) vectors: HashMap<u64, Quantized>,
}

impl EmbeddingStore {
    /// An empty store for `model` with vectors of `dim` components.
    pub fn new(model: &str, dim: usize) -> Self {
        EmbeddingStore {
            model: model.to_owned(),
            dim,
            vectors: HashMap::new(),
        }
    }

    /// Vectors held.
    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    /// True when no vector is held.
    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }

    /// Messages of `messages` with no vector yet, newest first (the ones a
    /// question is likeliest to need), each text once.
    pub fn missing<'a>(&self, messages: &'a [Message]) -> Vec<&'a Message> {
        let mut seen = HashSet::new();
        messages
            .iter()
            .rev()
            .filter(|m| {
                let k = key(m);
                !self.vectors.contains_key(&k) && seen.insert(k)
            })
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
        const STEP: usize = 16;
        let missing = self.missing(messages);
        let mut added = 0;
        for group in missing.chunks(STEP) {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let texts: Vec<String> = group.iter().map(|m| embedded_text(m)).collect();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let vectors = embedder.embed(&refs)?;
            for (m, v) in group.iter().zip(vectors) {
                if v.len() != self.dim {
                    return Err(format!(
                        "the embedding model gave {} components, expected {}",
                        v.len(),
                        self.dim
                    ));
                }
                self.vectors.insert(key(m), Quantized::new(&v));
                added += 1;
            }
        }
        Ok(added)
    }

    /// Drops the vectors of messages no longer in `messages` (edited or
    /// removed); returns how many.
    pub fn retain_only(&mut self, messages: &[Message]) -> usize {
        let keys: HashSet<u64> = messages.iter().map(key).collect();
        let before = self.vectors.len();
        self.vectors.retain(|k, _| keys.contains(k));
        before - self.vectors.len()
    }

    /// The vector of `m`, when embedded.
    pub fn get(&self, m: &Message) -> Option<&Quantized> {
        self.vectors.get(&key(m))
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
    /// A question embedded ahead of time (while the state file was read):
    /// its text and vector. [`Self::rank`] uses it for that question.
    pub query: Option<(String, Vec<f32>)>,
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
    pub fn rank(
        &self,
        messages: &[Message],
        query: &str,
        skip: &HashSet<&str>,
    ) -> Option<DenseRanking> {
        if self.store.model != self.embedder.id() {
            return None;
        }
        let q = match &self.query {
            Some((text, v)) if text == query => v.clone(),
            _ => self.embedder.embed(&[query]).ok()?.pop()?,
        };
        if q.len() != self.store.dim {
            return None;
        }
        let mut best = f32::NEG_INFINITY;
        let mut scored: Vec<(usize, &Quantized, f32)> = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            if skip.contains(m.id.as_str()) {
                continue;
            }
            let Some(v) = self.store.get(m) else {
                continue;
            };
            let s = v.dot(&q);
            best = best.max(s);
            scored.push((i, v, s));
        }
        if self.params.hop > 0.0 && self.params.hop_from > 0 && !scored.is_empty() {
            let mut top: Vec<&(usize, &Quantized, f32)> = scored.iter().collect();
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
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        hits.truncate(self.params.depth);
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
