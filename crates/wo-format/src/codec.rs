//! Reading and writing state files: the one canonical serializer and the
//! parser that turns bytes into a validated [`State`].
//!
//! Canonical form (product §1): UTF-8, 2-space indent, keys in the model's
//! declaration order then unknown keys sorted, messages sorted by
//! (timestamp, id), trailing newline. The writer can re-use the bytes of
//! messages unchanged since the last save ([`MessageCache`]), so appending a
//! turn to a 100k-message file costs little more than writing its bytes.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{Message, TruthEntry};
use crate::state::State;
use crate::validate::{self, Issue, is_accepted_schema, is_valid_id};

/// Why bytes could not become a [`State`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", render_issues(.issues))]
pub struct ParseError {
    /// Every problem found, each with its JSON pointer and rule.
    pub issues: Vec<Issue>,
}

fn render_issues(issues: &[Issue]) -> String {
    let mut s = String::new();
    for (i, issue) in issues.iter().enumerate().take(20) {
        if i > 0 {
            s.push('\n');
        }
        s.push_str(&issue.to_string());
    }
    if issues.len() > 20 {
        s.push_str(&format!("\n… and {} more", issues.len() - 20));
    }
    s
}

/// Parses and structurally validates a state file, derives missing ids and
/// restores canonical order.
pub fn parse(bytes: &[u8]) -> Result<State, ParseError> {
    // The plain deserializer first: tracking the path of every value costs a
    // quarter of the parse, and is only needed to say where a file is wrong,
    // so a failure is parsed again with tracking (same deserializer, same
    // verdict).
    let typed = match parse_untracked(bytes) {
        Ok(state) => Ok(state),
        Err(()) => parse_tracked(bytes),
    };
    match typed {
        Ok(mut state) if semantic_ok(&state) => {
            state.normalize();
            Ok(state)
        }
        Ok(_) => Err(ParseError {
            issues: full_issues(bytes, None),
        }),
        Err(e) => Err(ParseError {
            issues: full_issues(bytes, Some(e)),
        }),
    }
}

fn parse_untracked(bytes: &[u8]) -> Result<State, ()> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let state = State::deserialize(&mut de).map_err(|_| ())?;
    de.end().map_err(|_| ())?;
    Ok(state)
}

fn parse_tracked(bytes: &[u8]) -> Result<State, (String, String)> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut de)
        .map_err(|e| (path_to_pointer(e.path()), e.into_inner().to_string()))
        .and_then(|s| {
            de.end()
                .map(|()| s)
                .map_err(|e| (String::new(), e.to_string()))
        })
}

/// The document as a `Value` for the validator. `serde_json` refuses a
/// number outside f64's range ("number out of range"), which an unknown
/// field may hold and the typed model keeps byte for byte; such a document is
/// read again by [`crate::rawjson`]'s parser, which accepts it. Any other
/// error is `serde_json`'s, with its line and column.
pub(crate) fn document_value(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice(bytes).or_else(|e| {
        if e.to_string().starts_with("number out of range")
            && let Ok(text) = std::str::from_utf8(bytes)
            && let Ok(doc) = crate::rawjson::document_value(text)
        {
            return Ok(doc);
        }
        Err(e)
    })
}

/// Full validation for `wo validate`: structure and XHTML content. Returns
/// the issues (empty: valid) and the lint warnings.
pub fn validate_bytes(bytes: &[u8]) -> (Vec<Issue>, Vec<Issue>) {
    let doc: Value = match document_value(bytes) {
        Ok(v) => v,
        Err(e) => return (vec![syntax_issue(&e)], Vec::new()),
    };
    let mut issues = validate::validate_structure(&doc);
    if issues.is_empty()
        && let Err(e) = parse(bytes)
    {
        issues = e.issues;
    }
    issues.extend(validate::validate_content(&doc));
    (issues, validate::lint(&doc))
}

fn syntax_issue(e: &serde_json::Error) -> Issue {
    Issue {
        pointer: String::new(),
        rule: "json-syntax",
        message: format!(
            "invalid JSON at line {} column {}: {e}",
            e.line(),
            e.column()
        ),
    }
}

/// The slow path after a failed fast parse: a full structural report.
fn full_issues(bytes: &[u8], typed_error: Option<(String, String)>) -> Vec<Issue> {
    let doc: Value = match document_value(bytes) {
        Ok(v) => v,
        Err(e) => {
            // Too deep for `Value` too: the typed parser knows where.
            if let Some((pointer, message)) = typed_error
                && message.contains(crate::rawjson::TOO_DEEP)
            {
                return vec![Issue {
                    pointer,
                    rule: "depth",
                    message,
                }];
            }
            return vec![syntax_issue(&e)];
        }
    };
    let issues = validate::validate_structure(&doc);
    if !issues.is_empty() {
        return issues;
    }
    // What the JSON data model cannot show (a known key written twice, which
    // `Value` silently collapses), or a disagreement between the validator and
    // the typed model: report what serde saw rather than nothing (tests keep
    // the two in step).
    let (pointer, message) = match typed_error {
        Some(e) => e,
        None => (
            String::new(),
            "the file breaks a rule of the model".to_owned(),
        ),
    };
    let rule = if message.starts_with("duplicate field") {
        "duplicate-key"
    } else {
        "type"
    };
    vec![Issue {
        pointer,
        rule,
        message,
    }]
}

fn path_to_pointer(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for seg in path.iter() {
        out.push('/');
        match seg {
            Segment::Seq { index } => out.push_str(&index.to_string()),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                out.push_str(&validate::pointer_token(key))
            }
            Segment::Unknown => out.push('?'),
        }
    }
    out
}

/// Rules the typed model cannot express by its types alone.
pub(crate) fn semantic_ok(s: &State) -> bool {
    s.messages().iter().all(message_ok) && state_ok_but_messages(s)
}

/// [`semantic_ok`]'s rules for one message.
pub(crate) fn message_ok(m: &Message) -> bool {
    let id_ok = |id: &str| id.is_empty() || is_valid_id(id);
    let opt_id_ok = |id: &Option<String>| id.as_deref().is_none_or(is_valid_id);
    id_ok(&m.id)
        && !m.username.trim().is_empty()
        && opt_id_ok(&m.parent)
        && m.sources
            .as_ref()
            .is_none_or(|v| v.iter().all(|x| is_valid_id(x)))
}

/// [`semantic_ok`]'s rules for everything but the messages.
fn state_ok_but_messages(s: &State) -> bool {
    let unit = |x: f64| (0.0..=1.0).contains(&x);
    let prefs = &s.truth.retrieval_prefs;
    s.version == 1
        && is_accepted_schema(&s.schema)
        && s.truth.trust.iter().all(truth_entry_ok)
        && s.truth.deleted.iter().all(|d| is_valid_id(&d.id))
        && [
            prefs.min_certainty,
            prefs.certainty_weight,
            prefs.recency_weight,
        ]
        .iter()
        .all(|x| x.is_none_or(unit))
}

/// [`semantic_ok`]'s rules for one truth entry.
pub(crate) fn truth_entry_ok(t: &TruthEntry) -> bool {
    let unit = |x: f64| (0.0..=1.0).contains(&x);
    let id_ok = |id: &str| id.is_empty() || is_valid_id(id);
    let opt_id_ok = |id: &Option<String>| id.as_deref().is_none_or(is_valid_id);
    id_ok(&t.id)
        && unit(t.certainty)
        && opt_id_ok(&t.supersedes)
        && opt_id_ok(&t.source)
        && t.provenance
            .as_ref()
            .is_none_or(|p| p.messages.iter().all(|x| is_valid_id(x)) && opt_id_ok(&p.exchange))
}

/// Serialised bytes of the first messages of a state, as last written.
#[derive(Debug, Default)]
pub struct MessageCache {
    token: u64,
    /// The messages region is `bytes[start..]`. `start` is 0 unless the
    /// cache was seeded from a file's bytes ([`parse_written`]): the buffer the
    /// file was read into is kept whole rather than copied, so its head
    /// stays in front.
    bytes: Vec<u8>,
    start: usize,
    /// End offset in `bytes` of each cached element.
    ends: Vec<usize>,
    /// CRC-32 of the messages region `bytes[start..]`, kept up to date as
    /// messages are appended, so a writer can checksum what it writes
    /// without reading 50 MB again ([`CanonicalParts::crc32`]).
    crc: Option<crc32fast::Hasher>,
    /// Keep `crc` at all ([`MessageCache::with_checksum`]): only a writer
    /// that records checksums pays for it (not the browser's serialiser).
    checksum: bool,
}

impl MessageCache {
    /// Number of messages whose bytes are cached.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when nothing is cached (the next save serialises every message).
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Forgets every cached message (after a change the cache cannot follow).
    pub fn clear(&mut self) {
        *self = MessageCache {
            checksum: self.checksum,
            ..MessageCache::default()
        };
    }

    /// An empty cache that also keeps the CRC-32 of the messages' bytes as
    /// they are serialised and appended, so [`CanonicalParts::crc32`] of
    /// each save reads only its head and tail.
    pub fn with_checksum() -> MessageCache {
        MessageCache {
            checksum: true,
            ..MessageCache::default()
        }
    }
}

/// The canonical bytes of a state (without the append fast path).
pub fn to_canonical_vec(state: &State) -> Vec<u8> {
    let mut out = Vec::new();
    write_canonical(state, &mut MessageCache::default(), &mut out);
    out
}

/// Writes the canonical bytes of `state` into `out` (see [`canonical_parts`]).
pub fn write_canonical(state: &State, cache: &mut MessageCache, out: &mut Vec<u8>) {
    let parts = canonical_parts(state, cache);
    out.clear();
    out.reserve(parts.len());
    for chunk in parts.chunks() {
        out.extend_from_slice(chunk);
    }
}

/// The canonical bytes of a state in three pieces, so a writer can send the
/// (possibly huge) messages region from the cache without copying it.
pub struct CanonicalParts<'c> {
    /// Everything before the messages' elements (`{`, `version` … `"messages": [`).
    pub head: Vec<u8>,
    /// The messages' elements, borrowed from the [`MessageCache`].
    pub messages: &'c [u8],
    /// Everything after them (`]`, `truth`, unknown fields, the closing `}`).
    pub tail: Vec<u8>,
    /// CRC-32 state of `messages`, when the cache keeps one.
    messages_crc: Option<crc32fast::Hasher>,
}

impl CanonicalParts<'_> {
    /// CRC-32 (IEEE) of the whole file these parts make. With a cache
    /// made by [`MessageCache::with_checksum`] the messages region's
    /// checksum comes from the cache (extended as messages are appended),
    /// so this only reads the head and the tail.
    pub fn crc32(&self) -> u32 {
        let mut h = crc32fast::Hasher::new();
        h.update(&self.head);
        match &self.messages_crc {
            Some(region) => h.combine(region),
            None => h.update(self.messages),
        }
        h.update(&self.tail);
        h.finalize()
    }

    /// The three pieces in order, to write one after another.
    pub fn chunks(&self) -> [&[u8]; 3] {
        [&self.head, self.messages, &self.tail]
    }

    /// Total length in bytes.
    pub fn len(&self) -> usize {
        self.head.len() + self.messages.len() + self.tail.len()
    }

    /// True when there are no bytes at all (never for a real state).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Serialises `state` canonically, re-using `cache` for messages unchanged
/// since the save it was filled by, and refilling it. After the bytes are
/// durably written the caller seals the cache with the token from
/// [`State::mark_saved`].
pub fn canonical_parts<'c>(state: &State, cache: &'c mut MessageCache) -> CanonicalParts<'c> {
    let messages = state.messages();
    let reusable = if cache.token != 0 && cache.token == state.save_token() {
        cache.len().min(state.clean_prefix())
    } else {
        0
    };
    let sorted = messages.is_sorted_by(|a, b| a.order_key() <= b.order_key());
    // The region's checksum survives only a pure append: anything cut off
    // would have to be subtracted, so it is recomputed instead.
    if reusable < cache.ends.len() || !sorted {
        cache.crc = None;
    }
    // Rebuild the cache from the first changed message on.
    if reusable == 0 {
        cache.bytes.clear();
        cache.start = 0;
        cache.crc = None;
    } else {
        cache.bytes.truncate(cache.ends[reusable - 1]);
    }
    cache.ends.truncate(reusable);
    cache.token = 0;
    let order: Vec<usize> = if sorted {
        (0..messages.len()).collect()
    } else {
        let mut idx: Vec<usize> = (0..messages.len()).collect();
        idx.sort_by(|&a, &b| messages[a].order_key().cmp(&messages[b].order_key()));
        cache.bytes.clear();
        cache.start = 0;
        cache.ends.clear();
        idx
    };
    let appended_from = cache.bytes.len();
    for &i in &order[cache.ends.len()..] {
        if !cache.ends.is_empty() {
            cache.bytes.extend_from_slice(b",\n");
        }
        write_indented(&messages[i], 4, &mut cache.bytes);
        cache.ends.push(cache.bytes.len());
    }
    let region = &cache.bytes[cache.start..];
    let messages_crc = match &mut cache.crc {
        Some(h) => {
            h.update(&cache.bytes[appended_from..]);
            Some(h.clone())
        }
        None if cache.checksum => {
            let mut h = crc32fast::Hasher::new();
            h.update(region);
            cache.crc = Some(h.clone());
            Some(h)
        }
        None => None,
    };

    let (head, tail) = head_and_tail(state, region.is_empty());
    CanonicalParts {
        head,
        messages: &cache.bytes[cache.start..],
        tail,
        messages_crc,
    }
}

/// The canonical bytes before and after the messages' elements.
fn head_and_tail(state: &State, no_messages: bool) -> (Vec<u8>, Vec<u8>) {
    let head = head_bytes(state, no_messages);
    let mut tail = Vec::with_capacity(4096);
    if no_messages {
        tail.push(b']');
    } else {
        tail.extend_from_slice(b"\n  ]");
    }
    tail.extend_from_slice(b",\n  \"truth\": ");
    write_pretty_at(&state.truth, 2, &mut tail);
    for (key, value) in &state.extra {
        tail.extend_from_slice(b",\n  ");
        write_compact(key, &mut tail);
        tail.extend_from_slice(b": ");
        write_pretty_at(value, 2, &mut tail);
    }
    tail.extend_from_slice(b"\n}\n");
    (head, tail)
}

/// The canonical bytes before the messages' elements: `{` … `"messages": [`
/// and, when there are messages, the newline before the first.
fn head_bytes(state: &State, no_messages: bool) -> Vec<u8> {
    let mut head = Vec::with_capacity(4096 + state.context.len());
    head.extend_from_slice(b"{\n  \"version\": ");
    head.extend_from_slice(state.version.to_string().as_bytes());
    for (key, value) in [
        ("schema", state.schema.as_str()),
        ("date", state.date.as_str()),
        ("context", state.context.as_str()),
    ] {
        head.extend_from_slice(b",\n  ");
        write_compact(key, &mut head);
        head.extend_from_slice(b": ");
        write_compact(value, &mut head);
    }
    head.extend_from_slice(b",\n  \"messages\": [");
    if !no_messages {
        head.push(b'\n');
    }
    head
}

impl MessageCache {
    /// True when the cache holds every message of `state` unchanged since
    /// it was filled.
    pub fn is_sealed_for(&self, state: &State) -> bool {
        self.token != 0
            && self.token == state.save_token()
            && state.clean_prefix() == state.messages().len()
            && self.len() == state.messages().len()
    }

    /// Marks the cache as matching the save named by `token`
    /// (from [`State::mark_saved`]).
    pub fn seal(&mut self, token: u64) {
        self.token = token;
    }
}

/// Where the messages' elements lie in a file written in the canonical
/// layout, found by a byte scan (no parse): see [`Layout::scan`].
#[derive(Debug)]
struct Layout {
    /// Offset of the first element (just after `"messages": [\n`).
    start: usize,
    /// Each element's start and end (just after its closing `}`).
    spans: Vec<(usize, usize)>,
}

impl Layout {
    /// In the canonical layout the top-level keys are indented by 2 spaces,
    /// a message element is `    {` … `\n    }` with everything inside it
    /// deeper, and JSON strings hold no raw newline: so the first
    /// `\n  "messages": [\n` opens the array, and each `\n    }` closes an
    /// element. `None`: the bytes are not laid out that way, or the array is
    /// empty.
    fn scan(bytes: &[u8]) -> Option<Layout> {
        const OPEN: &[u8] = b",\n  \"messages\": [\n";
        const END: &[u8] = b"\n    }";
        let start = memchr::memmem::find(bytes, OPEN)? + OPEN.len();
        let finder = memchr::memmem::Finder::new(END);
        let mut spans = Vec::new();
        let mut at = start;
        loop {
            if !bytes.get(at..)?.starts_with(b"    {") {
                return None;
            }
            let end = at + finder.find(&bytes[at..])? + END.len();
            spans.push((at, end));
            let rest = &bytes[end..];
            if rest.starts_with(b",\n") {
                at = end + 2;
            } else if rest.starts_with(b"\n  ],") {
                return Some(Layout { start, spans });
            } else {
                return None;
            }
        }
    }

    /// Offset just after the last element.
    fn end(&self) -> usize {
        self.spans.last().map_or(self.start, |s| s.1)
    }
}

/// Below this many messages one thread parses the file alone: a second
/// thread costs more to start than it saves.
const SPLIT_PARSE_MIN: usize = 4096;

/// Messages a state read from a file can take in before its vector grows:
/// a turn appends two (a session a few each turn), and growing a vector of
/// 100k messages copies all of them (~10 ms a turn at that size).
const APPEND_ROOM: usize = 64;

/// Parses a state file that a store recorded writing — `expected_crc32` is
/// the CRC-32 (IEEE) of the bytes it wrote — and, when `bytes` are exactly
/// those (same CRC-32) and in the canonical layout, also returns the
/// [`MessageCache`] of its messages taken from the file's own bytes, so the
/// next save writes them back without serialising them again (seal it with
/// the token of [`State::mark_saved`]).
///
/// The state is always the one [`parse`] gives (the same errors with the
/// same pointers, too); for a file the store wrote, its messages are parsed
/// on two threads (each element on its own: the layout says where each
/// one lies). Any other bytes — a hand edit, a truncation, an older
/// store's file — are parsed by [`parse`] and get no cache.
///
/// Why re-using the bytes is exact: a canonical writer's bytes re-parse to
/// a state that serialises to the same bytes (the round-trip property
/// tests); the cache is still only seeded after checking that the head is
/// the canonical head of the parsed state and each element starts with its
/// message's id, in order (so no id was derived and no message moved).
pub fn parse_written(
    bytes: Vec<u8>,
    expected_crc32: u32,
) -> Result<(State, Option<MessageCache>), ParseError> {
    let Some(layout) = Layout::scan(&bytes) else {
        return parse(&bytes).map(|s| (s, None));
    };
    let last = layout.end();
    let crc_of = |a: usize, b: usize| {
        let mut h = crc32fast::Hasher::new();
        h.update(&bytes[a..b]);
        h
    };
    let whole_crc = |region: &crc32fast::Hasher| {
        let mut whole = crc_of(0, layout.start);
        whole.combine(region);
        whole.combine(&crc_of(last, bytes.len()));
        whole.finalize()
    };
    let (state, region) = if layout.spans.len() >= SPLIT_PARSE_MIN {
        // Checksum and parse at once, each thread its half; the result is
        // only used if the checksum then matches.
        let (state, region) = parse_split(&bytes, &layout);
        if whole_crc(&region) != expected_crc32 {
            return parse(&bytes).map(|s| (s, None));
        }
        match state {
            Some(parsed) => (parsed, region),
            // Whatever is wrong, `parse` says it the usual way.
            None => (
                Split {
                    state: parse(&bytes)?,
                    ids_in_place: false,
                },
                region,
            ),
        }
    } else {
        let region = crc_of(layout.start, last);
        if whole_crc(&region) != expected_crc32 {
            return parse(&bytes).map(|s| (s, None));
        }
        (
            Split {
                state: parse(&bytes)?,
                ids_in_place: false,
            },
            region,
        )
    };
    let Split {
        state,
        ids_in_place,
    } = state;
    let cache = seed(&state, bytes, layout, region, ids_in_place);
    Ok((state, cache))
}

/// Elements one claim of [`parse_split`] reads: small enough that the two
/// threads finish within a fraction of a millisecond of each other.
const CLAIM: usize = 256;

/// [`parse`] with the messages' elements deserialised on two threads and
/// the rest of the document (its head, `[]` for the messages, its tail)
/// on this one. The elements are read in claims of [`CLAIM`]: this thread
/// takes them from the front once the document is read, the other from
/// the back, until they meet (a split fixed in advance left one thread
/// waiting for the other a quarter of the time: fresh memory costs one
/// more than the other, and the document's share is not its byte count).
/// Each claim also takes the CRC-32 of its bytes. The state is `None` on
/// any error: the caller re-parses with [`parse`] for its report. The
/// checksum is the whole region's.
fn parse_split(bytes: &[u8], layout: &Layout) -> (Option<Split>, crc32fast::Hasher) {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    let spans = &layout.spans;
    let n = spans.len();
    let claims = n.div_ceil(CLAIM);
    // The bytes of claim `c`: from its first element to the next claim's
    // first element (separators included), so the claims tile the region.
    let bounds = |c: usize| {
        let from = spans[c * CLAIM].0;
        let to = spans.get((c + 1) * CLAIM).map_or(layout.end(), |s| s.0);
        (from, to)
    };
    // Claim `c` read into `out`: its checksum and whether each element
    // opened with its id (for `seed`, while the bytes are in the CPU's
    // cache). Its text is checked as UTF-8 once, in one pass, so the reader
    // need not check every string on its own.
    let read_claim = |c: usize, out: &mut Vec<Message>| -> Option<(crc32fast::Hasher, bool)> {
        let (from, to) = bounds(c);
        let chunk = &bytes[from..to];
        let text = std::str::from_utf8(chunk).ok()?;
        let mut ids_in_place = true;
        for &(a, b) in &spans[c * CLAIM..((c + 1) * CLAIM).min(n)] {
            let m = crate::canonical_read::read_message(&text[a - from..b - from]).ok()?;
            if !message_ok(&m) {
                return None;
            }
            ids_in_place &= opens_with_id(&bytes[a..b], &m.id);
            out.push(m);
        }
        let mut crc = crc32fast::Hasher::new();
        crc.update(chunk);
        Some((crc, ids_in_place))
    };
    // Claims not yet taken: `front..back`.
    let open = Mutex::new((0usize, claims));
    let failed = AtomicBool::new(false);
    let take = |from_front: bool| -> Option<usize> {
        if failed.load(Ordering::Relaxed) {
            return None;
        }
        let mut open = open.lock().unwrap_or_else(|e| e.into_inner());
        let (front, back) = &mut *open;
        if front >= back {
            return None;
        }
        Some(if from_front {
            *front += 1;
            *front - 1
        } else {
            *back -= 1;
            *back
        })
    };
    // The messages, in order, into a vector of the right size and room for
    // a turn's appends (growing one of 100k messages would move and zero
    // tens of MB); `None` on an error.
    // The front: its messages, each claim's checksum, whether the ids were
    // in place; the back: each claim's messages, checksum and ids.
    type Front = Option<(Vec<Message>, Vec<crc32fast::Hasher>, bool)>;
    type Back = Option<Vec<(Vec<Message>, crc32fast::Hasher, bool)>>;
    let (doc, front, back): (_, Front, Back) = std::thread::scope(|scope| {
        let other = scope.spawn(|| {
            let mut taken = Vec::new();
            while let Some(c) = take(false) {
                let mut out = Vec::with_capacity(CLAIM);
                let Some((crc, ids)) = read_claim(c, &mut out) else {
                    failed.store(true, Ordering::Relaxed);
                    return None;
                };
                taken.push((out, crc, ids));
            }
            Some(taken)
        });
        // The array emptied: `[` + `]`, then what follows the last
        // element's closing `\n  ]`.
        let mut doc = Vec::with_capacity(layout.start + bytes.len() - layout.end());
        doc.extend_from_slice(&bytes[..layout.start - 1]);
        doc.push(b']');
        doc.extend_from_slice(&bytes[layout.end() + 4..]);
        let doc = parse_untracked(&doc).ok();
        let mut messages = Vec::with_capacity(n + APPEND_ROOM);
        let mut crcs = Vec::new();
        let mut ids_in_place = true;
        let mut front = Some(());
        while let Some(c) = take(true) {
            match read_claim(c, &mut messages) {
                Some((crc, ids)) => {
                    crcs.push(crc);
                    ids_in_place &= ids;
                }
                None => {
                    failed.store(true, Ordering::Relaxed);
                    front = None;
                    break;
                }
            }
        }
        // The spawned thread only parses and hashes: it cannot panic on
        // any input; were it to, this thread panics with it.
        let back = other
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        (doc, front.map(|()| (messages, crcs, ids_in_place)), back)
    });
    let mut region = crc32fast::Hasher::new();
    let state = (|| {
        let (mut messages, crcs, front_ids) = front?;
        let back = back?;
        // Every claim was read (none failed), the front's in order, the
        // back's from the end: the region's checksum in the file's order.
        for crc in &crcs {
            region.combine(crc);
        }
        let mut ids_in_place = front_ids;
        for (chunk, crc, ids) in back.into_iter().rev() {
            messages.extend(chunk);
            region.combine(&crc);
            ids_in_place &= ids;
        }
        let mut state = doc?;
        if !state.messages.is_empty() {
            return None;
        }
        state.messages = messages;
        if !state_ok_but_messages(&state) {
            return None;
        }
        // Each element opened with its id and normalising moves nothing:
        // the i-th element is the i-th message.
        let sorted = state
            .messages
            .is_sorted_by(|a, b| a.order_key() <= b.order_key());
        // An element that opens with its id has one: only when some did
        // not can an id be missing.
        let ids_missing = !ids_in_place && state.messages.iter().any(|m| m.id.is_empty());
        state.normalize_known(sorted, ids_missing);
        Some(Split {
            state,
            ids_in_place: ids_in_place && sorted,
        })
    })();
    // Any error: the caller re-parses with `parse`, which says what is wrong
    // whatever the checksum; the region's checksum is then taken in one go.
    if state.is_none() {
        region = crc32fast::Hasher::new();
        region.update(&bytes[layout.start..layout.end()]);
    }
    (state, region)
}

/// A state from [`parse_split`], and whether it found every element
/// opening with its message's id, in the state's order.
struct Split {
    state: State,
    ids_in_place: bool,
}

/// Whether a message element opens with `id` as its first key, written as
/// the canonical writer writes it (ids are plain ASCII: nothing to escape;
/// any other id is not taken for one).
fn opens_with_id(element: &[u8], id: &str) -> bool {
    const PREFIX: &[u8] = b"    {\n      \"id\": \"";
    let id = id.as_bytes();
    !id.is_empty()
        && id
            .iter()
            .all(|&b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
        && element.starts_with(PREFIX)
        && element[PREFIX.len()..].starts_with(id)
        && element[PREFIX.len() + id.len()..].starts_with(b"\",")
}

/// The cache of `state`'s messages from `bytes` (see [`parse_written`]);
/// `ids_in_place`: the parse already found each element opening with its
/// message's id, in order.
fn seed(
    state: &State,
    mut bytes: Vec<u8>,
    layout: Layout,
    region: crc32fast::Hasher,
    ids_in_place: bool,
) -> Option<MessageCache> {
    let messages = state.messages();
    if messages.len() != layout.spans.len() || !bytes.starts_with(&head_bytes(state, false)) {
        return None;
    }
    if !ids_in_place
        && !messages
            .iter()
            .zip(&layout.spans)
            .all(|(m, &(a, b))| opens_with_id(&bytes[a..b], &m.id))
    {
        return None;
    }
    let ends = layout.spans.iter().map(|s| s.1).collect();
    bytes.truncate(layout.end());
    Some(MessageCache {
        token: 0,
        bytes,
        start: layout.start,
        ends,
        crc: Some(region),
        checksum: true,
    })
}

fn write_compact<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    // Serialising model types and strings into memory cannot fail.
    serde_json::to_writer(&mut *out, value).expect("in-memory JSON serialisation");
}

/// Pretty-prints `value` as if nested `indent` spaces deep, straight into
/// `out` (no second pass to re-indent).
fn write_pretty_at<T: Serialize + ?Sized>(value: &T, indent: usize, out: &mut Vec<u8>) {
    let fmt = NestedPretty {
        depth: indent / 2,
        has_value: false,
    };
    let mut ser = serde_json::Serializer::with_formatter(out, fmt);
    value
        .serialize(&mut ser)
        .expect("in-memory JSON serialisation");
}

/// serde_json's two-space pretty format, starting at a given depth.
struct NestedPretty {
    depth: usize,
    has_value: bool,
}

impl NestedPretty {
    fn newline_indent<W: ?Sized + std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        const SPACES: &[u8; 64] = &[b' '; 64];
        w.write_all(b"\n")?;
        let mut n = self.depth * 2;
        while n > 0 {
            let k = n.min(SPACES.len());
            w.write_all(&SPACES[..k])?;
            n -= k;
        }
        Ok(())
    }

    /// An array or object begins with `bracket`, one level deeper.
    fn open<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        bracket: &[u8],
    ) -> std::io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(bracket)
    }

    /// … and ends with `bracket` on a line of its own unless it was empty.
    fn close<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        bracket: &[u8],
    ) -> std::io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            self.newline_indent(w)?;
        }
        w.write_all(bracket)
    }

    /// Each element or member starts on a new line, after a comma unless first.
    fn item<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        self.newline_indent(w)
    }
}

impl serde_json::ser::Formatter for NestedPretty {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"[")
    }

    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.item(w, first)
    }

    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, _w: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"{")
    }

    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.item(w, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, _w: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// A message as the canonical writer puts it in the `messages` array, from
/// its `{` to its `}` (what a parser sees as that element's bytes).
pub(crate) fn write_message_element(message: &Message, out: &mut Vec<u8>) {
    write_pretty_at(message, 4, out);
}

fn write_indented(message: &Message, indent: usize, out: &mut Vec<u8>) {
    out.extend(std::iter::repeat_n(b' ', indent));
    write_pretty_at(message, indent, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Message;
    use crate::timestamp::Timestamp;

    fn ts(s: &str) -> Timestamp {
        Timestamp::parse(s).unwrap()
    }

    #[test]
    fn canonical_bytes_round_trip_and_match_serde_pretty() {
        let mut s = State::new(ts("2026-02-22T21:10:00Z"));
        s.context = "<div><p>ctx</p></div>".into();
        s.push_message(Message::new(
            "alec",
            ts("2026-02-22T20:11:05Z"),
            "t",
            "<p>a</p>",
        ));
        s.push_message(Message::new(
            "bot",
            ts("2026-02-22T20:11:06Z"),
            "t",
            "<p>b\n\"q\"</p>",
        ));
        s.extra.insert(
            "zeta".into(),
            serde_json::json!({"b": 1, "a": [1, 2]}).into(),
        );
        let bytes = to_canonical_vec(&s);
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.ends_with("}\n"));
        // Same bytes as serde_json's own pretty printer over the same tree.
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        let mut expected = serde_json::to_vec_pretty(&v).unwrap();
        expected.push(b'\n');
        // serde_json::Value maps sort keys; ours keep model order, so compare
        // through a re-parse instead of bytes, and check the order directly.
        assert_eq!(serde_json::from_slice::<Value>(&expected).unwrap(), v);
        let keys: Vec<&str> = [
            "\"version\"",
            "\"schema\"",
            "\"date\"",
            "\"context\"",
            "\"messages\"",
            "\"truth\"",
            "\"zeta\"",
        ]
        .into_iter()
        .collect();
        let positions: Vec<usize> = keys.iter().map(|k| text.find(k).unwrap()).collect();
        assert!(positions.is_sorted(), "{text}");
        let back = parse(&bytes).unwrap();
        assert_eq!(back, s);
        assert_eq!(to_canonical_vec(&back), bytes);
    }

    #[test]
    fn empty_state_layout() {
        let s = State::new(ts("2026-01-01T00:00:00Z"));
        let text = String::from_utf8(to_canonical_vec(&s)).unwrap();
        assert!(
            text.contains("\"messages\": [],\n  \"truth\": {\n    \"trust\": [],"),
            "{text}"
        );
        assert_eq!(parse(text.as_bytes()).unwrap(), s);
    }

    #[test]
    fn cache_reuse_gives_identical_bytes() {
        let mut s = State::new(ts("2026-01-01T00:00:00Z"));
        for i in 0..5 {
            s.push_message(Message::new(
                "u",
                Timestamp::from_unix(1_800_000_000 + i),
                "t",
                format!("<p>{i}</p>"),
            ));
        }
        let mut cache = MessageCache::default();
        let mut out = Vec::new();
        write_canonical(&s, &mut cache, &mut out);
        let token = s.mark_saved();
        cache.seal(token);
        s.push_message(Message::new(
            "u",
            Timestamp::from_unix(1_900_000_000),
            "t",
            "<p>new</p>",
        ));
        assert_eq!(s.clean_prefix(), 5);
        write_canonical(&s, &mut cache, &mut out);
        assert_eq!(out, to_canonical_vec(&s));
        // An insertion in the middle invalidates the tail of the cache.
        let token = s.mark_saved();
        cache.seal(token);
        let mid = Message::new("u", Timestamp::from_unix(1_800_000_002), "t2", "<p>mid</p>");
        let mid_id = mid.id.clone();
        s.push_message(mid);
        let pos = s.messages().iter().position(|m| m.id == mid_id).unwrap();
        assert!(pos == 2 || pos == 3);
        assert_eq!(s.clean_prefix(), pos);
        write_canonical(&s, &mut cache, &mut out);
        assert_eq!(out, to_canonical_vec(&s));
        // A foreign state never uses the cache.
        let other = parse(&out).unwrap();
        write_canonical(&other, &mut cache, &mut out);
        assert_eq!(out, to_canonical_vec(&other));
    }

    #[test]
    fn errors_name_pointer_and_rule() {
        let bad = br#"{"version": 2, "schema": "x", "date": "yesterday",
            "messages": [{"title": "t", "username": "u", "timestamp": "2026-01-01T00:00:00Z"}],
            "truth": {"trust": [{"title": "t", "timestamp": "2026-01-01T00:00:00Z", "certainty": 1.5, "content": ""}]}}"#;
        let err = parse(bad).unwrap_err();
        let got: Vec<(String, &str)> = err
            .issues
            .iter()
            .map(|i| (i.pointer.clone(), i.rule))
            .collect();
        assert_eq!(
            got,
            vec![
                ("/version".to_string(), "const"),
                ("/schema".to_string(), "pattern"),
                ("/date".to_string(), "format"),
                ("/messages/0".to_string(), "required"),
                ("/truth/trust/0/certainty".to_string(), "range"),
            ]
        );
        let syntax = parse(b"{\"version\": 1,").unwrap_err();
        assert_eq!(syntax.issues[0].rule, "json-syntax");
        assert!(syntax.issues[0].message.contains("line 1"));
    }

    #[test]
    fn missing_ids_are_derived_and_order_restored() {
        let text = br#"{"version": 1, "schema": "wikioracle.llm_state", "date": "2026-01-01T00:00:00Z",
            "messages": [
              {"title": "b", "username": "u", "timestamp": "2026-01-02T00:00:00Z", "content": "<p>b</p>"},
              {"title": "a", "username": "u", "timestamp": "2026-01-01T00:00:00Z", "content": "<p>a</p>", "future_field": {"x": 1}}
            ]}"#;
        let s = parse(text).unwrap();
        assert_eq!(s.messages()[0].title, "a");
        assert_eq!(
            s.messages()[0].id,
            crate::ids::message_id("u", "2026-01-01T00:00:00Z", "<p>a</p>")
        );
        assert_eq!(
            s.messages()[0].extra["future_field"],
            serde_json::json!({"x": 1})
        );
        let again = parse(&to_canonical_vec(&s)).unwrap();
        assert_eq!(again, s);
    }
}
