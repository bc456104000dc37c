//! The recall sidecar (`wo_engine::recall_file`) is a cache that never
//! changes an answer: whatever happened to the file or the transcript since
//! it was written (nothing, appended turns, a hand edit, an insertion, a
//! deleted message, damage, a cut, another file's sidecar), the index
//! `load` returns assembles exactly the context the scan does, and `load`
//! says truthfully whether it read or rebuilt it.

use std::path::Path;

use proptest::prelude::*;
use wo_engine::assemble::estimate_tokens;
use wo_engine::recall_file::{self, Loaded, Rebuilt};
use wo_engine::{AssemblyOptions, RecallIndex, assemble, assemble_indexed};
use wo_format::{Message, State, Timestamp};

const NOW: i64 = 1_800_000_000;
const WORDS: &[&str] = &[
    "kiln",
    "glaze",
    "firing",
    "fired",
    "cone",
    "porcelain",
    "clay",
    "garden",
    "the",
    "and",
    "HTTPServer",
    "étude",
    "日本",
];
const QUERY: &str = "Caroline: what firing schedule for the porcelain kiln glaze?";

fn message(i: usize, words: &[usize]) -> Message {
    let text: Vec<&str> = words.iter().map(|&w| WORDS[w % WORDS.len()]).collect();
    let text = text.join(" ");
    Message::new(
        ["Caroline", "smollm2", "ann"][i % 3],
        Timestamp::from_unix(NOW - 1_000_000 + 10 * i as i64),
        text.clone(),
        format!("<p>{text}</p>"),
    )
}

fn state_of(specs: &[Vec<usize>]) -> State {
    let mut s = State::new(Timestamp::from_unix(NOW));
    for (i, words) in specs.iter().enumerate() {
        s.push_message(message(i, words));
    }
    s
}

/// The context from `index` equals the scan's, part for part.
fn assert_same_context(state: &State, index: &RecallIndex) {
    assert!(
        index.is_current(state),
        "the loaded index reflects the state"
    );
    let mut opts = AssemblyOptions::new(state, 700, 64);
    opts.now = Timestamp::from_unix(NOW);
    let scan = assemble(state, QUERY, &opts, &estimate_tokens, &[]).unwrap();
    let indexed =
        assemble_indexed(state, Some(index), QUERY, &opts, &estimate_tokens, &[]).unwrap();
    assert_eq!(scan.system, indexed.system);
    assert_eq!(scan.turns, indexed.turns);
    assert_eq!(scan.included, indexed.included);
    assert_eq!(scan.dropped, indexed.dropped);
}

fn load_and_check(path: &Path, state: &State) -> (RecallIndex, Loaded) {
    let (index, loaded) = recall_file::load(path, state);
    assert_same_context(state, &index);
    (index, loaded)
}

fn specs(n: usize) -> Vec<Vec<usize>> {
    (0..n)
        .map(|i| vec![i % 13, (i * 7) % 13, (i * 3) % 5])
        .collect()
}

#[test]
fn read_when_it_fits_rebuilt_when_it_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let llm = dir.path().join("llm.json");
    let path = recall_file::sidecar_path(&llm);
    assert_eq!(path, dir.path().join(".llm.json.recall"));
    let mut state = state_of(&specs(60));

    // Missing: built, and written.
    let (mut index, loaded) = load_and_check(&path, &state);
    assert_eq!(loaded, Loaded::Rebuilt(Rebuilt::Missing));
    assert!(recall_file::save(&path, &mut index, &state, &loaded).unwrap());
    let written = std::fs::read(&path).unwrap();
    assert!(written.starts_with(recall_file::MAGIC));

    // As written: read.
    let (mut index, loaded) = load_and_check(&path, &state);
    assert_eq!(loaded, Loaded::Read { covered: 60 });
    assert!(!recall_file::save(&path, &mut index, &state, &loaded).unwrap());

    // Two turns appended (what `wo ask` does): read, the two added; not
    // rewritten for so few.
    state.push_message(message(60, &[0, 5]));
    state.push_message(message(61, &[1, 2]));
    let (mut index, loaded) = load_and_check(&path, &state);
    assert_eq!(loaded, Loaded::Read { covered: 60 });
    assert!(!recall_file::save(&path, &mut index, &state, &loaded).unwrap());
    assert_eq!(std::fs::read(&path).unwrap(), written);

    // A hand edit of an indexed message's text: stale, rebuilt, rewritten.
    let mut edited = state.clone();
    edited.messages_mut()[10].content = "<p>kiln kiln porcelain</p>".into();
    let (mut index, loaded) = load_and_check(&path, &edited);
    assert_eq!(loaded, Loaded::Rebuilt(Rebuilt::Stale));
    assert!(recall_file::save(&path, &mut index, &edited, &loaded).unwrap());
    assert_eq!(
        recall_file::load(&path, &edited).1,
        Loaded::Read { covered: 62 }
    );
    // … and the original is now the stale one (same length, other text).
    assert_eq!(
        load_and_check(&path, &state).1,
        Loaded::Rebuilt(Rebuilt::Stale)
    );

    // A speaker renamed by hand: the speaker is scored, so stale too.
    let mut renamed = edited.clone();
    renamed.messages_mut()[3].username = "Melanie".into();
    assert_eq!(
        load_and_check(&path, &renamed).1,
        Loaded::Rebuilt(Rebuilt::Stale)
    );

    // A message deleted (fewer messages than the file covers), or one
    // inserted before the end: stale.
    let mut shorter = edited.clone();
    shorter.messages_mut().pop();
    assert_eq!(
        load_and_check(&path, &shorter).1,
        Loaded::Rebuilt(Rebuilt::Stale)
    );
    let mut inserted = edited.clone();
    let mut early = message(0, &[0, 1, 2]);
    early.timestamp = Timestamp::from_unix(NOW - 999_995);
    early.id = "m_0000000000000001".into();
    inserted.push_message(early);
    assert_eq!(
        load_and_check(&path, &inserted).1,
        Loaded::Rebuilt(Rebuilt::Stale)
    );
    // A title change is not scored: still read.
    let mut titled = edited.clone();
    let id = titled.messages()[5].id.clone();
    titled.set_message_title(
        &id,
        "kiln notes".into(),
        Timestamp::from_unix(1_900_000_000),
    );
    assert_eq!(
        load_and_check(&path, &titled).1,
        Loaded::Read { covered: 62 }
    );
}

#[test]
fn damage_of_any_kind_is_rebuilt_never_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".llm.json.recall");
    let state = state_of(&specs(40));
    let (mut index, loaded) = recall_file::load(&path, &state);
    recall_file::save(&path, &mut index, &state, &loaded).unwrap();
    let good = std::fs::read(&path).unwrap();

    let unreadable = |bytes: &[u8]| {
        std::fs::write(&path, bytes).unwrap();
        let (index, loaded) = load_and_check(&path, &state);
        assert!(
            matches!(loaded, Loaded::Rebuilt(Rebuilt::Unreadable(ref why)) if why.contains(".llm.json.recall")),
            "{loaded:?}"
        );
        index
    };
    // Every cut, and a flipped bit anywhere (sampled), is refused.
    for cut in (0..good.len()).step_by(good.len() / 97 + 1) {
        unreadable(&good[..cut]);
    }
    for at in (0..good.len()).step_by(good.len() / 89 + 1) {
        let mut bad = good.clone();
        bad[at] ^= 0x10;
        unreadable(&bad);
    }
    unreadable(b"");
    unreadable(b"{\"version\": 1}");
    // Another layout version with a valid checksum: refused by its magic.
    let mut other = good[..good.len() - 4].to_vec();
    other[7] = b'9';
    let sum = crc32fast::hash(&other);
    other.extend_from_slice(&sum.to_le_bytes());
    unreadable(&other);
    // A directory where the file should be: rebuilt, and saving fails
    // without touching it.
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    let (mut index, loaded) = load_and_check(&path, &state);
    assert!(matches!(loaded, Loaded::Rebuilt(Rebuilt::Unreadable(_))));
    assert!(recall_file::save(&path, &mut index, &state, &loaded).is_err());
    assert!(path.is_dir());
    // No temp file is left behind by the failed save.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_link_or_fifo_at_the_sidecar_is_rebuilt_at_once_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".llm.json.recall");
    let state = state_of(&specs(10));
    // /dev/zero once made `load` read until memory ran out; a FIFO made it
    // wait for ever.
    std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
    let start = std::time::Instant::now();
    let (_, loaded) = load_and_check(&path, &state);
    assert!(
        matches!(loaded, Loaded::Rebuilt(Rebuilt::Unreadable(ref why)) if why.contains("is a symbolic link")),
        "{loaded:?}"
    );
    std::fs::remove_file(&path).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap()
            .success()
    );
    let (_, loaded) = load_and_check(&path, &state);
    assert!(
        matches!(loaded, Loaded::Rebuilt(Rebuilt::Unreadable(ref why)) if why.contains("is not a regular file")),
        "{loaded:?}"
    );
    assert!(start.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn many_appends_are_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".llm.json.recall");
    let mut state = state_of(&specs(10));
    let (mut index, loaded) = recall_file::load(&path, &state);
    recall_file::save(&path, &mut index, &state, &loaded).unwrap();
    for i in 10..(11 + recall_file::REWRITE_AFTER) {
        state.push_message(message(i, &[i % 13]));
    }
    let (mut index, loaded) = load_and_check(&path, &state);
    assert_eq!(loaded, Loaded::Read { covered: 10 });
    assert!(recall_file::save(&path, &mut index, &state, &loaded).unwrap());
    assert_eq!(
        recall_file::load(&path, &state).1,
        Loaded::Read {
            covered: state.messages().len()
        }
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Random transcripts, a sidecar written for one of them, then random
    /// appends, edits and damage: the context is always the scan's.
    #[test]
    fn any_history_assembles_the_scans_context(
        start in proptest::collection::vec(proptest::collection::vec(0usize..13, 0..8), 0..40),
        appended in proptest::collection::vec(proptest::collection::vec(0usize..13, 0..8), 0..6),
        edit in proptest::option::of((0usize..40, proptest::collection::vec(0usize..13, 0..8))),
        damage in proptest::option::of((0usize..100_000, 1u8..=255)),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".llm.json.recall");
        let mut state = state_of(&start);
        let (mut index, loaded) = recall_file::load(&path, &state);
        recall_file::save(&path, &mut index, &state, &loaded).unwrap();
        let n = state.messages().len();
        for (i, words) in appended.iter().enumerate() {
            state.push_message(message(n + i, words));
        }
        if let Some((at, words)) = &edit
            && !state.messages().is_empty()
        {
            let len = state.messages().len();
            let text: Vec<&str> = words.iter().map(|&w| WORDS[w]).collect();
            state.messages_mut()[at % len].content = format!("<p>{}</p>", text.join(" "));
        }
        if let Some((at, mask)) = damage {
            let mut bytes = std::fs::read(&path).unwrap();
            let len = bytes.len();
            bytes[at % len] ^= mask;
            std::fs::write(&path, bytes).unwrap();
        }
        let (index, loaded) = recall_file::load(&path, &state);
        prop_assert!(index.is_current(&state));
        if damage.is_some() {
            prop_assert!(matches!(loaded, Loaded::Rebuilt(Rebuilt::Unreadable(_))), "{:?}", loaded);
        }
        let mut opts = AssemblyOptions::new(&state, 500, 64);
        opts.now = Timestamp::from_unix(NOW);
        let scan = assemble(&state, QUERY, &opts, &estimate_tokens, &[]).unwrap();
        let indexed = assemble_indexed(&state, Some(&index), QUERY, &opts, &estimate_tokens, &[]).unwrap();
        prop_assert_eq!(scan.system, indexed.system);
        prop_assert_eq!(scan.turns, indexed.turns);
        prop_assert_eq!(scan.included, indexed.included);
        prop_assert_eq!(scan.dropped, indexed.dropped);
    }
}

/// The postings are read lazily, each list checked when first read: a file
/// whose checksum is right but whose lists are malformed (written by a
/// broken or hostile program) is read, and whichever list a question
/// touches that is malformed makes recall scan — the context is still the
/// scan's, for questions naming any word of the transcript, before and
/// after turns are appended to the lists.
#[test]
fn a_malformed_list_behind_a_valid_checksum_never_changes_the_context() {
    let dir = tempfile::tempdir().unwrap();
    let path = recall_file::sidecar_path(&dir.path().join("llm.json"));
    let mut state = state_of(&specs(40));
    let (mut index, loaded) = recall_file::load(&path, &state);
    assert!(recall_file::save(&path, &mut index, &state, &loaded).unwrap());
    let good = std::fs::read(&path).unwrap();
    // Every pair of the lists (the bytes before the checksum, back to the
    // end of the directory) in turn: its document set past the last one,
    // the checksum recomputed.
    let body = good.len() - 4;
    let questions: Vec<String> = WORDS
        .iter()
        .chain(&["Caroline", "smollm2", "ann"])
        .map(|w| format!("{w}?"))
        .chain([QUERY.to_owned()])
        .collect();
    for pair in 1..=12 {
        let at = body - 8 * pair;
        let mut bad = good[..body].to_vec();
        bad[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let sum = crc32fast::hash(&bad);
        bad.extend_from_slice(&sum.to_le_bytes());
        std::fs::write(&path, &bad).unwrap();
        let mut grown = state.clone();
        grown.push_message(message(40, &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]));
        for s in [&state, &grown] {
            let (index, loaded) = recall_file::load(&path, s);
            assert_eq!(loaded, Loaded::Read { covered: 40 });
            let mut opts = AssemblyOptions::new(s, 700, 64);
            opts.now = Timestamp::from_unix(NOW);
            for q in &questions {
                let scan = assemble(s, q, &opts, &estimate_tokens, &[]).unwrap();
                let read =
                    assemble_indexed(s, Some(&index), q, &opts, &estimate_tokens, &[]).unwrap();
                assert_eq!(scan.system, read.system, "pair {pair}, {q}");
                assert_eq!(scan.included, read.included, "pair {pair}, {q}");
                assert_eq!(scan.dropped, read.dropped, "pair {pair}, {q}");
            }
        }
    }
    state.push_message(message(41, &[1]));
    assert_eq!(
        recall_file::load(&path, &state).1,
        Loaded::Read { covered: 40 }
    );
}

/// The sidecar's keys are checksums anyone can compute: a file carrying
/// another transcript's postings under this transcript's keys is read
/// (the keys match), but no hit it claims is sent unless the message's own
/// text scores it — the context is the scan's, and the next save rewrites
/// the file from the transcript.
#[test]
fn a_forged_sidecar_with_another_transcripts_postings_sends_what_a_scan_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = recall_file::sidecar_path(&dir.path().join("llm.json"));
    // This transcript talks about gardens; not one message holds a word of
    // the question.
    let garden = |i: usize| {
        let text = format!("tomatoes and basil in bed {i}");
        Message::new(
            ["dana", "smollm2"][i % 2],
            Timestamp::from_unix(NOW - 1_000_000 + 10 * i as i64),
            text.clone(),
            format!("<p>{text}</p>"),
        )
    };
    let mut state = State::new(Timestamp::from_unix(NOW));
    for i in 0..40 {
        state.push_message(garden(i));
    }
    // Another transcript of the same length, where the question's words are.
    let mut other = State::new(Timestamp::from_unix(NOW));
    for i in 0..40 {
        let text = if i % 5 == 2 {
            format!("the porcelain kiln firing schedule and glaze notes {i}")
        } else {
            format!("tomatoes and basil in bed {i}")
        };
        other.push_message(Message::new(
            "ann",
            Timestamp::from_unix(NOW - 1_000_000 + 10 * i as i64),
            text.clone(),
            format!("<p>{text}</p>"),
        ));
    }
    let (mut index, loaded) = recall_file::load(&path, &other);
    assert!(recall_file::save(&path, &mut index, &other, &loaded).unwrap());
    // The forgery: this transcript's keys (CRC-32 of speaker, 0xFF,
    // content; and the content's length) over the other's postings, the
    // checksum recomputed.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.truncate(bytes.len() - 4);
    for (i, m) in state.messages().iter().enumerate() {
        let mut crc = crc32fast::Hasher::new();
        crc.update(m.username.as_bytes());
        crc.update(&[0xff]);
        crc.update(m.content.as_bytes());
        let key = (u64::from(crc.finalize()) << 32) | (m.content.len() as u64 & 0xffff_ffff);
        let at = 16 + 8 * i;
        bytes[at..at + 8].copy_from_slice(&key.to_le_bytes());
    }
    let sum = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&sum.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();

    let (mut index, loaded) = recall_file::load(&path, &state);
    assert_eq!(loaded, Loaded::Read { covered: 40 }, "the keys match");
    let mut opts = AssemblyOptions::new(&state, 700, 64);
    opts.now = Timestamp::from_unix(NOW);
    opts.new_conversation = true;
    let scan = assemble(&state, QUERY, &opts, &estimate_tokens, &[]).unwrap();
    let read = assemble_indexed(&state, Some(&index), QUERY, &opts, &estimate_tokens, &[]).unwrap();
    assert_eq!(scan.system, read.system);
    assert_eq!(scan.included, read.included);
    assert_eq!(scan.dropped, read.dropped);
    assert!(
        !read.system.contains("tomatoes"),
        "no message sharing no word with the question is sent: {}",
        read.system
    );
    // Found out: the index answers nothing more, and the file is rewritten
    // from the transcript.
    assert!(index.is_untrusted());
    assert!(
        index
            .recall(&state, QUERY, &Default::default(), 10)
            .is_none()
    );
    assert!(recall_file::save(&path, &mut index, &state, &loaded).unwrap());
    let (index, loaded) = recall_file::load(&path, &state);
    assert_eq!(loaded, Loaded::Read { covered: 40 });
    let again =
        assemble_indexed(&state, Some(&index), QUERY, &opts, &estimate_tokens, &[]).unwrap();
    assert_eq!(scan.included, again.included);
    assert!(!index.is_untrusted());
}

/// A sidecar temp file a killed `wo ask` left (as big as the sidecar) is
/// removed by the next save once it is stale; a fresh one (another
/// process's write in progress), a link and other files are left alone.
#[test]
fn stale_sidecar_temp_files_are_swept() {
    let dir = tempfile::tempdir().unwrap();
    let llm = dir.path().join("llm.json");
    let path = recall_file::sidecar_path(&llm);
    let old = std::time::SystemTime::now() - recall_file::STALE_TEMP_AGE * 2;
    let make = |name: &str, modified: std::time::SystemTime| {
        let p = dir.path().join(name);
        std::fs::write(&p, vec![0u8; 4096]).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(modified)
            .unwrap();
        p
    };
    let stale = make(".recall-abc123.tmp", old);
    let fresh = make(".recall-def456.tmp", std::time::SystemTime::now());
    let unrelated = make("notes.tmp", old);
    let victim = make("victim", old);
    let link = dir.path().join(".recall-link.tmp");
    std::os::unix::fs::symlink(&victim, &link).unwrap();

    let state = state_of(&specs(10));
    let (mut index, loaded) = recall_file::load(&path, &state);
    recall_file::save(&path, &mut index, &state, &loaded).unwrap();
    assert!(!stale.exists(), "the stale temp file was swept");
    assert!(fresh.exists(), "a write in progress is left alone");
    assert!(unrelated.exists() && victim.exists());
    assert!(link.symlink_metadata().is_ok(), "a link is not ours");
    // Swept even when the sidecar itself needs no rewrite.
    let again = make(".recall-ghi789.tmp", old);
    let (mut index, loaded) = recall_file::load(&path, &state);
    assert!(!recall_file::save(&path, &mut index, &state, &loaded).unwrap());
    assert!(!again.exists());
}
