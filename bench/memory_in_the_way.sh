#!/usr/bin/env bash
# What memory adds to questions asked one after the other, the way a person
# with one configured provider meets it: a llama-cpp-python server on
# loopback serving the offline model (SmolLM2), `wo ask` ten times in a row
# with the memory interpreter on (its default with a config file), against
# the same ten with it off — alternated question by question, each side in
# its own project, at temperature 0 so that both sides generate alike.
# Prints each side's median and slowest answer time, the
# ratio, and then, once the background interpreter has run, how many
# exchanges it interpreted and why the others were not.
#
#   bash bench/memory_in_the_way.sh            # WO=path/to/wo, PORT, QUESTIONS
#
# Needs the model (scripts/install-model.sh) and the server
# (`python3 -m pip install "llama-cpp-python[server]"`). Goal: the ratio
# within noise of 1.0 and no answer failing — memory never in the way.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WO="${WO:-$HERE/target/debug/wo}"
PORT="${PORT:-18093}"
PY="${PYTHON:-python3}"
MODEL="${WO_MODEL:-${XDG_DATA_HOME:-$HOME/.local/share}/wikioracle/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
[ -x "$WO" ] || { echo "no wo at $WO (cargo build -p wikioracle, or WO=…)" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "no model at $MODEL (scripts/install-model.sh)" >&2; exit 1; }

work="$(mktemp -d)"
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$PY" -m llama_cpp.server --model "$MODEL" --host 127.0.0.1 --port "$PORT" \
  --n_ctx 4096 --n_threads 2 >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null || { tail "$work/server.log" >&2; exit 1; }

config() { # FILE MODE
  cat >"$1" <<EOC
[defaults]
provider = "llamacpp"

[interpreter]
mode = "$2"

[providers.llamacpp]
kind = "openai"
base_url = "http://127.0.0.1:$PORT/v1"
context_window = 4096
EOC
}
mkdir -p "$work/on" "$work/off"
config "$work/on.toml" after
config "$work/off.toml" off
for side in on off; do
  (cd "$work/$side" && WO_CONFIG="$work/$side.toml" "$WO" init --context "Trying wo." >/dev/null 2>&1)
done

questions=(
  "What is a kiln?"
  "I am building a pottery studio in my garage. What do I need?"
  "My kiln is a Skutt KM-818. How hot does cone 6 get?"
  "What clay should I use for mugs?"
  "Remind me what kiln I have."
  "How long does a bisque firing take?"
  "What is glaze crawling?"
  "My name is Alec and I teach pottery on Saturdays."
  "When do I teach?"
  "Summarise what you know about my studio."
)
n="${QUESTIONS:-${#questions[@]}}"
failed=0
for i in $(seq 0 $((n - 1))); do
  q="${questions[$((i % ${#questions[@]}))]}"
  # Which side goes first alternates too: the server keeps the last
  # prompt's cache, and the side asked second would always find its twin's.
  order="on off"; [ $((i % 2)) -eq 1 ] && order="off on"
  for side in $order; do
    start=$(date +%s.%N)
    if ! (cd "$work/$side" && WO_CONFIG="$work/$side.toml" "$WO" ask --temperature 0 --max-tokens 48 "$q" \
      </dev/null >/dev/null 2>"$work/err"); then
      failed=$((failed + 1))
      echo "  $side: failed: $(tail -c 300 "$work/err")" >&2
    fi
    echo "$side $(echo "$(date +%s.%N) - $start" | bc)" >>"$work/times"
  done
done

"$PY" - "$work/times" "$failed" <<'PY'
import statistics, sys
times = {"on": [], "off": []}
for line in open(sys.argv[1]):
    side, t = line.split()
    times[side].append(float(t))
on, off = statistics.median(times["on"]), statistics.median(times["off"])
print(f"questions: {len(times['on'])} a side, alternated; failed answers: {sys.argv[2]}")
print(f"interpreter on:  median {on:.2f} s, slowest {max(times['on']):.2f} s")
print(f"interpreter off: median {off:.2f} s, slowest {max(times['off']):.2f} s")
print(f"on / off: {on / off:.2f}x (goal: within noise of 1.0x)")
PY

# Then the background interpreter, at the pause after the last question.
for _ in $(seq 1 180); do
  status="$(cd "$work/on" && WO_CONFIG="$work/on.toml" "$WO" memory status)"
  echo "$status" | grep -qE '^(pending|running)' || break
  sleep 5
done
echo "$status" | "$PY" -c '
import collections, sys
lines = [l for l in sys.stdin.read().splitlines()[1:] if l.strip()]
count = collections.Counter(l.split()[0] for l in lines)
print("interpreter afterwards: " + ", ".join(f"{k} {v}" for k, v in sorted(count.items())))
for l in lines:
    if l.startswith("failed"):
        print("  " + l.split("  ", 3)[-1][:160])
'
