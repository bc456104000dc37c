//! State-file benchmark: load, append-one-turn-and-save and merge
//! of ten exports at 1k, 10k and 100k messages, each compared in the same run
//! against (a) the physical floor — writing the file's bytes with fsync — and
//! (b) Python's `json` doing the same job (`bench/py_reference.py`).
//!
//! Run: `cargo bench -p wo-store --bench state_io` (env `SIZES=1000,10000`
//! to choose sizes, `REPEAT=N` for runs per measurement, `OPS=load,cold` to
//! run only some rows: `load`, `warm`, `cold`, `merge`; `NO_PYTHON=1` skips
//! the Python reference, for profiling). Prints a table of medians and
//! ratios; BENCHMARKS.md records a run.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use wo_format::{Message, State, Timestamp, TruthEntry};
use wo_store::exports::merge_files;
use wo_store::{OpenOptions, Store};

/// The same allocator as the `wo` binary, so the numbers match what users get.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn repeat() -> usize {
    std::env::var("REPEAT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
}

/// A realistic transcript: ~500 bytes per message (so 100k ≈ 50 MB).
fn make_state(n: usize, salt: &str) -> State {
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    s.context = "<div><p>Operating context for this directory.</p></div>".into();
    let body = "Retrieval is deterministic and local: BM25 over the transcript, weighted by certainty and recency. ";
    let mut messages = Vec::with_capacity(n);
    for i in 0..n {
        let user = if i % 2 == 0 {
            "alec"
        } else {
            "smollm2-135m-instruct"
        };
        messages.push(Message::new(
            user,
            Timestamp::from_unix(1_700_000_000 + i as i64 * 7),
            format!("Turn {i} {salt}"),
            format!("<p>{}</p><p>{body}{body}{body}</p><p>n={i}</p>", salt),
        ));
    }
    *s.messages_mut() = messages;
    s.normalize();
    for i in 0..(n / 10).min(10_000) {
        s.truth.trust.push(TruthEntry::new(
            format!("fact {i}"),
            Timestamp::from_unix(1_700_000_000 + i as i64),
            0.5,
            "<p>a fact</p>",
        ));
    }
    s
}

fn write_file(path: &Path, s: &State) -> usize {
    let bytes = wo_format::to_canonical_vec(s);
    fs::write(path, &bytes).unwrap();
    bytes.len()
}

/// The floor: create a file, write the bytes, fsync it and its directory.
fn floor(dir: &Path, bytes: &[u8]) -> Duration {
    let times = (0..repeat())
        .map(|i| {
            let p = dir.join(format!("floor{i}.bin"));
            let t = Instant::now();
            let mut f = File::create(&p).unwrap();
            f.write_all(bytes).unwrap();
            f.sync_all().unwrap();
            File::open(dir).unwrap().sync_all().unwrap();
            let e = t.elapsed();
            fs::remove_file(&p).unwrap();
            e
        })
        .collect();
    median(times)
}

/// Whether the row `op` was asked for (`OPS`, default all).
fn wanted(op: &str) -> bool {
    std::env::var("OPS").map_or(true, |ops| ops.split(',').any(|o| o.trim() == op))
}

fn python(op: &str, state: &Path, exports: &[PathBuf]) -> Option<Duration> {
    if std::env::var_os("NO_PYTHON").is_some() {
        return None;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/py_reference.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(op)
        .arg(state)
        .args(exports)
        .env("REPEAT", repeat().to_string())
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "python reference failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    let v: serde_json_lite::Value = serde_json_lite::parse(&String::from_utf8_lossy(&out.stdout))?;
    Some(Duration::from_secs_f64(v.median_s))
}

/// Just enough JSON reading for the reference's one-line report.
mod serde_json_lite {
    pub struct Value {
        pub median_s: f64,
    }
    pub fn parse(s: &str) -> Option<Value> {
        let v: serde_json::Value = serde_json::from_str(s.trim()).ok()?;
        Some(Value {
            median_s: v.get("median_s")?.as_f64()?,
        })
    }
}

/// CPU time of this process so far (user + system, every thread): under
/// load, wall time says more about the neighbours than about the work.
fn cpu_now() -> Duration {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given; RUSAGE_SELF is valid.
    let u = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr());
        u.assume_init()
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Times `op`: (wall, CPU).
fn timed(op: impl FnOnce()) -> (Duration, Duration) {
    let (t, c) = (Instant::now(), cpu_now());
    op();
    (t.elapsed(), cpu_now() - c)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn ratio(a: Duration, b: Duration) -> String {
    format!("{:.2}×", a.as_secs_f64() / b.as_secs_f64().max(1e-9))
}

fn new_turn(i: usize) -> Message {
    Message::new(
        "alec",
        Timestamp::from_unix(2_000_000_000 + i as i64),
        "appended",
        format!("<p>appended turn {i}</p>"),
    )
}

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    let sizes: Vec<usize> = std::env::var("SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 100_000]);
    let dir =
        tempfile::tempdir_in(std::env::var("BENCH_DIR").unwrap_or_else(|_| ".".into())).unwrap();
    println!(
        "state-file benchmark: median of {} runs each; floor = write the same bytes + fsync",
        repeat()
    );
    println!(
        "{:>8} {:>8} | {:<22} {:>10} {:>10} {:>10} | {:>9} {:>9}",
        "messages", "MB", "operation", "wo", "floor", "python", "wo/floor", "py/wo"
    );
    for &n in &sizes {
        let state = make_state(n, "base");
        let path = dir.path().join(format!("llm_{n}.json"));
        let size = write_file(&path, &state);
        let bytes = fs::read(&path).unwrap();
        let floor_t = floor(dir.path(), &bytes);
        let mb = size as f64 / 1e6;
        let row = |op: &str, wo: Duration, py: Option<Duration>, floor_applies: bool| {
            println!(
                "{:>8} {:>8.1} | {:<22} {:>10} {:>10} {:>10} | {:>9} {:>9}",
                n,
                mb,
                op,
                ms(wo),
                if floor_applies {
                    ms(floor_t)
                } else {
                    "-".into()
                },
                py.map(ms).unwrap_or_else(|| "n/a".into()),
                if floor_applies {
                    ratio(wo, floor_t)
                } else {
                    "-".into()
                },
                py.map(|p| ratio(p, wo)).unwrap_or_else(|| "n/a".into()),
            );
        };

        if wanted("load") {
            // load
            let load = median(
                (0..repeat())
                    .map(|_| {
                        let t = Instant::now();
                        let s = Store::open(&path, OpenOptions::default()).unwrap();
                        let e = t.elapsed();
                        assert_eq!(s.state().messages().len(), n);
                        e
                    })
                    .collect(),
            );
            row("load", load, python("load", &path, &[]), false);
        }
        // append one turn and save, store already open (server / REPL)
        let work = dir.path().join("work.json");
        fs::copy(&path, &work).unwrap();
        if wanted("warm") {
            let mut store = Store::open(&work, OpenOptions::default()).unwrap();
            store.save().unwrap(); // first save fills the byte cache
            let warm = median(
                (0..repeat())
                    .map(|i| {
                        let t = Instant::now();
                        store.transact(|s| s.push_message(new_turn(i))).unwrap();
                        t.elapsed()
                    })
                    .collect(),
            );
            row(
                "append+save (open)",
                warm,
                python("append", &path, &[]),
                true,
            );
        }
        if wanted("cold") {
            // one CLI run: open + append + save, on a file the last run
            // wrote (its bytes re-used: `wo_format::seed_cache`)
            Store::open(&work, OpenOptions::default())
                .unwrap()
                .save()
                .unwrap();
            let (cold, cold_cpu): (Vec<_>, Vec<_>) = (0..repeat())
                .map(|i| {
                    let mut s = None;
                    let t = timed(|| {
                        let mut st = Store::open(&work, OpenOptions::default()).unwrap();
                        assert_eq!(st.reusable_messages(), st.state().messages().len());
                        st.transact(|st| st.push_message(new_turn(1000 + i)))
                            .unwrap();
                        s = Some(st); // dropped outside the timing
                    });
                    drop(s);
                    t
                })
                .unzip();
            let (cold, cold_cpu) = (median(cold), median(cold_cpu));
            row("open+append+save", cold, python("cold", &path, &[]), true);
            // The same with the store dropped inside the timing, as a CLI
            // run ends: its state freed, and the replaced version removed
            // if that is still going on.
            let to_end = median(
                (0..repeat())
                    .map(|i| {
                        timed(|| {
                            let mut st = Store::open(&work, OpenOptions::default()).unwrap();
                            assert_eq!(st.reusable_messages(), st.state().messages().len());
                            st.transact(|st| st.push_message(new_turn(3000 + i)))
                                .unwrap();
                        })
                        .0
                    })
                    .collect(),
            );
            row("  … to the store's drop", to_end, None, true);

            // the same after a hand edit (here: a space after the closing
            // brace): nothing of the file is trusted, every byte is parsed
            // and serialised again
            let (edited, edited_cpu): (Vec<_>, Vec<_>) = (0..repeat())
                .map(|i| {
                    let mut bytes = fs::read(&work).unwrap();
                    bytes.push(b' ');
                    fs::write(&work, &bytes).unwrap();
                    drop(bytes);
                    let mut s = None;
                    let t = timed(|| {
                        let mut st = Store::open(&work, OpenOptions::default()).unwrap();
                        assert_eq!(st.reusable_messages(), 0);
                        st.transact(|st| st.push_message(new_turn(2000 + i)))
                            .unwrap();
                        s = Some(st);
                    });
                    drop(s);
                    t
                })
                .unzip();
            let (edited, edited_cpu) = (median(edited), median(edited_cpu));
            row("  … after a hand edit", edited, None, true);
            println!(
                "{:>8} {:>8} | CPU time (all threads, median): open+append+save {}, after a hand edit {}",
                "",
                "",
                ms(cold_cpu),
                ms(edited_cpu)
            );
        }
        if wanted("merge") {
            // merge of ten exports, each the base plus ten turns of its own
            let exports: Vec<PathBuf> = (0..10)
                .map(|k| {
                    let mut e = state.clone();
                    for j in 0..10 {
                        e.push_message(Message::new(
                            "phone",
                            Timestamp::from_unix(2_100_000_000 + (k * 10 + j) as i64),
                            "phone turn",
                            format!("<p>export {k} turn {j}</p>"),
                        ));
                    }
                    let p = dir.path().join(format!("export_{n}_{k}.json"));
                    write_file(&p, &e);
                    p
                })
                .collect();
            let merge = median(
                (0..repeat().min(3))
                    .map(|_| {
                        fs::copy(&path, &work).unwrap();
                        let t = Instant::now();
                        let mut s = Store::open(&work, OpenOptions::default()).unwrap();
                        let out = merge_files(&mut s, &exports, false, false).unwrap();
                        let e = t.elapsed();
                        assert!(out.iter().all(|o| o.result.is_ok()));
                        assert_eq!(s.state().messages().len(), n + 100);
                        e
                    })
                    .collect(),
            );
            row(
                "merge 10 exports",
                merge,
                python("merge", &path, &exports),
                true,
            );
            for e in exports {
                fs::remove_file(e).unwrap();
            }
        }
    }
}
