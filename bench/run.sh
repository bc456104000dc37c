#!/usr/bin/env bash
# Runs the benchmarks and prints their ratios; BENCHMARKS.md records a run
# and explains each number. Optional env: SIZES, REPEAT, MESSAGES, TRUTH.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== state file: load / append+save / merge vs fsync floor and Python"
cargo bench -q -p wo-store --bench state_io
echo "== what wo ask adds around the model call"
cargo bench -q -p wo-engine --bench ask_overhead
echo "== local provider vs llama.cpp"
python3 bench/local_speed.py
echo "== wo serve's OpenAI-compatible endpoint: added first-token latency"
cargo bench -q -p wo-server --bench openai_proxy
echo "== the web app opening a 10,000-message llm.json in Chromium"
bench/web_open.sh
if [ -x bench/serve/run.sh ]; then
  echo "== wo serve: added latency, throughput, concurrency, stateless req/s"
  bench/serve/run.sh
fi
if [ -x bench/index/run.sh ]; then
  echo "== directory index vs peers and the rg floor"
  bench/index/run.sh
fi
