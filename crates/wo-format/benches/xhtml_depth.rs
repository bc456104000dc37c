//! Sanitising and XHTML conversion are linear in nesting depth (before,
//! an HTML tree builder took 4 s for 200 KB of nested `<div>` and about an
//! hour for 4 MB). For each hostile shape and each function, prints the time
//! per KB from 10 KB to 4 MB, the ratio of the slowest to the fastest time
//! per KB (goal: within 2×) and the time for the slowest 4 MB body (goal:
//! < 1 s; one thread, so wall time is CPU time).
//!
//! Run: `cargo bench -p wo-format --bench xhtml_depth` (env `MAX_KB` to stop
//! earlier, `REPEAT` for the runs per size; the best run counts).

use std::time::{Duration, Instant};

use wo_format::xhtml::{
    canonical_xhtml, check_fragment, markdown_to_xhtml, sanitize_html, to_plain_text,
};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// `unit` repeated to about `kb` KB (never closing what it opens).
fn repeated(unit: &str, kb: usize) -> String {
    unit.repeat(kb * 1024 / unit.len())
}

fn best_of(repeat: usize, input: &str, f: fn(&str)) -> Duration {
    (0..repeat)
        .map(|_| {
            let t = Instant::now();
            f(input);
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// A function under test.
type Func = fn(&str);

struct Table {
    sizes: Vec<usize>,
    repeat: usize,
    worst_ratio: f64,
    worst_4mb: Duration,
}

impl Table {
    fn row(&mut self, shape: &str, name: &str, make: &dyn Fn(usize) -> String, f: fn(&str)) {
        let mut per_kb = Vec::new();
        let mut cells = String::new();
        for &kb in &self.sizes {
            let input = make(kb);
            let t = best_of(self.repeat, &input, f);
            let us = t.as_secs_f64() * 1e6 / (input.len() as f64 / 1024.0);
            per_kb.push(us);
            cells.push_str(&format!("{us:>8.2}µs"));
            if kb == 4096 {
                self.worst_4mb = self.worst_4mb.max(t);
            }
        }
        let max = per_kb.iter().cloned().fold(f64::MIN, f64::max);
        let min = per_kb.iter().cloned().fold(f64::MAX, f64::min);
        let ratio = max / min;
        self.worst_ratio = self.worst_ratio.max(ratio);
        println!("{shape:<26} {name:<18} {cells}   per-KB max/min {ratio:.2}x");
    }
}

fn main() {
    let max_kb = env("MAX_KB", 4096);
    let mut t = Table {
        sizes: [10, 40, 200, 1024, 4096]
            .into_iter()
            .filter(|&kb| kb <= max_kb)
            .collect(),
        repeat: env("REPEAT", 3),
        worst_ratio: 0.0,
        worst_4mb: Duration::ZERO,
    };
    println!(
        "{:<26} {:<18} {}",
        "shape",
        "function",
        t.sizes
            .iter()
            .map(|kb| format!("{:>10}", format!("{kb} KB")))
            .collect::<String>()
    );
    let funcs: [(&str, Func); 3] = [
        ("sanitize_html", |s| {
            std::hint::black_box(sanitize_html(s));
        }),
        ("canonical_xhtml", |s| {
            std::hint::black_box(canonical_xhtml(s));
        }),
        ("to_plain_text", |s| {
            std::hint::black_box(to_plain_text(s));
        }),
    ];
    for (shape, unit) in [
        ("nested <div>", "<div>"),
        ("nested <div>x", "<div>x"),
        ("misnested <b><i><p>", "<b><i><p>"),
        ("lists <ul><li>", "<ul><li>"),
        ("tables <table><td>", "<table><td>"),
        ("disallowed <font>", "<font>"),
        ("entities &lt;", "&lt;"),
    ] {
        for (name, f) in funcs {
            t.row(shape, name, &|kb| repeated(unit, kb), f);
        }
    }
    // The check meets balanced, allowed markup in files: nest it fully.
    t.row(
        "balanced <div>…</div>",
        "check_fragment",
        &|kb| {
            let n = kb * 1024 / 11;
            format!("{}{}", "<div>".repeat(n), "</div>".repeat(n))
        },
        |s| {
            let _ = std::hint::black_box(check_fragment(s));
        },
    );
    let md: fn(&str) = |s| {
        std::hint::black_box(markdown_to_xhtml(s));
    };
    // Markdown nests through its own syntax.
    for (shape, unit) in [
        ("markdown >>>> quotes", ">"),
        ("markdown <<<< text", "<"),
        ("markdown nested lists", "- * "),
        ("markdown ordered lists", "1. "),
        ("markdown mixed > - 1.", "> - 1. "),
        (
            "markdown >x lines",
            ">>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>x\n",
        ),
        ("markdown html <div>", "<div>"),
    ] {
        t.row(shape, "markdown_to_xhtml", &|kb| repeated(unit, kb), md);
    }
    // Lists nested by indentation (line k indented 2k), then short lazy
    // continuation lines, each matched against every open list.
    t.row(
        "markdown indented+lazy",
        "markdown_to_xhtml",
        &|kb| {
            let mut input = String::new();
            let mut k = 0;
            while input.len() < kb * 512 {
                input.push_str(&" ".repeat(2 * k));
                input.push_str("- x\n");
                k += 1;
            }
            while input.len() < kb * 1024 {
                input.push_str("y\n");
            }
            input
        },
        md,
    );
    println!(
        "\nworst per-KB ratio (slowest/fastest size): {:.2}x (goal ≤ 2x); \
         slowest 4 MB body: {:.3} s (goal < 1 s)",
        t.worst_ratio,
        t.worst_4mb.as_secs_f64()
    );
}
