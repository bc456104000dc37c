#!/usr/bin/env bash
# A one-shot `wo search WORD` on a ~60k-chunk index against `rg WORD TREE` on
# the same tree, in ONE run (a few minutes once `wo` is built). Prints a Markdown table of
# medians and the ratio; results.json goes to $BENCH_OUT.
#
#   bench/search/run.sh [DIR]
#
# DIR           tree to copy (default: the local cargo registry's crate sources,
#               ~/.cargo/registry/src/<registry>/): whole top-level entries in name order, each
#               taken if it still fits under BENCH_MAX_MB (default 85, ≈ 60k chunks of Rust
#               crates), copied to $BENCH_TREES/search-tree (default /tmp/wo-bench-trees) so
#               the tree stays fixed and outside any git work tree.
# WORDS         words to search (default: "deserialize mutex allocator utf8 fn"); each is timed
#               as `wo search WORD --dir TREE` and `rg WORD TREE`, output to /dev/null.
# RUNS          timed runs per word and tool, interleaved (default 15).
# BENCH_OUT     scratch (default bench/out/search, git-ignored).
# WO            wo binary (default target-bench/release/wo, built if missing, without the
#               embedded model: search does not use it).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
export BENCH_OUT="${BENCH_OUT:-$ROOT/bench/out/search}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target-bench}"
mkdir -p "$BENCH_OUT"
say() { printf '== %s\n' "$*" >&2; }

command -v rg >/dev/null 2>&1 || { say "installing ripgrep"; apt-get install -y ripgrep >/dev/null 2>&1 ||
  { apt-get update >/dev/null 2>&1 && apt-get install -y ripgrep >/dev/null; }; }
command -v python3 >/dev/null 2>&1 || apt-get install -y python3 >/dev/null

export WO="${WO:-$CARGO_TARGET_DIR/release/wo}"
if [ ! -x "$WO" ]; then
  say "building wo (release, no embedded model)"
  cargo build --release -p wikioracle --no-default-features -j 1
fi
CHECK="$CARGO_TARGET_DIR/release/examples/sidecar_check"
if [ ! -x "$CHECK" ]; then
  say "building the equivalence check (wo-index example sidecar_check)"
  cargo build --release -p wo-index --example sidecar_check -j 1
fi

SRC="${1:-}"
if [ -z "$SRC" ]; then
  SRC="$(ls -d "$HOME"/.cargo/registry/src/*/ 2>/dev/null | head -1)"
fi
[ -d "$SRC" ] || { echo "no tree to benchmark (give DIR)" >&2; exit 1; }
TREES="${BENCH_TREES:-/tmp/wo-bench-trees}"
TREE="$TREES/search-tree"
CAP_MB="${BENCH_MAX_MB:-85}"
if [ ! -f "$TREE/.complete" ]; then
  say "copying up to $CAP_MB MB of $SRC to $TREE"
  rm -rf "$TREE" && mkdir -p "$TREE"
  python3 - "$SRC" "$TREE" "$CAP_MB" <<'EOF'
import os, shutil, sys
src, dst, cap = sys.argv[1], sys.argv[2], int(sys.argv[3]) * 1_000_000
def size(p):
    total = 0
    for d, _, fs in os.walk(p):
        for f in fs:
            try: total += os.lstat(os.path.join(d, f)).st_size
            except OSError: pass
    return total
used = 0
for name in sorted(os.listdir(src)):
    p = os.path.join(src, name)
    if not os.path.isdir(p): continue
    s = size(p)
    if used + s > cap: continue
    shutil.copytree(p, os.path.join(dst, name), symlinks=True)
    used += s
print(f"copied {used/1e6:.1f} MB", file=sys.stderr)
EOF
  touch "$TREE/.complete"
fi

say "indexing (caps lifted)"
"$WO" index "$TREE" --max-total-bytes 100000000000 --json > "$BENCH_OUT/index.json.report"

say "timing"
python3 - "$WO" "$TREE" "$BENCH_OUT" <<'EOF'
import json, os, statistics, subprocess, sys, time
wo, tree, out = sys.argv[1], sys.argv[2], sys.argv[3]
words = os.environ.get("WORDS", "deserialize mutex allocator utf8 fn").split()
runs = int(os.environ.get("RUNS", "15"))
report = json.load(open(os.path.join(out, "index.json.report")))
sidecar = os.path.join(tree, ".wo-index", "search.bin")
index_json = os.path.join(tree, ".wo-index", "index.json")

def timed(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t

def wo_cmd(w): return [wo, "search", w, "--dir", tree]
def rg_cmd(w): return ["rg", w, tree]

load_start = open("/proc/loadavg").read().split()[:3]
# Warm the page cache for both (index.json and the tree), as a user's second search would.
for w in words[:1]:
    timed(rg_cmd(w)); timed(rg_cmd(w))
    timed([wo, "search", "--symbols", "zz-none", "--dir", tree])
if os.path.exists(sidecar): os.remove(sidecar)
cold = timed(wo_cmd(words[0]))
sidecar_bytes = os.path.getsize(sidecar)
# What every search cost before the sidecar: loading the whole index.json (`--symbols` still
# does, then lists nothing).
full = [timed([wo, "search", "--symbols", "zz-none", "--dir", tree]) for _ in range(5)]
rows = []
for w in words:
    a, b = [], []
    for _ in range(runs):
        a.append(timed(wo_cmd(w)))
        b.append(timed(rg_cmd(w)))
    # Same answer as the full load: the JSON of --json through the sidecar is checked by the
    # tests; here count hits so a broken run shows.
    hits = json.loads(subprocess.run(wo_cmd(w) + ["--json"], capture_output=True, text=True).stdout)
    wm, rm = statistics.median(a), statistics.median(b)
    rows.append({"word": w, "wo_ms": wm * 1e3, "rg_ms": rm * 1e3, "ratio": wm / rm,
                 "wo_min_ms": min(a) * 1e3, "rg_min_ms": min(b) * 1e3, "hits": len(hits)})
load_end = open("/proc/loadavg").read().split()[:3]
res = {"chunks": report["chunks"], "files": report["files"], "source_bytes": report["bytes"],
       "index_bytes": os.path.getsize(index_json), "sidecar_bytes": sidecar_bytes,
       "cold_ms": cold * 1e3, "full_load_ms": statistics.median(full) * 1e3, "runs": runs,
       "rows": rows, "loadavg_start": load_start, "loadavg_end": load_end}
json.dump(res, open(os.path.join(out, "results.json"), "w"), indent=1)
print(f"tree: {res['files']} files, {res['source_bytes']/1e6:.1f} MB, {res['chunks']} chunks; "
      f"index.json {res['index_bytes']/1e6:.1f} MB, search.bin {sidecar_bytes/1e6:.1f} MB")
print(f"load average {' '.join(load_start)} (start) / {' '.join(load_end)} (end)")
print(f"first search (builds the sidecar): {cold*1e3:.0f} ms; "
      f"loading index.json (every search before): {res['full_load_ms']:.0f} ms median of 5\n")
print(f"| word | hits | wo search (median of {runs}) | rg (median of {runs}) | wo / rg |")
print("|---|---:|---:|---:|---:|")
for r in rows:
    print(f"| `{r['word']}` | {r['hits']} | {r['wo_ms']:.1f} ms | {r['rg_ms']:.1f} ms | {r['ratio']:.2f}× |")
EOF

say "checking the sidecar's answers against the full load on this index"
# shellcheck disable=SC2086
"$CHECK" "$TREE" ${WORDS:-deserialize mutex allocator utf8 fn} | tee "$BENCH_OUT/check.txt" | tail -1
