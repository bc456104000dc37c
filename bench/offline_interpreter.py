#!/usr/bin/env python3
"""How the built-in offline model does as memory's interpreter, for one or
more `wo` builds: six everyday exchanges (an Open WebUI export) imported into
a fresh project, then `wo memory rebuild -p local --yes` — one structured-output
call per exchange, SmolLM2 in-process, answers held to the interpreter's schema.

Prints per build: the rebuild's wall time, how many exchanges gave a valid
batch of operations (the rest are reported as not remembered), and the entries
kept. Builds alternate when --rounds > 1, so a machine's load falls on each.

    python3 bench/offline_interpreter.py --wo target/release/wo [--wo OTHER] [--rounds 2]

Needs the model (scripts/install-model.sh). Nothing leaves the machine.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

EXCHANGES = [
    ("I'm setting up a small pottery studio in my garage. What kiln should I start with?",
     "For a garage studio, a small electric kiln on a 240 V circuit is the usual start: "
     "a top-loader of about 7 cubic feet fires to cone 6 and needs a vent and clearance from walls."),
    ("My name is Dana, by the way, and the garage is in Porto.",
     "Nice to meet you, Dana. In Porto, check the local electrical code for a 240 V line before buying."),
    ("I decided on a Skutt KM-818. It arrives next Tuesday.",
     "Good choice: the KM-818 is a reliable top-loader. Plan the electrician's visit before Tuesday."),
    ("What clay body should I use for mugs fired to cone 6?",
     "A mid-fire stoneware such as a cone 5-6 buff or speckled stoneware: it vitrifies enough for "
     "mugs that hold liquids without leaking."),
    ("I have to finish the studio's electrical work by the end of the month.",
     "Then book the electrician this week: a dedicated 50 A breaker and a NEMA 6-50 outlet are typical."),
    ("The electrician came today and the outlet works. That task is done.",
     "Great, the studio is powered. Next: a test firing of the empty kiln to burn off the elements' coating."),
]


def export(path: str, count: int) -> None:
    messages, parent, t = {}, None, 1_764_000_000
    for i, (q, a) in enumerate(EXCHANGES[:count]):
        for role, text, mid in (("user", q, f"q{i}"), ("assistant", a, f"a{i}")):
            messages[mid] = {"id": mid, "parentId": parent, "childrenIds": [], "role": role,
                             "content": text, "timestamp": t}
            if parent:
                messages[parent]["childrenIds"].append(mid)
            parent, t = mid, t + 30
    chat = {"id": "studio", "title": "Pottery studio", "created_at": 1_764_000_000,
            "updated_at": t, "chat": {"title": "Pottery studio",
                                      "history": {"currentId": parent, "messages": messages}}}
    with open(path, "w") as f:
        json.dump([chat], f)


def run(wo: str, cwd: str, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([wo, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=3600)


def once(wo: str, count: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(d, "cfg"), NO_COLOR="1")
        cfg = os.path.join(d, "config.toml")
        with open(cfg, "w") as f:
            f.write('[defaults]\nprovider = "local"\n\n[interpreter]\nmode = "after"\n')
        env["WO_CONFIG"] = cfg
        export(os.path.join(d, "export.json"), count)
        for args in (("init",), ("import", "export.json")):
            r = run(wo, d, env, *args)
            if r.returncode != 0:
                sys.exit(f"{wo} {' '.join(args)} failed: {r.stderr}")
        started = time.monotonic()
        r = run(wo, d, env, "memory", "rebuild", "-p", "local", "--yes")
        took = time.monotonic() - started
        if r.returncode != 0:
            sys.exit(f"{wo} memory rebuild failed: {r.stderr}")
        entries = json.loads(run(wo, d, env, "memory", "list", "--json").stdout or "[]")
        with open(os.path.join(d, "llm.json")) as f:
            state = json.load(f)
        log = state.get("memory_log") or []
        return {"seconds": took, "valid": len(log), "entries": entries,
                "notes": [l for l in r.stderr.splitlines() if "nothing remembered" in l]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wo", action="append", required=True, help="a wo binary (repeatable)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--exchanges", type=int, default=len(EXCHANGES),
                    help=f"the first N of the {len(EXCHANGES)} exchanges")
    a = ap.parse_args()
    a.wo = [os.path.abspath(w) for w in a.wo]
    for rnd in range(a.rounds):
        for wo in a.wo:
            r = once(wo, a.exchanges)
            print(f"round {rnd + 1} {wo}: {r['seconds']:.1f} s, {r['valid']} of {a.exchanges} "
                  f"exchanges gave a valid batch, {len(r['entries'])} entries", flush=True)
            for e in r["entries"]:
                print(f"    [{e.get('kind')}] {e.get('title')}")
            for n in r["notes"]:
                print(f"    {n.strip()}")


if __name__ == "__main__":
    main()
