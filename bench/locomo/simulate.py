#!/usr/bin/env python3
"""What more (or less) recall budget would give, without rebuilding wo.

For each conversation of a LoCoMo file this asks `wo context explain` once at
the real budget and once at a large one, and reads from the large one the
order recall chose every candidate in (each recalled part's `rank`: the fused
ranking the budget is filled by, neighbouring turns included — not `score`,
which is the part's own match). It then fills recall's budget again in that
order, with the assembler's rule (best first; a part that does not fit is
skipped, 32 in a row end it; a day's heading costs its first line), at the
real recall budget plus each `--extra`, and scores evidence coverage as
run.py does. `--extra 0` reproduces run.py's figures while the recent window
keeps no share before recall (questions asked long after the conversation,
as here; the first message, the large run's one-turn window, is the one
message not ranked); a simulation is only as good as that check.

Usage:
  python3 bench/locomo/simulate.py LOCOMO_JSON --wo PATH [--embed-cache DIR]
      [--only conv-26,conv-30] [--extra 0,300,600] [--save DATA] [--load DATA]
"""

import argparse
import html
import json
import math
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import run as R  # noqa: E402  (the harness: import, explain, questions)

NEXT = re.compile(r"\(next to (\S+)\)$")
RECALL_BUDGET = re.compile(r"over the recall budget \((\d+) tokens\)")
RECALL_MISSES, RECALL_MIN_LINE_TOKENS = 32, 8  # wo_engine::assemble


def tokens(text):
    """wo's estimate: a token per 4 characters, rounded up."""
    return math.ceil(len(text) / 4)


def collect(wo, samples, budget, large, embed_cache):
    out = {}
    with tempfile.TemporaryDirectory() as work:
        for s in samples:
            label = s["sample_id"]
            home = os.path.join(work, label)
            os.makedirs(home)
            R.run([wo, "init", home])
            state = os.path.join(home, "llm.json")
            conv = s["conversation"]
            stamps = R.import_conversation(wo, state, s, work)
            valid = {d for d, _, _, _ in R.session_turns(conv)}
            qs = list(R.questions(s, valid))
            names = {conv["speaker_a"], conv["speaker_b"]}
            dia = {k: v[1] for k, v in R.message_dia(state, {label: (names, stamps)}).items()}
            cached = embed_cache and os.path.join(embed_cache, label + ".embed")
            if cached and os.path.exists(cached):
                shutil.copyfile(cached, os.path.join(home, ".llm.json.embed"))
            R.run([wo, "--state", state, "context", "embed", "--quiet"])
            real, _ = R.explain_all(wo, state, qs, budget, work)
            messages = json.load(open(state))["messages"]
            # Following the first message, the window is one turn: every
            # other message is a candidate, in rank order.
            qfile = os.path.join(work, "questions.txt")
            p = R.run([wo, "--state", state, "context", "explain", "--queries", qfile,
                       "--budget", str(large), "--recall-tokens", str(large), "--json",
                       "--parent", messages[0]["id"]])
            ranked = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
            lines = {}
            for m in messages:
                text = html.unescape(re.sub(r"<[^>]+>", "", m["content"])).replace("\n", " ")
                lines[m["id"]] = (m["timestamp"][:10],
                                  f"- {m['timestamp'][11:16]} {m['username']}: {text}\n")
            out[label] = {"qs": qs, "dia": dia, "real": real, "ranked": ranked,
                          "lines": lines, "order": [m["id"] for m in messages]}
            print(f"{label}: {len(qs)} questions collected", file=sys.stderr, flush=True)
    return out


def fill(order, lines, cap):
    spent, misses, days, taken = 0, 0, set(), []
    for mid in order:
        if misses >= RECALL_MISSES or cap - spent < RECALL_MIN_LINE_TOKENS:
            break
        day, line = lines[mid]
        t = tokens(line) + (0 if day in days else tokens(f"{day} (UTC):\n"))
        if spent + t > cap:
            misses += 1
            continue
        misses = 0
        spent += t
        days.add(day)
        taken.append(mid)
    return taken, spent


def simulate(d, extra):
    """Rows (question number, category, any, all) and recalled tokens."""
    rows, spent_all = [], []
    for qi, ((_, ev, cat), real, ranked) in enumerate(zip(d["qs"], d["real"], d["ranked"])):
        if cat not in R.SCORED:
            continue
        cap = next((int(m.group(1)) for x in real["dropped"]
                    if (m := RECALL_BUDGET.search(x["reason"]))), None)
        if cap is None:  # everything fitted: the real prompt is the answer
            ids = [p["id"] for p in real["parts"] if "id" in p]
            spent = sum(p["tokens"] for p in real["parts"] if p["kind"] == "recalled_message")
        else:
            parts = sorted((p for p in ranked["parts"] if p["kind"] == "recalled_message"),
                           key=lambda p: p["rank"])
            ids, spent = fill([p["id"] for p in parts], d["lines"], cap + extra)
            # The recent turns take what recall leaves, newest first.
            left, taken = cap + extra - spent, set(ids)
            for mid in reversed(d["order"]):
                if mid in taken:
                    continue
                t = tokens(d["lines"][mid][1].split(": ", 1)[1]) + 4
                if t > left:
                    break
                left -= t
                ids.append(mid)
        covered = {d["dia"].get(i) for i in ids}
        hit = [e in covered for e in ev]
        rows.append((qi, cat, any(hit), all(hit)))
        spent_all.append(spent)
    return rows, spent_all


def summary(rows):
    n = len(rows)
    mh = [r for r in rows if r[1] == 1]
    return (sum(r[2] for r in rows) / max(n, 1), sum(r[3] for r in mh) / max(len(mh), 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", default=os.environ.get("LOCOMO"))
    ap.add_argument("--wo", default=os.environ.get("WO", "wo"))
    ap.add_argument("--budget", type=int, default=2000)
    ap.add_argument("--large", type=int, default=40000,
                    help="the budget every candidate fits in")
    ap.add_argument("--only", help="comma-separated sample ids")
    ap.add_argument("--embed-cache", help="wo's embeddings sidecars, as run.py keeps them")
    ap.add_argument("--extra", default="0,300,600",
                    help="recall tokens added to the real recall budget, comma-separated")
    ap.add_argument("--save", help="write what was collected here")
    ap.add_argument("--load", help="simulate from a file --save wrote (no wo run)")
    args = ap.parse_args()
    if args.load:
        data = json.load(open(args.load))
    else:
        if not args.data:
            sys.exit("no LoCoMo file: pass its path or set $LOCOMO")
        samples = json.load(open(args.data))
        if args.only:
            keep = set(args.only.split(","))
            samples = [s for s in samples if s["sample_id"] in keep]
        data = collect(args.wo, samples, args.budget, args.large, args.embed_cache)
        if args.save:
            with open(args.save, "w") as f:
                json.dump(data, f)
    for extra in [int(x) for x in args.extra.split(",")]:
        per = {label: simulate(d, extra) for label, d in data.items()}
        rows = [r for rs, _ in per.values() for r in rs]
        spent = [s for _, ss in per.values() for s in ss]
        halves = [summary([r for r in rows if r[0] % 2 == h]) for h in (0, 1)]
        any_, all_ = summary(rows)
        print(f"recall budget +{extra}: recall_any {any_:.3f}, multi-hop all {all_:.3f} "
              f"(question halves {halves[0][0]:.3f} / {halves[1][0]:.3f}, "
              f"multi-hop {halves[0][1]:.3f} / {halves[1][1]:.3f}); "
              f"{sum(spent) / max(len(spent), 1):.0f} recalled tokens a question; "
              + ", ".join(f"{label} {summary(rs)[0]:.3f}/{summary(rs)[1]:.3f}"
                          for label, (rs, _) in per.items()))


if __name__ == "__main__":
    main()
