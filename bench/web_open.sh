#!/usr/bin/env bash
# The web app opening and scrolling a 10,000-message llm.json in Chromium
# (tests/browser/run.mjs in its WO_BROWSER_BENCH=1 mode):
# local and stateless, one 10,000-message conversation and 500 conversations
# of 20. Prints, per case, the open time (navigation → the app's `wo-ready`
# mark, median of 5 reloads) beside the reference measured in the same page:
# getting and parsing the same whole state without rendering (local: fetch
# /api/export + JSON parse; stateless: the IndexedDB read), and the frame
# times while scrolling to the conversation's top with the mouse wheel.
# Fails if an open takes 1 s or more. No model is called.
# Env: PROFILE=release to bench a release build (default: the debug build).
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${PROFILE:-debug}"
if [ "$profile" = release ]; then cargo build -q --release -p wikioracle; else cargo build -q -p wikioracle; fi
[ -d tests/browser/node_modules/axe-core ] || npm ci --prefix tests/browser --no-audit --no-fund --loglevel=error
WO_BROWSER_BENCH=1 WO_BIN="$PWD/target/$profile/wo" WO_OPENAI_BASE_URL=http://127.0.0.1:9/v1 \
  node tests/browser/run.mjs
