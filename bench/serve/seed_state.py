#!/usr/bin/env python3
"""Writes an llm.json with N messages (alternating user/assistant turns, ~400 bytes each, a
Zipf-distributed vocabulary so retrieval has real work), for the latency run on a grown state.

    python3 bench/serve/seed_state.py OUT.json N
"""
import json
import random
import sys
from datetime import datetime, timedelta, timezone

out, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(42)
vocab = [f"w{i}" for i in range(5000)]
weights = [1.0 / (i + 1) for i in range(len(vocab))]
start = datetime(2025, 1, 1, tzinfo=timezone.utc)
messages = []
parent = None
for i in range(n):
    ts = (start + timedelta(seconds=30 * i)).strftime("%Y-%m-%dT%H:%M:%SZ")
    words = rng.choices(vocab, weights, k=55)
    role = "user" if i % 2 == 0 else "assistant"
    mid = f"m_seed{i:011d}"
    m = {
        "id": mid,
        "title": " ".join(words[:6]),
        "username": "user" if role == "user" else "bench",
        "timestamp": ts,
        "content": "<p>" + " ".join(words) + "</p>",
        "role": role,
    }
    if parent:
        m["parent"] = parent
    messages.append(m)
    parent = mid
state = {
    "version": 1,
    "schema": "https://raw.githubusercontent.com/arborrhythms/WikiOracle/main/spec/llm_state_v1.json",
    "date": (start + timedelta(seconds=30 * n)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "context": "",
    "messages": messages,
    "truth": {"trust": []},
}
with open(out, "w") as f:
    json.dump(state, f, indent=2)
    f.write("\n")
