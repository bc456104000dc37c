//! Savepoints: taking back a change to a [`State`](crate::State) exactly.
//!
//! A writer that may refuse a change only after applying it (a limit
//! checked on the result, a disk that is full) must leave the state it
//! holds exactly as it was, or the refused change is written by the next
//! save. Copying a 50 MB transcript before every change would cost more
//! than the change, so a savepoint copies only the small fields (context,
//! truth, unknown fields, bookkeeping) and records how the transcript
//! changes: a message inserted costs its position, a message replaced by
//! [`State::set_message_title`](crate::State::set_message_title) its old copy; only a change through
//! [`State::messages_mut`](crate::State::messages_mut) or a re-sort copies the whole transcript (once,
//! and only while a savepoint is open).
//!
//! Savepoints nest: [`State::savepoint`](crate::State::savepoint) opens one, [`State::release`](crate::State::release)
//! keeps what changed since (folding it into the savepoint below, if any)
//! and [`State::rollback`](crate::State::rollback) takes it back.

use crate::model::{Extra, Message, Truth};
use crate::timestamp::Timestamp;
use crate::transcript::TranscriptLog;

/// One way the transcript changed since a savepoint, in the order done.
#[derive(Clone, Debug)]
pub(crate) enum MessageChange {
    /// A message was inserted at this position.
    Inserted(usize),
    /// The message at this position was replaced; this was it before.
    Replaced(usize, Box<Message>),
    /// Anything may have changed: the whole transcript as it was before.
    All(Vec<Message>),
}

/// What a savepoint needs to restore the state as it was when opened.
#[derive(Clone, Debug)]
pub(crate) struct Savepoint {
    pub(crate) version: u64,
    pub(crate) schema: String,
    pub(crate) date: Timestamp,
    pub(crate) context: String,
    pub(crate) truth: Truth,
    pub(crate) extra: Extra,
    pub(crate) clean_prefix: usize,
    pub(crate) save_token: u64,
    pub(crate) transcript: TranscriptLog,
    pub(crate) changes: Vec<MessageChange>,
    /// `changes` holds an [`MessageChange::All`]: what follows it needs no
    /// record (restoring the copy undoes it too).
    pub(crate) copied: bool,
}

impl Savepoint {
    pub(crate) fn record(&mut self, change: impl FnOnce() -> MessageChange) {
        if !self.copied {
            let change = change();
            self.copied = matches!(change, MessageChange::All(_));
            self.changes.push(change);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::model::{Message, TruthEdit, TruthEntry};
    use crate::{State, Timestamp};

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_unix(1_800_000_000 + s)
    }

    fn sample() -> State {
        let mut s = State::new(ts(0));
        for i in 0..5 {
            s.push_message(Message::new("alec", ts(i * 10), "t", format!("<p>{i}</p>")));
        }
        s.add_truth(TruthEntry::new("entry", ts(1), 0.5, "<p>e</p>"));
        s.mark_saved();
        s
    }

    #[test]
    fn rollback_restores_every_kind_of_change() {
        let mut s = sample();
        let before = s.clone();
        let version = s.transcript_version();
        s.savepoint();
        s.push_message(Message::new("alec", ts(100), "t", "<p>end</p>"));
        s.push_message(Message::new("alec", ts(15), "t", "<p>middle</p>"));
        let id = s.messages()[0].id.clone();
        s.set_message_title(&id, "renamed".into(), ts(200));
        s.context = "<p>changed</p>".into();
        let tid = s.truth.trust[0].id.clone();
        s.edit_truth(&tid, TruthEdit::default(), ts(300));
        s.add_truth(TruthEntry::new("more", ts(2), 0.5, "<p>m</p>"));
        s.messages_mut().pop();
        s.push_message(Message::new("alec", ts(400), "t", "<p>after copy</p>"));
        assert_ne!(s, before);
        assert!(s.rollback());
        assert_eq!(s, before);
        assert_eq!(s.clean_prefix(), before.clean_prefix());
        assert_eq!(s.save_token(), before.save_token());
        assert!(
            s.unchanged_since(&version),
            "versions from before still hold"
        );
        assert_eq!(s.savepoints(), 0);
        assert!(!s.rollback(), "nothing left to roll back");
    }

    #[test]
    fn nested_savepoints_release_into_the_outer_one() {
        let mut s = sample();
        let before = s.clone();
        s.savepoint();
        s.push_message(Message::new("alec", ts(100), "t", "<p>a</p>"));
        let after_a = s.clone();
        s.savepoint();
        s.push_message(Message::new("alec", ts(101), "t", "<p>b</p>"));
        assert!(s.rollback());
        assert_eq!(s, after_a, "the inner change alone was taken back");
        s.savepoint();
        s.push_message(Message::new("alec", ts(5), "t", "<p>c</p>"));
        s.truth.trust.clear();
        assert!(s.release());
        assert_eq!(s.savepoints(), 1);
        assert!(s.rollback());
        assert_eq!(
            s, before,
            "the outer rollback takes back the released change"
        );
    }

    #[test]
    fn release_keeps_the_change() {
        let mut s = sample();
        s.savepoint();
        s.push_message(Message::new("alec", ts(100), "t", "<p>a</p>"));
        let changed = s.clone();
        assert!(s.release());
        assert_eq!(s, changed);
        assert!(!s.release());
    }
}
