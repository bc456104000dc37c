//! Group commit: many threads' changes to one shared [`Store`], written
//! together — one [`Store::transact`] (one atomic write, one fsync of the
//! file and one of its directory) for all the changes that arrived while
//! the previous write was in progress.
//!
//! Why: a server that writes every chat turn durably before acknowledging
//! it pays one fsync per turn when turns are written one after the other;
//! under load the writes queue behind each other (100 concurrent chats
//! waited ~185 ms for their first token, mostly behind other turns'
//! saves). Batching keeps the rule "durable before acknowledged" and pays
//! the disk once per batch.
//!
//! How (the classic leader/follower scheme): a committer queues its change
//! and, if no write is in progress, becomes the leader — it takes every
//! queued change, applies them in arrival order inside one
//! `Store::transact` and hands each committer the one outcome. Committers
//! that queued meanwhile wait; when the leader is done one of them leads
//! the next batch. Every member of a batch gets the same verdict: if the
//! write or its fsync fails, every change of the batch fails (none is
//! acknowledged as durable), with the error the store reported.
//!
//! The write path is unchanged: the batch is one `transact` — lock, refresh
//! with outside changes merged, apply, stage, last look, rename, fsyncs.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use wo_format::State;

use crate::store::{SaveOutcome, Store, StoreError};

/// One change waiting to be written, its value and where its verdict goes.
trait Member: Send {
    /// Applies the change to the state being written.
    fn apply(&mut self, state: &mut State);
    /// Delivers the batch's verdict (the change's value with the outcome,
    /// or a copy of the error).
    fn finish(self: Box<Self>, verdict: &Result<SaveOutcome, StoreError>);
}

/// A committer's verdict, filled by the leader of its batch.
type Slot<T> = Arc<Mutex<Option<Result<(T, SaveOutcome), StoreError>>>>;

struct Pending<T, F> {
    change: Option<F>,
    value: Option<T>,
    slot: Slot<T>,
    path: PathBuf,
}

impl<T: Send, F: FnOnce(&mut State) -> T + Send> Member for Pending<T, F> {
    fn apply(&mut self, state: &mut State) {
        if let Some(change) = self.change.take() {
            self.value = Some(change(state));
        }
    }

    fn finish(mut self: Box<Self>, verdict: &Result<SaveOutcome, StoreError>) {
        let result = match (verdict, self.value.take()) {
            (Ok(outcome), Some(value)) => Ok((value, outcome.clone())),
            (Err(e), _) => Err(e.duplicate()),
            // Not applied (cannot happen: a batch applies every member
            // before it writes); reported, never a silent success.
            (Ok(_), None) => Err(aborted(&self.path)),
        };
        *lock(&self.slot) = Some(result);
    }
}

impl<T, F> Drop for Pending<T, F> {
    /// A member dropped without a verdict (its batch panicked) is told it
    /// failed, so its committer never waits forever nor reports success.
    fn drop(&mut self) {
        let mut slot = lock(&self.slot);
        if slot.is_none() {
            *slot = Some(Err(aborted(&self.path)));
        }
    }
}

fn aborted(path: &Path) -> StoreError {
    StoreError::Write {
        path: path.to_path_buf(),
        source: std::io::Error::other(
            "another change written in the same batch failed unexpectedly; this change was not confirmed written",
        ),
    }
}

/// A poisoned lock only means a panic elsewhere; the data it guards (a
/// queue, a verdict) is still consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Box<dyn Member>>,
    /// A leader is writing a batch now.
    leading: bool,
}

/// The group-commit queue of one shared store. Use one per `Mutex<Store>`;
/// other code may still lock the store and transact directly (it then
/// simply writes between two batches).
pub struct GroupCommit {
    /// The store's file, named by the error of a member whose batch
    /// panicked (taken once: the store's lock is never needed to queue).
    path: PathBuf,
    queue: Mutex<Queue>,
    done: Condvar,
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let q = lock(&self.queue);
        f.debug_struct("GroupCommit")
            .field("waiting", &q.waiting.len())
            .field("leading", &q.leading)
            .finish()
    }
}

impl GroupCommit {
    /// An empty queue for `store` (the store it will be given to
    /// [`GroupCommit::commit`]).
    pub fn new(store: &Store) -> GroupCommit {
        GroupCommit {
            path: store.path().to_path_buf(),
            queue: Mutex::new(Queue::default()),
            done: Condvar::new(),
        }
    }

    /// Changes queued now, waiting for the write in progress to end.
    pub fn queued(&self) -> usize {
        lock(&self.queue).waiting.len()
    }

    /// Applies `change` to `store`'s state and writes it durably, in one
    /// write with every other change committed through this queue at the
    /// same time. Blocks until the write that holds this change is durable
    /// (or failed: then this change is reported failed, like every other
    /// change of its batch). Call it from a thread that may block.
    ///
    /// `change` runs on whichever committer's thread leads the batch, after
    /// the changes queued before it, on the state as refreshed from disk.
    pub fn commit<T, F>(
        &self,
        store: &Mutex<Store>,
        change: F,
    ) -> Result<(T, SaveOutcome), StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut State) -> T + Send + 'static,
    {
        let slot: Slot<T> = Arc::new(Mutex::new(None));
        let path = self.path.clone();
        let mut queue = lock(&self.queue);
        queue.waiting.push(Box::new(Pending {
            change: Some(change),
            value: None,
            slot: slot.clone(),
            path,
        }));
        loop {
            // The verdict is set before the leader takes the queue lock to
            // wake us, so checking it under that lock misses no wake-up.
            if let Some(verdict) = lock(&slot).take() {
                return verdict;
            }
            if !queue.leading {
                // Our change is still queued (a finished batch would have
                // set our verdict): lead the next batch.
                queue.leading = true;
                let batch = std::mem::take(&mut queue.waiting);
                drop(queue);
                let panicked = write_batch(store, batch);
                queue = lock(&self.queue);
                queue.leading = false;
                self.done.notify_all();
                if let Err(payload) = panicked {
                    drop(queue);
                    resume_unwind(payload);
                }
                continue;
            }
            queue = self.done.wait(queue).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Writes one batch: every member applied in order, one transact, the
/// verdict to each. A panic in a change is caught so the queue goes on
/// (the batch's members are told they failed), then re-raised by the
/// leader.
fn write_batch(
    store: &Mutex<Store>,
    mut batch: Vec<Box<dyn Member>>,
) -> Result<(), Box<dyn Any + Send>> {
    let written = catch_unwind(AssertUnwindSafe(|| {
        let mut store = lock(store);
        store
            .transact(|state| {
                for member in batch.iter_mut() {
                    member.apply(state);
                }
            })
            .map(|((), outcome)| outcome)
    }));
    match written {
        Ok(verdict) => {
            for member in batch {
                member.finish(&verdict);
            }
            Ok(())
        }
        // Dropping the members tells each it failed.
        Err(payload) => Err(payload),
    }
}
