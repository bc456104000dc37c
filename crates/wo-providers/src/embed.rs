//! Sentence embeddings for recall: the [`Embedder`] interface, where the
//! model is expected ([`default_embedding_model_path`]), and — with the
//! `local` feature — [`LocalEmbedder`], all-MiniLM-L6-v2 run in-process by
//! llama.cpp from the GGUF file `scripts/install-embedding-model.sh`
//! writes (mean pooling, as the model was trained; unit length).
//!
//! Nothing here downloads: without the file there is no embedder, and
//! recall ranks by BM25 alone.

use std::path::PathBuf;

use crate::config::{Env, data_dir};

/// File name of the embedding model (`scripts/install-embedding-model.sh`).
pub const EMBEDDING_MODEL_FILE: &str = "all-MiniLM-L6-v2.F32.gguf";

/// Where the embedding model is expected: `$WO_EMBEDDING_MODEL`, else
/// `DATA_DIR/models/all-MiniLM-L6-v2.F32.gguf`.
pub fn default_embedding_model_path(env: &Env) -> Option<PathBuf> {
    if let Some(p) = env.get("WO_EMBEDDING_MODEL").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    Some(data_dir(env)?.join("models").join(EMBEDDING_MODEL_FILE))
}

/// The installed embedding model ([`default_embedding_model_path`]),
/// loaded; otherwise why there is none, in words a note can show (recall is
/// then BM25's alone). Never downloads.
pub fn open_installed(env: &Env) -> Result<std::sync::Arc<dyn Embedder>, String> {
    let path = default_embedding_model_path(env)
        .ok_or("no data directory to find the embedding model in (set WO_EMBEDDING_MODEL)")?;
    open_at(&path)
}

#[cfg(feature = "local")]
fn open_at(path: &std::path::Path) -> Result<std::sync::Arc<dyn Embedder>, String> {
    if !path.is_file() {
        return Err(format!(
            "no embedding model at {} (scripts/install-model.sh installs it)",
            path.display()
        ));
    }
    Ok(std::sync::Arc::new(LocalEmbedder::open(path)?))
}

#[cfg(not(feature = "local"))]
fn open_at(_: &std::path::Path) -> Result<std::sync::Arc<dyn Embedder>, String> {
    Err("this wo was built without llama.cpp (the `local` feature)".into())
}

/// Turns texts into unit-length vectors whose dot product says how alike
/// their meanings are. The same text gives the same vector on a machine.
pub trait Embedder: Send + Sync {
    /// Names the model and its file: vectors of different ids are never
    /// compared (a sidecar written with another model is rebuilt).
    fn id(&self) -> &str;
    /// Length of every vector.
    fn dim(&self) -> usize;
    /// One vector per text, in order. Blocking (milliseconds per text).
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String>;
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = v
        .iter()
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt();
    if norm > 0.0 {
        for x in v {
            *x = (f64::from(*x) / norm) as f32;
        }
    }
}

#[cfg(feature = "local")]
pub use local::LocalEmbedder;

#[cfg(feature = "local")]
mod local {
    use std::num::NonZeroU32;
    use std::path::Path;
    use std::sync::{Mutex, mpsc};

    use llama_cpp_2::context::LlamaContext;
    use llama_cpp_2::context::params::{LlamaContextParams, LlamaPoolingType};
    use llama_cpp_2::llama_batch::LlamaBatch;
    use llama_cpp_2::model::LlamaModel;
    use llama_cpp_2::model::params::LlamaModelParams;

    use super::{Embedder, normalize};

    /// Tokens one text is cut to, [CLS] and [SEP] included: the length the
    /// model was trained on (sentence-transformers' `max_seq_length`).
    pub const MAX_TOKENS: usize = 256;

    /// A BERT-family embedding model run by llama.cpp in this process (the
    /// one llama.cpp backend the chat model uses too).
    ///
    /// The model lives on a thread of its own, which keeps one llama.cpp
    /// context for every call: a question is not charged a context's set-up
    /// (its buffers allocated and its compute graph reserved), and every
    /// call computes on the same thread's OpenMP team (a call landing on
    /// another thread got a second team and ran at half speed, as the chat
    /// model's generation thread found). Calls from several threads are
    /// queued, one at a time.
    pub struct LocalEmbedder {
        id: String,
        dim: usize,
        jobs: Mutex<mpsc::Sender<Job>>,
    }

    /// Texts to embed, and where their vectors go.
    struct Job {
        texts: Vec<String>,
        reply: mpsc::Sender<Result<Vec<Vec<f32>>, String>>,
    }

    impl std::fmt::Debug for LocalEmbedder {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("LocalEmbedder")
                .field("id", &self.id)
                .finish()
        }
    }

    impl LocalEmbedder {
        /// Loads the GGUF at `path` (tens of milliseconds: the file is
        /// mapped, not read) and starts its thread. Fails when it is missing
        /// or not an embedding model llama.cpp can run.
        pub fn open(path: &Path) -> Result<Self, String> {
            let meta = std::fs::metadata(path)
                .map_err(|e| format!("embedding model {}: {e}", path.display()))?;
            let backend = crate::local::backend()?;
            let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
                .map_err(|e| format!("cannot load the embedding model {}: {e}", path.display()))?;
            let dim = usize::try_from(model.n_embd()).unwrap_or(0);
            if dim == 0 {
                return Err(format!("{}: not an embedding model", path.display()));
            }
            let name = path
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            let threads = std::env::var("WO_EMBED_THREADS")
                .ok()
                .and_then(|t| t.parse::<usize>().ok())
                .unwrap_or(1);
            let threads = i32::try_from(threads).unwrap_or(1).max(1);
            let (send, jobs) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("wo-embedding".into())
                .spawn(move || serve(&model, dim, threads, &jobs))
                .map_err(|e| format!("cannot start the embedding thread: {e}"))?;
            Ok(LocalEmbedder {
                id: format!("{name}:{}:{dim}", meta.len()),
                dim,
                jobs: Mutex::new(send),
            })
        }
    }

    /// The embedding thread: one job at a time, on one context kept from
    /// the first job on (made again after a failure), until the
    /// [`LocalEmbedder`] is dropped.
    fn serve(model: &LlamaModel, dim: usize, threads: i32, jobs: &mpsc::Receiver<Job>) {
        let mut kept: Option<LlamaContext<'_>> = None;
        for job in jobs {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let ctx = match kept.take() {
                    Some(ctx) => ctx,
                    None => context(model, threads)?,
                };
                let ctx = kept.insert(ctx);
                embed_with(model, ctx, dim, &job.texts)
            }))
            .unwrap_or_else(|_| {
                Err("the embedding model failed (a panic in llama.cpp's bindings)".into())
            });
            if result.is_err() {
                // A context a call failed in is not trusted with the next.
                kept = None;
            }
            // The caller may have gone (nothing waits for the vectors).
            let _ = job.reply.send(result);
        }
    }

    fn context(model: &LlamaModel, threads: i32) -> Result<LlamaContext<'_>, String> {
        let backend = crate::local::backend()?;
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(MAX_TOKENS as u32))
            .with_n_batch(MAX_TOKENS as u32)
            .with_n_ubatch(MAX_TOKENS as u32)
            .with_n_threads(threads)
            .with_n_threads_batch(threads)
            .with_embeddings(true)
            .with_pooling_type(LlamaPoolingType::Mean);
        model
            .new_context(backend, params)
            .map_err(|e| format!("embedding context: {e}"))
    }

    /// One vector per text, each text encoded alone: a text's vector never
    /// depends on which texts were embedded with it, or before it on this
    /// context (an encoder keeps no state between calls).
    fn embed_with(
        model: &LlamaModel,
        ctx: &mut LlamaContext<'_>,
        dim: usize,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, String> {
        let mut batch = LlamaBatch::new(MAX_TOKENS, 1);
        let vocab = model.vocab();
        let sep = vocab.sep();
        let mut out = Vec::with_capacity(texts.len());
        for text in texts {
            // Special tokens in the text are text ([CLS] and [SEP] are
            // added around it, not parsed out of it).
            let mut tokens = vocab.tokenize(text.as_bytes(), true, false);
            if tokens.len() > MAX_TOKENS {
                tokens.truncate(MAX_TOKENS - 1);
                tokens.push(sep);
            }
            batch.clear();
            for (pos, tok) in tokens.iter().enumerate() {
                batch
                    .add(*tok, pos as i32, &[0], true)
                    .map_err(|e| format!("embedding batch: {e}"))?;
            }
            ctx.encode(&mut batch)
                .map_err(|e| format!("embedding: {e}"))?;
            let mut v = ctx
                .embeddings_seq_ith(0)
                .map_err(|e| format!("embedding: {e}"))?
                .to_vec();
            v.truncate(dim);
            normalize(&mut v);
            out.push(v);
        }
        Ok(out)
    }

    impl Embedder for LocalEmbedder {
        fn id(&self) -> &str {
            &self.id
        }

        fn dim(&self) -> usize {
            self.dim
        }

        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
            if texts.is_empty() {
                return Ok(Vec::new());
            }
            let (reply, vectors) = mpsc::channel();
            let job = Job {
                texts: texts.iter().map(|t| (*t).to_owned()).collect(),
                reply,
            };
            let gone = || "the embedding thread has ended".to_owned();
            self.jobs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .send(job)
                .map_err(|_| gone())?;
            vectors.recv().map_err(|_| gone())?
        }
    }
}
