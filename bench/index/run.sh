#!/usr/bin/env bash
# `wo index` against llmx-mcp, code2prompt, repomix and an rg floor on a large
# real tree, incremental re-index, query latency, retrieval quality (queries.tsv) and export
# size, in ONE run. Prints Markdown tables; results.json and report.md go to $BENCH_OUT.
#
#   bench/index/run.sh [DIR]
#
# DIR            tree to benchmark (default: the local cargo registry's sources,
#                ~/.cargo/registry/src/<registry>/). It is copied to $BENCH_OUT/tree first
#                (wo writes .wo-index/ into the tree; the copy also keeps the tree fixed while
#                cargo keeps adding crates to the registry). Copies live in $BENCH_TREES
#                (default /tmp/wo-bench-trees): outside any git work tree, because repomix
#                applies the .gitignore of an enclosing repository (this one ignores bench/out/)
#                and then packs nothing.
# BENCH_MAX_MB   size cap for that copy: whole top-level entries (crates) in name order, each
#                taken if it still fits under the cap. Default 300; 0 = the whole tree. (llmx-mcp
#                peaked at 7.7 GB for 284 MB here: mind the machine's memory before lifting it.)
# PACK_MAX_MB    size of the "larger tree" for the export-size report (default 30; same rule).
# BENCH_OUT      scratch (default bench/out/index, git-ignored). BENCH_PEERS: peers (bench/out/peers).
# BENCH_TIMEOUT  per-tool limit in seconds (default 1800); a peer past it is reported as such.
# BENCH_SKIP     words among: speed latency quality pack llmx code2prompt repomix incr-edit.
# NQUERIES       latency queries (default 300); REPEAT timed passes over them (default 3).
# WO             wo binary (default target-bench/release/wo, built if missing).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
export BENCH_OUT="${BENCH_OUT:-$ROOT/bench/out/index}"
PEERS="${BENCH_PEERS:-$ROOT/bench/out/peers}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target-bench}"
mkdir -p "$BENCH_OUT" "$PEERS"

say() { printf '== %s\n' "$*" >&2; }

# ---- tools -------------------------------------------------------------------------------
need_apt() { # command package
  command -v "$1" >/dev/null 2>&1 || { say "installing $2"; apt-get install -y "$2" >/dev/null 2>&1 ||
    { apt-get update >/dev/null 2>&1 && apt-get install -y "$2" >/dev/null; }; }
}
need_apt rg ripgrep
[ -x /usr/bin/time ] || need_apt /usr/bin/time time
need_apt python3 python3

export WO="${WO:-$CARGO_TARGET_DIR/release/wo}"
if [ ! -x "$WO" ]; then
  say "building wo (release)"
  cargo build --release -p wikioracle -j 1
fi

# Query-latency harness (library, in process): built outside the workspace with its lock file.
QSRC="$PEERS/qlat"
mkdir -p "$QSRC/src"
cp "$ROOT/bench/index/qlat/Cargo.toml" "$QSRC/Cargo.toml"
cp "$ROOT/bench/index/qlat/src/main.rs" "$QSRC/src/main.rs"
sed -i "s#path = \"../../../crates/wo-index\"#path = \"$ROOT/crates/wo-index\"#" "$QSRC/Cargo.toml"
[ -f "$QSRC/Cargo.lock" ] || cp "$ROOT/Cargo.lock" "$QSRC/Cargo.lock"
say "building the query-latency harness"
cargo build --release -j 1 --manifest-path "$QSRC/Cargo.toml" 2>&1 | grep -v '^ *\(Compiling\|Finished\|Locking\|Adding\|Updating\|Downloaded\|Downloading\)' >&2 || true
export QLAT="$CARGO_TARGET_DIR/release/wo-index-qlat"
[ -x "$QLAT" ] || { echo "harness build failed" >&2; exit 1; }

# Peers. llmx-mcp is built with its `cli` feature (the `llmx` binary; the default features
# build only the MCP server, whose index path also computes neural embeddings) and without
# the embedding features: BM25 indexing and search, as the seed specifies.
export LLMX="$PEERS/llmx/bin/llmx"
if [ ! -x "$LLMX" ] && [[ " ${BENCH_SKIP:-} " != *" llmx "* ]]; then
  say "installing llmx-mcp 2.2.1"
  cargo install llmx-mcp --version 2.2.1 --locked --root "$PEERS/llmx" -j 1 \
    --no-default-features --features cli,treesitter
fi
export CODE2PROMPT="$PEERS/code2prompt/bin/code2prompt"
if [ ! -x "$CODE2PROMPT" ] && [[ " ${BENCH_SKIP:-} " != *" code2prompt "* ]]; then
  say "installing code2prompt 4.3.0"
  cargo install code2prompt --version 4.3.0 --locked --root "$PEERS/code2prompt" -j 1
fi
export REPOMIX="$PEERS/repomix/node_modules/.bin/repomix"
if [ ! -x "$REPOMIX" ] && [[ " ${BENCH_SKIP:-} " != *" repomix "* ]]; then
  say "installing repomix 1.18.1"
  npm install --prefix "$PEERS/repomix" repomix@1.18.1 >/dev/null
fi

# ---- trees -------------------------------------------------------------------------------
SRC="${1:-$(ls -d "$HOME"/.cargo/registry/src/*/ | head -n 1)}"
SRC="$(cd "$SRC" && pwd)"
BENCH_MAX_MB="${BENCH_MAX_MB:-300}"; [ "$BENCH_MAX_MB" = 0 ] && BENCH_MAX_MB=""
export BENCH_SRC="$SRC" BENCH_MAX_MB
TREES="${BENCH_TREES:-/tmp/wo-bench-trees}"; mkdir -p "$TREES"

snapshot() { # src dest cap_mb(empty = all)
  local src="$1" dest="$2" cap="${3:-}" stamp total=0 sz
  stamp="$src|${cap:-all}"
  if [ -f "$dest.stamp" ] && [ "$(cat "$dest.stamp")" = "$stamp" ] && [ -d "$dest" ]; then
    say "reusing snapshot $dest ($stamp)"; return
  fi
  say "copying $src to $dest (cap ${cap:-none} MB)"
  rm -rf "$dest" "$dest.stamp"; mkdir -p "$dest"
  while IFS= read -r name; do
    sz=$(du -sb "$src/$name" | cut -f1)
    if [ -n "$cap" ] && [ $((total + sz)) -gt $((cap * 1000000)) ]; then continue; fi
    cp -a "$src/$name" "$dest/"
    total=$((total + sz))
  done < <(ls -1A "$src" | LC_ALL=C sort)
  echo "$stamp" > "$dest.stamp"
}
export BENCH_TREE="$TREES/tree"
snapshot "$SRC" "$BENCH_TREE" "$BENCH_MAX_MB"
export BENCH_PACKTREE="$TREES/packtree"
snapshot "$SRC" "$BENCH_PACKTREE" "${PACK_MAX_MB:-30}"

# This repository as git sees it (tracked + untracked, not ignored), for the labelled queries.
export BENCH_REPO="$TREES/repo"
rm -rf "$BENCH_REPO"; mkdir -p "$BENCH_REPO"
# bench/index/ and BENCHMARKS.md are left out: they quote the questions themselves.
git ls-files -z -co --exclude-standard | grep -zv -e '^bench/index/' -e '^BENCHMARKS.md$' |
  tar --null -T - --ignore-failed-read -cf - 2>/dev/null |
  tar -xf - -C "$BENCH_REPO"

say "wo $("$WO" --version 2>/dev/null || true); rg $(rg --version | head -n 1); $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
exec python3 "$ROOT/bench/index/bench.py"
