//! Messages a state already holds, by their exact bytes in a canonical
//! file, so that admitting an export that repeats them need not parse and
//! check them again ([`crate::admit::admit_export`], the export reader in
//! `model_de`). Below both of them: it depends only on the model, the
//! canonical writer and the XHTML rules.

use std::collections::HashMap;

use crate::codec;
use crate::model::Message;
use crate::state::State;
use crate::xhtml;

/// Messages known to be admissible (a state's own, already admitted), by
/// their exact bytes in a canonical file: an export copied back from
/// elsewhere repeats most of them, and an element with exactly those bytes
/// parses to exactly that message, so [`admit_export`] need not build,
/// check and drop it again.
#[derive(Debug, Default)]
pub struct KnownMessages {
    /// The serialised messages, in pieces written on separate cores.
    pieces: Vec<Vec<u8>>,
    /// Piece, start and end of each message, in the state's order.
    spans: Vec<(usize, usize, usize)>,
    /// Index in `spans` by a hash of the message's bytes.
    by_hash: HashMap<u64, usize>,
}

impl KnownMessages {
    /// The messages of `state` (a state that was parsed or admitted, so each
    /// message passes the structural rules) whose content also passes the
    /// XHTML rules, as the canonical writer puts them in a file.
    pub fn of(state: &State) -> KnownMessages {
        let messages = state.messages();
        let failing = failing_contents(messages);
        let is_failing = |i: usize| failing.binary_search(&i).is_ok();
        let write = |offset: usize, chunk: &[Message]| {
            // About what the file holds, so the buffer is not grown by copies.
            let estimate: usize = chunk.iter().map(|m| m.content.len() + 256).sum();
            let mut bytes = Vec::with_capacity(estimate);
            let mut spans = Vec::with_capacity(chunk.len());
            for (i, m) in chunk.iter().enumerate() {
                if is_failing(offset + i) {
                    continue;
                }
                let start = bytes.len();
                codec::write_message_element(m, &mut bytes);
                spans.push((start, bytes.len()));
            }
            (bytes, spans)
        };
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let pieces: Vec<Piece> = if threads < 2 || messages.len() < 2048 {
            vec![write(0, messages)]
        } else {
            let per = messages.len().div_ceil(threads);
            std::thread::scope(|scope| {
                let handles: Vec<_> = messages
                    .chunks(per)
                    .enumerate()
                    .map(|(k, chunk)| scope.spawn(move || write(k * per, chunk)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("serialising known messages"))
                    .collect()
            })
        };
        let mut known = KnownMessages {
            pieces: Vec::with_capacity(pieces.len()),
            spans: Vec::with_capacity(messages.len()),
            by_hash: HashMap::with_capacity(messages.len()),
        };
        for (p, (bytes, spans)) in pieces.into_iter().enumerate() {
            for (start, end) in spans {
                known
                    .by_hash
                    .insert(fx_hash(&bytes[start..end]), known.spans.len());
                known.spans.push((p, start, end));
            }
            known.pieces.push(bytes);
        }
        known
    }

    fn bytes(&self, i: usize) -> Option<&[u8]> {
        let &(p, start, end) = self.spans.get(i)?;
        Some(&self.pieces[p][start..end])
    }

    /// The index of the known message whose bytes `element` (an element of
    /// a file's `messages` array, as written) are, trying `hint` first (an
    /// export mostly repeats the state's messages in the state's order).
    pub(crate) fn find(&self, element: &[u8], hint: usize) -> Option<usize> {
        if self.bytes(hint) == Some(element) {
            return Some(hint);
        }
        let &i = self.by_hash.get(&fx_hash(element))?;
        (self.bytes(i) == Some(element)).then_some(i)
    }

    /// True when `element` (an element of a file's `messages` array, as
    /// written) is byte for byte a known message.
    pub fn contains(&self, element: &[u8]) -> bool {
        self.find(element, usize::MAX).is_some()
    }

    /// Number of known messages.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// True when no message is known (every message will be parsed).
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

/// Serialised messages and the start and end of each.
type Piece = (Vec<u8>, Vec<(usize, usize)>);

/// A lookup key for a message's bytes: its length and a fast hash of its
/// first and last bytes (where the id and the closing fields sit). Only a
/// key: every hit is confirmed byte for byte, and two messages sharing one
/// only means the second is parsed as usual.
fn fx_hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    const EDGE: usize = 128;
    let mut h = bytes.len() as u64;
    let mut mix = |part: &[u8]| {
        let mut words = part.chunks_exact(8);
        for w in &mut words {
            let w = u64::from_le_bytes(w.try_into().expect("8-byte chunk"));
            h = (h.rotate_left(5) ^ w).wrapping_mul(K);
        }
        let mut last = [0u8; 8];
        last[..words.remainder().len()].copy_from_slice(words.remainder());
        h = (h.rotate_left(5) ^ u64::from_le_bytes(last)).wrapping_mul(K);
    };
    if bytes.len() <= 2 * EDGE {
        mix(bytes);
    } else {
        mix(&bytes[..EDGE]);
        mix(&bytes[bytes.len() - EDGE..]);
    }
    h
}

/// Indices of messages whose content breaks the XHTML rules, checked on all
/// cores (a large export has hundreds of thousands).
pub(crate) fn failing_contents(messages: &[Message]) -> Vec<usize> {
    let check = |offset: usize, chunk: &[Message]| -> Vec<usize> {
        chunk
            .iter()
            .enumerate()
            .filter(|(_, m)| xhtml::check_fragment(&m.content).is_err())
            .map(|(i, _)| offset + i)
            .collect()
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads < 2 || messages.len() < 2048 {
        return check(0, messages);
    }
    let per = messages.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = messages
            .chunks(per)
            .enumerate()
            .map(|(k, chunk)| scope.spawn(move || check(k * per, chunk)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}
