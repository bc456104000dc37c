#!/usr/bin/env bash
# Hosted scale-out: 1, 2 and 4 `wo serve --stateless` instances behind HAProxy (the
# configuration documented in docs/deploy.md, bench/scale/haproxy.cfg), against one fast local
# upstream speaking the OpenAI streaming format (bench/serve/harness). For each instance count:
# requests/s of a closed loop of clients through the proxy, and first-token latency one request
# at a time; the upstream called directly is the reference of the same run. With 2 and 4
# instances it also checks, through the proxy, that a client's second turn served by another
# instance continues its conversation (`wo-serve-bench continuity`), and that the guard's
# Host/Origin checks hold behind the proxy. Exits 1 if a check fails.
#
#   bench/scale/run.sh                    # prints SKIPPED (exit 0) when haproxy is not installed
#
# Env (defaults in brackets):
#   BENCH_OUT     output directory [bench/out/scale] (git-ignored); wiped per run
#   WO            wo binary [target-bench/release/wo, built with cargo --release -j 1]
#   HARNESS       wo-serve-bench binary [built from bench/serve/harness]
#   INSTANCES     instance counts to run [1 2 4]
#   RPS_CLIENTS   [64]; RPS_SECONDS per phase [8]; RPS_TOKENS [8]; RPS_THREADS client threads [2]
#   LAT_ITERS     first-token requests per count [200] (+ 20 warm-up); LAT_TOKENS [16]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=../lib.sh
. "$ROOT/bench/lib.sh"
cd "$ROOT"
HAPROXY="${HAPROXY:-$(command -v haproxy || true)}"
if [ -z "$HAPROXY" ]; then
  echo "SKIPPED: haproxy is not installed (apt-get install haproxy)"
  exit 0
fi
OUT="${BENCH_OUT:-$ROOT/bench/out/scale}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target-bench}"
INSTANCES="${INSTANCES:-1 2 4}"
RPS_CLIENTS="${RPS_CLIENTS:-64}" RPS_SECONDS="${RPS_SECONDS:-8}" RPS_TOKENS="${RPS_TOKENS:-8}"
RPS_THREADS="${RPS_THREADS:-2}" LAT_ITERS="${LAT_ITERS:-200}" LAT_TOKENS="${LAT_TOKENS:-16}"
PUBLIC=wo.test

rm -rf "$OUT"
mkdir -p "$OUT"
say() { printf '== %s  [load %s]\n' "$*" "$(cut -d' ' -f1-3 /proc/loadavg)" >&2; }

# docs/deploy.md's configuration must be this file, byte for byte.
if ! diff <(awk '/^```haproxy$/{on=1; next} /^```$/{on=0} on' docs/deploy.md) bench/scale/haproxy.cfg >"$OUT/readme.diff"; then
  echo "docs/deploy.md's HAProxy configuration differs from bench/scale/haproxy.cfg:" >&2
  cat "$OUT/readme.diff" >&2
  exit 1
fi

if [ -z "${WO:-}" ]; then
  say "building wo (release)"
  cargo build --release -j 1 -p wikioracle
  WO="$CARGO_TARGET_DIR/release/wo"
fi
if [ -z "${HARNESS:-}" ]; then
  say "building the harness (bench/serve/harness, offline)"
  cargo build --release -j 1 --offline --manifest-path "$ROOT/bench/serve/harness/Cargo.toml"
  HARNESS="$CARGO_TARGET_DIR/release/wo-serve-bench"
fi
H="$HARNESS"
ST="$(mktemp -d /tmp/wo-scale-bench.XXXXXX)"
mkdir -p "$ST/home"

PIDS=()
stop() { # pid: Ctrl-C (graceful), then SIGKILL after 5 s
  kill -INT "$1" 2>/dev/null || return 0
  for _ in $(seq 1 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.05; done
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
cleanup() {
  for p in "${PIDS[@]}"; do stop "$p"; done
  rm -rf "$ST"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

say "upstream"
"$H" upstream --threads 2 --url-file "$OUT/upstream.url" >"$OUT/upstream.log" 2>&1 &
PIDS+=("$!")
wait_file "$OUT/upstream.url"
write_upstream_config "$OUT/config.toml" "$(cat "$OUT/upstream.url")"

echo "machine: $(nproc) cores, $(uname -r); load before: $(cut -d' ' -f1-3 /proc/loadavg); $("$HAPROXY" -v | head -1); wo $("$WO" --version 2>/dev/null || echo "$WO")" | tee "$OUT/machine.txt"

# Instances run as docs/deploy.md's systemd unit starts them: --allow-host, no per-address caps
# (every request comes from the proxy), graceful stop on SIGINT; --allow-model echo lets the
# continuity check ask the upstream to echo the prompt it was sent.
INST_PIDS=()
start_instances() { # count
  INST_PIDS=()
  for i in $(seq 1 "$1"); do
    HOME="$ST/home" WO_CONFIG="$OUT/config.toml" WO_SERVE_QUIET=1 \
      "$WO" serve --stateless --port 0 --print-url-file "$OUT/wo$i.url" --allow-host "$PUBLIC" \
      --rate-limit 0 --max-connections-per-ip 0 --allow-model echo >"$OUT/wo$i.log" 2>&1 &
    INST_PIDS+=("$!")
    PIDS+=("$!")
    wait_file "$OUT/wo$i.url"
  done
}
stop_instances() { for p in "${INST_PIDS[@]}"; do stop "$p"; done; rm -f "$OUT"/wo*.url; }

# The documented file with this run's addresses: the public bind, the N servers, and no
# per-client rate limit (every bench client shares one address).
proxy_config() { # count port
  local servers=""
  for i in $(seq 1 "$1"); do
    local hp; hp="$(sed -e 's#^http://##' -e 's#/.*##' "$OUT/wo$i.url")"
    servers+="    server wo$i $hp check inter 2s"$'\n'
  done
  awk -v port="$2" -v servers="$servers" '
    /^    bind 127\.0\.0\.1:8080$/ { print "    bind 127.0.0.1:" port; next }
    /sc_http_req_rate\(0\) gt 120/ { sub(/gt 120/, "gt 100000000") }
    /^    server wo[0-9]/ { if (!done) { printf "%s", servers; done = 1 }; next }
    { print }' bench/scale/haproxy.cfg
}

RESULTS=()
for n in $INSTANCES; do
  say "$n instance(s)"
  start_instances "$n"
  port="$(free_port)"
  proxy_config "$n" "$port" >"$OUT/haproxy-$n.cfg"
  "$HAPROXY" -c -q -f "$OUT/haproxy-$n.cfg"
  "$HAPROXY" -db -f "$OUT/haproxy-$n.cfg" >"$OUT/haproxy-$n.log" 2>&1 &
  HP=$!
  PIDS+=("$HP")
  sleep 0.3
  if ! kill -0 "$HP" 2>/dev/null; then
    echo "haproxy did not start:" >&2
    cat "$OUT/haproxy-$n.log" >&2
    exit 1
  fi
  echo "http://127.0.0.1:$port" >"$OUT/proxy.url"
  # Ready when the health checks have every server up: requests then spread over all.
  for _ in $(seq 1 100); do
    curl -s -o /dev/null -H "Host: $PUBLIC" "http://127.0.0.1:$port/api/health" && break
    sleep 0.1
  done
  sleep 2.5
  if [ "$n" -ge 2 ]; then
    "$H" continuity --url-file "$OUT/proxy.url" --host "$PUBLIC" --instances "$n" \
      --json "$OUT/continuity-$n.json" | tee "$OUT/continuity-$n.txt"
  fi
  timeout 600 "$H" latency --label "first token, $n instance(s)" \
    --target "direct=openai:$OUT/upstream.url" --target "proxy-$n=wo-stateless:$OUT/proxy.url" \
    --iters "$LAT_ITERS" --warmup 20 --tokens "$LAT_TOKENS" --model bench \
    --json "$OUT/latency-$n.json" | tee "$OUT/latency-$n.txt"
  # One instance without the proxy too, to tell the proxy's cost from the instances'.
  timeout 600 "$H" rps --target "direct=openai:$OUT/upstream.url" \
    --target "wo1-alone=wo-stateless:$OUT/wo1.url" \
    --target "proxy-$n=wo-stateless:$OUT/proxy.url" --clients "$RPS_CLIENTS" \
    --duration "$RPS_SECONDS" --rounds 1 --tokens "$RPS_TOKENS" --model bench \
    --threads "$RPS_THREADS" --json "$OUT/rps-$n.json" | tee "$OUT/rps-$n.txt"
  stop "$HP"
  stop_instances
done

say "summary"
python3 - "$OUT" $INSTANCES <<'PY' | tee "$OUT/summary.txt"
import json, sys, os
out, counts = sys.argv[1], sys.argv[2:]
def load(name):
    p = os.path.join(out, name)
    return json.load(open(p)) if os.path.exists(p) else None
base = None
print("instances | req/s through HAProxy | × 1 instance | one instance without the proxy, req/s | upstream direct req/s | first token p50 through HAProxy (direct) | continuity")
for n in counts:
    r, l, c = load(f"rps-{n}.json"), load(f"latency-{n}.json"), load(f"continuity-{n}.json")
    def rps_of(name):
        for t in r.get("summary", []):
            if t.get("name") == name:
                return t.get("req_per_s_median")
    via, direct, alone = rps_of(f"proxy-{n}"), rps_of("direct"), rps_of("wo1-alone")
    base = base or via
    ttft = {t["name"]: t.get("ttft_ms", {}).get("p50") for t in l.get("targets", [])}
    cont = "—" if c is None else ("ok" if c.get("ok") else "FAILED")
    print(f"{n} | {via:.0f} | {via / base:.2f}× | {alone:.0f} | {direct:.0f} | {ttft.get(f'proxy-{n}')} ms ({ttft.get('direct')} ms) | {cont}")
PY
