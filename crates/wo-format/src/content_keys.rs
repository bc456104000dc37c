//! Each message's content key: a CRC-32 of its speaker and content beside
//! the content's length. The caches kept beside a state file (the recall
//! postings, the embeddings) name a message's text by it, so a message
//! edited since a cache was written is seen as stale there.
//!
//! A [`crate::State`] keeps its transcript's keys between uses, kept up to
//! date as its branch links are (extended by an append, dropped by any
//! other change): a turn at 100k messages reads ~50 MB of text to key them,
//! and it needs them for each cache it checks and for the one it writes.

use std::sync::OnceLock;

use crate::model::Message;

/// The content key of `m`: a CRC-32 of its speaker, 0xFF (never in UTF-8)
/// and its content, in the high half; the content's length in the low.
pub fn content_key(m: &Message) -> u64 {
    let mut crc = crc32fast::Hasher::new();
    crc.update(m.username.as_bytes());
    crc.update(&[0xff]);
    crc.update(m.content.as_bytes());
    (u64::from(crc.finalize()) << 32) | (m.content.len() as u64 & 0xffff_ffff)
}

/// The [`content_key`] of each of `messages`, in order. A long transcript
/// is keyed on several threads; the keys are the same however it is split.
pub fn content_keys(messages: &[Message]) -> Vec<u64> {
    let threads = (messages.len() / KEYS_PER_THREAD).clamp(1, key_threads());
    if threads == 1 {
        return messages.iter().map(content_key).collect();
    }
    let mut out = vec![0u64; messages.len()];
    let share = messages.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let mut parts = out.chunks_mut(share).zip(messages.chunks(share));
        let mine = parts.next();
        for (keys, part) in parts {
            scope.spawn(move || fill(keys, part));
        }
        if let Some((keys, part)) = mine {
            fill(keys, part);
        }
    });
    out
}

/// Below this many messages a thread's share, starting it costs more than
/// it saves.
const KEYS_PER_THREAD: usize = 16_384;

/// Threads [`content_keys`] may use: the cores this process may run on, at
/// most 4 (past that the memory's bandwidth, not the checksum, is the
/// limit).
fn key_threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(4)))
}

fn fill(keys: &mut [u64], messages: &[Message]) {
    for (k, m) in keys.iter_mut().zip(messages) {
        *k = content_key(m);
    }
}

/// The keys as a state holds them: computed on first use.
#[derive(Debug, Default)]
pub(crate) struct KeyCache(OnceLock<Vec<u64>>);

impl Clone for KeyCache {
    /// A copy starts empty (as the branch links do): the cache is not
    /// content.
    fn clone(&self) -> Self {
        KeyCache::default()
    }
}

impl KeyCache {
    /// The keys of `messages`, computed now if need be.
    pub(crate) fn get(&self, messages: &[Message]) -> &[u64] {
        self.0.get_or_init(|| content_keys(messages))
    }

    /// Any message may have changed, or moved.
    pub(crate) fn clear(&mut self) {
        self.0.take();
    }

    /// `message` is about to be appended at the end.
    pub(crate) fn appending(&mut self, message: &Message) {
        if let Some(keys) = self.0.get_mut() {
            keys.push(content_key(message));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{State, Timestamp};

    fn message(i: usize, text: &str) -> Message {
        Message::new(
            ["ann", "bob"][i % 2],
            Timestamp::from_unix(1_700_000_000 + i as i64),
            "t",
            format!("<p>{text} {i}</p>"),
        )
    }

    #[test]
    fn a_long_transcript_keyed_on_several_threads_gets_the_same_keys() {
        let messages: Vec<Message> = (0..3 * KEYS_PER_THREAD + 5)
            .map(|i| message(i, "m"))
            .collect();
        let want: Vec<u64> = messages.iter().map(content_key).collect();
        assert_eq!(content_keys(&messages), want);
        assert_eq!(content_keys(&messages[..7]), want[..7]);
        assert!(content_keys(&[]).is_empty());
    }

    #[test]
    fn the_key_changes_with_speaker_and_content_only() {
        let a = message(1, "m");
        let mut b = a.clone();
        b.title = "another title".into();
        assert_eq!(content_key(&a), content_key(&b));
        b.content = "<p>m 2</p>".into();
        assert_ne!(content_key(&a), content_key(&b));
        let mut c = a.clone();
        c.username = "cy".into();
        assert_ne!(content_key(&a), content_key(&c));
    }

    /// Whatever changes the transcript, the keys a state keeps are the keys
    /// of what it holds: each change below is made after the keys were
    /// read, so a cache left stale by any of them fails here.
    #[test]
    fn a_states_kept_keys_follow_every_change() {
        let fresh = |s: &State| content_keys(s.messages());
        let mut s = State::new(Timestamp::from_unix(1_800_000_000));
        for i in 0..5 {
            assert!(s.push_message(message(i * 10, "first")));
        }
        assert_eq!(s.content_keys(), fresh(&s));
        // Appended at the end: extended.
        assert!(s.push_message(message(100, "appended")));
        assert_eq!(s.content_keys(), fresh(&s));
        // Inserted before the end: recomputed.
        assert!(s.push_message(message(15, "between")));
        assert_eq!(s.content_keys(), fresh(&s));
        // Edited through `messages_mut`.
        s.messages_mut()[2].content = "<p>edited</p>".into();
        assert_eq!(s.content_keys(), fresh(&s));
        // A savepoint's changes rolled back, the keys read in between.
        s.savepoint();
        assert!(s.push_message(message(200, "undone")));
        assert_eq!(s.content_keys(), fresh(&s));
        assert!(s.rollback());
        assert_eq!(s.content_keys(), fresh(&s));
        assert_eq!(s.content_keys().len(), 7);
        // A copy refreshed from a state it copied, then appended to.
        let mut copy = s.clone();
        let version = copy.refresh_copy(&s, None);
        assert_eq!(copy.content_keys(), fresh(&copy));
        assert!(s.push_message(message(300, "later")));
        copy.refresh_copy(&s, Some(&version));
        assert_eq!(copy.content_keys(), fresh(&s));
        // Normalising an out-of-order transcript moves messages.
        s.messages_mut().reverse();
        let _ = s.content_keys();
        s.normalize();
        assert_eq!(s.content_keys(), fresh(&s));
    }
}
