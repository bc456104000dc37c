#!/usr/bin/env bash
# A full index against its floors, in ONE run, on two trees:
#   (a) code: a copy of part of the local cargo registry's sources (Rust, plus what crates ship);
#   (b) text: a tree without code (Markdown, HTML, JSON, plain text: /usr/share/doc's
#       uncompressed files and the registry's .md/.json/.html/.txt files).
# For each it prints files/bytes, our wall time (a full `index_directory`, what `wo index --full`
# runs, caps lifted; peak RSS by GNU time), the tree-sitter parse floor (every file with a
# grammar, parsed with the chunker's grammars over THREADS threads, nothing else), the rg read
# floor (`rg -uuu -a -c '' DIR`) and the ratios, each with CPU seconds (user + system) beside the
# wall seconds: on a shared machine the CPU figures are the steadier ones. Takes a few minutes.
#
#   bench/index/floor.sh
#
# FLOOR_CODE_MB  size of the code tree (default 60): whole crates in name order.
# FLOOR_TEXT_MB  cap on the text tree (default 60).
# FLOOR_TREES    where the copies live (default /tmp/wo-floor-trees; kept between runs).
# RUNS           timed runs of each measurement (default 3; the best is reported).
# THREADS        threads for the parse floor and the index (default 2 = this machine's cores).
# BASELINE       optional: an index_floor binary built from an older commit; its full index
#                is timed in the same run (the "before" column).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
RUNS="${RUNS:-3}"
THREADS="${THREADS:-2}"
TREES="${FLOOR_TREES:-/tmp/wo-floor-trees}"
say() { printf '== %s\n' "$*" >&2; }
command -v rg >/dev/null || { echo "floor.sh needs rg (apt-get install ripgrep)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "floor.sh needs GNU time (apt-get install time)" >&2; exit 1; }

say "building the harness (release)"
cargo build --release -p wo-index --example index_floor -j 1 2>&1 | grep -E '^(warning|error)' >&2 || true
BIN="$CARGO_TARGET_DIR/release/examples/index_floor"
[ -x "$BIN" ] || { echo "harness build failed" >&2; exit 1; }

# ---- trees -------------------------------------------------------------------------------
REG="$(ls -d "$HOME"/.cargo/registry/src/*/ 2>/dev/null | head -n 1 || true)"
[ -n "$REG" ] || { echo "no cargo registry sources under ~/.cargo/registry/src" >&2; exit 1; }
CODE="$TREES/code"; TEXT="$TREES/text"
mkdir -p "$TREES"
code_mb="${FLOOR_CODE_MB:-60}"; text_mb="${FLOOR_TEXT_MB:-60}"
if [ "$(cat "$CODE.stamp" 2>/dev/null)" != "$REG|$code_mb" ]; then
  say "copying $code_mb MB of $REG to $CODE"
  rm -rf "$CODE"; mkdir -p "$CODE"; total=0
  while IFS= read -r name; do
    sz=$(du -sb "$REG/$name" | cut -f1)
    [ $((total + sz)) -gt $((code_mb * 1000000)) ] && continue
    cp -a "$REG/$name" "$CODE/"; total=$((total + sz))
  done < <(ls -1A "$REG" | LC_ALL=C sort)
  echo "$REG|$code_mb" > "$CODE.stamp"
fi
if [ "$(cat "$TEXT.stamp" 2>/dev/null)" != "$REG|$text_mb" ]; then
  say "collecting up to $text_mb MB of text files into $TEXT"
  rm -rf "$TEXT"; mkdir -p "$TEXT"
  { find /usr/share/doc -type f ! -name '*.gz' ! -name '*.bz2' ! -name '*.xz' ! -name '*.pdf' \
      ! -name '*.png' ! -name '*.jpg' ! -name '*.gif' ! -name '*.svg' ! -name '*.js' -print0
    find "$REG" -type f \( -name '*.md' -o -name '*.json' -o -name '*.html' -o -name '*.txt' \) -print0
  } | LC_ALL=C sort -z | python3 -c '
import os, shutil, sys
dest, cap = sys.argv[1], int(sys.argv[2]) * 1000000
total = 0
for src in sys.stdin.buffer.read().split(b"\0"):
    if not src:
        continue
    src = src.decode("utf-8", "surrogateescape")
    size = os.path.getsize(src)
    if total + size > cap:
        continue
    rel = src.lstrip("/").replace("/.", "/_")
    os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
    shutil.copyfile(src, os.path.join(dest, rel))
    total += size
' "$TEXT" "$text_mb"
  echo "$REG|$text_mb" > "$TEXT.stamp"
fi

# ---- measurements ------------------------------------------------------------------------
best() { python3 -c 'import sys; print(min(float(x) for x in sys.argv[1:]))' "$@"; }
kv() { sed -n "s/^$1=//p"; }
secs_of() { # command...: wall seconds of one run
  local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N)
  python3 -c "print(round($t1 - $t0, 3))"
}
cpu_of() { # command...: CPU seconds (user + system) of one run, by GNU time
  /usr/bin/time -f 'cpu=%U %S' "$@" 2>&1 >/dev/null | sed -n 's/^cpu=//p' \
    | python3 -c 'import sys; print(round(sum(float(x) for x in sys.stdin.read().split()), 2))'
}

say "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; RUNS=$RUNS THREADS=$THREADS"
printf '| tree | files | MB | code MB | before s (CPU s) | wo index s (CPU s) | peak RSS MB | parse floor s (CPU s, %s thr) | rg floor s (CPU s) | index / parse (CPU) | index / rg (CPU) | load |\n' "$THREADS"
printf '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n'
for tree in "$CODE" "$TEXT"; do
  rm -rf "$tree/.wo-index"
  parse=(); pcpu=(); rgs=(); rcpu=(); idx=(); icpu=(); rss=(); base=(); bcpu=()
  for _ in $(seq "$RUNS"); do
    out=$("$BIN" parse "$tree" "$THREADS")
    parse+=("$(echo "$out" | kv parse_s)"); pcpu+=("$(echo "$out" | kv parse_cpu_s)")
    files=$(echo "$out" | kv files); bytes=$(echo "$out" | kv bytes)
    code_bytes=$(echo "$out" | kv code_bytes)
    rgs+=("$(secs_of rg -uuu -a -c '' -g '!.wo-index' "$tree")")
    rcpu+=("$(cpu_of rg -uuu -a -c '' -g '!.wo-index' "$tree")")
    out=$(/usr/bin/time -f 'rss_kb=%M' "$BIN" index "$tree" "$THREADS" 2>&1)
    idx+=("$(echo "$out" | kv index_s)"); rss+=("$(echo "$out" | kv rss_kb)")
    icpu+=("$(echo "$out" | kv index_cpu_s)")
    if [ -n "${BASELINE:-}" ]; then
      bout=$("$BASELINE" index "$tree" "$THREADS")
      base+=("$(echo "$bout" | kv index_s)"); bcpu+=("$(echo "$bout" | kv index_cpu_s)")
    fi
    ifiles=$(echo "$out" | kv files)
  done
  p=$(best "${parse[@]}"); r=$(best "${rgs[@]}"); i=$(best "${idx[@]}")
  pc=$(best "${pcpu[@]}"); ic=$(best "${icpu[@]}")
  bs=$([ -n "${BASELINE:-}" ] && best "${base[@]}" || echo "")
  bc=$([ -n "${BASELINE:-}" ] && best "${bcpu[@]}" || echo "")
  rc=$(best "${rcpu[@]}")
  m=$(python3 -c 'import sys; print(max(int(x) for x in sys.argv[1:]) // 1024)' "${rss[@]}")
  python3 - "$tree" "$files" "$ifiles" "$bytes" "$code_bytes" "$i" "$m" "$p" "$r" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" "${parse[*]}" "${rgs[*]}" "${idx[*]}" "$pc" "$ic" "$bs" \
    "${base[*]:-}" "$bc" "$rc" <<'EOF'
import sys
tree, files, ifiles, b, cb, i, m, p, r, load, ps, rs, ids, pc, ic, bs, bss, bc, rc = sys.argv[1:]
b, cb, i, p, r, pc, ic, rc = int(b), int(cb), float(i), float(p), float(r), float(pc), float(ic), float(rc)
pr = f"{i / p:.2f}× ({ic / pc:.2f}×)" if p > 0.001 and pc > 0 else "— (no code)"
before = f"{float(bs):.2f} ({float(bc):.2f})" if bs else "—"
rr = f"{ic / rc:.1f}×" if rc > 0 else "—"
print(f"| {tree.rsplit('/', 1)[-1]} | {files} ({ifiles} indexed) | {b/1e6:.1f} | {cb/1e6:.1f} | {before} "
      f"| {i:.2f} ({ic:.2f}) | {m} | {p:.2f} ({pc:.2f}) | {r:.3f} ({rc:.2f}) | {pr} "
      f"| {i / r:.1f}× ({rr}) | {load} |")
print(f"   runs: parse {ps}; rg {rs}; index {ids}; before {bss}", file=sys.stderr)
EOF
  rm -rf "$tree/.wo-index"
done
