#!/usr/bin/env bash
# Runs every benchmark and prints its ratios; see BENCHMARKS.md for a
# recorded run and what each number means. Optional: SIZES, REPEAT.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== state file (issue 2)"
cargo bench -p wo-store --bench state_io
