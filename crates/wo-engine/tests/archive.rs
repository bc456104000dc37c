//! Archiving: an entry with `expires` unused for the
//! configured age leaves retrieval, marked and kept; a use keeps it; the
//! mark survives merges; archived entries are found on request only.

use wo_engine::archive::{Archived, archive_unused, search};
use wo_engine::assemble::estimate_tokens;
use wo_engine::turn::{CompletedTurn, apply_turn};
use wo_engine::{AssemblyOptions, assemble};
use wo_format::{Expires, State, Timestamp, TruthEntry};

const T0: i64 = 1_800_000_000;
const DAY: i64 = 86_400;

fn at(days: i64, secs: i64) -> Timestamp {
    Timestamp::from_unix(T0 + days * DAY + secs)
}

fn entry(title: &str, body: &str, expires: Option<Expires>) -> TruthEntry {
    let mut e = TruthEntry::new(title, at(0, 0), 0.9, format!("<p>{body}</p>"));
    e.expires = expires;
    e
}

fn state() -> State {
    let mut s = State::new(at(0, 0));
    s.truth.trust = vec![
        entry(
            "Kiln visit",
            "the kiln technician visits on friday",
            Some(Expires::Flag(true)),
        ),
        entry(
            "Glaze order",
            "the celadon glaze order arrives",
            Some(Expires::At(at(400, 0))),
        ),
        entry("Kiln max", "the kiln reaches 1300 C", None),
        entry(
            "Kiln colour",
            "the kiln is painted blue",
            Some(Expires::Flag(false)),
        ),
    ];
    s
}

fn turn(sent: Timestamp, sources: Vec<String>, days: Option<u32>) -> CompletedTurn {
    CompletedTurn {
        sources,
        context_used: None,
        archive_after_days: days,
        ..CompletedTurn::new(
            "ann",
            "when does the kiln technician come?",
            "Friday.",
            ("fake", "fake-1"),
            (sent.clone(), sent),
        )
    }
}

#[test]
fn the_age_boundary_is_inclusive_and_only_expiring_entries_archive() {
    let mut s = state();
    assert!(
        archive_unused(&mut s, &at(90, -1), 90).is_empty(),
        "a second short"
    );
    let ids = archive_unused(&mut s, &at(90, 0), 90);
    let titles: Vec<&str> = s
        .truth
        .trust
        .iter()
        .filter(|e| ids.contains(&e.id))
        .map(|e| e.title.as_str())
        .collect();
    assert_eq!(titles, ["Kiln visit", "Glaze order"]);
    for e in &s.truth.trust {
        if ids.contains(&e.id) {
            assert_eq!(e.archived, Some(at(90, 0)));
            assert_eq!(e.updated, Some(at(90, 0)), "the mark wins merges");
        } else {
            assert_eq!(e.archived, None, "{}: no expires, never archived", e.title);
        }
    }
    // Already archived: not again.
    assert!(archive_unused(&mut s, &at(500, 0), 90).is_empty());
}

#[test]
fn a_referenced_entry_is_kept_and_use_is_counted() {
    let mut s = state();
    let visit = s.truth.trust[0].id.clone();
    // A prompt that sends the entry counts the use and dates it.
    let mut opts = AssemblyOptions::new(&s, 4096, 256);
    opts.now = at(60, 0);
    let a = assemble(&s, "kiln technician visit", &opts, &estimate_tokens, &[]).unwrap();
    assert!(a.sources.contains(&visit), "{:?}", a.sources);
    apply_turn(&mut s, &turn(at(60, 0), a.sources.clone(), Some(90)));
    let e = &s.truth.trust[0];
    assert_eq!(e.refs, Some(1));
    assert_eq!(e.used, Some(at(60, 0)));
    // The same turn archived the unused one with expires (it was 60 days
    // old: not yet) — and 90 days after the creation, only that one goes.
    assert!(s.truth.trust.iter().all(|e| e.archived.is_none()));
    apply_turn(&mut s, &turn(at(90, 0), vec![], Some(90)));
    let archived: Vec<&str> = s
        .truth
        .trust
        .iter()
        .filter(|e| e.archived.is_some())
        .map(|e| e.title.as_str())
        .collect();
    assert_eq!(archived, ["Glaze order"], "the visit was used at day 60");
    // 90 days after its last use, the visit goes too, at the turn's clock.
    apply_turn(&mut s, &turn(at(150, -1), vec![], Some(90)));
    assert!(s.truth.trust[0].archived.is_none());
    apply_turn(&mut s, &turn(at(150, 0), vec![], Some(90)));
    assert_eq!(s.truth.trust[0].archived, Some(at(150, 0)));
    // With archiving off nothing is archived, however old.
    let mut never = state();
    apply_turn(&mut never, &turn(at(9000, 0), vec![], None));
    assert!(never.truth.trust.iter().all(|e| e.archived.is_none()));
}

#[test]
fn archived_entries_leave_retrieval_and_are_searchable_on_request() {
    let mut s = state();
    archive_unused(&mut s, &at(100, 0), 90);
    let visit = s.truth.trust[0].id.clone();
    let mut opts = AssemblyOptions::new(&s, 4096, 256);
    opts.now = at(100, 0);
    let a = assemble(&s, "kiln technician visit", &opts, &estimate_tokens, &[]).unwrap();
    assert!(!a.sources.contains(&visit));
    let dropped = a
        .dropped
        .iter()
        .find(|d| d.id.as_deref() == Some(visit.as_str()))
        .expect("reported as dropped");
    assert!(dropped.reason.starts_with("archived"), "{}", dropped.reason);
    // Search: live entries by default, archived ones on request.
    let live: Vec<&str> = search(&s, "kiln", Archived::Exclude)
        .iter()
        .map(|(_, e)| e.title.as_str())
        .collect();
    assert_eq!(live.len(), 2);
    assert!(!live.contains(&"Kiln visit"));
    let archived: Vec<&str> = search(&s, "kiln technician", Archived::Only)
        .iter()
        .map(|(_, e)| e.title.as_str())
        .collect();
    assert_eq!(archived, ["Kiln visit"]);
    assert!(search(&s, "zebra", Archived::Only).is_empty());
}

#[test]
fn merge_keeps_the_mark_either_way_and_it_round_trips() {
    let live = state();
    let mut archived = state();
    archive_unused(&mut archived, &at(100, 0), 90);
    let mut a = live.clone();
    wo_format::merge::merge_into(&mut a, &archived);
    let mut b = archived.clone();
    wo_format::merge::merge_into(&mut b, &live);
    for merged in [&a, &b] {
        assert_eq!(merged.truth.trust[0].archived, Some(at(100, 0)));
        assert_eq!(merged.truth.trust, archived.truth.trust);
    }
    // Written and read back, the fields survive and validate.
    let bytes = wo_format::to_canonical_vec(&archived);
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(text.contains("\"archived\": \"2027-04-25T"), "{text}");
    let back = wo_format::parse(&bytes).unwrap();
    assert_eq!(back.truth.trust, archived.truth.trust);
    let (errors, _warnings) = wo_format::validate_bytes(&bytes);
    assert!(errors.is_empty(), "{errors:?}");
    // A bad value is named by its pointer.
    let bad = text.replacen("\"archived\": \"2027-04-25T", "\"archived\": \"soon", 1);
    let err = wo_format::parse(bad.as_bytes()).unwrap_err().to_string();
    assert!(err.contains("/truth/trust/0/archived"), "{err}");
    let (errors, _) = wo_format::validate_bytes(bad.as_bytes());
    assert!(
        errors
            .iter()
            .any(|i| i.pointer == "/truth/trust/0/archived"),
        "{errors:?}"
    );
}
