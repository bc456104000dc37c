//! The embedding model run in-process (all-MiniLM-L6-v2 as GGUF,
//! `scripts/install-model.sh`): vectors of unit length, deterministic, and
//! as alike as the sentences are. Heavy: skipped without the model (failed
//! under `WO_REQUIRE_HEAVY_TESTS=1`).
#![cfg(feature = "local")]

use wo_providers::embed::{Embedder, LocalEmbedder};
use wo_testkit::{Need, embedding_model_path, heavy};

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn embeds_like_sentence_transformers_and_deterministically() {
    if !heavy(&[Need::EmbeddingModel]) {
        return;
    }
    let e = LocalEmbedder::open(&embedding_model_path()).expect("the model loads");
    assert_eq!(e.dim(), 384);
    let texts = [
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The girl is carrying a baby.",
    ];
    let v = e.embed(&texts).unwrap();
    for x in &v {
        assert!((dot(x, x) - 1.0).abs() < 1e-4);
    }
    // sentence-transformers gives 0.7553 for this pair (its documented
    // example): the conversion and the pooling are the model's.
    let alike = dot(&v[0], &v[1]);
    assert!((alike - 0.7553).abs() < 0.01, "{alike}");
    assert!(dot(&v[0], &v[2]) < 0.2);
    // The same text alone or among others: the same vector, bit for bit.
    let alone = e.embed(&texts[1..2]).unwrap();
    assert_eq!(alone[0], v[1]);
    // A text longer than the model's window is cut, not refused; an empty
    // one still has a vector.
    let long = "word ".repeat(2000);
    let w = e.embed(&[long.as_str(), ""]).unwrap();
    assert_eq!(w.len(), 2);
    assert!(LocalEmbedder::open(std::path::Path::new("/nonexistent/model.gguf")).is_err());
}
