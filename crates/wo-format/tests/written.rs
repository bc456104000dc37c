//! `parse_written`, the one-shot writer's read of a file a store wrote: it
//! must give exactly what `parse` gives for any bytes, and the message cache
//! it seeds from the file's bytes must make a save write exactly the bytes
//! serialising would. Any byte changed, a truncation or a checksum that does
//! not match takes the full path (no cache).

mod common;

use proptest::prelude::*;
use wo_format::{
    MessageCache, State, Timestamp, canonical_parts, parse, parse_written, to_canonical_vec,
};

/// Enough messages for the two-thread parse (its threshold is 4096).
const BIG: usize = 4200;

fn filler(i: usize) -> wo_format::Message {
    wo_format::Message::new(
        if i.is_multiple_of(2) { "alec" } else { "bot" },
        Timestamp::from_unix(1_700_000_000 + i as i64),
        format!("turn {i}"),
        format!("<p>turn {i} with \"quotes\", a tab\tand é</p>"),
    )
}

fn padded(mut state: State, n: usize) -> State {
    for i in 0..n {
        state.push_message(filler(i));
    }
    state
}

fn appended() -> wo_format::Message {
    wo_format::Message::new(
        "alec",
        Timestamp::from_unix(2_000_000_000),
        "new",
        "<p>new turn</p>",
    )
}

/// What a save writes after appending one turn to `state`, using `cache`.
fn save_after_append(mut state: State, cache: &mut MessageCache) -> (Vec<u8>, u32) {
    state.push_message(appended());
    let parts = canonical_parts(&state, cache);
    (parts.chunks().concat(), parts.crc32())
}

/// The fast path against the full path for the bytes a writer wrote.
fn check_fast_equals_full(state: &State) -> Result<(), TestCaseError> {
    let bytes = to_canonical_vec(state);
    let crc = crc32fast::hash(&bytes);
    let (mut fast, cache) = parse_written(bytes.clone(), crc).unwrap();
    let mut full = parse(&bytes).unwrap();
    prop_assert_eq!(&fast, &full);
    let mut cache = cache.expect("a canonical file the store wrote seeds the cache");
    prop_assert_eq!(cache.len(), fast.messages().len());
    cache.seal(fast.mark_saved());
    full.mark_saved();
    let (fast_out, fast_crc) = save_after_append(fast, &mut cache);
    let (full_out, full_crc) = save_after_append(full, &mut MessageCache::default());
    prop_assert!(fast_out == full_out, "fast path wrote other bytes");
    prop_assert_eq!(fast_crc, full_crc);
    prop_assert_eq!(fast_crc, crc32fast::hash(&full_out));
    // A second append on the same cache: the region checksum was extended.
    let mut again = parse(&fast_out).unwrap();
    let token = again.mark_saved();
    cache.seal(token);
    let (out2, crc2) = save_after_append2(again, &mut cache);
    prop_assert_eq!(crc2, crc32fast::hash(&out2));
    Ok(())
}

fn save_after_append2(mut state: State, cache: &mut MessageCache) -> (Vec<u8>, u32) {
    state.push_message(wo_format::Message::new(
        "bot",
        Timestamp::from_unix(2_000_000_100),
        "second",
        "<p>second</p>",
    ));
    let parts = canonical_parts(&state, cache);
    (parts.chunks().concat(), parts.crc32())
}

/// Whatever the bytes, `parse_written` says what `parse` says, and seeds
/// nothing unless the checksum matches.
fn check_same_verdict(bytes: &[u8], crc: u32) -> Result<(), TestCaseError> {
    let fast = parse_written(bytes.to_vec(), crc);
    let full = parse(bytes);
    match (fast, full) {
        (Ok((state, cache)), Ok(expected)) => {
            prop_assert_eq!(state, expected);
            if crc != crc32fast::hash(bytes) {
                prop_assert!(cache.is_none(), "seeded from bytes the checksum refused");
            }
        }
        (Err(a), Err(b)) => prop_assert_eq!(a, b),
        (a, b) => prop_assert!(false, "verdicts differ: {:?} vs {:?}", a.is_ok(), b.is_ok()),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(64), ..ProptestConfig::default() })]

    /// Small generated states (unknown fields, raw numbers, fractional
    /// timestamps): one thread parses, the cache is seeded.
    #[test]
    fn fast_path_output_equals_full_path_output(state in common::strategies::state()) {
        prop_assume!(!state.messages().is_empty());
        check_fast_equals_full(&state)?;
    }


    /// One byte changed anywhere (the checksum recorded for the original):
    /// the full path's verdict, no cache.
    #[test]
    fn a_changed_byte_takes_the_full_path(
        state in common::strategies::state(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let bytes = to_canonical_vec(&padded(state, 8));
        let crc = crc32fast::hash(&bytes);
        let mut changed = bytes.clone();
        let i = at.index(changed.len());
        prop_assume!(changed[i] != byte);
        changed[i] = byte;
        check_same_verdict(&changed, crc)?;
    }

    /// Truncated anywhere: the full path's error (same pointer), no cache.
    #[test]
    fn a_truncated_file_takes_the_full_path(
        state in common::strategies::state(),
        at in any::<prop::sample::Index>(),
    ) {
        let bytes = to_canonical_vec(&padded(state, 8));
        let crc = crc32fast::hash(&bytes);
        let cut = at.index(bytes.len());
        check_same_verdict(&bytes[..cut], crc)?;
    }
}

proptest! {
    // Each case parses a few thousand messages several times: fewer cases.
    #![proptest_config(ProptestConfig { cases: common::cases(8), ..ProptestConfig::default() })]

    /// The same with enough messages for the two-thread parse.
    #[test]
    fn split_parse_output_equals_full_path_output(state in common::strategies::state()) {
        check_fast_equals_full(&padded(state, BIG))?;
    }

    /// A big file changed in one byte whose record matches the change (a
    /// forged record, or a checksum collision): the two-thread parse reads
    /// its elements in their canonical layout, and still says exactly what
    /// `parse` says.
    #[test]
    fn a_big_file_with_a_matching_record_gets_the_full_verdict(
        state in common::strategies::state(),
        at in any::<prop::sample::Index>(),
        byte in prop::sample::select(b"\"\\{}[],:\n 0aZ\x01\xc3".to_vec()),
    ) {
        let mut bytes = to_canonical_vec(&padded(state, BIG));
        // In the first 40 KB of the messages' elements.
        let start = bytes.windows(6).position(|w| w == b"\n    {").unwrap_or(0);
        let i = start + at.index((bytes.len() - start).min(40_000));
        prop_assume!(bytes[i] != byte);
        bytes[i] = byte;
        let crc = crc32fast::hash(&bytes);
        check_same_verdict(&bytes, crc)?;
    }
}

/// A checksum that is not the file's (forged, or from another version):
/// parsed the full way, nothing seeded — also past the two-thread threshold.
#[test]
fn a_wrong_checksum_seeds_nothing() {
    let state = padded(State::new(Timestamp::from_unix(1_800_000_000)), BIG);
    let bytes = to_canonical_vec(&state);
    let crc = crc32fast::hash(&bytes);
    let (parsed, cache) = parse_written(bytes.clone(), crc ^ 1).unwrap();
    assert!(cache.is_none());
    assert_eq!(parsed, parse(&bytes).unwrap());
    let (_, cache) = parse_written(bytes, crc).unwrap();
    assert_eq!(cache.map(|c| c.len()), Some(BIG));
}

/// A damaged file past the two-thread threshold still gets the full path's
/// error, with its JSON pointer.
#[test]
fn a_damaged_big_file_reports_where() {
    let state = padded(State::new(Timestamp::from_unix(1_800_000_000)), BIG);
    let text = String::from_utf8(to_canonical_vec(&state)).unwrap();
    // A wrong type deep in the second half: the same length, valid JSON.
    let needle = "\"username\": \"bot\"";
    let at = text.rfind(needle).unwrap();
    let mut damaged = text.clone().into_bytes();
    damaged[at + 12..at + 12 + 5].copy_from_slice(b"12345");
    let crc = crc32fast::hash(&damaged);
    let err = parse_written(damaged.clone(), crc).unwrap_err();
    assert_eq!(err, parse(&damaged).unwrap_err());
    assert!(
        err.issues
            .iter()
            .any(|i| i.pointer.starts_with("/messages/") && i.pointer.ends_with("/username")),
        "{err}"
    );
}

/// A checksum forged to match bytes that are not UTF-8 (past the two-thread
/// threshold, where the halves are checked as text once): `parse`'s error.
#[test]
fn forged_checksum_over_invalid_utf8_gets_the_parse_error() {
    let state = padded(State::new(Timestamp::from_unix(1_800_000_000)), BIG);
    let mut bytes = to_canonical_vec(&state);
    let at = bytes.windows(4).rposition(|w| w == b"turn").unwrap();
    bytes[at] = 0xff;
    let err = parse_written(bytes.clone(), crc32fast::hash(&bytes)).unwrap_err();
    assert_eq!(err, parse(&bytes).unwrap_err());
}
