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
    // The model keeps one context from call to call: after a text that
    // filled its window, from another thread, and from a second embedder
    // of the same file, the first texts' vectors are the same bits.
    assert_eq!(e.embed(&texts).unwrap(), v);
    let e = std::sync::Arc::new(e);
    let other = e.clone();
    let from_a_thread = std::thread::spawn(move || other.embed(&texts).unwrap());
    assert_eq!(from_a_thread.join().unwrap(), v);
    let second = LocalEmbedder::open(&embedding_model_path()).unwrap();
    assert_eq!(second.embed(&texts).unwrap(), v);
    assert!(LocalEmbedder::open(std::path::Path::new("/nonexistent/model.gguf")).is_err());
}

/// Many threads asking at once are answered one at a time, each with its
/// own text's vector; an embedder dropped ends its thread, and a new one
/// works.
#[test]
fn concurrent_questions_each_get_their_own_vector() {
    if !heavy(&[Need::EmbeddingModel]) {
        return;
    }
    let e = std::sync::Arc::new(LocalEmbedder::open(&embedding_model_path()).unwrap());
    let questions: Vec<String> = (0..8).map(|i| format!("question number {i}?")).collect();
    let want: Vec<Vec<f32>> = questions
        .iter()
        .map(|q| e.embed(&[q.as_str()]).unwrap().remove(0))
        .collect();
    let threads: Vec<_> = questions
        .iter()
        .cloned()
        .map(|q| {
            let e = e.clone();
            std::thread::spawn(move || e.embed(&[q.as_str()]).unwrap().remove(0))
        })
        .collect();
    for (t, want) in threads.into_iter().zip(&want) {
        assert_eq!(&t.join().unwrap(), want);
    }
    drop(e);
    let again = LocalEmbedder::open(&embedding_model_path()).unwrap();
    assert_eq!(again.embed(&[questions[0].as_str()]).unwrap()[0], want[0]);
    assert!(again.embed(&[]).unwrap().is_empty());
}
