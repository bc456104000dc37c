//! What an agent writes is held to the rules the file is read with and to
//! the bounds of every field: a refused call is a tool error naming the
//! argument, and the file is byte for byte what it was.

use wo_format::TruthKind;
use wo_mcp::write::{WriteOp, apply};
use wo_store::{OpenOptions, Store};

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path().join("llm.json"),
        OpenOptions {
            create_if_missing: true,
            ..Default::default()
        },
    )
    .unwrap();
    (dir, store)
}

fn bytes(store: &Store) -> Vec<u8> {
    std::fs::read(store.path()).unwrap()
}

fn remember(title: &str, tags: Vec<String>) -> WriteOp {
    WriteOp::Remember {
        title: Some(title.into()),
        content: "something".into(),
        kind: TruthKind::Effort,
        certainty: 0.5,
        tags,
    }
}

#[test]
fn a_blank_model_is_refused_and_the_file_stays_readable() {
    let (_dir, mut store) = store();
    for blank in [" ", "", "\u{a0}\u{3000}", "\t\n"] {
        let before = bytes(&store);
        let err = apply(
            &mut store,
            WriteOp::LogExchange {
                question: "q".into(),
                answer: "a".into(),
                model: Some(blank.into()),
            },
            "client",
        )
        .unwrap_err();
        assert!(
            err.starts_with("model: must not be blank"),
            "{blank:?}: {err}"
        );
        assert_eq!(bytes(&store), before, "{blank:?} changed the file");
        assert!(wo_format::parse(&bytes(&store)).is_ok());
    }
    // A named model and no model at all still work.
    for model in [Some("m-1".to_owned()), None] {
        apply(
            &mut store,
            WriteOp::LogExchange {
                question: "q".into(),
                answer: "a".into(),
                model,
            },
            "client",
        )
        .unwrap();
    }
    assert!(wo_format::parse(&bytes(&store)).is_ok());
}

#[test]
fn fields_are_bounded() {
    let (_dir, mut store) = store();
    let before = bytes(&store);
    let cases = [
        (remember(&"t".repeat(3 << 20), Vec::new()), "title"),
        (
            remember("fine", (0..20_000).map(|i| format!("tag{i}")).collect()),
            "tags",
        ),
        (remember("fine", vec!["x".repeat(1_000)]), "tags/0"),
        (
            WriteOp::LogExchange {
                question: "q".into(),
                answer: "a".into(),
                model: Some("m".repeat(200_000)),
            },
            "model",
        ),
    ];
    for (op, field) in cases {
        let err = apply(&mut store, op, "client").unwrap_err();
        assert!(err.starts_with(&format!("{field}: ")), "{field}: {err}");
        assert_eq!(bytes(&store), before, "{field} changed the file");
    }
    // A 5 MB resolution.
    let added = apply(&mut store, remember("an effort", Vec::new()), "client").unwrap();
    let id = added["added"].as_str().unwrap().to_owned();
    let before = bytes(&store);
    let err = apply(
        &mut store,
        WriteOp::Resolve {
            id: id.clone(),
            resolution: Some("r".repeat(5 << 20)),
        },
        "client",
    )
    .unwrap_err();
    assert!(err.starts_with("resolution: "), "{err}");
    assert_eq!(bytes(&store), before);
    apply(
        &mut store,
        WriteOp::Resolve {
            id,
            resolution: Some("done".into()),
        },
        "client",
    )
    .unwrap();
}

#[test]
fn the_store_refuses_a_record_no_reader_would_open() {
    // Whatever a writer builds, the store checks it before the rename.
    let (_dir, mut store) = store();
    let before = bytes(&store);
    let err = store
        .transact(|s| {
            s.push_message(wo_format::Message::new(
                "\u{3000}",
                wo_format::Timestamp::now(),
                "t",
                "<p>x</p>",
            ))
        })
        .unwrap_err();
    assert!(matches!(err, wo_store::StoreError::Refused { .. }), "{err}");
    assert!(
        err.to_string().contains("username must not be blank"),
        "{err}"
    );
    assert_eq!(bytes(&store), before);
}
