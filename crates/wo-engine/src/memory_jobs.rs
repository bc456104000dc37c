//! The memory queue: exchanges waiting for the interpreter, kept in a small
//! file beside the state file (`.llm.json.memory-jobs`), so that a face can
//! hand the memory step to another process and return as soon as the
//! answer is saved (product §7: memory is never in the way).
//!
//! A job is `pending` until a runner claims it (`running`), then `done`,
//! `failed` (with a reason in plain words) or `cancelled`. One runner works
//! on a file's queue at a time: it holds `.llm.json.memory-run.lock` for as
//! long as it runs, so a job left `running` while nobody holds that lock
//! was interrupted (the runner was killed) and is tried once more. Every
//! change to the queue is made under `.llm.json.memory-jobs.lock` and
//! written atomically. A runner gives up its lock while holding the queue's,
//! after finding nothing pending: a job queued at that moment is seen either
//! by the runner leaving or by the next one started for it.
//!
//! Answers go first. A face answering a question on the file (`wo ask`, a
//! turn of `wo chat`) holds `.llm.json.memory-answering.lock` shared while
//! the model answers; the runner starts a call only once no answer has been
//! in flight for a pause ([`RunContext::answers_quiet`], `[interpreter]
//! pause_seconds`, 10 s by default), and stops a call when an answer starts,
//! the job going back to the queue to start again, from the beginning, at
//! the next quiet moment. Why: a model on the person's own machine (a
//! llama.cpp or llama-cpp-python server, Ollama) answers one request at a
//! time — an interpreter call held the next question up for as long as it
//! ran, and llama-cpp-python even cut one request off for the other — and
//! questions asked one after the other leave no quiet moment, so memory
//! waits for the person to pause. The server does the same in process
//! (`crate::priority`).
//!
//! The files are opened through `wo_durable::project`: a link, a FIFO
//! or a device at one of their names (a project folder may come from
//! anywhere) is never followed, read, waited on or replaced; the queue
//! reads as empty, a change to it fails naming the file and why, and
//! [`Queue::refused_files`] lists them for a face to say so.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use wo_format::Timestamp;
use wo_providers::Provider;
use wo_store::durable::project;

use crate::memory::{Exchange, InterpretError, RememberError, remember};

/// Finished jobs kept for `wo memory status`; older ones are dropped.
const KEEP_FINISHED: usize = 50;
/// The most the queue file is read: far more jobs than ever wait (finished
/// ones are pruned to [`KEEP_FINISHED`]); a larger file is not one wo wrote.
const MAX_QUEUE_BYTES: u64 = 64 << 20;
/// How often a running job checks whether it was cancelled, or an answer
/// started.
const CANCEL_POLL: Duration = Duration::from_millis(200);

/// Where a job stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    /// Queued; no runner has claimed it yet.
    Pending,
    /// A runner is interpreting it.
    Running,
    /// Interpreted; its operations are in the journal.
    Done,
    /// Nothing was remembered; `reason` says why.
    Failed,
    /// Cancelled before it finished; nothing was remembered.
    Cancelled,
}

impl JobStatus {
    /// The status as `wo memory status` and the queue file spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Pending => "pending",
            JobStatus::Running => "running",
            JobStatus::Done => "done",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled => "cancelled",
        }
    }
}

/// One exchange waiting for (or done with) the interpreter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// The exchange: its answer's message id.
    pub exchange: String,
    /// The question's message id.
    pub question: String,
    /// The configured provider that interprets it.
    pub provider: String,
    /// When it was queued.
    pub queued: Timestamp,
    /// Where it stands.
    pub status: JobStatus,
    /// When a runner claimed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<Timestamp>,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<Timestamp>,
    /// Why it failed or was cancelled, in plain words; for a done job, what
    /// it remembered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How many operations were recorded (done jobs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operations: Option<usize>,
    /// The process that claimed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// How many runners have claimed it (an interrupted run is retried once).
    #[serde(default)]
    pub attempts: u32,
    /// Someone asked to cancel it while it ran.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancel: bool,
    /// A failure was shown to the person once (by a later `wo ask`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reported: bool,
}

impl Job {
    /// A pending job for `exchange`, interpreted by `provider`.
    pub fn new(exchange: &Exchange, provider: &str) -> Self {
        Job {
            exchange: exchange.answer_id.clone(),
            question: exchange.question_id.clone(),
            provider: provider.to_owned(),
            queued: Timestamp::now(),
            status: JobStatus::Pending,
            started: None,
            finished: None,
            reason: None,
            operations: None,
            pid: None,
            attempts: 0,
            cancel: false,
            reported: false,
        }
    }
}

#[derive(Default, Serialize, Deserialize)]
struct QueueFile {
    jobs: Vec<Job>,
}

/// The queue file of the state file at `state_path`.
pub fn queue_path(state_path: &Path) -> PathBuf {
    beside(state_path, "memory-jobs")
}

fn beside(state_path: &Path, what: &str) -> PathBuf {
    let name = state_path
        .file_name()
        .map_or_else(|| "llm.json".into(), |n| n.to_string_lossy().into_owned());
    state_path.with_file_name(format!(".{name}.{what}"))
}

fn io_err(path: &Path, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// A lock beside the state file, created when missing (0600), never
/// through a link, never waiting on a FIFO (see `project::open_lock_file`).
fn open_lock(path: &Path) -> std::io::Result<File> {
    project::open_lock_file(path)
}

/// The queue of one state file; every change is made under its lock.
#[derive(Clone, Debug)]
pub struct Queue {
    path: PathBuf,
    lock: PathBuf,
    run_lock: PathBuf,
    answering_lock: PathBuf,
}

/// An answer in flight on a queue's file (see [`Queue::answering`]): the
/// runner holds its interpreter calls back until it is dropped, and for a
/// pause after ([`RunContext::answers_quiet`]).
#[derive(Debug)]
pub struct Answering(Option<File>);

impl Drop for Answering {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            // The quiet moment counts from here (the runner reads it).
            let _ = f.set_modified(std::time::SystemTime::now());
            let _ = f.unlock();
        }
    }
}

impl Queue {
    /// The queue of the state file at `state_path`.
    pub fn of(state_path: &Path) -> Self {
        Queue {
            path: queue_path(state_path),
            lock: beside(state_path, "memory-jobs.lock"),
            run_lock: beside(state_path, "memory-run.lock"),
            answering_lock: beside(state_path, "memory-answering.lock"),
        }
    }

    /// The files the queue keeps beside the state file: the queue itself
    /// and its three locks (never committed: they describe this machine's
    /// work in progress).
    pub fn files(&self) -> [&Path; 4] {
        [&self.path, &self.lock, &self.run_lock, &self.answering_lock]
    }

    /// Marks an answer in flight until the returned guard is dropped, for a
    /// runner of this queue to give way to it. Best effort and never in the
    /// answer's way: where no runner ever ran (no lock file) there is no
    /// one to tell, and a lock that cannot be opened or taken at once (a
    /// link or a FIFO planted at its name, another process holding it)
    /// tells nobody.
    pub fn answering(&self) -> Answering {
        if self.answering_lock.symlink_metadata().is_err() {
            return Answering(None);
        }
        let Ok(f) = open_lock(&self.answering_lock) else {
            return Answering(None);
        };
        // The runner holds it alone only for the instant of a look.
        for _ in 0..50 {
            match f.try_lock_shared() {
                Ok(()) => return Answering(Some(f)),
                Err(std::fs::TryLockError::WouldBlock) => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(std::fs::TryLockError::Error(_)) => break,
            }
        }
        Answering(None)
    }

    /// Whether no answer is in flight on the file, and none ended less
    /// than `quiet` ago. A lock that cannot be looked at (a link, a FIFO)
    /// counts as quiet: memory is never held back for ever by it; an end
    /// dated in the future counts as long past.
    pub fn answers_quiet(&self, quiet: Duration) -> bool {
        // Opened, never created: looking changes nothing.
        let Ok(f) = project::open_regular_file(&self.answering_lock) else {
            return true;
        };
        match f.try_lock() {
            Ok(()) => {
                let _ = f.unlock();
            }
            Err(std::fs::TryLockError::WouldBlock) => return false,
            Err(std::fs::TryLockError::Error(_)) => return true,
        }
        let ended = f.metadata().and_then(|m| m.modified());
        match ended.map(|t| std::time::SystemTime::now().duration_since(t)) {
            Ok(Ok(since)) => since >= quiet,
            _ => true,
        }
    }

    /// The jobs, oldest first. A missing file is an empty queue; a damaged
    /// one (not written by wo) reads as empty and is replaced by the next
    /// change — it is a work list, never the only copy of anything.
    /// A queue file that is a link or not a regular file reads as empty
    /// too, and is never read ([`Queue::refused_files`] says why).
    pub fn jobs(&self) -> Vec<Job> {
        self.read_jobs().unwrap_or_default()
    }

    /// [`Queue::jobs`], or why the queue file cannot be read (a link, a FIFO,
    /// a device, too large: never followed nor waited on, never replaced).
    fn read_jobs(&self) -> std::io::Result<Vec<Job>> {
        match project::read_regular_file(&self.path, MAX_QUEUE_BYTES) {
            Ok(bytes) => Ok(serde_json::from_slice::<QueueFile>(&bytes)
                .map(|q| q.jobs)
                .unwrap_or_default()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// The queue's files (the queue, its lock, the runner's lock) that are
    /// there but are not regular files — a symbolic link, a FIFO, a device —
    /// each as one line naming the file and why. wo leaves them as they are
    /// and queues nothing while one is there.
    pub fn refused_files(&self) -> Vec<String> {
        [&self.path, &self.lock, &self.run_lock]
            .into_iter()
            .filter_map(|p| project::check_regular_or_missing(p).err())
            .map(|e| {
                let Some(refused) = project::refusal(&e) else {
                    return e.to_string();
                };
                let what = match &refused.why {
                    project::Refusal::Symlink => "is a symbolic link".to_owned(),
                    why => why.to_string(),
                };
                format!(
                    "{}: {what}; wo neither follows nor replaces it, and queues nothing for \
                     the interpreter while it is there (moved aside, a new one is made)",
                    refused.path.display()
                )
            })
            .collect()
    }

    /// Runs `change` on the jobs under the queue's lock and writes them back
    /// atomically when it returns `true`.
    fn update<T>(&self, change: impl FnOnce(&mut Vec<Job>) -> (T, bool)) -> std::io::Result<T> {
        let lock = open_lock(&self.lock)?;
        lock.lock().map_err(|e| io_err(&self.lock, e))?;
        let mut jobs = self.read_jobs()?;
        let (out, changed) = change(&mut jobs);
        if changed {
            prune(&mut jobs);
            let bytes = serde_json::to_vec_pretty(&QueueFile { jobs })
                .map_err(|e| io_err(&self.path, e.into()))?;
            wo_store::write_atomic(&self.path, &[&bytes]).map_err(|e| io_err(&self.path, e))?;
        }
        Ok(out)
    }

    /// Queues `job` (an exchange already queued and not finished is not
    /// queued twice).
    pub fn push(&self, job: Job) -> std::io::Result<()> {
        // A runner could never take it: its lock cannot be opened.
        project::check_regular_or_missing(&self.run_lock)?;
        self.update(|jobs| {
            let queued = jobs.iter().any(|j| {
                j.exchange == job.exchange
                    && matches!(j.status, JobStatus::Pending | JobStatus::Running)
            });
            if !queued {
                jobs.push(job);
            }
            ((), !queued)
        })
    }

    /// Cancels the unfinished jobs whose exchange starts with `prefix` (all
    /// with `None`): a pending one at once, a running one as soon as its
    /// runner sees the request. Returns the exchanges cancelled.
    pub fn cancel(&self, prefix: Option<&str>) -> std::io::Result<Vec<String>> {
        // Not `exists()`: a link (dangling or not) is refused by `update`.
        if self.path.symlink_metadata().is_err() {
            return Ok(Vec::new());
        }
        self.update(|jobs| {
            let mut hit = Vec::new();
            for j in jobs.iter_mut() {
                if !prefix.is_none_or(|p| j.exchange.starts_with(p)) {
                    continue;
                }
                match j.status {
                    JobStatus::Pending => {
                        j.status = JobStatus::Cancelled;
                        j.finished = Some(Timestamp::now());
                        j.reason = Some("cancelled before it started".into());
                        hit.push(j.exchange.clone());
                    }
                    JobStatus::Running if !j.cancel => {
                        j.cancel = true;
                        hit.push(j.exchange.clone());
                    }
                    _ => {}
                }
            }
            let changed = !hit.is_empty();
            (hit, changed)
        })
    }

    /// The failed jobs not yet shown to the person, marked shown: a later
    /// command reports each failure once.
    pub fn take_unreported_failures(&self) -> std::io::Result<Vec<Job>> {
        // Most turns have no queue: nothing is created for them.
        if self.path.symlink_metadata().is_err() {
            return Ok(Vec::new());
        }
        self.update(|jobs| {
            let mut out = Vec::new();
            for j in jobs.iter_mut() {
                if j.status == JobStatus::Failed && !j.reported {
                    j.reported = true;
                    out.push(j.clone());
                }
            }
            let changed = !out.is_empty();
            (out, changed)
        })
    }

    /// Whether a runner holds the queue now.
    pub fn runner_active(&self) -> bool {
        // Opened, never created: a file that never had a runner has none
        // (nor has one whose lock is a link or a FIFO: none could start).
        let Ok(f) = project::open_regular_file(&self.run_lock) else {
            return false;
        };
        match f.try_lock() {
            Ok(()) => {
                let _ = f.unlock();
                false
            }
            Err(_) => true,
        }
    }

    /// Becomes the queue's runner, or `None` when another process is.
    pub fn start_runner(&self) -> std::io::Result<Option<Runner>> {
        let f = open_lock(&self.run_lock)?;
        match f.try_lock() {
            Ok(()) => Ok(Some(Runner {
                queue: self.clone(),
                held: Some(f),
            })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(io_err(&self.run_lock, e)),
        }
    }

    fn cancel_requested(&self, exchange: &str) -> bool {
        self.jobs()
            .iter()
            .any(|j| j.exchange == exchange && j.status == JobStatus::Running && j.cancel)
    }
}

/// Drops the oldest finished jobs beyond [`KEEP_FINISHED`].
fn prune(jobs: &mut Vec<Job>) {
    let finished = jobs
        .iter()
        .filter(|j| !matches!(j.status, JobStatus::Pending | JobStatus::Running))
        .count();
    let mut drop = finished.saturating_sub(KEEP_FINISHED);
    jobs.retain(|j| {
        if drop > 0 && !matches!(j.status, JobStatus::Pending | JobStatus::Running) {
            drop -= 1;
            false
        } else {
            true
        }
    });
}

/// The one process working on a queue (see [`Queue::start_runner`]).
pub struct Runner {
    queue: Queue,
    held: Option<File>,
}

impl Runner {
    /// Claims the oldest pending job (marked running by this process), or,
    /// with nothing pending, gives up the runner's lock and returns `None`.
    /// A job left running by a runner that was killed is tried once more,
    /// then failed.
    pub fn claim(&mut self) -> std::io::Result<Option<Job>> {
        if self.held.is_none() {
            return Ok(None);
        }
        let pid = std::process::id();
        let claimed = self.queue.update(|jobs| {
            let mut changed = false;
            // This process holds the runner's lock: a job still running
            // belongs to a runner that died.
            for j in jobs.iter_mut().filter(|j| j.status == JobStatus::Running) {
                changed = true;
                if j.cancel || j.attempts >= 2 {
                    j.status = if j.cancel {
                        JobStatus::Cancelled
                    } else {
                        JobStatus::Failed
                    };
                    j.finished = Some(Timestamp::now());
                    j.reason =
                        Some("the background process stopped before it finished, twice".into());
                } else {
                    j.status = JobStatus::Pending;
                }
            }
            match jobs.iter_mut().find(|j| j.status == JobStatus::Pending) {
                Some(j) => {
                    j.status = JobStatus::Running;
                    j.started = Some(Timestamp::now());
                    j.pid = Some(pid);
                    j.attempts += 1;
                    (Some(j.clone()), true)
                }
                None => {
                    // Under the queue's lock: a job pushed after this finds
                    // no runner and starts one.
                    if let Some(f) = self.held.take() {
                        let _ = f.unlock();
                    }
                    (None, changed)
                }
            }
        })?;
        Ok(claimed)
    }

    /// Puts `job` back in the queue, pending, as if never claimed: its call
    /// was dropped for an answer, through no fault of its own.
    pub fn give_back(&self, job: &Job) -> std::io::Result<()> {
        self.queue.update(|jobs| {
            if let Some(j) = jobs
                .iter_mut()
                .find(|j| j.exchange == job.exchange && j.status == JobStatus::Running)
            {
                j.status = JobStatus::Pending;
                j.started = None;
                j.pid = None;
                j.attempts = j.attempts.saturating_sub(1);
            }
            ((), true)
        })
    }

    /// Records how `job` ended.
    pub fn finish(
        &self,
        job: &Job,
        status: JobStatus,
        reason: Option<String>,
        operations: Option<usize>,
    ) -> std::io::Result<()> {
        self.queue.update(|jobs| {
            if let Some(j) = jobs
                .iter_mut()
                .find(|j| j.exchange == job.exchange && j.status == JobStatus::Running)
            {
                j.status = status;
                j.finished = Some(Timestamp::now());
                j.reason = reason;
                j.operations = operations;
            }
            ((), true)
        })
    }
}

/// What a finished job came to, in the queue's words.
pub struct Outcome {
    /// Done, failed or cancelled.
    pub status: JobStatus,
    /// Why, in plain words (what was remembered, for a done job).
    pub reason: Option<String>,
    /// Operations recorded.
    pub operations: Option<usize>,
}

/// Builds the configured provider of a name (the face's config), or says
/// why it cannot.
pub type ProviderByName<'a> = &'a dyn Fn(&str) -> Result<Arc<dyn Provider>, String>;

/// What [`run_queue`] needs from its face: the providers by name and the
/// interpreter prompt.
pub struct RunContext<'a> {
    /// Builds the configured provider `name`.
    pub provider: ProviderByName<'a>,
    /// The interpreter prompt in effect.
    pub prompt: &'a str,
    /// The longest one job may take (the call and its retry).
    pub job_timeout: Duration,
    /// How long no answer must have been in flight on the file before a
    /// call starts (`[interpreter] pause_seconds`).
    pub answers_quiet: Duration,
}

/// Runs the queue of `store`'s file until nothing is pending: each job is
/// one interpreter call (and its one retry), started once no answer has
/// been in flight on the file for [`RunContext::answers_quiet`], bounded by
/// [`RunContext::job_timeout`] and the provider's answer limits, cancelled
/// within [`CANCEL_POLL`] of `Queue::cancel`, dropped and queued again when
/// an answer starts, its operations applied in one store transaction.
/// Returns the jobs run with their outcome. `None`: another process is
/// running this queue (it will take new jobs too).
pub async fn run_queue(
    store: &mut wo_store::Store,
    ctx: &RunContext<'_>,
) -> std::io::Result<Option<Vec<(Job, JobStatus)>>> {
    let queue = Queue::of(store.path());
    let Some(mut runner) = queue.start_runner()? else {
        return Ok(None);
    };
    // Made here when missing, so that answers from now on are seen (its
    // date is then the start of the pause).
    let _ = open_lock(&queue.answering_lock);
    let mut ran = Vec::new();
    loop {
        // Answers go first (see the module docs): a call starts only at a
        // quiet moment; the jobs stay pending meanwhile.
        while queue.jobs().iter().any(|j| j.status == JobStatus::Pending)
            && !queue.answers_quiet(ctx.answers_quiet)
        {
            tokio::time::sleep(CANCEL_POLL).await;
        }
        let Some(job) = runner.claim()? else { break };
        match run_job(store, &queue, &job, ctx).await {
            Some(outcome) => {
                runner.finish(&job, outcome.status, outcome.reason, outcome.operations)?;
                ran.push((job, outcome.status));
            }
            None => runner.give_back(&job)?,
        }
    }
    Ok(Some(ran))
}

/// One interpreter call for `job`; `None` when an answer started on the
/// file meanwhile and the call was dropped, to be made again.
async fn run_job(
    store: &mut wo_store::Store,
    queue: &Queue,
    job: &Job,
    ctx: &RunContext<'_>,
) -> Option<Outcome> {
    let failed = |reason: String| Outcome {
        status: JobStatus::Failed,
        reason: Some(reason),
        operations: None,
    };
    let provider = match (ctx.provider)(&job.provider) {
        Ok(p) => p,
        Err(e) => {
            return Some(failed(format!(
                "the provider {:?} cannot be used: {e}",
                job.provider
            )));
        }
    };
    let by = format!("{}/{}", provider.name(), provider.default_model());
    let exchange = Exchange {
        question_id: job.question.clone(),
        answer_id: job.exchange.clone(),
    };
    let work = remember(store, provider.as_ref(), &exchange, ctx.prompt, &by);
    let stop = async {
        loop {
            tokio::time::sleep(CANCEL_POLL).await;
            if queue.cancel_requested(&job.exchange) {
                return Stop::Cancelled;
            }
            if !queue.answers_quiet(Duration::ZERO) {
                return Stop::Answering;
            }
        }
    };
    let raced = tokio::time::timeout(ctx.job_timeout, async {
        futures::pin_mut!(work);
        futures::pin_mut!(stop);
        match futures::future::select(work, stop).await {
            futures::future::Either::Left((result, _)) => Ok(result),
            futures::future::Either::Right((stop, _)) => Err(stop),
        }
    })
    .await;
    Some(match raced {
        Err(_) => failed(format!(
            "the interpreter took longer than {} s; nothing was remembered",
            ctx.job_timeout.as_secs()
        )),
        Ok(Err(Stop::Cancelled)) => Outcome {
            status: JobStatus::Cancelled,
            reason: Some("cancelled while the interpreter was running".into()),
            operations: None,
        },
        // An answer started: the call is dropped (nothing was applied:
        // operations are applied only once the reply is whole).
        Ok(Err(Stop::Answering)) => return None,
        Ok(Ok(Ok(record))) => Outcome {
            status: JobStatus::Done,
            reason: Some(summary(&record)),
            operations: Some(record.ops.len()),
        },
        Ok(Ok(Err(RememberError::AlreadyRecorded))) => Outcome {
            status: JobStatus::Done,
            reason: Some("already remembered by another process".into()),
            operations: Some(0),
        },
        Ok(Ok(Err(e))) => failed(plain_reason(&e)),
    })
}

/// Why a running interpreter call was stopped.
enum Stop {
    /// `wo memory cancel` asked for it.
    Cancelled,
    /// An answer started on the file: the call is made again later.
    Answering,
}

fn summary(record: &crate::memory::Record) -> String {
    let e = &record.effect;
    if record.ops.is_empty() {
        return "nothing worth remembering".into();
    }
    format!(
        "{} new, {} resolved, {} used",
        e.created.len(),
        e.resolved.len(),
        e.touched.len()
    )
}

/// Why nothing was remembered, in plain words: never a parser's message
/// (a model's reply that is not valid operations is said to be so).
pub fn plain_reason(e: &RememberError) -> String {
    match e {
        RememberError::Interpret(i) => plain_interpret_reason(i),
        RememberError::Stale(_) => {
            "the file changed while the interpreter ran and its operations no longer apply".into()
        }
        RememberError::Store(s) => format!("the file could not be updated: {s}"),
        RememberError::AlreadyRecorded => "already remembered by another process".into(),
    }
}

/// Why an interpreter call produced nothing, in plain words (see
/// [`plain_reason`]).
pub fn plain_interpret_reason(e: &InterpretError) -> String {
    match e {
        InterpretError::Rejected(ops) => {
            let why = if ops.pointer.is_empty() && ops.reason.starts_with("not one JSON object") {
                "its reply was cut off or was not JSON".to_owned()
            } else if ops.pointer.is_empty() {
                ops.reason.clone()
            } else {
                format!("{} ({})", ops.reason, ops.pointer)
            };
            format!("the interpreter's reply was not usable memory operations: {why}")
        }
        InterpretError::Provider(p) => {
            format!("the interpreter's model could not be reached or failed: {p}")
        }
        InterpretError::NoMessage(id) => {
            format!("the exchange is no longer in the file (message {id})")
        }
        InterpretError::TooLong { prompt, window } => format!(
            "the exchange and the memory entries it is compared with take about {prompt} tokens, \
             too many for the interpreter's model ({window}-token window); \
             a model with a larger window (context_window in its provider's settings) can take it"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::time::Instant;

    fn job() -> Job {
        let exchange = Exchange {
            question_id: "q1".into(),
            answer_id: "a1".into(),
        };
        Job::new(&exchange, "test")
    }

    fn mkfifo(path: &Path) {
        let ok = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(ok.success());
    }

    #[test]
    fn a_link_or_fifo_at_a_queue_file_is_refused_never_followed_nor_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let state = project.join("llm.json");
        let start = Instant::now();
        for (i, name) in [
            ".llm.json.memory-jobs",
            ".llm.json.memory-jobs.lock",
            ".llm.json.memory-run.lock",
        ]
        .into_iter()
        .enumerate()
        {
            for plant in 0..3 {
                let at = project.join(name);
                let target = outside.join(format!("made-{i}-{plant}"));
                match plant {
                    0 => symlink("/dev/zero", &at).unwrap(),
                    1 => symlink(&target, &at).unwrap(),
                    _ => mkfifo(&at),
                }
                let queue = Queue::of(&state);
                assert!(queue.jobs().is_empty());
                assert!(!queue.runner_active());
                let e = queue.push(job()).unwrap_err();
                assert!(e.to_string().contains(name), "{e}");
                let refused = queue.refused_files();
                assert_eq!(refused.len(), 1, "{refused:?}");
                assert!(refused[0].contains(name), "{refused:?}");
                if name.ends_with("run.lock") {
                    let e = queue.start_runner().err().expect("no runner through it");
                    assert!(e.to_string().contains(name), "{e}");
                }
                assert!(!target.exists(), "{name}: created through the link");
                assert!(std::fs::symlink_metadata(&at).is_ok());
                std::fs::remove_file(&at).unwrap();
                // Gone, the queue works again.
                queue.push(job()).unwrap();
                assert_eq!(queue.jobs().len(), 1);
                for name in [
                    ".llm.json.memory-jobs",
                    ".llm.json.memory-jobs.lock",
                    ".llm.json.memory-run.lock",
                ] {
                    let _ = std::fs::remove_file(project.join(name));
                }
            }
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    }
}
