//! Checks, on a real index, that `search_root` (through the search sidecar) answers exactly as
//! `Index::open` + `Index::search` for each word given (with and without a path filter), and
//! prints the time of each way. `bench/search/run.sh` runs it on its 60k-chunk tree.
//!
//!     cargo run --release -p wo-index --example sidecar_check -- ROOT WORD...

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use wo_index::{Index, Query, search_root};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((root, words)) = args.split_first() else {
        eprintln!("usage: sidecar_check ROOT WORD...");
        return ExitCode::from(2);
    };
    let root = Path::new(root);
    let t = Instant::now();
    let index = match Index::open(root) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    println!("full load: {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
    let mut bad = 0;
    for w in words {
        for path in [None, Some("a")] {
            let mut q = Query::new(w.as_str());
            q.path_prefix = path.map(str::to_string);
            let want = serde_json::to_string(&index.search(&q)).unwrap_or_default();
            let t = Instant::now();
            let got = match search_root(root, &q) {
                Ok((hits, used)) => {
                    println!(
                        "{w:?} path {path:?}: {} hits, {:.1} ms through the sidecar ({used:?})",
                        hits.len(),
                        t.elapsed().as_secs_f64() * 1e3
                    );
                    serde_json::to_string(&hits).unwrap_or_default()
                }
                Err(e) => {
                    eprintln!("{w:?}: {e}");
                    String::new()
                }
            };
            if got != want {
                eprintln!("MISMATCH for {w:?} (path {path:?})");
                bad += 1;
            }
        }
    }
    if bad > 0 {
        return ExitCode::FAILURE;
    }
    println!("identical: {} queries", words.len() * 2);
    ExitCode::SUCCESS
}
