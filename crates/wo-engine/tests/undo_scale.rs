//! Undoing an exchange costs what its record and the entries cost, not
//! their product: a hosted server runs it on what an anonymous client sends.

use std::time::{Duration, Instant};

use serde_json::json;
use wo_engine::memory::{LOG_KEY, undo};
use wo_format::{Provenance, RawJson, State, Timestamp, TruthEntry};

const EXCHANGE: &str = "m_00000000000000aa";

fn state_with(n: usize) -> State {
    let at = Timestamp::parse("2025-01-01T00:00:00Z").unwrap();
    let mut state = State::new(at.clone());
    for i in 0..n {
        let mut e = TruthEntry::new(format!("entry {i}"), at.clone(), 0.5, "<p>x</p>");
        e.provenance = Some(Provenance {
            messages: Vec::new(),
            by: "interpreter".into(),
            at: at.clone(),
            exchange: Some(EXCHANGE.into()),
            extra: Default::default(),
        });
        state.truth.trust.push(e);
    }
    let created: Vec<String> = state.truth.trust.iter().map(|e| e.id.clone()).collect();
    let record = json!({
        "exchange": EXCHANGE, "by": "interpreter", "at": "2025-01-01T00:00:00Z",
        "messages": [], "ops": [], "created": created, "touched": created,
    });
    state
        .extra
        .insert(LOG_KEY.into(), RawJson::from(json!([record])));
    state
}

#[test]
fn undoing_thirty_thousand_entries_is_linear() {
    let mut state = state_with(30_000);
    let start = Instant::now();
    let undone = undo(&mut state, EXCHANGE, Timestamp::now()).unwrap();
    let took = start.elapsed();
    // Linear work takes a fraction of this in a debug build; the
    // quadratic lookups took minutes.
    assert!(took < Duration::from_secs(10), "undo took {took:?}");
    assert_eq!(undone.removed.len(), 30_000);
    assert!(
        undone.untouched.is_empty(),
        "removed entries are not untouched"
    );
    assert!(state.truth.trust.is_empty());
    assert_eq!(state.truth.deleted.len(), 30_000);
    assert!(state.truth.deleted.is_sorted_by(|a, b| a.id <= b.id));
}

#[test]
fn undo_keeps_what_was_edited_since_and_untouches_the_rest() {
    let mut state = state_with(3);
    let kept = state.truth.trust[1].id.clone();
    state.truth.trust[1].updated = Some(Timestamp::now());
    let undone = undo(&mut state, EXCHANGE, Timestamp::now()).unwrap();
    assert_eq!(undone.removed.len(), 2);
    assert_eq!(undone.kept, vec![kept.clone()]);
    assert_eq!(undone.untouched, vec![kept.clone()]);
    assert_eq!(state.truth.trust.len(), 1);
    assert_eq!(state.truth.trust[0].id, kept);
    assert_eq!(state.truth.deleted.len(), 2);
}
