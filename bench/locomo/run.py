#!/usr/bin/env python3
"""LoCoMo evidence recall of WikiOracle's context assembly.

For each conversation of a LoCoMo file (and for all of them in one file) this
builds an llm.json *with wo itself* (`wo import` of a CLI chat state file, one
message per turn), asks `wo context explain --json` what would be sent for
every question within the prompt budget, and reports how often the evidence
turns are in it, next to plain BM25 over the turn texts (k1 1.2, b 0.75, top
10) computed here in the same run. See README.md for the measure.

Usage:
  python3 bench/locomo/run.py [LOCOMO_JSON] [--wo PATH] [--budget 2000] [--json OUT]
LOCOMO_JSON defaults to $LOCOMO. The data is CC BY-NC: it is read from where it
is, never copied into the repository.
"""

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from datetime import datetime, timedelta, timezone

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
SCORED = (1, 2, 3, 4)


def session_turns(conv):
    """Yields (dia_id, speaker, text, utc datetime) for every turn, in order."""
    n = 1
    while f"session_{n}" in conv:
        when = datetime.strptime(conv[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
        when = when.replace(tzinfo=timezone.utc)
        for k, turn in enumerate(conv[f"session_{n}"]):
            text = turn["text"]
            if turn.get("blip_caption"):
                text += f" [image: {turn['blip_caption']}]"
            yield turn["dia_id"], turn["speaker"], text, when + timedelta(seconds=10 * k)
        n += 1


def iso(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def import_conversation(wo, state, sample, workdir):
    """Writes the conversation as a CLI chat state file (speaker A as the
    user, speaker B as the assistant named after the file's model) and
    imports it with `wo import`. Returns {timestamp: dia_id}."""
    conv = sample["conversation"]
    a, b = conv["speaker_a"], conv["speaker_b"]
    entries, stamps = [], {}
    for dia, speaker, text, when in session_turns(conv):
        role = "user" if speaker == a else "assistant"
        entries.append({"role": role, "content": text, "timestamp": iso(when)})
        stamps[iso(when)] = dia
    path = os.path.join(workdir, f"{sample['sample_id']}.openai.json")
    with open(path, "w") as f:
        json.dump({"provider": "locomo", "model": b, "conversation": entries, "meta": {}}, f)
    run([wo, "--state", state, "import", path, "--format", "openai-cli", "--username", a])
    return stamps


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return p


def message_dia(state, stamps_by_conv):
    """Message id -> (sample_id, dia_id), matching the imported messages by
    timestamp within their conversation (usernames tell conversations apart)."""
    with open(state) as f:
        data = json.load(f)
    out = {}
    for m in data["messages"]:
        ts = m["timestamp"]
        t = datetime.fromisoformat(ts.replace("Z", "+00:00")).astimezone(timezone.utc)
        key = iso(t)
        for sid, (names, stamps) in stamps_by_conv.items():
            if m.get("username") in names and key in stamps:
                out[m["id"]] = (sid, stamps[key])
    return out


def questions(sample, valid):
    for q in sample["qa"]:
        ev = []
        for e in q.get("evidence", []):
            ev += [x for x in re.split(r"[;,\s]+", e) if x]
        ev = [e for e in ev if e in valid]
        if ev:
            yield q["question"], sorted(set(ev)), q["category"]


# ---- plain BM25 over turn texts ------------------------------------------

def toks(text):
    return re.findall(r"[a-z0-9]+", text.lower())


class PlainBM25:
    def __init__(self, docs, k1=1.2, b=0.75):
        self.k1, self.b = k1, b
        self.tf = [Counter(toks(d)) for d in docs]
        self.len = [sum(c.values()) for c in self.tf]
        self.avg = sum(self.len) / max(len(docs), 1)
        df = Counter()
        for c in self.tf:
            df.update(c.keys())
        n = len(docs)
        self.idf = {t: math.log((n - d + 0.5) / (d + 0.5) + 1) for t, d in df.items()}

    def top(self, query, k):
        q = toks(query)
        scores = []
        for i, c in enumerate(self.tf):
            s = 0.0
            for t in q:
                f = c.get(t)
                if f:
                    s += self.idf[t] * f * (self.k1 + 1) / (f + self.k1 * (1 - self.b + self.b * self.len[i] / self.avg))
            if s > 0:
                scores.append((s, i))
        scores.sort(reverse=True)
        return [i for _, i in scores[:k]]


# ---- scoring ----------------------------------------------------------------

class Tally:
    def __init__(self):
        self.rows = []  # (category, any, all, tokens, seconds, recalled tokens)

    def add(self, cat, covered, evidence, tokens=0, seconds=0.0, recalled=0):
        hit = [e in covered for e in evidence]
        self.rows.append((cat, any(hit), all(hit), tokens, seconds, recalled))

    def summary(self):
        def agg(rows):
            n = len(rows)
            if not n:
                return {"n": 0}
            return {
                "n": n,
                "recall_any": sum(r[1] for r in rows) / n,
                "recall_all": sum(r[2] for r in rows) / n,
                "tokens_per_question": sum(r[3] for r in rows) / n,
                "seconds_per_question": sum(r[4] for r in rows) / n,
                "recalled_tokens_per_question": sum(r[5] for r in rows) / n,
            }
        scored = [r for r in self.rows if r[0] in SCORED]
        out = {"scored": agg(scored)}
        for c, name in CATEGORIES.items():
            out[name] = agg([r for r in self.rows if r[0] == c])
        return out


def explain_all(wo, state, qs, budget, workdir, floor=None, gate=None, recall_tokens=None):
    qfile = os.path.join(workdir, "questions.txt")
    with open(qfile, "w") as f:
        for q, _, _ in qs:
            f.write(q.replace("\n", " ") + "\n")
    started = time.time()
    # Memory may fill the whole budget unless told otherwise: the figures
    # are recall at a prompt budget, as they always were (wo's default
    # bound on memory's tokens is larger than the budgets measured).
    extra = ["--recall-tokens", str(budget if recall_tokens is None else recall_tokens)]
    extra += [] if floor is None else ["--relevance-floor", str(floor)]
    extra += [] if gate is None else ["--relevance-gate", str(gate)]
    p = run([wo, "--state", state, "context", "explain", "--queries", qfile,
             "--budget", str(budget), "--json"] + extra)
    wall = time.time() - started
    out = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    if len(out) != len(qs):
        sys.exit(f"expected {len(qs)} explanations, got {len(out)}")
    return out, wall


def covered_ids(expl):
    ids = set()
    for p in expl["parts"]:
        if p["kind"] in ("recalled_message", "recent_turn") and "id" in p:
            ids.add(p["id"])
        if p["kind"] == "artifact":
            ids.update(p.get("references", []))
    return ids


def recalled_tokens(expl):
    """Tokens of the parts sent for their relevance: recalled messages and
    memory entries (the recent window is the conversation, not recall)."""
    return sum(p["tokens"] for p in expl["parts"]
               if p["kind"] in ("recalled_message", "artifact"))


def measure(wo, samples, budget, workdir, label, floor=None, unrelated=(), gate=None,
            embed_cache=None, recall_tokens=None):
    home = os.path.join(workdir, label)
    os.makedirs(home)
    run([wo, "init", home])
    state = os.path.join(home, "llm.json")
    stamps_by_conv, texts, qs = {}, [], []
    for s in samples:
        conv = s["conversation"]
        stamps = import_conversation(wo, state, s, workdir)
        stamps_by_conv[s["sample_id"]] = ({conv["speaker_a"], conv["speaker_b"]}, stamps)
        turns = list(session_turns(conv))
        texts += [((s["sample_id"], d), t) for d, _, t, _ in turns]
        valid = {d for d, _, _, _ in turns}
        qs += [(q, [(s["sample_id"], e) for e in ev], c) for q, ev, c in questions(s, valid)]
    run([wo, "validate", state])
    dia = message_dia(state, stamps_by_conv)
    if len(dia) != len(texts):
        sys.exit(f"{label}: {len(texts)} turns but {len(dia)} messages mapped back")
    # wo embeds every message once per file (the embeddings sidecar); with
    # --embed-cache the sidecar is kept between runs (vectors are keyed by
    # message content, so a reused one answers exactly as a fresh one).
    sidecar = os.path.join(home, ".llm.json.embed")
    cached = embed_cache and os.path.join(embed_cache, label + ".embed")
    if cached and os.path.exists(cached):
        shutil.copyfile(cached, sidecar)
    # As `wo ask`'s background step leaves it: every message embedded.
    run([wo, "--state", state, "context", "embed", "--quiet"])
    expls, wall = explain_all(wo, state, qs, budget, workdir, floor, gate, recall_tokens)
    if cached and os.path.exists(sidecar):
        os.makedirs(embed_cache, exist_ok=True)
        shutil.copyfile(sidecar, cached)
    ours, plain = Tally(), Tally()
    bm = PlainBM25([t for _, t in texts])
    rows = []
    for (q, ev, cat), e in zip(qs, expls):
        cov = {dia[i] for i in covered_ids(e) if i in dia}
        ours.add(cat, cov, ev, e["tokens"], e["seconds"], recalled_tokens(e))
        _, hit_any, hit_all, *_ = ours.rows[-1]
        rows.append({"category": cat, "any": hit_any, "all": hit_all, "tokens": e["tokens"],
                     "recalled_tokens": recalled_tokens(e)})
        top = {texts[i][0] for i in bm.top(q, 10)}
        plain.add(cat, top, ev)
    out = {
        "label": label,
        "messages": len(texts),
        "questions": len(qs),
        "wall_seconds_per_question": wall / max(len(qs), 1),
        "wo": ours.summary(),
        "plain_bm25_top10": plain.summary(),
        # Question by question, in the file's order (for splits by question).
        "questions_scored": rows,
    }
    if unrelated:
        ue, _ = explain_all(wo, state, [(q, [], 0) for q in unrelated], budget, workdir, floor,
                            gate, recall_tokens)
        out["unrelated"] = {
            "n": len(ue),
            "share_recalling_anything": sum(1 for e in ue if recalled_tokens(e) > 0) / len(ue),
            "recalled_tokens_per_question": sum(recalled_tokens(e) for e in ue) / len(ue),
        }
    return out


def fmt(r):
    w, p = r["wo"], r["plain_bm25_top10"]
    lines = [f"{r['label']}: {r['messages']} turns, {r['questions']} questions, "
             f"{w['scored']['tokens_per_question']:.0f} prompt tokens/question "
             f"({w['scored']['recalled_tokens_per_question']:.0f} recalled), "
             f"{w['scored']['seconds_per_question']*1000:.1f} ms/question in wo "
             f"({r['wall_seconds_per_question']*1000:.1f} ms with process start, amortised)"]
    lines.append(f"  {'':<12} {'n':>4}  {'wo any':>7} {'wo all':>7}  {'bm25 any':>8} {'bm25 all':>8}")
    for name in ["scored"] + list(CATEGORIES.values()):
        a, b = w[name], p[name]
        if not a["n"]:
            continue
        lines.append(f"  {name:<12} {a['n']:>4}  {a['recall_any']:>7.3f} {a['recall_all']:>7.3f}  "
                     f"{b['recall_any']:>8.3f} {b['recall_all']:>8.3f}")
    if "unrelated" in r:
        u = r["unrelated"]
        lines.append(f"  unrelated questions ({u['n']}): {u['share_recalling_anything']:.3f} recall "
                     f"anything, {u['recalled_tokens_per_question']:.0f} recalled tokens/question")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", default=os.environ.get("LOCOMO"))
    ap.add_argument("--wo", default=os.environ.get("WO", "wo"))
    ap.add_argument("--budget", type=int, default=2000)
    ap.add_argument("--recall-tokens", type=int,
                    help="wo's bound on memory's tokens (default: the budget, so memory may fill it)")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--only", help="comma-separated sample ids to measure (a split of your own)")
    ap.add_argument("--floor", type=float,
                    help="wo's relevance floor per part (default: wo's own; 0 = whatever shares a word)")
    ap.add_argument("--gate", type=float,
                    help="wo's relevance floor for the best match of a question (default: wo's own)")
    ap.add_argument("--unrelated", default=os.path.join(os.path.dirname(__file__), "unrelated.txt"),
                    help="questions about nothing in the conversations (one a line; '' to skip)")
    ap.add_argument("--no-all-in-one", action="store_true")
    ap.add_argument("--embed-cache", help="keep wo's embeddings sidecars here between runs")
    args = ap.parse_args()
    if not args.data:
        sys.exit("no LoCoMo file: pass its path or set $LOCOMO")
    with open(args.data) as f:
        samples = json.load(f)
    if args.only:
        keep = set(args.only.split(","))
        samples = [s for s in samples if s["sample_id"] in keep]
    unrelated = []
    if args.unrelated:
        with open(args.unrelated) as f:
            unrelated = [l.strip() for l in f if l.strip()]
    results = []
    with tempfile.TemporaryDirectory() as work:
        for s in samples:
            results.append(measure(args.wo, [s], args.budget, work, s["sample_id"], args.floor,
                                   unrelated, args.gate, args.embed_cache, args.recall_tokens))
            print(fmt(results[-1]), flush=True)
        if len(samples) > 1 and not args.no_all_in_one:
            results.append(measure(args.wo, samples, args.budget, work, "all-in-one", args.floor,
                                   unrelated, args.gate, args.embed_cache, args.recall_tokens))
            print(fmt(results[-1]), flush=True)
    per = [r for r in results if r["label"] != "all-in-one"]
    if per:
        def pooled(key, field, cat="scored"):
            n = sum(r[key][cat]["n"] for r in per)
            return sum(r[key][cat][field] * r[key][cat]["n"] for r in per) / max(n, 1)
        print(f"per conversation, pooled: wo recall_any {pooled('wo', 'recall_any'):.3f} "
              f"tokens {pooled('wo', 'tokens_per_question'):.0f} "
              f"recalled tokens {pooled('wo', 'recalled_tokens_per_question'):.0f} "
              f"(plain BM25@10 {pooled('plain_bm25_top10', 'recall_any'):.3f}); multi-hop recall_all "
              f"{pooled('wo', 'recall_all', 'multi-hop'):.3f} "
              f"(plain {pooled('plain_bm25_top10', 'recall_all', 'multi-hop'):.3f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"budget": args.budget, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
