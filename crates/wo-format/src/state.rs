//! The whole state file in memory ([`State`]): its messages kept sorted,
//! the branch walk over their links, titles, archiving marks, save
//! bookkeeping and savepoints. Above the record types ([`crate::model`]),
//! the branch cache ([`crate::links`]), the savepoint journal
//! ([`crate::undo`]) and the transcript versions ([`crate::transcript`]),
//! which all know nothing of `State`.

use crate::ids;
use crate::model::{
    ARCHIVE_KEY, Extra, Message, RETITLED_KEY, RawJson, RetrievalPrefs, SCHEMA_URL, Tombstone,
    Truth, TruthEdit, TruthEntry, VERSION,
};
use crate::timestamp::Timestamp;
use crate::transcript::{TranscriptLog, TranscriptVersion};
use crate::undo::{MessageChange, Savepoint};

/// A whole state file.
/// (`Deserialize` for the model types is in `model_de`: hand-written so
/// that unknown fields keep their exact text and need no buffering.)
#[derive(Clone, Debug)]
pub struct State {
    /// Format version; always [`VERSION`] (the compatibility gate).
    pub version: u64,
    /// Schema identifier; writers write [`SCHEMA_URL`].
    pub schema: String,
    /// When the file last changed; set by the writer on every save.
    pub date: Timestamp,
    /// The operating context (XHTML), sent with every query.
    pub context: String,
    pub(crate) messages: Vec<Message>,
    /// Curated knowledge and retrieval preferences.
    pub truth: Truth,
    /// Unknown top-level fields (e.g. `memory_log`), kept as written.
    pub extra: Extra,
    /// How many leading messages are unchanged since [`State::mark_saved`];
    /// lets the store re-use their serialised bytes (append fast path).
    pub(crate) clean_prefix: usize,
    /// Identifies the [`crate::codec::MessageCache`] filled by the last save.
    pub(crate) save_token: u64,
    /// Which transcript contents this state has had (see
    /// [`State::transcript_version`]).
    pub(crate) transcript: TranscriptLog,
    /// Each message's next step in [`State::branch`], kept between walks.
    pub(crate) links: crate::links::LinkCache,
    /// Each message's content key ([`State::content_keys`]), kept as the
    /// links are: dropped wherever they are, extended by an append.
    pub(crate) key_cache: crate::content_keys::KeyCache,
    /// Open savepoints, innermost last (see [`crate::undo`]).
    pub(crate) savepoints: Vec<crate::undo::Savepoint>,
}

impl PartialEq for State {
    /// Equality of content; the save bookkeeping is not content.
    fn eq(&self, other: &Self) -> bool {
        self.version == other.version
            && self.schema == other.schema
            && self.date == other.date
            && self.context == other.context
            && self.messages == other.messages
            && self.truth == other.truth
            && self.extra == other.extra
    }
}

impl State {
    /// An empty state with SPEC defaults, dated `now`.
    pub fn new(now: Timestamp) -> Self {
        State {
            version: VERSION,
            schema: SCHEMA_URL.to_owned(),
            date: now,
            context: String::new(),
            messages: Vec::new(),
            truth: Truth {
                retrieval_prefs: RetrievalPrefs::spec_defaults(),
                ..Truth::default()
            },
            extra: Extra::new(),
            clean_prefix: 0,
            save_token: 0,
            transcript: TranscriptLog::new(),
            links: Default::default(),
            key_cache: Default::default(),
            savepoints: Vec::new(),
        }
    }

    /// The transcript's contents now (see [`TranscriptVersion`]).
    pub fn transcript_version(&self) -> TranscriptVersion {
        self.transcript.current(self.messages.len())
    }

    /// True when the first `v.len` messages are exactly what they were when
    /// `v` was taken from this state (or the state it was cloned from):
    /// since then messages were at most inserted after them. False when
    /// unsure (a change anywhere, a re-read, many insertions since).
    pub fn unchanged_since(&self, v: &TranscriptVersion) -> bool {
        self.unchanged_prefix_since(v) == Some(v.len)
    }

    /// How many of the first `v.len` messages are exactly what they were
    /// when `v` was taken from this state (or the state it was cloned from):
    /// messages inserted since moved the rest, so a cache of `v` (the
    /// server's recall index) keeps that many and redoes the others.
    /// `None` when unsure (a change anywhere, a re-read, many insertions
    /// since).
    pub fn unchanged_prefix_since(&self, v: &TranscriptVersion) -> Option<usize> {
        if v.len > self.messages.len() {
            return None;
        }
        self.transcript
            .held_prefix(v, self.messages.len())
            .map(|kept| kept.min(v.len))
    }

    /// The transcript, sorted by (timestamp, id).
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Mutable access to the transcript. Callers must leave it sorted (or call
    /// [`State::normalize`]); the append fast path is disabled until the next
    /// save.
    pub fn messages_mut(&mut self) -> &mut Vec<Message> {
        self.note_any_change();
        self.clean_prefix = 0;
        self.transcript.changed_all();
        self.links.clear();
        self.key_cache.clear();
        &mut self.messages
    }

    /// Inserts a message at its sorted place (normally the end). Returns false
    /// and changes nothing when a message with the same id is present.
    pub fn push_message(&mut self, mut message: Message) -> bool {
        if message.id.is_empty() {
            message.id = ids::message_id(
                &message.username,
                message.timestamp.as_str(),
                &message.content,
            );
        }
        let known = match self.links.built() {
            Some(links) => links.contains(&self.messages, &message.id),
            None => self.messages.iter().rev().any(|m| m.id == message.id),
        };
        if known {
            return false;
        }
        let pos = self
            .messages
            .partition_point(|m| m.order_key() <= message.order_key());
        self.insert_message_at(pos, message);
        true
    }

    /// Inserts `message` at `pos` (its sorted place, which the caller has
    /// found), keeping the save and transcript bookkeeping.
    pub(crate) fn insert_message_at(&mut self, pos: usize, message: Message) {
        self.note_inserted(pos);
        self.clean_prefix = self.clean_prefix.min(pos);
        self.transcript.inserted(pos, self.messages.len());
        if pos == self.messages.len() {
            self.links.appending(&self.messages, &message);
            self.key_cache.appending(&message);
        } else {
            self.links.clear();
            self.key_cache.clear();
        }
        self.messages.insert(pos, message);
    }

    /// Number of leading messages unchanged since the last [`State::mark_saved`].
    pub fn clean_prefix(&self) -> usize {
        self.clean_prefix.min(self.messages.len())
    }

    /// Records that the current messages are what was last written, and
    /// returns a fresh token naming that save.
    pub fn mark_saved(&mut self) -> u64 {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        self.clean_prefix = self.messages.len();
        self.save_token = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.save_token
    }

    /// The token of the last [`State::mark_saved`] (0: never saved).
    pub fn save_token(&self) -> u64 {
        self.save_token
    }

    /// Makes `self` what `src.clone()` would be, copying only what changed:
    /// `copied` is the version [`State::refresh_copy`] returned when it last
    /// made `self` a copy of `src` (which must not have changed since;
    /// `None`: `self` is no copy of it). The messages `src` kept since that
    /// version are kept as they are here, only those after them are cloned,
    /// and the branch links follow an append instead of being rebuilt.
    /// Returns the version to pass next time.
    ///
    /// For a long-lived reader's copy of a writer's state (the server
    /// publishes one after each write): a full clone of a large transcript
    /// copies every message for the two a turn appends.
    pub fn refresh_copy(
        &mut self,
        src: &State,
        copied: Option<&TranscriptVersion>,
    ) -> TranscriptVersion {
        let kept = copied
            .filter(|v| v.len == self.messages.len())
            .and_then(|v| src.unchanged_prefix_since(v))
            .unwrap_or(0);
        let appended = kept == self.messages.len();
        self.messages.truncate(kept);
        if appended {
            for m in &src.messages[kept..] {
                self.links.appending(&self.messages, m);
                self.key_cache.appending(m);
                self.messages.push(m.clone());
            }
        } else {
            self.links.clear();
            self.key_cache.clear();
            self.messages.extend_from_slice(&src.messages[kept..]);
        }
        self.version = src.version;
        self.schema.clone_from(&src.schema);
        self.date = src.date.clone();
        self.context.clone_from(&src.context);
        self.truth.clone_from(&src.truth);
        self.extra.clone_from(&src.extra);
        self.clean_prefix = src.clean_prefix;
        self.save_token = src.save_token;
        self.transcript = src.transcript.clone();
        self.savepoints.clone_from(&src.savepoints);
        // Taken from `src` (it marks the version handed out there), so a
        // later insertion in `src` keeps it in its log.
        src.transcript_version()
    }

    /// Each message's [`crate::content_keys::content_key`], in transcript
    /// order: computed on first use, then kept until the transcript changes
    /// (an append extends them).
    pub fn content_keys(&self) -> &[u64] {
        self.key_cache.get(&self.messages)
    }

    /// Finds a message by id (the first with it, should a hand-edited file
    /// repeat one).
    pub fn message(&self, id: &str) -> Option<&Message> {
        // Once a branch walk has built the links, they know where every id
        // is: a turn looks up several ids (its parent, that its new ids are
        // free), each a scan of the whole transcript otherwise — a quarter
        // of what saving a turn took at 100k messages.
        if let Some(found) = self
            .links
            .built()
            .and_then(|links| links.unique_position(&self.messages, id))
        {
            return found.map(|j| &self.messages[j as usize]);
        }
        self.messages.iter().find(|m| m.id == id)
    }

    /// Where the message with `id` is in [`Self::messages`], when no two
    /// messages share an id (every file the tools write): `Some(None)` when
    /// none has it; `None` when a hand-edited file repeats an id (an id then
    /// names no one place) or the ids cannot be indexed. Builds the branch
    /// links on first use (the prompt's walk builds them anyway).
    pub fn position_if_ids_unique(&self, id: &str) -> Option<Option<usize>> {
        let links = self.links.get(&self.messages)?;
        links
            .unique_position(&self.messages, id)
            .map(|found| found.map(|j| j as usize))
    }

    /// Builds the branch links now if no walk has (they are kept until a
    /// change other than an append): [`Self::message`] and
    /// [`Self::push_message`] then find an id with one look-up instead of
    /// a scan of the transcript.
    pub fn index_ids(&self) {
        let _ = self.links.get(&self.messages);
    }

    /// Whether every message's id is its own (see
    /// [`Self::position_if_ids_unique`]).
    pub fn ids_unique(&self) -> bool {
        self.links
            .get(&self.messages)
            .is_some_and(|links| !links.repeats_ids())
    }

    /// Finds a truth entry by id.
    pub fn truth_entry(&self, id: &str) -> Option<&TruthEntry> {
        self.truth.trust.iter().find(|t| t.id == id)
    }

    /// Derives missing ids and restores the canonical order of messages and
    /// truth entries. Idempotent.
    pub fn normalize(&mut self) {
        let sorted = self
            .messages
            .is_sorted_by(|a, b| a.order_key() <= b.order_key());
        let ids_missing = self.messages.iter().any(|m| m.id.is_empty());
        self.normalize_known(sorted, ids_missing);
    }

    /// [`State::normalize`] for a caller that already knows whether the
    /// messages are sorted and whether any lacks its id (the parser finds
    /// both while reading: each pass over 100k messages costs
    /// milliseconds).
    pub(crate) fn normalize_known(&mut self, sorted: bool, ids_missing: bool) {
        if !sorted || ids_missing {
            self.note_any_change();
        }
        let mut changed = false;
        if ids_missing {
            for m in &mut self.messages {
                if m.id.is_empty() {
                    m.id = ids::message_id(&m.username, m.timestamp.as_str(), &m.content);
                    changed = true;
                }
            }
        }
        for t in &mut self.truth.trust {
            if t.id.is_empty() {
                t.id = ids::truth_id(&t.title, t.timestamp.as_str(), &t.content);
            }
        }
        // Checked again after deriving: a derived id may put messages of
        // one instant out of (timestamp, id) order.
        let sorted = sorted
            && (!changed
                || self
                    .messages
                    .is_sorted_by(|a, b| a.order_key() <= b.order_key()));
        if !sorted {
            self.messages
                .sort_by(|a, b| a.order_key().cmp(&b.order_key()));
            changed = true;
        }
        if changed {
            self.clean_prefix = 0;
            self.transcript.changed_all();
            self.links.clear();
            self.key_cache.clear();
        }
    }

    /// Renames the message `id` at `now`: sets its title (its content, and
    /// so its id, stay as they are) and stamps [`RETITLED_KEY`] with `now`,
    /// or a microsecond after the rename it replaces when the clock is not
    /// past it, so the new title wins a merge against every older copy
    /// (see `merge::join_message`). Returns the message, or `None` when
    /// there is none. Only that message's cached bytes are invalidated: the
    /// messages before it keep the append fast path.
    pub fn set_message_title(
        &mut self,
        id: &str,
        title: String,
        now: Timestamp,
    ) -> Option<&Message> {
        let pos = self.messages.iter().position(|m| m.id == id)?;
        if self.messages[pos].title != title {
            self.note_replacing(pos);
            let m = &mut self.messages[pos];
            let stamp = match m.retitled() {
                Some(before) if now <= before => before.next_micro(),
                _ => now,
            };
            m.title = title;
            m.extra.insert(
                RETITLED_KEY.to_owned(),
                RawJson::from(serde_json::Value::String(stamp.as_str().to_owned())),
            );
            self.clean_prefix = self.clean_prefix.min(pos);
            // A title is searched: a recall index kept beside this state
            // must not take it for unchanged (see `unchanged_since`).
            self.transcript.changed_all();
        }
        Some(&self.messages[pos])
    }

    /// Archives (`hidden`) or restores the conversation whose root is `id`,
    /// said at `now` — or just after the last say, so a machine whose clock
    /// runs slow still has the last word ([`ARCHIVE_KEY`]). Content, id and
    /// every other message are unchanged. `None` when no message has `id`.
    pub fn set_archived(&mut self, id: &str, hidden: bool, now: Timestamp) -> Option<&Message> {
        let pos = self.messages.iter().position(|m| m.id == id)?;
        let m = &mut self.messages[pos];
        if m.archived() != hidden {
            let at = match m.archive_say() {
                Some((before, _)) if now <= before => before.next_micro(),
                _ => now,
            };
            m.extra.insert(
                ARCHIVE_KEY.to_owned(),
                RawJson::from(serde_json::json!({"at": at.as_str(), "hidden": hidden})),
            );
            self.clean_prefix = self.clean_prefix.min(pos);
            self.transcript.changed_all();
        }
        Some(&self.messages[pos])
    }

    /// Adds a truth entry unless one with its id exists; returns whether it
    /// was added.
    pub fn add_truth(&mut self, entry: TruthEntry) -> bool {
        if self.truth.trust.iter().any(|t| t.id == entry.id) {
            return false;
        }
        self.truth.trust.push(entry);
        true
    }

    /// Applies an edit to the truth entry `id` and stamps `updated`: `now`,
    /// or a microsecond after the version edited when the clock is not past
    /// it, so the edit always wins a merge against it; returns the
    /// edited entry, or `None` when there is no such entry.
    pub fn edit_truth(&mut self, id: &str, edit: TruthEdit, now: Timestamp) -> Option<&TruthEntry> {
        let entry = self.truth.trust.iter_mut().find(|t| t.id == id)?;
        if let Some(title) = edit.title {
            entry.title = title;
        }
        if let Some(content) = edit.content {
            entry.content = content;
        }
        if let Some(c) = edit.certainty {
            entry.certainty = c.clamp(0.0, 1.0);
        }
        entry.mark_changed(now);
        Some(entry)
    }

    /// Removes a truth entry and leaves a tombstone; returns it if found.
    pub fn delete_truth(&mut self, id: &str, now: Timestamp) -> Option<TruthEntry> {
        let pos = self.truth.trust.iter().position(|t| t.id == id)?;
        let removed = self.truth.trust.remove(pos);
        // The tombstone must bury the version just removed, even when the
        // clock is behind its `updated`, and an older tombstone of the same
        // id (which did not bury it) is moved forward, not kept as it was.
        let date = now.max(removed.effective_update().clone());
        match self.truth.deleted.iter_mut().find(|d| d.id == id) {
            Some(d) => {
                if date > d.date {
                    d.date = date;
                }
            }
            None => {
                self.truth.deleted.push(Tombstone {
                    id: id.to_owned(),
                    date,
                    extra: Extra::new(),
                });
                self.truth.deleted.sort_by(|a, b| a.id.cmp(&b.id));
            }
        }
        Some(removed)
    }

    /// [`State::delete_truth`] for every entry whose id is in `ids`, in one
    /// pass (one by one, each removal costs a scan and a shift of the
    /// list). Returns the entries removed, in the list's order.
    pub fn delete_truths(
        &mut self,
        ids: &std::collections::HashSet<String>,
        now: &Timestamp,
    ) -> Vec<TruthEntry> {
        if ids.is_empty() {
            return Vec::new();
        }
        let (removed, kept): (Vec<TruthEntry>, Vec<TruthEntry>) =
            std::mem::take(&mut self.truth.trust)
                .into_iter()
                .partition(|t| ids.contains(&t.id));
        self.truth.trust = kept;
        let mut at: std::collections::HashMap<String, usize> = self
            .truth
            .deleted
            .iter()
            .enumerate()
            .map(|(i, d)| (d.id.clone(), i))
            .collect();
        for r in &removed {
            // As `delete_truth`: the tombstone buries the version removed.
            let date = now.clone().max(r.effective_update().clone());
            match at.get(&r.id) {
                Some(&i) => {
                    let d = &mut self.truth.deleted[i];
                    if date > d.date {
                        d.date = date;
                    }
                }
                None => {
                    at.insert(r.id.clone(), self.truth.deleted.len());
                    self.truth.deleted.push(Tombstone {
                        id: r.id.clone(),
                        date,
                        extra: Extra::new(),
                    });
                }
            }
        }
        self.truth.deleted.sort_by(|a, b| a.id.cmp(&b.id));
        removed
    }

    /// The branch ending at `leaf`: the messages on the path from its root
    /// to `leaf`, oldest first (empty when no message has that id).
    ///
    /// Each step goes to the message's `parent`. [Unlinked
    /// messages](Message::is_unlinked) (no parent and no mark: a legacy
    /// transcript, a tool that keeps none) form an implicit chain in
    /// (timestamp, id) order: from such a message, and from one whose
    /// `parent` is not in the file, the step goes to the latest earlier
    /// unlinked message. So a transcript without parents is one branch,
    /// turns added to it with explicit parents continue it, and forks
    /// (several children of one message) are separate branches sharing
    /// their history. A message that [starts a
    /// conversation](Message::starts_conversation) ends the walk: it is a
    /// root, and it is never a step of the implicit chain, so conversations
    /// added later (imports, New chat) never capture an unlinked message.
    /// A cycle of hand-edited parents ends the walk.
    ///
    /// Each message's step is kept between calls (built on the first walk,
    /// extended as messages are appended), so a walk costs its length, not
    /// the transcript's.
    pub fn branch(&self, leaf: &str) -> Vec<&Message> {
        match self.links.get(&self.messages) {
            Some(links) => links.branch(&self.messages, leaf),
            None => self.branch_uncached(leaf),
        }
    }

    /// The branch to `leaf` newest first — [`State::branch`] reversed —
    /// walked lazily over the cached links: a caller that reads the newest
    /// few messages of a long branch pays for those, and counts the rest
    /// with [`crate::BranchWalk::rest_excluding`].
    pub fn branch_walk(&self, leaf: &str) -> crate::links::BranchWalk<'_> {
        match self.links.get(&self.messages) {
            Some(links) => links.walk(&self.messages, leaf),
            None => crate::links::BranchWalk::eager(self.branch_uncached(leaf)),
        }
    }

    /// [`State::branch`] computed from scratch (the definition the cached
    /// walk is held to).
    pub fn branch_uncached(&self, leaf: &str) -> Vec<&Message> {
        let index: std::collections::HashMap<&str, usize> = self
            .messages
            .iter()
            .enumerate()
            .map(|(i, m)| (m.id.as_str(), i))
            .collect();
        let previous_parentless = implicit_chain(&self.messages);
        let mut seen = vec![false; self.messages.len()];
        let mut path = Vec::new();
        let mut cur = index.get(leaf).copied();
        while let Some(i) = cur {
            if std::mem::replace(&mut seen[i], true) {
                break; // a cycle in hand-edited parents: stop, never loop
            }
            let m = &self.messages[i];
            path.push(m);
            cur = match &m.parent {
                Some(p) => index.get(p.as_str()).copied().or(previous_parentless[i]),
                // A conversation's root: nothing before it belongs to it.
                None if m.starts_conversation() => None,
                None => previous_parentless[i],
            };
        }
        path.reverse();
        path
    }
}

/// The implicit chain ([`State::branch`]): for each message (by index),
/// the latest earlier [unlinked](Message::is_unlinked) message, which an
/// unlinked message, or one whose `parent` is not in the file, follows.
pub(crate) fn implicit_chain(messages: &[Message]) -> Vec<Option<usize>> {
    let mut previous = Vec::with_capacity(messages.len());
    let mut last = None;
    for (i, m) in messages.iter().enumerate() {
        previous.push(last);
        if m.is_unlinked() {
            last = Some(i);
        }
    }
    previous
}

// Savepoints (the journal itself is [`crate::undo`]).
impl State {
    /// Opens a savepoint: [`State::rollback`] restores the state exactly as
    /// it is now, [`State::release`] keeps what changed. Savepoints nest.
    pub fn savepoint(&mut self) {
        let sp = Savepoint {
            version: self.version,
            schema: self.schema.clone(),
            date: self.date.clone(),
            context: self.context.clone(),
            truth: self.truth.clone(),
            extra: self.extra.clone(),
            clean_prefix: self.clean_prefix,
            save_token: self.save_token,
            transcript: self.transcript.clone(),
            changes: Vec::new(),
            copied: false,
        };
        self.savepoints.push(sp);
    }

    /// Positions in the transcript now of the messages inserted or replaced
    /// since the innermost savepoint, ascending: what a writer checking one
    /// change must look at (the messages that only moved are as they were).
    /// `None` when no savepoint is open or the transcript may have changed
    /// anywhere ([`State::messages_mut`], a re-sort).
    pub fn touched_since_savepoint(&self) -> Option<Vec<usize>> {
        let sp = self.savepoints.last()?;
        let mut touched: Vec<usize> = Vec::new();
        for change in &sp.changes {
            match change {
                MessageChange::Inserted(pos) => {
                    for p in &mut touched {
                        if *p >= *pos {
                            *p += 1;
                        }
                    }
                    touched.push(*pos);
                }
                MessageChange::Replaced(pos, _) => {
                    if !touched.contains(pos) {
                        touched.push(*pos);
                    }
                }
                MessageChange::All(_) => return None,
            }
        }
        touched.sort_unstable();
        Some(touched)
    }

    /// Open savepoints.
    pub fn savepoints(&self) -> usize {
        self.savepoints.len()
    }

    /// Keeps what changed since the innermost savepoint and closes it (an
    /// enclosing savepoint can still take it back). False when none is open.
    pub fn release(&mut self) -> bool {
        let Some(inner) = self.savepoints.pop() else {
            return false;
        };
        if let Some(outer) = self.savepoints.last_mut() {
            for change in inner.changes {
                if outer.copied {
                    break;
                }
                outer.record(|| change);
            }
        }
        true
    }

    /// Restores the state exactly as it was when the innermost savepoint
    /// was opened, and closes it. False (nothing changed) when none is open.
    pub fn rollback(&mut self) -> bool {
        let Some(sp) = self.savepoints.pop() else {
            return false;
        };
        let touched = !sp.changes.is_empty();
        for change in sp.changes.into_iter().rev() {
            match change {
                MessageChange::Inserted(pos) => {
                    self.messages.remove(pos);
                }
                MessageChange::Replaced(pos, old) => self.messages[pos] = *old,
                MessageChange::All(messages) => self.messages = messages,
            }
        }
        if touched {
            // Rebuilt on the next walk; the restored transcript log says
            // which versions handed out before the savepoint still hold.
            self.links.clear();
            self.key_cache.clear();
        }
        self.version = sp.version;
        self.schema = sp.schema;
        self.date = sp.date;
        self.context = sp.context;
        self.truth = sp.truth;
        self.extra = sp.extra;
        self.clean_prefix = sp.clean_prefix;
        self.save_token = sp.save_token;
        self.transcript = sp.transcript;
        true
    }

    /// Before a message is inserted at `pos`.
    pub(crate) fn note_inserted(&mut self, pos: usize) {
        if let Some(sp) = self.savepoints.last_mut() {
            sp.record(|| MessageChange::Inserted(pos));
        }
    }

    /// Before the message at `pos` is changed in place.
    pub(crate) fn note_replacing(&mut self, pos: usize) {
        if let Some(sp) = self.savepoints.last_mut() {
            let old = &self.messages[pos];
            sp.record(|| MessageChange::Replaced(pos, Box::new(old.clone())));
        }
    }

    /// Before the transcript may change in any way.
    pub(crate) fn note_any_change(&mut self) {
        if let Some(sp) = self.savepoints.last_mut() {
            let messages = &self.messages;
            sp.record(|| MessageChange::All(messages.clone()));
        }
    }
}

#[cfg(test)]
mod transcript_version_tests {
    use super::*;

    fn msg(i: i64) -> Message {
        Message::new(
            "u",
            Timestamp::from_unix(1_800_000_000 + i),
            "t",
            format!("<p>m{i}</p>"),
        )
    }

    fn state(n: i64) -> State {
        let mut s = State::new(Timestamp::from_unix(1_800_000_000));
        for i in 0..n {
            s.push_message(msg(i * 10));
        }
        s
    }

    #[test]
    fn appends_keep_earlier_versions_and_changes_void_them() {
        let mut s = state(3);
        let v = s.transcript_version();
        assert_eq!(v.len, 3);
        assert!(s.unchanged_since(&v));
        assert_eq!(s.transcript_version(), v, "no change, same version");
        s.push_message(msg(100));
        let w = s.transcript_version();
        assert_ne!(v, w);
        assert!(s.unchanged_since(&v) && s.unchanged_since(&w));
        // An insertion before the end voids what covered its place.
        s.push_message(msg(15));
        assert!(!s.unchanged_since(&w), "message 2 moved");
        assert!(!s.unchanged_since(&v));
        // … but the messages before the insertion still hold for both.
        assert_eq!(s.unchanged_prefix_since(&w), Some(2));
        assert_eq!(s.unchanged_prefix_since(&v), Some(2));
        s.push_message(msg(5));
        assert_eq!(
            s.unchanged_prefix_since(&w),
            Some(1),
            "the lowest insertion counts"
        );
        s.push_message(msg(110));
        assert_eq!(
            s.unchanged_prefix_since(&w),
            Some(1),
            "an append moves nothing"
        );
        s.push_message(msg(-1));
        assert_eq!(
            s.unchanged_prefix_since(&w),
            None,
            "nothing left that holds"
        );
        let x = s.transcript_version();
        s.push_message(msg(200));
        assert!(s.unchanged_since(&x));
        assert_eq!(s.unchanged_prefix_since(&x), Some(x.len));
        // Any mutable access voids everything.
        let _ = s.messages_mut();
        assert!(!s.unchanged_since(&x));
        assert_eq!(s.unchanged_prefix_since(&x), None);
        let y = s.transcript_version();
        assert!(s.unchanged_since(&y));
        // A re-sort that changes nothing keeps the version.
        s.normalize();
        assert!(s.unchanged_since(&y));
    }

    #[test]
    fn diverging_clones_and_reparses_share_no_version() {
        let s = state(4);
        let v = s.transcript_version();
        let (mut a, mut b) = (s.clone(), s.clone());
        a.push_message(msg(1000));
        b.push_message(msg(2000));
        let va = a.transcript_version();
        assert!(a.unchanged_since(&v) && b.unchanged_since(&v));
        assert!(!b.unchanged_since(&va), "b's fifth message is another");
        // Unobserved intermediate versions are not kept, so a long run of
        // appends still leaves the first version usable.
        for i in 0..1000 {
            a.push_message(msg(3000 + i));
        }
        assert!(a.unchanged_since(&v) && a.unchanged_since(&va));
        // A state read from bytes is a new lineage, even when equal.
        let reread = crate::parse(&crate::to_canonical_vec(&s)).unwrap();
        assert_eq!(reread, s);
        assert!(!reread.unchanged_since(&v));
        // A version longer than the transcript never holds.
        let short = state(2);
        assert!(!short.unchanged_since(&v));
    }

    /// `copy` is what a clone of `src` would be: content, transcript
    /// versions, branch walks.
    fn assert_same_as_clone(copy: &State, src: &State) {
        assert_eq!(copy, src);
        assert_eq!(copy.transcript_version(), src.transcript_version());
        assert_eq!(copy.clean_prefix(), src.clean_prefix());
        assert_eq!(copy.save_token(), src.save_token());
        for leaf in src.messages() {
            let ids = |s: &State| -> Vec<String> {
                s.branch(&leaf.id).iter().map(|m| m.id.clone()).collect()
            };
            assert_eq!(ids(copy), ids(src), "branch of {}", leaf.id);
            assert_eq!(ids(copy), ids(&src.clone()));
        }
    }

    #[test]
    fn refresh_copy_is_a_clone_that_copies_only_what_changed() {
        let mut src = state(4);
        src.context = "<p>c</p>".into();
        let mut copy = State::new(Timestamp::from_unix(1));
        // Not a copy yet: everything is copied.
        let mut v = copy.refresh_copy(&src, None);
        assert_same_as_clone(&copy, &src);
        let first = copy.messages()[0].content.as_ptr();

        // Appended: the messages already here stay (same allocations).
        src.push_message(msg(100));
        src.push_message(msg(110));
        src.date = Timestamp::from_unix(1_900_000_000);
        v = copy.refresh_copy(&src, Some(&v));
        assert_same_as_clone(&copy, &src);
        assert_eq!(
            copy.messages()[0].content.as_ptr(),
            first,
            "kept, not copied"
        );

        // Inserted before the end: the prefix before it stays.
        src.push_message(msg(15));
        v = copy.refresh_copy(&src, Some(&v));
        assert_same_as_clone(&copy, &src);
        assert_eq!(copy.messages()[0].content.as_ptr(), first);

        // Changed in place (a rename voids every version): all copied.
        let id = src.messages()[0].id.clone();
        src.set_message_title(&id, "renamed".into(), Timestamp::from_unix(1_900_000_001));
        v = copy.refresh_copy(&src, Some(&v));
        assert_same_as_clone(&copy, &src);
        assert_eq!(copy.messages()[0].title, "renamed");

        // Changed and taken back: the copy follows exactly.
        src.savepoint();
        src.push_message(msg(-50));
        let w = copy.refresh_copy(&src, Some(&v));
        assert_same_as_clone(&copy, &src);
        src.rollback();
        copy.refresh_copy(&src, Some(&w));
        assert_same_as_clone(&copy, &src);

        // A version of another lineage (a re-read) is no help: all copied.
        let reread = crate::parse(&crate::to_canonical_vec(&src)).unwrap();
        let mut other = copy.clone();
        other.refresh_copy(&reread, Some(&v));
        assert_same_as_clone(&other, &reread);
        // Nor is one that does not match the copy's length.
        let mut short = state(1);
        short.refresh_copy(&src, Some(&v));
        assert_same_as_clone(&short, &src);
    }

    #[test]
    fn touched_since_savepoint_names_what_was_inserted_or_replaced() {
        let mut s = state(5);
        assert_eq!(s.touched_since_savepoint(), None, "no savepoint");
        s.savepoint();
        assert_eq!(s.touched_since_savepoint(), Some(vec![]));
        s.push_message(msg(100)); // at 5
        s.push_message(msg(15)); // at 2: the first one moves to 6
        let id = s.messages()[0].id.clone();
        s.set_message_title(&id, "renamed".into(), Timestamp::from_unix(1_900_000_000));
        s.push_message(msg(-5)); // at 0: everything moves
        assert_eq!(s.touched_since_savepoint(), Some(vec![0, 1, 3, 7]));
        let titles: Vec<&str> = [0, 1, 3, 7]
            .iter()
            .map(|&i| s.messages()[i].title.as_str())
            .collect();
        assert_eq!(titles, ["t", "renamed", "t", "t"]);
        assert_eq!(s.messages()[3].timestamp, msg(15).timestamp);
        assert_eq!(s.messages()[7].timestamp, msg(100).timestamp);
        let _ = s.messages_mut();
        assert_eq!(
            s.touched_since_savepoint(),
            None,
            "anything may have changed"
        );
        s.rollback();
        s.savepoint();
        s.push_message(msg(200));
        assert_eq!(s.touched_since_savepoint(), Some(vec![5]));
    }

    #[test]
    fn merge_appends_keep_the_version() {
        let mut base = state(3);
        let v = base.transcript_version();
        let mut other = state(3);
        other.push_message(msg(500));
        other.push_message(msg(600));
        crate::merge::merge_into(&mut base, &other);
        assert_eq!(base.messages().len(), 5);
        assert!(base.unchanged_since(&v));
        let w = base.transcript_version();
        let mut early = State::new(Timestamp::from_unix(1_800_000_000));
        early.push_message(msg(-5));
        crate::merge::merge_into(&mut base, &early);
        assert!(!base.unchanged_since(&w), "merged in before the start");
    }
}
