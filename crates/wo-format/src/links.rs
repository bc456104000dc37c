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
//!
//! When the steps form a forest (no cycle, no repeated id — every file the
//! tools write), the cache also keeps each message's depth (the length of
//! its branch) and one jump pointer (Myers' skew-binary scheme: O(1) per
//! appended message, the ancestor at any depth in O(log n) steps), so a
//! [`BranchWalk`] — the branch newest first, walked only as far as a caller
//! reads — can count what it has not walked (how many messages, which of a
//! few ids are among them, the oldest) without walking it: the prompt's
//! recent window reads a few dozen turns of a 100k-message branch.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::iter::Rev;
use std::sync::OnceLock;

use crate::model::Message;

/// No next step.
const NONE: u32 = u32::MAX;

/// The maps of id hashes: the key is already a seeded hash of the id
/// ([`Links::id_hash`]), so it is its own bucket hash. Hashing it again
/// (std's SipHash) was a third of building the links at 100k messages.
type IdHashes = BuildHasherDefault<AlreadyHashed>;

/// A [`Hasher`] for keys that are hashes: the `u64` given is the result.
#[derive(Default)]
struct AlreadyHashed(u64);

impl Hasher for AlreadyHashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed here; anything else is still hashed
        // (never taken as-is) so the type stays correct for any key.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
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

    /// The links if a walk built them already (never builds them).
    pub(crate) fn built(&self) -> Option<&Links> {
        self.0.get().and_then(Option::as_ref)
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
    /// Hashes ids for `by_id` and `dangling`: seeded once per process (a
    /// file's ids cannot be chosen to collide in the maps: no quadratic
    /// build), and several times faster than SipHash on short ids.
    hasher: foldhash::fast::RandomState,
    /// Id hash → position of the last message with that id.
    by_id: HashMap<u64, u32, IdHashes>,
    /// For each message, the position its walk goes to next ([`NONE`]: it
    /// ends there).
    next: Vec<u32>,
    /// The latest unlinked message (`Message::is_unlinked`: the implicit
    /// chain's end).
    last_parentless: Option<u32>,
    /// Hashes of parents that name no message: appending a message with
    /// such an id changes an earlier message's step.
    dangling: HashSet<u64, IdHashes>,
    /// Two messages share an id (a hand-edited file): `by_id` then holds
    /// the last of them only. (An append never makes one: it drops the
    /// cache instead.)
    repeated: bool,
    /// Depths and jump pointers; `None` when the steps are not a forest
    /// (a cycle, or an id repeated, so an id does not name one message).
    tree: Option<Tree>,
}

/// Each message's depth (messages on its branch, itself included: a root
/// has 1) and jump pointer (an ancestor, or itself for a root), indexed like
/// [`Links::next`].
#[derive(Debug, Default)]
struct Tree {
    depth: Vec<u32>,
    jump: Vec<u32>,
}

impl Tree {
    /// Records message `v` whose step is `parent` (already recorded).
    fn add(&mut self, v: u32, parent: u32) {
        let (depth, jump) = if parent == NONE {
            (1, v)
        } else {
            let p = parent as usize;
            let j = self.jump[p] as usize;
            let jj = self.jump[j] as usize;
            // Skew-binary jumps: two equal jumps above combine into one.
            let jump = if self.depth[p] - self.depth[j] == self.depth[j] - self.depth[jj] {
                jj as u32
            } else {
                parent
            };
            (self.depth[p] + 1, jump)
        };
        let v = v as usize;
        if self.depth.len() <= v {
            self.depth.resize(v + 1, 0);
            self.jump.resize(v + 1, 0);
        }
        self.depth[v] = depth;
        self.jump[v] = jump;
    }

    /// The ancestor of `v` (or `v`) at `depth` (1 ..= depth of `v`).
    fn ancestor_at(&self, next: &[u32], mut v: u32, depth: u32) -> u32 {
        while self.depth[v as usize] > depth {
            let j = self.jump[v as usize];
            v = if self.depth[j as usize] >= depth {
                j
            } else {
                next[v as usize]
            };
        }
        v
    }

    /// Depths and jumps for `next`, or `None` if it has a cycle. Each
    /// message is recorded after its parent (steps may point forward in a
    /// hand-edited file).
    fn build(next: &[u32]) -> Option<Tree> {
        let n = next.len();
        let mut tree = Tree {
            depth: vec![0; n],
            jump: vec![0; n],
        };
        // 0: not reached, 1: on the chain being followed, 2: recorded.
        let mut mark = vec![0u8; n];
        let mut chain = Vec::new();
        for start in 0..n {
            let mut v = start as u32;
            while v != NONE && mark[v as usize] == 0 {
                mark[v as usize] = 1;
                chain.push(v);
                v = next[v as usize];
            }
            if v != NONE && mark[v as usize] == 1 {
                return None; // a cycle
            }
            while let Some(u) = chain.pop() {
                tree.add(u, next[u as usize]);
                mark[u as usize] = 2;
            }
        }
        Some(tree)
    }
}

impl Links {
    fn build(messages: &[Message]) -> Option<Links> {
        let n = u32::try_from(messages.len()).ok().filter(|&n| n < NONE)?;
        let hasher = foldhash::fast::RandomState::default();
        let mut by_id: HashMap<u64, u32, IdHashes> =
            HashMap::with_capacity_and_hasher(n as usize, IdHashes::default());
        let mut repeated = false;
        for (i, m) in messages.iter().enumerate() {
            if let Some(j) = by_id.insert(hasher.hash_one(m.id.as_str()), i as u32) {
                if messages[j as usize].id != m.id {
                    return None; // two ids share a hash: walk uncached
                }
                repeated = true;
            }
        }
        let mut links = Links {
            hasher,
            by_id,
            next: Vec::with_capacity(n as usize),
            last_parentless: None,
            dangling: HashSet::default(),
            repeated,
            tree: None,
        };
        for (i, m) in messages.iter().enumerate() {
            let step = links.step(messages, m);
            links.next.push(step);
            if m.is_unlinked() {
                links.last_parentless = Some(i as u32);
            }
        }
        if !repeated {
            links.tree = Tree::build(&links.next);
        }
        Some(links)
    }

    fn id_hash(&self, id: &str) -> u64 {
        self.hasher.hash_one(id)
    }

    /// The position of the message with `id` (the last one, as the
    /// uncached walk's map gives).
    fn position(&self, messages: &[Message], id: &str) -> Option<u32> {
        self.by_id
            .get(&self.id_hash(id))
            .copied()
            .filter(|&j| messages.get(j as usize).is_some_and(|m| m.id == id))
    }

    /// Where the message with `id` is, when no id repeats (then the first
    /// message with it is the only one); `None` inside when one does.
    pub(crate) fn unique_position(&self, messages: &[Message], id: &str) -> Option<Option<u32>> {
        (!self.repeated).then(|| self.position(messages, id))
    }

    /// Whether two messages share an id.
    pub(crate) fn repeats_ids(&self) -> bool {
        self.repeated
    }

    /// Whether some message has `id`.
    pub(crate) fn contains(&self, messages: &[Message], id: &str) -> bool {
        self.position(messages, id).is_some()
    }

    /// The step from `m`, the message after `messages[..self.next.len()]`
    /// (`by_id` already holds every id the step may name).
    fn step(&mut self, messages: &[Message], m: &Message) -> u32 {
        let previous_parentless = self.last_parentless.unwrap_or(NONE);
        match &m.parent {
            Some(p) => match self.position(messages, p) {
                Some(j) => j,
                None => {
                    self.dangling.insert(self.id_hash(p));
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
        let h = self.id_hash(&message.id);
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
        if message.is_unlinked() {
            self.last_parentless = Some(n);
        }
        if step == n {
            self.tree = None; // its own parent: a cycle
        } else if let Some(tree) = &mut self.tree {
            tree.add(n, step);
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

    /// [`BranchWalk`] over these links, lazy when they form a forest.
    pub(crate) fn walk<'m>(&'m self, messages: &'m [Message], leaf: &str) -> BranchWalk<'m> {
        match &self.tree {
            Some(tree) => BranchWalk(Walk::Lazy {
                messages,
                next: &self.next,
                tree,
                links: self,
                cur: self.position(messages, leaf).unwrap_or(NONE),
            }),
            None => BranchWalk::eager(self.branch(messages, leaf)),
        }
    }
}

/// The branch to a leaf, newest first (the leaf, its parent, …): the
/// messages of [`crate::State::branch`] in reverse, walked only as far as
/// it is read. What is left can be counted without walking it
/// ([`BranchWalk::rest_excluding`]).
pub struct BranchWalk<'m>(Walk<'m>);

enum Walk<'m> {
    /// Over the cached links of a forest.
    Lazy {
        messages: &'m [Message],
        next: &'m [u32],
        tree: &'m Tree,
        links: &'m Links,
        /// The next message to yield ([`NONE`]: the walk is over).
        cur: u32,
    },
    /// The whole branch, walked already (no cache, or not a forest).
    Eager(Rev<std::vec::IntoIter<&'m Message>>),
}

impl<'m> BranchWalk<'m> {
    /// A walk over `branch` (oldest first, as `State::branch` gives it).
    pub(crate) fn eager(branch: Vec<&'m Message>) -> Self {
        BranchWalk(Walk::Eager(branch.into_iter().rev()))
    }

    /// The messages not yet walked whose id is not in `skip`: how many, and
    /// the oldest of them. From the links' depths and jumps when cached
    /// (O(|skip| log n)), else by reading the rest of the branch.
    pub fn rest_excluding(&self, skip: &HashSet<&str>) -> (usize, Option<&'m Message>) {
        match &self.0 {
            Walk::Lazy {
                messages,
                next,
                tree,
                links,
                cur,
            } => {
                if *cur == NONE {
                    return (0, None);
                }
                let depth = tree.depth[*cur as usize];
                // Ids are unique in a forest: each skipped id is at most
                // one message, left to walk if it is an ancestor of `cur`.
                let on_rest = |p: u32| {
                    let d = tree.depth[p as usize];
                    d <= depth && tree.ancestor_at(next, *cur, d) == p
                };
                let skipped = skip
                    .iter()
                    .filter_map(|id| links.position(messages, id))
                    .filter(|&p| on_rest(p))
                    .count();
                let left = depth as usize - skipped;
                let oldest = (left > 0)
                    .then(|| {
                        (1..=depth)
                            .map(|d| &messages[tree.ancestor_at(next, *cur, d) as usize])
                            .find(|m| !skip.contains(m.id.as_str()))
                    })
                    .flatten();
                (left, oldest)
            }
            Walk::Eager(rest) => {
                let mut left = 0;
                let mut oldest = None;
                for m in rest.clone().filter(|m| !skip.contains(m.id.as_str())) {
                    left += 1;
                    oldest = Some(m);
                }
                (left, oldest)
            }
        }
    }
}

impl<'m> Iterator for BranchWalk<'m> {
    type Item = &'m Message;

    fn next(&mut self) -> Option<&'m Message> {
        match &mut self.0 {
            Walk::Lazy {
                messages,
                next,
                cur,
                ..
            } => {
                if *cur == NONE {
                    return None;
                }
                let m = &messages[*cur as usize];
                *cur = next[*cur as usize];
                Some(m)
            }
            Walk::Eager(rest) => rest.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use crate::model::Message;
    use crate::state::State;
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
                    // A lookup by id, before and after a walk built the
                    // links, finds the first message with it (repeated or
                    // not), as a scan does.
                    let first = s.messages().iter().find(|m| &m.id == leaf).map(|m| m as *const Message);
                    prop_assert_eq!(s.message(leaf).map(|m| m as *const Message), first, "lookup {}", leaf);
                    let a: Vec<*const Message> = s.branch(leaf).into_iter().map(|m| m as *const _).collect();
                    let b: Vec<*const Message> = s.branch_uncached(leaf).into_iter().map(|m| m as *const _).collect();
                    prop_assert_eq!(&a, &b, "leaf {}", leaf);
                    // The lazy walk is the branch newest first; what it has
                    // not walked is counted as reading it would count it,
                    // after every prefix and for several sets of skipped ids.
                    let walked: Vec<*const Message> = s.branch_walk(leaf).map(|m| m as *const _).collect();
                    let newest_first: Vec<*const Message> = b.iter().rev().copied().collect();
                    prop_assert_eq!(&walked, &newest_first, "walk from {}", leaf);
                    prop_assert_eq!(s.message(leaf).map(|m| m as *const Message), first, "lookup {} after a walk", leaf);
                    let rev: Vec<&Message> = s.branch_uncached(leaf).into_iter().rev().collect();
                    for k in 0..=rev.len() {
                        let mut walk = s.branch_walk(leaf);
                        for _ in 0..k {
                            walk.next();
                        }
                        for modulus in [1usize, 2, 3, 7] {
                            let skip: HashSet<&str> = s.messages().iter().enumerate()
                                .filter(|(i, _)| i % modulus == 1 % modulus)
                                .map(|(_, m)| m.id.as_str())
                                .chain(["m_nosuch"])
                                .collect();
                            let rest: Vec<&Message> = rev[k..].iter().copied()
                                .filter(|m| !skip.contains(m.id.as_str())).collect();
                            let (left, oldest) = walk.rest_excluding(&skip);
                            prop_assert_eq!(left, rest.len(), "leaf {} after {}", leaf, k);
                            prop_assert_eq!(
                                oldest.map(|m| m as *const Message),
                                rest.last().map(|m| *m as *const Message),
                                "oldest, leaf {} after {}", leaf, k
                            );
                        }
                    }
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
                let known = s.messages().iter().any(|o| o.id == m.id);
                let pushed = s.push_message(m.clone());
                prop_assert_eq!(pushed, !known, "push of {}", &m.id);
                if !pushed {
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

#[cfg(test)]
mod walk_tests {
    use std::collections::HashSet;

    use super::Walk;
    use crate::model::Message;
    use crate::state::State;
    use crate::timestamp::Timestamp;

    /// A long chain with a fork, built by appending as a server does: the
    /// walk is lazy (the forest's depths kept through every append), and
    /// the rest is counted without walking it.
    #[test]
    fn a_long_appended_chain_is_walked_lazily_and_counted() {
        let mut s = State::new(Timestamp::from_unix(1_800_000_000));
        let mut ids: Vec<String> = Vec::new();
        for i in 0..2_000 {
            let mut m = Message::new(
                "u",
                Timestamp::from_unix(1_800_000_001 + i),
                "t",
                format!("<p>m{i}</p>"),
            );
            // One chain, except message 1500 which forks from 1000.
            m.parent = match i {
                0 => None,
                1500 => Some(ids[1000].clone()),
                _ => Some(ids[i as usize - 1].clone()),
            };
            m.id = crate::ids::message_id(&m.username, m.timestamp.as_str(), &m.content);
            ids.push(m.id.clone());
            assert!(s.push_message(m));
            if i == 10 {
                s.branch(&ids[0]); // builds the cache; later appends extend it
            }
        }
        let mut walk = s.branch_walk(&ids[1999]);
        assert!(matches!(walk.0, Walk::Lazy { .. }));
        let newest: Vec<&str> = walk.by_ref().take(3).map(|m| m.id.as_str()).collect();
        assert_eq!(newest, [&ids[1999], &ids[1998], &ids[1997]]);
        // Left: 1996 ..= 1500, then 1000 ..= 0: 497 + 1001 messages.
        let skip: HashSet<&str> = [&ids[0], &ids[1200], &ids[700], &ids[1998]]
            .into_iter()
            .map(String::as_str)
            .collect();
        let (left, oldest) = walk.rest_excluding(&skip);
        assert_eq!(
            left,
            497 + 1001 - 2,
            "ids 0 and 700 are left, 1200 is off the branch"
        );
        assert_eq!(oldest.map(|m| m.id.as_str()), Some(ids[1].as_str()));
        assert_eq!(walk.count(), 497 + 1001);
    }
}
