//! The steps of [`crate::State::branch`], kept beside the transcript so that
//! a walk costs its own length, not the transcript's: a server assembling a
//! prompt over 100k messages walks the branch on every turn, and building
//! the id map each time was most of that walk.
//!
//! For each message, [`Links`] holds the position its walk goes to next —
//! computed by exactly the rule of [`crate::State::branch_uncached`] — and
//! the position of every id (the last message with it). The cache is built
//! on the first walk, extended when a message is appended (the state's
//! only changes on the hot path), and dropped on any other change, or when
//! an append would change an earlier message's step (its id repeats one, or
//! it is the missing parent of an earlier message). A proptest holds the
//! cached walk to the uncached one.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::sync::OnceLock;

use crate::model::Message;

/// No next step.
const NONE: u32 = u32::MAX;

fn id_hash(id: &str) -> u64 {
    BuildHasherDefault::<DefaultHasher>::default().hash_one(id)
}

/// The cache as a state holds it: empty until the first walk; `None`
/// inside when the transcript cannot be cached (two ids share a hash, or
/// it has `u32::MAX` messages or more): walks are then uncached.
#[derive(Debug, Default)]
pub(crate) struct LinkCache(OnceLock<Option<Links>>);

impl Clone for LinkCache {
    /// A copy starts empty: it is rebuilt on its first walk (copies are
    /// rare and short-lived; the cache is not content).
    fn clone(&self) -> Self {
        LinkCache::default()
    }
}

impl LinkCache {
    /// The links of `messages`, built now if need be.
    pub(crate) fn get(&self, messages: &[Message]) -> Option<&Links> {
        self.0.get_or_init(|| Links::build(messages)).as_ref()
    }

    /// Any message may have changed.
    pub(crate) fn clear(&mut self) {
        self.0.take();
    }

    /// `message` is about to be appended after `messages`.
    pub(crate) fn appending(&mut self, messages: &[Message], message: &Message) {
        let keep = match self.0.get_mut() {
            Some(Some(links)) => links.append(messages, message),
            // Not built: the first walk builds it with the message in.
            None => true,
            Some(None) => false,
        };
        if !keep {
            self.clear();
        }
    }
}

/// Each message's next step, and where each id is.
#[derive(Debug)]
pub(crate) struct Links {
    /// Id hash → position of the last message with that id.
    by_id: HashMap<u64, u32>,
    /// For each message, the position its walk goes to next ([`NONE`]: it
    /// ends there).
    next: Vec<u32>,
    /// The latest message without a parent (the implicit chain's end).
    last_parentless: Option<u32>,
    /// Hashes of parents that name no message: appending a message with
    /// such an id changes an earlier message's step.
    dangling: HashSet<u64>,
}

impl Links {
    fn build(messages: &[Message]) -> Option<Links> {
        let n = u32::try_from(messages.len()).ok().filter(|&n| n < NONE)?;
        let mut by_id: HashMap<u64, u32> = HashMap::with_capacity(n as usize);
        for (i, m) in messages.iter().enumerate() {
            if let Some(&j) = by_id.get(&id_hash(&m.id))
                && messages[j as usize].id != m.id
            {
                return None; // two ids share a hash: walk uncached
            }
            by_id.insert(id_hash(&m.id), i as u32);
        }
        let mut links = Links {
            by_id,
            next: Vec::with_capacity(n as usize),
            last_parentless: None,
            dangling: HashSet::new(),
        };
        for (i, m) in messages.iter().enumerate() {
            let step = links.step(messages, m);
            links.next.push(step);
            if m.parent.is_none() {
                links.last_parentless = Some(i as u32);
            }
        }
        Some(links)
    }

    /// The position of the message with `id` (the last one, as the
    /// uncached walk's map gives).
    fn position(&self, messages: &[Message], id: &str) -> Option<u32> {
        self.by_id
            .get(&id_hash(id))
            .copied()
            .filter(|&j| messages.get(j as usize).is_some_and(|m| m.id == id))
    }

    /// The step from `m`, the message after `messages[..self.next.len()]`
    /// (`by_id` already holds every id the step may name).
    fn step(&mut self, messages: &[Message], m: &Message) -> u32 {
        let previous_parentless = self.last_parentless.unwrap_or(NONE);
        match &m.parent {
            Some(p) => match self.position(messages, p) {
                Some(j) => j,
                None => {
                    self.dangling.insert(id_hash(p));
                    previous_parentless
                }
            },
            None if m.starts_conversation() => NONE,
            None => previous_parentless,
        }
    }

    /// Takes in `message` appended after `messages`; false when it changes
    /// an earlier message's step (the cache must then be rebuilt).
    fn append(&mut self, messages: &[Message], message: &Message) -> bool {
        let Some(n) = u32::try_from(messages.len()).ok().filter(|&n| n + 1 < NONE) else {
            return false;
        };
        let h = id_hash(&message.id);
        if self.by_id.contains_key(&h) || self.dangling.contains(&h) {
            return false;
        }
        self.by_id.insert(h, n);
        // `position` reads `messages`, which lacks the new message: a
        // parent naming itself is found here instead.
        let step = match &message.parent {
            Some(p) if *p == message.id => n,
            _ => self.step(messages, message),
        };
        self.next.push(step);
        if message.parent.is_none() {
            self.last_parentless = Some(n);
        }
        true
    }

    /// [`crate::State::branch`] over these links.
    pub(crate) fn branch<'m>(&self, messages: &'m [Message], leaf: &str) -> Vec<&'m Message> {
        let mut seen = vec![false; messages.len()];
        let mut path = Vec::new();
        let mut cur = self.position(messages, leaf);
        while let Some(i) = cur {
            let i = i as usize;
            if std::mem::replace(&mut seen[i], true) {
                break; // a cycle in hand-edited parents: stop, never loop
            }
            path.push(&messages[i]);
            cur = Some(self.next[i]).filter(|&j| j != NONE);
        }
        path.reverse();
        path
    }
}

#[cfg(test)]
mod tests {
    use crate::model::{Message, State};
    use crate::timestamp::Timestamp;
    use proptest::prelude::*;

    /// (timestamp offset, parent choice, new conversation, id override)
    type Spec = (i64, u8, bool, Option<u8>);

    fn message(i: usize, spec: &Spec, ids: &[String]) -> Message {
        let (at, parent, new_conv, id) = spec;
        let mut m = Message::new(
            "u",
            Timestamp::from_unix(1_800_000_000 + at),
            "t",
            format!("<p>m{i}</p>"),
        );
        m.parent = match parent % 4 {
            0 => None,
            // An earlier message (or any, for hand-edited files), a
            // missing one, or one appended later.
            1 | 2 if !ids.is_empty() => Some(ids[*parent as usize % ids.len()].clone()),
            3 => Some(format!("m_missing{}", parent % 3)),
            _ => None,
        };
        if let Some(k) = id {
            m.id = format!("m_dup{}", k % 4);
        }
        if *new_conv {
            m.mark_new_conversation();
        }
        if m.parent.is_none() && *new_conv {
            m.mark_new_conversation();
        }
        m
    }

    fn spec() -> impl Strategy<Value = Spec> {
        (
            0i64..50,
            any::<u8>(),
            prop::bool::weighted(0.1),
            prop::option::weighted(0.1, any::<u8>()),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Whatever the parents (missing, repeated ids, cycles, roots) and
        /// however the transcript grew, the cached walk equals the
        /// uncached one from every leaf.
        #[test]
        fn cached_branch_equals_the_definition(
            start in prop::collection::vec(spec(), 0..30),
            later in prop::collection::vec(spec(), 0..12),
            missing_ids in prop::collection::vec(0u8..3, 0..3),
        ) {
            let mut s = State::new(Timestamp::from_unix(1_800_000_000));
            let mut ids: Vec<String> = missing_ids.iter().map(|k| format!("m_missing{k}")).collect();
            for (i, sp) in start.iter().enumerate() {
                let m = message(i, sp, &ids);
                ids.push(m.id.clone());
                s.messages_mut().push(m);
            }
            s.normalize();
            let check = |s: &State| -> Result<(), TestCaseError> {
                let mut leaves: Vec<String> = s.messages().iter().map(|m| m.id.clone()).collect();
                leaves.push("m_missing0".into());
                leaves.push("m_nosuch".into());
                for leaf in &leaves {
                    let a: Vec<*const Message> = s.branch(leaf).into_iter().map(|m| m as *const _).collect();
                    let b: Vec<*const Message> = s.branch_uncached(leaf).into_iter().map(|m| m as *const _).collect();
                    prop_assert_eq!(a, b, "leaf {}", leaf);
                }
                Ok(())
            };
            check(&s)?;
            for (k, sp) in later.iter().enumerate() {
                // Appended (a later timestamp) or inserted before the end.
                let mut m = message(100 + k, sp, &ids);
                if sp.0 % 3 != 0 {
                    m.timestamp = Timestamp::from_unix(1_900_000_000 + k as i64);
                    if sp.3.is_none() {
                        m.id = crate::ids::message_id(&m.username, m.timestamp.as_str(), &m.content);
                    }
                }
                ids.push(m.id.clone());
                if !s.push_message(m.clone()) {
                    // push_message refuses a repeated id: a hand edit adds it.
                    s.messages_mut().push(m);
                    s.normalize();
                }
                check(&s)?;
            }
            let copy = s.clone();
            check(&copy)?;
        }
    }
}
