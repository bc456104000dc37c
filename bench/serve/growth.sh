#!/usr/bin/env bash
# growth.sh OUT WO... : CPU per turn of `wo serve` as its llm.json grows.
# For each wo binary given (e.g. a before and an after build, alternating in one run): a fresh
# server that creates its llm.json and takes ROUNDS loads of 100 clients x 3 turns (0 -> 600 ->
# 1,200 ... messages), then a server on an llm.json seeded with SEED messages (seed_state.py),
# one load. Prints each load's turns/s, first token, save wait and the server's CPU per turn, and at
# the end each build's CPU per turn as a ratio to the first build's (the run's reference).
# Env: ROUNDS [3], SEED [3000], MODEL [bench@1000], PERF=1 runs each server under
# `perf record --call-graph dwarf` (perf-N-KIND.data in OUT), H the harness binary
# [target/release/wo-serve-bench: cargo build --release --offline --manifest-path
# bench/serve/harness/Cargo.toml --target-dir target].
set -euo pipefail
OUT=$1; shift
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=../lib.sh
. "$ROOT/bench/lib.sh"
H=${H:-$ROOT/target/release/wo-serve-bench}
ROUNDS=${ROUNDS:-3} SEED=${SEED:-3000} MODEL=${MODEL:-bench@1000} PERF=${PERF:-}
mkdir -p "$OUT"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done; sleep 1; for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
"$H" upstream --url-file "$OUT/upstream.url" >"$OUT/upstream.log" 2>&1 & PIDS+=("$!")
wait_file "$OUT/upstream.url"
write_upstream_config "$OUT/config.toml" "$(cat "$OUT/upstream.url")"
python3 $ROOT/bench/serve/seed_state.py "$OUT/seed.json" "$SEED"
n=0
for WO in "$@"; do
  n=$((n+1)); tag=$(basename "$WO")
  for kind in fresh seeded; do
    ST="$OUT/st-$n-$kind"; rm -rf "$ST"; mkdir -p "$ST/home"
    [ $kind = seeded ] && cp "$OUT/seed.json" "$ST/llm.json"
    rm -f "$OUT/$n-$kind.url"
    PFX=(); [ -n "$PERF" ] && PFX=(perf record -F 250 --call-graph dwarf,16384 -o "$OUT/perf-$n-$kind.data" --)
    HOME="$ST/home" WO_CONFIG="$OUT/config.toml" WO_SERVE_QUIET=1 "${PFX[@]}" "$WO" serve --port 0 --print-url-file "$OUT/$n-$kind.url" --rate-limit 0 --state "$ST/llm.json" >"$OUT/$n-$kind.log" 2>&1 &
    pid=$!; PIDS+=("$pid"); wait_file "$OUT/$n-$kind.url"
    if [ -n "$PERF" ]; then ppid=$pid; pid=$(pgrep -P $ppid | head -1); fi
    r=${ROUNDS}; [ $kind = seeded ] && r=1
    for i in $(seq 1 $r); do
      msgs=$(python3 -c "import json,sys;print(len(json.load(open('$ST/llm.json'))['messages']))" 2>/dev/null || echo 0)
      echo "== $tag $kind round $i (file before: $msgs messages) load $(cut -d' ' -f1 /proc/loadavg)"
      "$H" concurrent --target "local=wo-local:$OUT/$n-$kind.url" --clients 100 --turns 3 --tokens 32 --model "$MODEL" \
        --watch "wo=$pid" --run-id "$(date +%s%N)" --ids-out "$OUT/ids-$n-$kind-$i.json" --json "$OUT/c-$n-$kind-$i.json" | grep -E "concurrent:|per turn|CPU of"
    done
    kill -INT $pid; for _ in $(seq 1 100); do kill -0 $pid 2>/dev/null || break; sleep 0.05; done
    if [ -n "$PERF" ]; then wait $ppid || true; fi
  done
done
# Ratios against the first build given (the reference of the run): each build's CPU per turn
# for each load, divided by the reference's for the same load (median over repeated builds).
python3 - "$OUT" "$@" <<'PY'
import json, os, statistics, sys
out, builds = sys.argv[1], sys.argv[2:]
ref = builds[0]
rows = {}
for n, wo in enumerate(builds, 1):
    for kind in ("fresh", "seeded"):
        i = 1
        while os.path.exists(f"{out}/c-{n}-{kind}-{i}.json"):
            d = json.load(open(f"{out}/c-{n}-{kind}-{i}.json"))
            ms = [c["cpu_ms_per_turn"] for c in d["cpu"] if c["name"] == "wo"][0]
            rows.setdefault((kind, i), {}).setdefault(wo, []).append(ms)
            i += 1
print(f"== CPU per turn against {os.path.basename(ref)} (the first build given), medians")
for (kind, i), per in sorted(rows.items()):
    base = statistics.median(per[ref])
    cells = [f"{os.path.basename(wo)} {statistics.median(v):.2f} ms = {statistics.median(v) / base:.2f}x"
             for wo, v in per.items()]
    print(f"{kind} load {i}: " + "; ".join(cells))
PY
