//! Transcript versions: what a cache kept beside a [`State`](crate::State) (the recall
//! index of a long-lived server) records of the messages it saw, and the
//! bookkeeping that later says whether they are unchanged, only appended to.
//! Below the state, which holds a [`TranscriptLog`] and updates it at each
//! change.
//!

/// Names the contents of a state's transcript at one moment: its first
/// `len` messages as they were then. A cache kept beside a state (the
/// recall index of a long-lived server) records the version it reflects,
/// and [`State::unchanged_since`](crate::State::unchanged_since) tells it later whether those messages are
/// still exactly what it saw, so it only has to take in what was appended.
/// Process-local: never stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TranscriptVersion {
    /// Messages covered (a prefix of the transcript).
    pub len: usize,
    /// Unique in this process: drawn afresh at every change.
    stamp: u64,
}

/// The bookkeeping behind [`TranscriptVersion`]: `base` names the
/// transcript as it was after the last change that could touch any message
/// (a parse, [`State::messages_mut`](crate::State::messages_mut), a re-sort); `log` holds the versions
/// handed out since, each valid for the prefix it names, the current one
/// last. Only versions someone took are kept (`observed`), so a merge that
/// appends a thousand messages adds one entry, not a thousand. Clones keep
/// the stamps they were cloned with and draw new ones for their own
/// changes, so two diverging copies never share a version they do not both
/// hold.
#[derive(Debug)]
pub(crate) struct TranscriptLog {
    base: u64,
    log: Vec<LoggedVersion>,
    /// The current version was handed out by [`State::transcript_version`](crate::State::transcript_version).
    observed: std::sync::atomic::AtomicBool,
}

impl Clone for TranscriptLog {
    fn clone(&self) -> Self {
        TranscriptLog {
            base: self.base,
            log: self.log.clone(),
            observed: std::sync::atomic::AtomicBool::new(
                self.observed.load(std::sync::atomic::Ordering::Relaxed),
            ),
        }
    }
}

/// A version handed out, and how much of it still holds.
#[derive(Clone, Copy, Debug)]
struct LoggedVersion {
    /// Messages the version covers.
    len: usize,
    /// Its first `valid` messages are still exactly as they were: a
    /// message inserted at `pos` leaves the `pos` before it alone, so a
    /// cache of this version can keep that prefix and redo only the rest.
    valid: usize,
    stamp: u64,
}

/// Versions kept: a cache more this many taken versions behind rebuilds.
const TRANSCRIPT_LOG_LEN: usize = 64;

fn fresh_stamp() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl TranscriptLog {
    pub(crate) fn new() -> Self {
        TranscriptLog {
            base: fresh_stamp(),
            log: Vec::new(),
            observed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Any message may have changed: every earlier version is void.
    pub(crate) fn changed_all(&mut self) {
        self.base = fresh_stamp();
        self.log.clear();
        *self.observed.get_mut() = false;
    }

    /// One message was inserted at `pos` into a transcript of `len_before`
    /// messages: versions covering more than `pos` messages hold only for
    /// their first `pos`.
    pub(crate) fn inserted(&mut self, pos: usize, len_before: usize) {
        let observed = std::mem::take(self.observed.get_mut());
        if self.log.is_empty() {
            if observed {
                self.log.push(LoggedVersion {
                    len: len_before,
                    valid: len_before,
                    stamp: self.base,
                });
            }
        } else if !observed {
            // The current version (always last) was never handed out.
            self.log.pop();
        }
        for v in &mut self.log {
            v.valid = v.valid.min(pos);
        }
        // A version with nothing left that holds is of no use to anyone.
        self.log.retain(|v| v.valid > 0 || v.len == 0);
        if self.log.len() >= TRANSCRIPT_LOG_LEN {
            self.log.remove(0);
        }
        self.log.push(LoggedVersion {
            len: len_before + 1,
            valid: len_before + 1,
            stamp: fresh_stamp(),
        });
    }

    pub(crate) fn current(&self, len: usize) -> TranscriptVersion {
        self.observed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        match self.log.last() {
            // The last entry is always whole: every insertion pushes one.
            Some(v) if v.len == len => TranscriptVersion {
                len,
                stamp: v.stamp,
            },
            _ => TranscriptVersion {
                len,
                stamp: self.base,
            },
        }
    }

    /// How many leading messages of version `v` still hold in a transcript
    /// of `len` messages; `None` when `v` is unknown (void or never of this
    /// state).
    pub(crate) fn held_prefix(&self, v: &TranscriptVersion, len: usize) -> Option<usize> {
        if self.log.is_empty() {
            return (v.len == len && v.stamp == self.base).then_some(len);
        }
        self.log
            .iter()
            .find(|l| l.len == v.len && l.stamp == v.stamp)
            .map(|l| l.valid)
    }
}
