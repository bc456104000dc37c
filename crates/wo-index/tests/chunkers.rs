//! Golden-file tests: each chunker's output for a fixture is compared with a reviewed
//! snapshot under `tests/snapshots/`. A change in boundaries, line numbers or labels fails.

use std::path::Path;

use wo_index::{ChunkingConfig, Kind, chunk_text, walk::kind_for_path};

fn render(name: &str, cfg: &ChunkingConfig) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/chunkers")
        .join(name);
    let text = std::fs::read_to_string(&path).expect("fixture");
    let kind = kind_for_path(name);
    let out = chunk_text(kind, name, &text, cfg);
    let mut s = format!("kind: {kind}\n");
    for (k, msg) in &out.warnings {
        s.push_str(&format!("warning: {k:?}: {msg}\n"));
    }
    for (i, p) in out.pieces.iter().enumerate() {
        s.push_str(&format!(
            "=== piece {i} lines {}-{}",
            p.start_line, p.end_line
        ));
        if !p.heading_path.is_empty() {
            s.push_str(&format!(" heading={:?}", p.heading_path));
        }
        if let Some(sym) = &p.symbol {
            s.push_str(&format!(" symbol={sym}"));
        }
        if !p.symbols.is_empty() {
            s.push_str(&format!(" symbols={:?}", p.symbols));
        }
        if let Some(a) = &p.address {
            s.push_str(&format!(" address={a}"));
        }
        s.push('\n');
        s.push_str(&p.content);
        s.push('\n');
    }
    s
}

fn small() -> ChunkingConfig {
    ChunkingConfig {
        chunk_target_chars: 60,
        chunk_max_chars: 120,
        max_chunks_per_file: 2000,
    }
}

macro_rules! golden {
    ($test:ident, $file:expr) => {
        #[test]
        fn $test() {
            insta::assert_snapshot!(render($file, &ChunkingConfig::default()));
        }
    };
    ($test:ident, $file:expr, small) => {
        #[test]
        fn $test() {
            insta::assert_snapshot!(render($file, &small()));
        }
    };
}

golden!(markdown, "guide.md");
golden!(markdown_small_caps, "guide.md", small);
golden!(json_object, "config.json");
golden!(json_array_ranges, "list.json");
golden!(json_single_line, "compact.json");
golden!(json_invalid_falls_back, "broken.json");
golden!(javascript, "app.js");
golden!(javascript_small_caps, "app.js", small);
golden!(typescript, "types.ts");
golden!(rust, "lib.rs");
golden!(rust_small_caps, "lib.rs", small);
golden!(python, "tool.py");
golden!(python_small_caps, "tool.py", small);
golden!(go, "main.go");
golden!(html, "page.html");
golden!(text, "notes.txt");

#[test]
fn every_piece_respects_the_hard_cap() {
    let cfg = small();
    for name in [
        "guide.md",
        "config.json",
        "list.json",
        "app.js",
        "types.ts",
        "lib.rs",
        "tool.py",
        "main.go",
        "page.html",
        "notes.txt",
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/chunkers")
            .join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        let out = chunk_text(kind_for_path(name), name, &text, &cfg);
        assert!(!out.pieces.is_empty(), "{name}: no pieces");
        for p in &out.pieces {
            assert!(
                p.content.chars().count() <= cfg.chunk_max_chars,
                "{name}: piece at {} has {} chars",
                p.start_line,
                p.content.chars().count()
            );
            assert!(
                p.start_line >= 1 && p.start_line <= p.end_line,
                "{name}: bad lines"
            );
        }
        // Pieces are in file order.
        for w in out.pieces.windows(2) {
            assert!(w[0].start_line <= w[1].start_line, "{name}: out of order");
        }
    }
}

#[test]
fn html_drops_scripts_and_styles() {
    let text = "<style>p{}</style><p>keep</p><script>var x = 'drop';</script>";
    let out = chunk_text(Kind::Html, "a.html", text, &ChunkingConfig::default());
    let all: String = out.pieces.iter().map(|p| p.content.as_str()).collect();
    assert!(all.contains("keep"));
    assert!(!all.contains("drop"));
    assert!(!all.contains("p{}"));
}

#[test]
fn markdown_fence_is_not_split_when_it_fits() {
    let mut text = String::from("# Title\n\n");
    for i in 0..10 {
        text.push_str(&format!("para {i} with some words in it\n\n"));
    }
    text.push_str("```\n");
    for i in 0..4 {
        text.push_str(&format!("code line {i}\n\n"));
    }
    text.push_str("```\n");
    let cfg = ChunkingConfig {
        chunk_target_chars: 100,
        chunk_max_chars: 400,
        max_chunks_per_file: 100,
    };
    let out = chunk_text(Kind::Markdown, "a.md", &text, &cfg);
    let fenced: Vec<_> = out
        .pieces
        .iter()
        .filter(|p| p.content.contains("code line"))
        .collect();
    assert_eq!(fenced.len(), 1, "fence split across pieces: {fenced:#?}");
    assert_eq!(fenced[0].content.matches("```").count(), 2);
}

/// Truncated and corrupted versions of every fixture must chunk without panicking, within
/// the caps and with sane line numbers.
#[test]
fn truncated_and_corrupted_inputs_never_panic() {
    let cfg = small();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chunkers");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for name in names {
        let text = std::fs::read_to_string(dir.join(&name)).unwrap();
        let kind = kind_for_path(&name);
        let chars: Vec<char> = text.chars().collect();
        for _ in 0..200 {
            let cut = (next() as usize) % (chars.len() + 1);
            let mut mutated: Vec<char> = chars[..cut].to_vec();
            // Sprinkle structural characters to break nesting.
            for _ in 0..(next() % 4) {
                let at = (next() as usize) % (mutated.len() + 1);
                let c = ['{', '}', '<', '>', '"', '`', '#', '\n', '(', '/'][(next() % 10) as usize];
                mutated.insert(at, c);
            }
            let input: String = mutated.into_iter().collect();
            let lines = input.split('\n').count();
            let out = chunk_text(kind, &name, &input, &cfg);
            for p in &out.pieces {
                assert!(p.content.chars().count() <= cfg.chunk_max_chars, "{name}");
                assert!(p.start_line >= 1 && p.start_line <= p.end_line, "{name}");
                assert!(
                    p.end_line <= lines,
                    "{name}: line {} of {lines}",
                    p.end_line
                );
            }
        }
    }
}
