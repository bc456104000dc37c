#!/usr/bin/env bash
# `wo serve` benchmarks (see README.md beside this file), all against one fast local upstream
# that speaks the OpenAI Chat Completions streaming format, in ONE run:
#   1a. first-token latency added by the server (local and stateless mode) against calling the
#       upstream directly, interleaved; also local mode on a grown llm.json (SEED_MESSAGES) and
#       local mode with its llm.json inside an indexed project (INDEXED)
#   1b. throughput of a streamed answer (upstream with no delay), same three paths
#   2.  100 concurrent chats in local mode; then every turn is checked in llm.json
#   3.  stateless requests/s against the upstream's own requests/s, same client
# Prints the ratios; JSON results, logs and the summary go to $BENCH_OUT.
#
#   bench/serve/run.sh
#
# Env (defaults in brackets):
#   BENCH_OUT       output directory [bench/out/serve] (git-ignored); wiped per run
#   WO              wo binary [target-bench/release/wo, built with cargo --release -j 1]
#   LAT_ITERS       latency requests per path [300] (+ LAT_WARMUP [30]); LAT_TOKENS [64];
#   LAT_DELAY_US    inter-token delay of the upstream for 1a [1000]
#   SEED_MESSAGES   messages in the grown llm.json for 1a [10000]; 0 skips that path
#   INDEXED         1: a 1a path whose llm.json sits in a `wo index`ed copy of crates/ [1]
#   NODELAY_SHIM    1: run every `wo serve` with bench/serve/nodelay.c preloaded (TCP_NODELAY on
#                   accepted sockets), to show what that fix gives [0]
#   BENCH_TMP       where the servers' state files live [a fresh /tmp/wo-serve-bench.XXXXXX,
#                   removed at exit]: outside any indexed tree, since local mode uses the index
#                   above its llm.json
#   TP_ITERS        throughput requests per path [50]; TP_TOKENS [4096]
#   CONC_CLIENTS    concurrent clients [100]; CONC_TURNS turns each [3]; CONC_TOKENS [32];
#                   CONC_MODEL the upstream's pacing [bench@1000: ~2 ms a token; bench: none]. The
#                   same load is first run against the upstream directly, for the ratios.
#                   CONC_SEED_MESSAGES: messages in llm.json before the load [3000]
#                   (seed_state.py; 0: a fresh file)
#   RPS_CLIENTS     [48]; RPS_SECONDS per phase [10]; RPS_ROUNDS [2]; RPS_TOKENS [8]
#   SKIP            words among: latency throughput concurrent rps
#   BENCH_CONFIG_EXTRA  lines appended to the servers' config.toml (bench/lib.sh)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=../lib.sh
. "$ROOT/bench/lib.sh"
cd "$ROOT"
OUT="${BENCH_OUT:-$ROOT/bench/out/serve}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target-bench}"
LAT_ITERS="${LAT_ITERS:-300}" LAT_WARMUP="${LAT_WARMUP:-30}" LAT_TOKENS="${LAT_TOKENS:-64}"
LAT_DELAY_US="${LAT_DELAY_US:-1000}" SEED_MESSAGES="${SEED_MESSAGES:-10000}"
TP_ITERS="${TP_ITERS:-50}" TP_TOKENS="${TP_TOKENS:-4096}"
CONC_CLIENTS="${CONC_CLIENTS:-100}" CONC_TURNS="${CONC_TURNS:-3}" CONC_TOKENS="${CONC_TOKENS:-32}"
CONC_MODEL="${CONC_MODEL:-bench@1000}" CONC_SEED_MESSAGES="${CONC_SEED_MESSAGES:-3000}"
RPS_CLIENTS="${RPS_CLIENTS:-48}" RPS_SECONDS="${RPS_SECONDS:-10}" RPS_ROUNDS="${RPS_ROUNDS:-2}"
RPS_TOKENS="${RPS_TOKENS:-8}" SKIP="${SKIP:-}" INDEXED="${INDEXED:-1}" NODELAY_SHIM="${NODELAY_SHIM:-0}"

say() { printf '== %s  [load %s]\n' "$*" "$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/load.txt" >&2; }
skip() { [[ " $SKIP " == *" $1 "* ]]; }

rm -rf "$OUT"
mkdir -p "$OUT"

# ---- build ---------------------------------------------------------------------------------
if [ -z "${WO:-}" ]; then
  say "building wo (release)"
  cargo build --release -j 1 -p wikioracle
  WO="$CARGO_TARGET_DIR/release/wo"
  WO_REV="built from $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates Cargo.toml Cargo.lock || echo ' + uncommitted changes')"
else
  WO_REV="given: $WO"
fi
say "building the harness (bench/serve/harness, offline)"
cargo build --release -j 1 --offline --manifest-path "$ROOT/bench/serve/harness/Cargo.toml"
H="$CARGO_TARGET_DIR/release/wo-serve-bench"
PRELOAD=""
if [ "$NODELAY_SHIM" = 1 ]; then
  cc -O2 -shared -fPIC -o "$OUT/nodelay.so" "$ROOT/bench/serve/nodelay.c" -ldl
  PRELOAD="$OUT/nodelay.so"
fi

RUN="$OUT"
if [ -n "${BENCH_TMP:-}" ]; then
  ST="$BENCH_TMP"
  mkdir -p "$ST"
else
  ST="$(mktemp -d /tmp/wo-serve-bench.XXXXXX)"
fi
mkdir -p "$ST/home"

# ---- processes (stopped on exit, each by its own pid) ----------------------------------------
PIDS=()
stop() { # pid: Ctrl-C (graceful), then SIGKILL after 5 s
  kill -INT "$1" 2>/dev/null || return 0
  for _ in $(seq 1 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.05; done
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
cleanup() {
  for p in "${PIDS[@]}"; do stop "$p"; done
  if [ -z "${BENCH_TMP:-}" ]; then rm -rf "$ST"; fi
}
trap cleanup EXIT


say "upstream (OpenAI streaming format, 1 thread)"
"$H" upstream --url-file "$RUN/upstream.url" >"$RUN/upstream.log" 2>&1 &
UP_PID=$!
PIDS+=("$UP_PID")
wait_file "$RUN/upstream.url"

write_upstream_config "$RUN/config.toml" "$(cat "$RUN/upstream.url")"

# serve NAME [ARGS…]: starts `wo serve` with its own HOME, the bench config, any port; the URL
# (with the token in local mode) lands in $RUN/NAME.url.
serve() {
  local name=$1
  shift
  HOME="$ST/home" WO_CONFIG="$RUN/config.toml" WO_SERVE_QUIET=1 LD_PRELOAD="$PRELOAD" \
    "$WO" serve --port 0 --print-url-file "$RUN/$name.url" --rate-limit 0 "$@" \
    >"$RUN/$name.log" 2>&1 &
  PIDS+=("$!")
  eval "PID_${name//-/_}=$!"
  wait_file "$RUN/$name.url"
}

# A stateless server accepts only the models it offers: the paced upstream models the parts
# below name.
serve stateless --stateless --allow-model "bench@$LAT_DELAY_US" --allow-model "$CONC_MODEL"
DIRECT="direct=openai:$RUN/upstream.url"
STATELESS="stateless=wo-stateless:$RUN/stateless.url"

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r); load before: $(cut -d' ' -f1-3 /proc/loadavg); wo $WO_REV; TCP_NODELAY shim: $NODELAY_SHIM" | tee "$RUN/machine.txt"

# ---- 1a. first-token latency ---------------------------------------------------------------
if ! skip latency; then
  say "1a. first-token latency: ${LAT_ITERS} requests per path, ${LAT_TOKENS} tokens, ${LAT_DELAY_US} µs between tokens"
  mkdir -p "$ST/lat"
  serve local --state "$ST/lat/llm.json"
  TARGETS=(--target "$DIRECT" --target "local=wo-local:$RUN/local.url" --target "$STATELESS")
  if [ "$SEED_MESSAGES" -gt 0 ]; then
    mkdir -p "$ST/seed"
    python3 "$ROOT/bench/serve/seed_state.py" "$ST/seed/llm.json" "$SEED_MESSAGES"
    "$WO" validate "$ST/seed/llm.json" >/dev/null
    echo "seeded llm.json: $SEED_MESSAGES messages, $(stat -c %s "$ST/seed/llm.json") bytes" | tee "$RUN/seed.txt"
    serve local-seeded --state "$ST/seed/llm.json"
    TARGETS+=(--target "local-${SEED_MESSAGES}=wo-local:$RUN/local-seeded.url")
  fi
  if [ "$INDEXED" = 1 ]; then
    # A small project (a copy of this repository's crates/), indexed; its llm.json at the root.
    mkdir -p "$ST/project"
    cp -r "$ROOT/crates" "$ST/project/"
    "$WO" index "$ST/project" >"$RUN/index.txt" 2>&1
    echo "indexed project: $(du -sh "$ST/project/crates" | cut -f1) of sources, index $(du -sh "$ST/project/.wo-index" | cut -f1)" | tee -a "$RUN/index.txt"
    serve local-indexed --state "$ST/project/llm.json"
    TARGETS+=(--target "local-indexed=wo-local:$RUN/local-indexed.url")
  fi
  timeout 1200 "$H" latency "${TARGETS[@]}" --iters "$LAT_ITERS" --warmup "$LAT_WARMUP" \
    --tokens "$LAT_TOKENS" --model "bench@$LAT_DELAY_US" --json "$RUN/latency.json" |
    tee "$RUN/latency.txt"
  "$H" fsync-floor --dir "$ST/lat" --bytes "$(stat -c %s "$ST/lat/llm.json")" --iters 50 \
    --json "$RUN/fsync_floor.json"
  if [ "$SEED_MESSAGES" -gt 0 ]; then
    "$H" fsync-floor --dir "$ST/seed" --bytes "$(stat -c %s "$ST/seed/llm.json")" --iters 20 \
      --json "$RUN/fsync_floor_seeded.json"
  fi
  echo "llm.json after 1a: local $(stat -c %s "$ST/lat/llm.json") bytes; seeded $(stat -c %s "$ST/seed/llm.json" 2>/dev/null || echo -) bytes" |
    tee -a "$RUN/latency.txt"
fi

# ---- 1b. throughput ------------------------------------------------------------------------
if ! skip throughput; then
  say "1b. throughput: ${TP_ITERS} answers of ${TP_TOKENS} tokens per path, no delay"
  mkdir -p "$ST/tp"
  serve local-tp --state "$ST/tp/llm.json"
  timeout 1200 "$H" latency --label throughput --target "$DIRECT" \
    --target "local=wo-local:$RUN/local-tp.url" --target "$STATELESS" \
    --iters "$TP_ITERS" --warmup 5 --tokens "$TP_TOKENS" --model bench --eof-grace-ms 5 \
    --json "$RUN/throughput.json" | tee "$RUN/throughput.txt"
  # CPU per token of each process at the maximum rate (stateless path only, so nothing is saved).
  cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
  w0=$(cpu "$PID_stateless") u0=$(cpu "$UP_PID") t0=$(date +%s%N)
  timeout 600 "$H" latency --label "throughput (stateless only, for CPU accounting)" \
    --target "$STATELESS" --iters "$TP_ITERS" --warmup 0 --tokens "$TP_TOKENS" --model bench \
    --eof-grace-ms 0 >/dev/null
  w1=$(cpu "$PID_stateless") u1=$(cpu "$UP_PID") t1=$(date +%s%N)
  awk -v w=$((w1 - w0)) -v u=$((u1 - u0)) -v n=$((TP_ITERS * TP_TOKENS)) -v s=$(((t1 - t0) / 1000000)) \
    'BEGIN { printf "CPU per streamed token (stateless path, %d tokens in %.2f s): wo serve %.2f µs, upstream %.2f µs\n", n, s/1000, w*1e4/n, u*1e4/n }' |
    tee -a "$RUN/throughput.txt"
fi

# ---- 2. concurrent chats -------------------------------------------------------------------
if ! skip concurrent; then
  say "2. ${CONC_CLIENTS} concurrent clients × ${CONC_TURNS} turns (local mode, model $CONC_MODEL, $CONC_SEED_MESSAGES messages seeded), then llm.json is checked"
  mkdir -p "$ST/conc" "$RUN/conc"
  if [ "$CONC_SEED_MESSAGES" -gt 0 ]; then
    python3 "$ROOT/bench/serve/seed_state.py" "$ST/conc/llm.json" "$CONC_SEED_MESSAGES"
    echo "concurrent: llm.json seeded with $CONC_SEED_MESSAGES messages" | tee "$RUN/conc/seed.txt"
  fi
  serve local-conc --state "$ST/conc/llm.json"
  timeout 600 "$H" concurrent --target "local=wo-local:$RUN/local-conc.url" \
    --reference "$DIRECT" \
    --clients "$CONC_CLIENTS" --turns "$CONC_TURNS" --tokens "$CONC_TOKENS" --model "$CONC_MODEL" \
    --watch "wo=$PID_local_conc" \
    --run-id "$(date +%s)" --ids-out "$RUN/conc/turns.json" --json "$RUN/concurrent.json" |
    tee "$RUN/concurrent.txt"
  # The server is stopped first (graceful), so the check reads what it left on disk.
  stop "$PID_local_conc"
  "$H" verify --state "$ST/conc/llm.json" --ids "$RUN/conc/turns.json" \
    --expect-turns $((CONC_CLIENTS * CONC_TURNS)) --seeded-messages "$CONC_SEED_MESSAGES" --json "$RUN/verify.json" | tee -a "$RUN/concurrent.txt"
  "$WO" validate "$ST/conc/llm.json" | tee -a "$RUN/concurrent.txt"
fi

# ---- 3. stateless requests per second ------------------------------------------------------
if ! skip rps; then
  say "3. stateless req/s: ${RPS_CLIENTS} clients, ${RPS_SECONDS} s per phase × ${RPS_ROUNDS} rounds, ${RPS_TOKENS} tokens"
  timeout 1200 "$H" rps --target "$DIRECT" --target "$STATELESS" --clients "$RPS_CLIENTS" \
    --duration "$RPS_SECONDS" --rounds "$RPS_ROUNDS" --tokens "$RPS_TOKENS" --model bench \
    --watch "upstream=$UP_PID" --watch "wo=$PID_stateless" --json "$RUN/rps.json" |
    tee "$RUN/rps.txt"
fi

say "done"
"$H" summary --dir "$RUN" | tee "$RUN/summary.txt"
echo "load average at each step:"; cat "$RUN/load.txt"
