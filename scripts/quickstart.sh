#!/usr/bin/env bash
# From a fresh clone to a real answer from the offline model, in one command:
#   bash scripts/quickstart.sh ["your question"]
# Installs what building the embedded llama.cpp needs (cmake, clang,
# libclang-dev; with apt, asking sudo when not root), the SmolLM2 model
# (scripts/install-model.sh), and `wo` itself (cargo install), then asks the
# question in a demo project whose memory is demo/llm.json, and serves the
# web app on it: open the printed URL and keep chatting in the browser.
# QUICKSTART_NO_SERVE=1 stops after the answer.
set -euo pipefail
cd "$(dirname "$0")/.."
question="${1:-In one sentence, what is a kiln?}"

missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v clang >/dev/null || missing+=(clang)
compgen -G "/usr/lib/llvm-*/lib/libclang*.so*" >/dev/null || compgen -G "/usr/lib/*/libclang*.so*" >/dev/null || missing+=(libclang-dev)
if [ ${#missing[@]} -gt 0 ]; then
  echo "quickstart: installing ${missing[*]} (needed to build llama.cpp)" >&2
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq && $sudo apt-get install -y -qq "${missing[@]}" >&2
fi

# The models download while wo builds: the build is the long part.
scripts/install-model.sh >&2 &
models=$!
echo "quickstart: building and installing wo (first time: about 15 minutes on two cores, compiling llama.cpp and wo; the models download meanwhile)" >&2
cargo install --locked --quiet --path crates/wikioracle
wait "$models" || { echo "quickstart: installing the models failed (see above); run scripts/install-model.sh again" >&2; exit 1; }
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

mkdir -p demo
cd demo
[ -f llm.json ] || wo init --context "A demo project for trying WikiOracle."
echo "quickstart: wo ask \"$question\"  (in $(pwd))" >&2
wo ask --temperature 0.2 "$question" </dev/null   # stdin is not the question
echo >&2
echo "quickstart: the turn is saved in $(pwd)/llm.json — try: cd demo && wo log, wo chat, wo memory add …" >&2
if [ -n "${QUICKSTART_NO_SERVE:-}" ]; then
  exit 0
fi
echo "quickstart: starting the web app on demo/llm.json — open the URL below (Ctrl-C stops)" >&2
exec wo serve
