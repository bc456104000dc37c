//! Opening recall's embedding model for a command: the local
//! all-MiniLM-L6-v2 GGUF when installed, else BM25 alone with one note.

use std::sync::Arc;

use wo_providers::embed::Embedder;

/// When to say that recall is by words alone (no embedding model).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Note {
    /// Every time: the user asked to see what is sent (`--show-context`,
    /// `wo context explain`, `wo context embed`).
    Always,
    /// The first time on this machine: a one-shot `wo ask` run many times
    /// a day should not repeat it, but a new user must learn it once.
    Once,
    /// Never: nobody reads this stderr (a detached background run).
    Never,
}

/// The embedding model, when installed and loadable; otherwise `None`, and
/// (as `note` says) one line on stderr saying recall is BM25's alone and
/// what installs it.
pub fn embedder(note: Note) -> Option<Arc<dyn Embedder>> {
    let (embedder, why) = wo_engine::setup::embedder_or_note(&wo_providers::config::Env::process());
    if let Some(why) = why {
        match note {
            Note::Always => eoutln!("note: {why}"),
            Note::Once => super::session::say_once("words-only-recall", &why),
            Note::Never => {}
        }
    }
    embedder
}

/// Dense recall being prepared for one turn on another thread: the model
/// loaded, the embeddings sidecar read and the question embedded while this
/// thread reads the state file (which takes longer on a large file), so
/// the first token is not delayed by it.
pub struct Pending {
    sidecar: std::path::PathBuf,
    job: std::thread::JoinHandle<Option<(wo_engine::dense::DenseRecall, Prepared)>>,
}

use wo_engine::embed_file::Prepared;

/// Starts preparing dense recall for `question` on the state file at
/// `state_path` (nothing is embedded but the question: messages the
/// sidecar lacks are found by BM25 until [`finish`] embeds them).
pub fn start(state_path: &std::path::Path, question: &str, note: Note) -> Pending {
    let sidecar = wo_engine::embed_file::sidecar_path(state_path);
    let path = sidecar.clone();
    let question = question.to_owned();
    let job = std::thread::spawn(move || {
        let embedder = embedder(note)?;
        let (mut dense, prepared) =
            wo_engine::embed_file::prepare(embedder, &path, &[], Some(std::time::Instant::now()));
        let v = dense.embedder.embed(&[question.as_str()]).ok()?.pop()?;
        dense.query = Some(wo_engine::dense::QueryVector::ready(question, v));
        Some((dense, prepared))
    });
    Pending { sidecar, job }
}

impl Pending {
    /// The dense recall, once ready (`None`: BM25 alone).
    pub fn wait(self) -> Option<Ready> {
        let (dense, prepared) = self.job.join().ok()??;
        Some(Ready {
            sidecar: self.sidecar,
            dense,
            prepared,
        })
    }
}

/// Dense recall ready for a turn, and what [`finish`] needs to update the
/// sidecar after it.
pub struct Ready {
    sidecar: std::path::PathBuf,
    /// Given to the turn.
    pub dense: wo_engine::dense::DenseRecall,
    prepared: Prepared,
}

/// Messages [`finish`] embeds itself, after the answer (the turn's own two
/// and a few more, tens of milliseconds); more are left to a detached
/// `wo context embed`.
const EMBED_INLINE: usize = 8;

/// After the turn is saved: embeds the new messages when they are few and
/// writes the sidecar; when many are missing (an import, a first use),
/// starts `wo context embed` detached to embed them in the background.
pub fn finish(
    g: &crate::cli::GlobalOpts,
    ready: Ready,
    state: &wo_format::State,
    state_path: &std::path::Path,
) {
    let Ready {
        sidecar,
        mut dense,
        prepared,
    } = ready;
    // A link or a FIFO at its name: said once, and no background run
    // started that could only fail on it.
    if let Some(note) = wo_engine::recall_file::refused_sidecar(&sidecar) {
        eoutln!("note: {note}");
        return;
    }
    let few =
        wo_engine::embed_file::persist_few(&mut dense, &sidecar, state, &prepared, EMBED_INLINE);
    if let Ok(None) = few {
        // Too many to embed here: what was read is kept (nothing new to
        // write) and the rest handed over.
        let _ = super::session::spawn_detached(g, state_path, &["context", "embed", "--quiet"]);
    }
    if let Some(note) = wo_engine::recall_file::refused_note(&few) {
        // Put there since the check above.
        eoutln!("note: {note}");
    }
}

/// `wo context embed`: embeds every message the embeddings sidecar lacks
/// and writes it. One at a time per file: a second run while one holds the
/// lock returns at once.
pub fn embed_all(
    state_path: &std::path::Path,
    state: &wo_format::State,
    quiet: bool,
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let Some(embedder) = embedder(if quiet { Note::Never } else { Note::Always }) else {
        return Ok(());
    };
    let sidecar = wo_engine::embed_file::sidecar_path(state_path);
    let lock_path = wo_engine::embed_file::lock_path(state_path);
    // Never through a link planted at its name (a dangling one would create
    // a file anywhere), never waiting on a FIFO there.
    let lock = wo_store::durable::project::open_lock_file(&lock_path)
        // The error names the file.
        .context("cannot open the embedding lock")?;
    if lock.try_lock().is_err() {
        if !quiet {
            eoutln!(
                "another `wo context embed` is embedding {}",
                state_path.display()
            );
        }
        return Ok(());
    }
    let started = std::time::Instant::now();
    let (mut dense, prepared) =
        wo_engine::embed_file::prepare(embedder, &sidecar, &[], Some(started));
    let missing = dense.store.missing(state.messages()).len();
    wo_engine::embed_file::persist(&mut dense, &sidecar, state, &prepared, None).map_err(|e| {
        // A refusal names the file and why; any other error gets its name.
        let named = wo_store::durable::project::refusal(&e).is_some();
        let e = anyhow::Error::new(e);
        if named {
            e
        } else {
            e.context(format!("cannot write {}", sidecar.display()))
        }
    })?;
    if !quiet {
        eoutln!(
            "embedded {missing} messages in {:.1} s ({} vectors in {})",
            started.elapsed().as_secs_f64(),
            dense.store.len(),
            sidecar.display()
        );
    }
    Ok(())
}

/// Recall by meaning for a session of many turns (`wo chat`): the model
/// and the embeddings sidecar are opened once, on another thread while the
/// session starts, and kept ([`wo_engine::setup::LiveEmbeddings`], as
/// `wo serve` keeps them); each turn embeds only its question, and its two
/// new messages are embedded after it is saved, off the next prompt's path.
pub struct Session {
    opening: Option<std::thread::JoinHandle<Option<Arc<wo_engine::setup::LiveEmbeddings>>>>,
    live: Option<Arc<wo_engine::setup::LiveEmbeddings>>,
    topping_up: Vec<std::thread::JoinHandle<()>>,
}

/// Starts opening recall by meaning for the state file at `state_path`.
/// Without the model, one note says recall is by words alone.
pub fn session(state_path: &std::path::Path) -> Session {
    let sidecar = wo_engine::embed_file::sidecar_path(state_path);
    let opening = std::thread::spawn(move || {
        let embedder = embedder(Note::Always)?;
        if let Some(note) = wo_engine::recall_file::refused_sidecar(&sidecar) {
            eoutln!("note: {note}");
        }
        let (live, _) = wo_engine::setup::LiveEmbeddings::open(embedder, sidecar);
        Some(Arc::new(live))
    });
    Session {
        opening: Some(opening),
        live: None,
        topping_up: Vec::new(),
    }
}

impl Session {
    /// Recall by meaning for the next turn (waits for the opening the
    /// first time).
    pub fn dense(&mut self) -> wo_engine::setup::Dense<'_> {
        if let Some(opening) = self.opening.take() {
            self.live = opening.join().ok().flatten();
        }
        self.live
            .as_deref()
            .map_or(wo_engine::setup::Dense::Off, wo_engine::setup::Dense::Live)
    }

    /// After a turn is saved: embeds its messages `new` on another thread
    /// (found by words until then) and writes the sidecar.
    pub fn saved(&mut self, new: Vec<wo_format::Message>) {
        let Some(live) = self.live.clone() else {
            return;
        };
        self.topping_up.retain(|t| !t.is_finished());
        self.topping_up.push(std::thread::spawn(move || {
            let _ = live.top_up(live.pending_new(&new), None);
        }));
    }

    /// At the end of the session: waits for the turns' top-ups, then embeds
    /// the few messages still missing and writes the sidecar, or — when
    /// many are (an import, a first use) — starts `wo context embed`
    /// detached to embed them in the background, as `wo ask` does.
    pub fn finish(
        mut self,
        g: &crate::cli::GlobalOpts,
        state: &wo_format::State,
        state_path: &std::path::Path,
    ) {
        for t in self.topping_up.drain(..) {
            let _ = t.join();
        }
        if let Some(opening) = self.opening.take() {
            self.live = opening.join().ok().flatten();
        }
        let Some(live) = self.live else {
            return;
        };
        let pending = live.pending(state, usize::MAX);
        if pending.len() > EMBED_INLINE {
            let _ = super::session::spawn_detached(g, state_path, &["context", "embed", "--quiet"]);
            return;
        }
        let _ = live.top_up(pending, None);
    }
}
