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
//! `Store::transact` and hands each committer the one outcome, then does
//! the same for what queued meanwhile, until nothing is left. Committers
//! either block for their verdict ([`GroupCommit::commit`]) or, from async
//! code, queue with [`GroupCommit::submit`] and await it: only the leader
//! holds a thread, so a hundred waiting turns do not hold a hundred. Every member of a batch that was written gets the same
//! verdict: if the write or its fsync fails, every change of the batch
//! fails (none is acknowledged as durable), with the error the store
//! reported; a change refused for its own size gets its own error.
//!
//! The write path is the store's: the batch is one transaction — lock,
//! refresh with outside changes merged, apply each change under its own
//! savepoint (one that breaks a content limit is taken back and refused
//! alone, so one oversized change never fails the turns batched with it),
//! stage, last look, rename, fsyncs. A failed write takes the whole batch
//! back: the store holds exactly what it held before.

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
    /// Delivers the verdict: the batch's outcome, or this change's own
    /// refusal, or a copy of the batch's error.
    fn finish(self: Box<Self>, verdict: Result<&SaveOutcome, &StoreError>);
}

/// Where a committer's verdict goes (a slot it waits on, or a channel).
type Deliver<T> = Box<dyn FnOnce(Result<(T, SaveOutcome), StoreError>) + Send>;

struct Pending<T, F> {
    change: Option<F>,
    value: Option<T>,
    deliver: Option<Deliver<T>>,
    path: PathBuf,
}

impl<T: Send, F: FnOnce(&mut State) -> T + Send> Member for Pending<T, F> {
    fn apply(&mut self, state: &mut State) {
        if let Some(change) = self.change.take() {
            self.value = Some(change(state));
        }
    }

    fn finish(mut self: Box<Self>, verdict: Result<&SaveOutcome, &StoreError>) {
        let result = match (verdict, self.value.take()) {
            (Ok(outcome), Some(value)) => Ok((value, outcome.clone())),
            (Err(e), _) => Err(e.duplicate()),
            // Not applied (cannot happen: a batch applies every member
            // before it writes); reported, never a silent success.
            (Ok(_), None) => Err(aborted(&self.path)),
        };
        if let Some(deliver) = self.deliver.take() {
            deliver(result);
        }
    }
}

impl<T, F> Drop for Pending<T, F> {
    /// A member dropped without a verdict (its batch panicked) is told it
    /// failed, so its committer never waits forever nor reports success.
    fn drop(&mut self) {
        if let Some(deliver) = self.deliver.take() {
            deliver(Err(aborted(&self.path)));
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

    /// Queues `change` for the next write; `deliver` gets its verdict (the
    /// change's value with the outcome once the write holding it is
    /// durable, or the error of that write). Returns true when no write is
    /// in progress: the caller must then run [`GroupCommit::lead`] (on a
    /// thread that may block), which writes this change and everything
    /// queued behind it. Never blocks: an async caller queues, starts a
    /// leader when told to, and awaits its verdict without holding a
    /// thread.
    pub fn submit<T, F>(
        &self,
        change: F,
        deliver: impl FnOnce(Result<(T, SaveOutcome), StoreError>) + Send + 'static,
    ) -> bool
    where
        T: Send + 'static,
        F: FnOnce(&mut State) -> T + Send + 'static,
    {
        let mut queue = lock(&self.queue);
        queue.waiting.push(Box::new(Pending {
            change: Some(change),
            value: None,
            deliver: Some(Box::new(deliver)),
            path: self.path.clone(),
        }));
        !std::mem::replace(&mut queue.leading, true)
    }

    /// Writes batches to `store` until nothing is queued: each batch is
    /// every change queued when it starts, in one `transact`. Call it only
    /// when [`GroupCommit::submit`] said so (one leader at a time). A
    /// panic in a change fails its batch's members and is re-raised here,
    /// after leadership is handed back (the next submitter leads).
    pub fn lead(&self, store: &Mutex<Store>) {
        self.lead_then(store, &|_| {});
    }

    /// [`GroupCommit::lead`], calling `written` after each batch's write
    /// (or failed write) with the store still locked and before any of its
    /// committers hears its verdict: a server publishes the store's state
    /// there for readers that never take the store's lock, so a committer
    /// acknowledged as durable finds its change in what they read next.
    pub fn lead_then(&self, store: &Mutex<Store>, written: &(dyn Fn(&Store) + Sync)) {
        loop {
            let batch = {
                let mut queue = lock(&self.queue);
                // Wakes the blocking committers of the batch just written
                // (under the queue lock: none is between its check and
                // its wait).
                self.done.notify_all();
                if queue.waiting.is_empty() {
                    queue.leading = false;
                    return;
                }
                std::mem::take(&mut queue.waiting)
            };
            if let Err(payload) = write_batch(store, batch, written) {
                let mut queue = lock(&self.queue);
                queue.leading = false;
                let orphans = !queue.waiting.is_empty();
                self.done.notify_all();
                drop(queue);
                if orphans {
                    // Changes queued meanwhile still need a leader.
                    self.lead_after_panic(store, written);
                }
                resume_unwind(payload);
            }
        }
    }

    /// After a panicking batch: writes what was queued behind it, if no
    /// one else leads.
    fn lead_after_panic(&self, store: &Mutex<Store>, written: &(dyn Fn(&Store) + Sync)) {
        let must_lead = {
            let mut queue = lock(&self.queue);
            !std::mem::replace(&mut queue.leading, true)
        };
        if must_lead {
            // A second panic here would be a second broken change: let it
            // propagate from the thread that found it.
            let _ = catch_unwind(AssertUnwindSafe(|| self.lead_then(store, written)));
        }
    }

    /// Applies `change` to `store`'s state and writes it durably, in one
    /// write with every other change committed through this queue at the
    /// same time. Blocks until the write that holds this change is durable
    /// (or failed: then this change is reported failed, like every other
    /// change of its batch). Call it from a thread that may block; when no
    /// write is in progress this thread writes, and keeps writing what
    /// queues behind it until nothing is left.
    ///
    /// `change` runs on whichever thread leads the batch, after the
    /// changes queued before it, on the state as refreshed from disk.
    pub fn commit<T, F>(
        &self,
        store: &Mutex<Store>,
        change: F,
    ) -> Result<(T, SaveOutcome), StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut State) -> T + Send + 'static,
    {
        type Slot<T> = Arc<Mutex<Option<Result<(T, SaveOutcome), StoreError>>>>;
        let slot: Slot<T> = Arc::new(Mutex::new(None));
        let filled = slot.clone();
        let must_lead = self.submit(change, move |verdict| *lock(&filled) = Some(verdict));
        if must_lead {
            self.lead(store);
        }
        // The verdict is set before the leader takes the queue lock to
        // wake waiters, so checking it under that lock misses no wake-up.
        let mut queue = lock(&self.queue);
        loop {
            if let Some(verdict) = lock(&slot).take() {
                return verdict;
            }
            queue = self.done.wait(queue).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Writes one batch: every member applied in order, each checked on its own
/// (one that breaks a limit is taken back and refused alone), one write for
/// the rest, the verdict to each. A panic in a change is caught so the queue
/// goes on (the batch is taken back and its members are told they failed),
/// then re-raised by the leader.
fn write_batch(
    store: &Mutex<Store>,
    mut batch: Vec<Box<dyn Member>>,
    after: &(dyn Fn(&Store) + Sync),
) -> Result<(), Box<dyn Any + Send>> {
    let written = catch_unwind(AssertUnwindSafe(|| {
        let mut store = lock(store);
        let written = store.transact_each(batch.len(), |i, state| batch[i].apply(state));
        after(&store);
        written
    }));
    match written {
        Ok(Ok((refused, outcome))) => {
            for (member, refusal) in batch.into_iter().zip(refused) {
                match refusal {
                    Some(e) => member.finish(Err(&e)),
                    None => member.finish(Ok(&outcome)),
                }
            }
            Ok(())
        }
        Ok(Err(e)) => {
            for member in batch {
                member.finish(Err(&e));
            }
            Ok(())
        }
        // The half-applied batch is taken back at once (readers never see
        // it); dropping the members tells each it failed.
        Err(payload) => {
            lock(store).roll_back();
            Err(payload)
        }
    }
}
