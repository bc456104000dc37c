#!/usr/bin/env python3
"""`wo index` / `wo search` / `wo pack` against peers, in one run.

Called by run.sh, which builds/installs every tool and prepares the snapshot tree; the
paths arrive in the environment (see run.sh). Prints Markdown tables and writes
$BENCH_OUT/results.json. Only the standard library is used.
"""

import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time

E = os.environ
OUT = E["BENCH_OUT"]
TREE = E["BENCH_TREE"]
REPO = E["BENCH_REPO"]  # snapshot of this repository (retrieval quality, pack)
PACKTREE = E["BENCH_PACKTREE"]  # a larger tree for the pack size report
WO = E["WO"]
QLAT = E["QLAT"]
LLMX = E.get("LLMX", "")
C2P = E.get("CODE2PROMPT", "")
REPOMIX = E.get("REPOMIX", "")
HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = int(E.get("BENCH_TIMEOUT", "1800"))
NQUERIES = int(E.get("NQUERIES", "300"))
SKIP = set(E.get("BENCH_SKIP", "").split())
BIG = str(10**12)  # lifts wo's caps: the whole tree is indexed
WO_CAPS = ["--max-total-bytes", BIG, "--max-file-bytes", BIG]

results = {"tree": TREE, "runs": {}, "notes": []}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def measure(name, argv, cwd=None, env=None, timeout=TIMEOUT, stdout_path=None):
    """Runs argv under GNU time (wall s, peak RSS) and `timeout`; returns a dict."""
    tf = os.path.join(OUT, f"time.{name}.txt")
    so = stdout_path or os.path.join(OUT, f"stdout.{name}.txt")
    se = os.path.join(OUT, f"stderr.{name}.txt")
    cmd = ["/usr/bin/time", "-f", "%e %M %U %S", "-o", tf, "timeout", str(timeout)] + argv
    log(f"[{time.strftime('%H:%M:%S')}] {name}: {' '.join(argv)}")
    with open(so, "wb") as fo, open(se, "wb") as fe:
        rc = subprocess.call(cmd, cwd=cwd, env=env, stdout=fo, stderr=fe)
    last = open(tf).read().strip().splitlines()[-1].split()
    r = {
        "name": name,
        "rc": rc,
        "wall_s": float(last[0]),
        "rss_mb": int(last[1]) / 1024.0,
        "user_s": float(last[2]),
        "sys_s": float(last[3]),
        "timed_out": rc == 124,
        "stdout": so,
        "stderr": se,
    }
    log(f"    -> rc {rc}, {r['wall_s']:.2f} s, {r['rss_mb']:.0f} MB")
    if rc != 0:
        log("    stderr tail: " + open(se, errors="replace").read()[-600:])
    results["runs"][name] = r
    return r


def tree_stats(root, skip=(".wo-index",)):
    files = 0
    size = 0
    for d, dirs, fs in os.walk(root):
        dirs[:] = [x for x in dirs if x not in skip]
        for f in fs:
            p = os.path.join(d, f)
            if os.path.islink(p):
                continue
            files += 1
            size += os.path.getsize(p)
    return files, size


def rm(p):
    if os.path.isdir(p) and not os.path.islink(p):
        shutil.rmtree(p)
    elif os.path.exists(p):
        os.remove(p)


def read_json(path):
    try:
        return json.load(open(path))
    except Exception:
        return None


# ---------------------------------------------------------------- indexing speed


def bench_speed():
    files, size = tree_stats(TREE)
    results["tree_files"], results["tree_bytes"] = files, size
    log(f"tree {TREE}: {files} files, {size/1e6:.1f} MB")
    rm(os.path.join(TREE, ".wo-index"))

    # Floor: rg reading every file (hidden, ignored and binary included). A first run warms
    # the page cache; the median of three further runs is the floor.
    floor = ["rg", "-uuu", "-a", "-c", "", TREE]
    measure("rg-warmup", floor)
    fl = [measure(f"rg-floor-{i}", floor) for i in range(3)]
    fl.sort(key=lambda r: r["wall_s"])
    results["runs"]["rg-floor"] = dict(fl[1], name="rg-floor")
    # Same rule set as wo (gitignore honoured, hidden skipped), for information.
    fl2 = [measure(f"rg-ignore-{i}", ["rg", "-a", "-c", "", TREE]) for i in range(3)]
    fl2.sort(key=lambda r: r["wall_s"])
    results["runs"]["rg-ignore"] = dict(fl2[1], name="rg-ignore")
    # Reading and printing every line (to /dev/null), for information.
    fl3 = [measure(f"rg-print-{i}", ["rg", "-uuu", "-a", "", TREE], stdout_path="/dev/null") for i in range(3)]
    fl3.sort(key=lambda r: r["wall_s"])
    results["runs"]["rg-print"] = dict(fl3[1], name="rg-print")

    # wo: full index with caps lifted, then an unchanged re-index.
    r = measure("wo-full", [WO, "index", TREE, "--json"] + WO_CAPS)
    rep = read_json(r["stdout"]) or {}
    r["report"] = {k: v for k, v in rep.items() if k != "warnings"}
    r["warnings"] = len(rep.get("warnings", []))
    r = measure("wo-incremental", [WO, "index", TREE, "--json"] + WO_CAPS)
    rep = read_json(r["stdout"]) or {}
    r["report"] = {k: v for k, v in rep.items() if k != "warnings"}
    # One touched file: mtime changes, content does not (hash check path), plus one edit.
    if "incr-edit" not in SKIP:
        victim = None
        for d, dirs, fs in os.walk(TREE):
            dirs.sort()
            dirs[:] = [x for x in dirs if x != ".wo-index"]
            for f in sorted(fs):
                if f.endswith(".rs"):
                    victim = os.path.join(d, f)
                    break
            if victim:
                break
        if victim:
            orig = open(victim, "rb").read()
            with open(victim, "ab") as fh:
                fh.write(b"\n// wo bench edit\n")
            r = measure("wo-one-edit", [WO, "index", TREE, "--json"] + WO_CAPS)
            rep = read_json(r["stdout"]) or {}
            r["report"] = {k: v for k, v in rep.items() if k != "warnings"}
            with open(victim, "wb") as fh:
                fh.write(orig)
            # Restore the index to the unedited tree (not timed as a benchmark number).
            measure("wo-restore", [WO, "index", TREE, "--json"] + WO_CAPS)
    results["index_json_bytes"] = os.path.getsize(os.path.join(TREE, ".wo-index", "index.json"))
    # The peers must not see wo's cache: move it out of the tree while they run.
    aside = os.path.join(OUT, "wo-index-aside")
    rm(aside)
    os.rename(os.path.join(TREE, ".wo-index"), aside)
    try:
        bench_peers()
    finally:
        os.rename(aside, os.path.join(TREE, ".wo-index"))


def bench_peers():

    if "llmx" not in SKIP and LLMX:
        store = os.path.join(OUT, "llmx-store")
        rm(store)
        r = measure("llmx-mcp", [LLMX, "--storage-dir", store, "--json", "index", TREE])
        rep = read_json(r["stdout"]) or {}
        r["report"] = {"stats": rep.get("stats"), "warnings": len(rep.get("warnings", []) or [])}
        r["output_bytes"] = tree_stats(store)[1] if os.path.isdir(store) else 0
    if "code2prompt" not in SKIP and C2P:
        o = os.path.join(OUT, "code2prompt-out.md")
        rm(o)
        r = measure("code2prompt", [C2P, TREE, "--output-file", o, "--no-clipboard"])
        r["output_bytes"] = os.path.getsize(o) if os.path.exists(o) else 0
        # Each file appears as a line "`path`:" before its code block.
        n = 0
        if os.path.exists(o):
            with open(o, "rb") as fh:
                for line in fh:
                    if line.startswith(b"`") and not line.startswith(b"``") and line.rstrip().endswith(b"`:"):
                        n += 1
        r["files"] = f"{n:,}"
    if "repomix" not in SKIP and REPOMIX:
        o = os.path.join(OUT, "repomix-out.xml")
        rm(o)
        env = dict(os.environ, NODE_OPTIONS="--max-old-space-size=16384")
        r = measure("repomix", [REPOMIX, TREE, "-o", o], env=env, cwd=OUT)
        r["output_bytes"] = os.path.getsize(o) if os.path.exists(o) else 0
        m = re.search(r"Total Files:\s*([\d,]+)", open(r["stdout"], errors="replace").read())
        r["files"] = m.group(1) if m else "?"


# ---------------------------------------------------------------- query latency

IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]{3,40}\b")


def latency_queries(n):
    """Identifiers drawn (seeded) from a spread sample of the tree's files; a third of the
    queries combine two identifiers, as a person would type them."""
    paths = []
    for d, dirs, fs in os.walk(TREE):
        dirs[:] = sorted(x for x in dirs if not x.startswith("."))
        for f in sorted(fs):
            if f.endswith((".rs", ".md", ".toml", ".js", ".ts", ".py", ".go", ".c", ".h", ".json", ".txt", ".html")):
                paths.append(os.path.join(d, f))
    rnd = random.Random(20260501)
    sample = rnd.sample(paths, min(len(paths), 400))
    idents = set()
    for p in sample:
        try:
            text = open(p, encoding="utf-8", errors="ignore").read(200_000)
        except OSError:
            continue
        idents.update(IDENT.findall(text))
    idents = sorted(idents)
    rnd.shuffle(idents)
    qs = []
    i = 0
    while len(qs) < n and i + 1 < len(idents):
        if len(qs) % 3 == 2:
            qs.append(f"{idents[i]} {idents[i+1]}")
            i += 2
        else:
            qs.append(idents[i])
            i += 1
    return qs


def pct(xs, p):
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    f = int(k)
    c = min(f + 1, len(xs) - 1)
    return xs[f] + (xs[c] - xs[f]) * (k - f)


def bench_latency():
    qs = latency_queries(NQUERIES)
    qf = os.path.join(OUT, "latency-queries.txt")
    open(qf, "w").write("\n".join(qs) + "\n")
    # One-shot CLI: process start + Index::open + one query, as a user or tool pays it.
    one = [measure(f"wo-search-cli-{i}", [WO, "search", qs[i], "--dir", TREE, "--json"]) for i in range(3)]
    one.sort(key=lambda r: r["wall_s"])
    results["runs"]["wo-search-cli"] = dict(one[1], name="wo-search-cli")
    # In-process: open once, then per-query latency (library, release build).
    r = measure("wo-qlat", [QLAT, TREE, qf], env=dict(os.environ, REPEAT=E.get("REPEAT", "3")))
    d = read_json(r["stdout"])
    lat = [x / 1000.0 for x in d["lat_us"]]  # ms
    results["latency"] = {
        "queries": d["queries"],
        "repeat": d["repeat"],
        "samples": len(lat),
        "open_s": d["open_us"] / 1e6,
        "p50_ms": pct(lat, 50),
        "p90_ms": pct(lat, 90),
        "p99_ms": pct(lat, 99),
        "max_ms": max(lat),
        "mean_ms": statistics.mean(lat),
        "harness_rss_mb": r["rss_mb"],
    }
    n = d["queries"]
    worst = sorted(((max(lat[i::n]), qs[i]) for i in range(n)), reverse=True)[:5]
    results["latency"]["slowest"] = [{"q": q, "ms": round(ms, 1)} for ms, q in worst]


# ---------------------------------------------------------------- retrieval quality


def load_labelled():
    rows = []
    for line in open(os.path.join(HERE, "queries.tsv"), encoding="utf-8"):
        if not line.strip() or line.startswith("#"):
            continue
        qid, q, exp = line.rstrip("\n").split("\t")
        rows.append((qid, q, exp.split("|")))
    return rows


def score(ranked_paths, expected):
    rank = next((i + 1 for i, p in enumerate(ranked_paths[:10]) if p in expected), None)
    found = {p for p in ranked_paths[:10] if p in expected}
    return (1.0 / rank if rank else 0.0), len(found) / len(expected), rank


def bench_quality():
    rows = load_labelled()
    rm(os.path.join(REPO, ".wo-index"))
    measure("q-wo-index", [WO, "index", REPO, "--json"])
    systems = {"wo": []}
    for qid, q, exp in rows:
        out = subprocess.run([WO, "search", q, "--dir", REPO, "--json", "--limit", "10"],
                             capture_output=True, text=True)
        hits = json.loads(out.stdout) if out.returncode == 0 else []
        systems["wo"].append([h["path"] for h in hits])
    if "llmx" not in SKIP and LLMX:
        store = os.path.join(OUT, "llmx-store-repo")
        rm(store)
        r = measure("q-llmx-index", [LLMX, "--storage-dir", store, "--json", "index", REPO])
        idx = (read_json(r["stdout"]) or {}).get("index_id")
        for strategy in ("bm25", "auto"):
            key = f"llmx-{strategy}"
            systems[key] = []
            for qid, q, exp in rows:
                out = subprocess.run([LLMX, "--storage-dir", store, "--index", idx, "--json", "search", q,
                                      "--strategy", strategy, "--limit", "10", "--max-tokens", "100000000"],
                                     capture_output=True, text=True)
                try:
                    res = json.loads(out.stdout).get("results", [])
                except ValueError:
                    log(f"llmx {strategy} {qid}: rc {out.returncode} {out.stderr[-300:]}")
                    res = []
                systems[key].append([x["path"].lstrip("./") if x["path"].startswith("./") else x["path"] for x in res])
    q = {"n": len(rows), "systems": {}, "per_query": []}
    for name, ranked in systems.items():
        mrr, rec, ranks = [], [], []
        for (qid, qq, exp), paths in zip(rows, ranked):
            m, r, rank = score(paths, exp)
            mrr.append(m)
            rec.append(r)
            ranks.append(rank)
        q["systems"][name] = {"mrr@10": statistics.mean(mrr), "recall@10": statistics.mean(rec),
                              "hit@1": sum(1 for x in ranks if x == 1) / len(rows), "ranks": ranks}
    for i, (qid, qq, exp) in enumerate(rows):
        q["per_query"].append({"id": qid, "q": qq, "expected": exp,
                               **{n: q["systems"][n]["ranks"][i] for n in systems},
                               **{f"{n}_top1": (systems[n][i][0] if systems[n][i] else None) for n in systems}})
    results["quality"] = q


# ---------------------------------------------------------------- export size


def dir_size(p):
    return tree_stats(p, skip=())


def bench_pack():
    packs = []
    for label, root, index_args in (("this repository", REPO, []), ("larger tree", PACKTREE, [])):
        if not os.path.isdir(os.path.join(root, ".wo-index")):
            measure(f"pack-index-{len(packs)}", [WO, "index", root, "--json"] + index_args)
        src = read_json(os.path.join(root, ".wo-index", "index.json"))
        sfiles = len(src["files"]) if src else None
        sbytes = sum(f.get("bytes", f.get("size", 0)) for f in (src["files"].values() if isinstance(src["files"], dict) else src["files"])) if src else None
        chunks = len(src["chunks"]) if src else None
        del src
        for layout in ("auto", "full", "compact", "archive"):
            out = os.path.join(OUT, f"pack-{len(packs)}-{layout}")
            rm(out)
            r = measure(f"pack-{len(packs)}-{layout}", [WO, "pack", root, "--out", out, "--layout", layout])
            ef, eb = dir_size(out)
            zips = {z: os.path.getsize(os.path.join(out, z)) for z in ("export.zip", "export.compact.zip")
                    if os.path.exists(os.path.join(out, z))}
            packs.append({"tree": label, "layout": layout, "source_files": sfiles, "source_bytes": sbytes,
                          "chunks": chunks, "export_files": ef, "export_bytes": eb, "zips": zips,
                          "wall_s": r["wall_s"], "cli_line": open(r["stdout"]).read().strip()})
    results["pack"] = packs


# ---------------------------------------------------------------- report


def fmt_mb(x):
    return f"{x:,.0f} MB"


def anon(path):
    """The cargo registry's directory name spells a registry host; keep it out of reports."""
    return re.sub(r"/registry/src/[^/]+", "/registry/src/<registry>", path.replace(os.path.expanduser("~"), "~"))


def report():
    R = results["runs"]
    lines = []
    if "wo-full" in R:
        wo = R["wo-full"]
        fl = R["rg-floor"]
        rep = wo.get("report", {})
        lines.append(f"Tree: `{TREE}` — {results['tree_files']:,} files, {results['tree_bytes']/1e6:,.1f} MB "
                     f"(snapshot of `{anon(E.get('BENCH_SRC','?'))}`, cap {E.get('BENCH_MAX_MB') or 'none'}). "
                     f"wo indexed {rep.get('files', '?'):,} files / {rep.get('bytes', 0)/1e6:,.1f} MB into "
                     f"{rep.get('chunks', 0):,} chunks (caps lifted: `--max-total-bytes`/`--max-file-bytes` 1e12), "
                     f"index.json {results.get('index_json_bytes', 0)/1e6:,.0f} MB, {wo.get('warnings', 0)} warnings.")
        lines.append("")
        lines.append("| tool | wall s | peak RSS | wo/tool time | wo/tool RSS | what it did | goal |")
        lines.append("| --- | ---: | ---: | ---: | ---: | --- | --- |")

        def row(key, label, what, goal):
            r = R.get(key)
            if not r:
                lines.append(f"| {label} | — | — | — | — | not run | |")
                return
            bad = " (timed out)" if r["timed_out"] else (f" (exit {r['rc']})" if r["rc"] else "")
            tr = wo["wall_s"] / r["wall_s"] if r["wall_s"] else float("nan")
            mr = wo["rss_mb"] / r["rss_mb"] if r["rss_mb"] else float("nan")
            ok = ""
            if goal == "peer":
                ok = ("met" if tr < 1 else "**missed**") + " (wo faster)"
                if r["timed_out"]:
                    ok = f"met (peer killed at {TIMEOUT} s)"
                elif r["rc"]:
                    ok = f"peer failed (exit {r['rc']}); see {os.path.basename(r['stderr'])}"
            elif goal == "floor":
                ok = ("met" if tr <= 3 else "**missed**") + " (≤ 3× floor)"
            lines.append(f"| {label} | {r['wall_s']:.2f}{bad} | {fmt_mb(r['rss_mb'])} | "
                         f"{'—' if key == 'wo-full' else f'{tr:.2f}×'} | {'—' if key == 'wo-full' else f'{mr:.2f}×'} | {what} | {ok} |")

        row("wo-full", "wo index (full)", f"{rep.get('files', 0):,} files → {rep.get('chunks', 0):,} chunks", "")
        l = R.get("llmx-mcp", {}).get("report", {}).get("stats") or {}
        row("llmx-mcp", "llmx-mcp 2.2.1 `llmx index` (BM25 build)",
            f"{l.get('total_files', '?')} files → {l.get('total_chunks', '?')} chunks; store {R.get('llmx-mcp', {}).get('output_bytes', 0)/1e6:,.0f} MB", "peer")
        row("code2prompt", "code2prompt 4.3.0", f"{R.get('code2prompt', {}).get('files', '?')} files → one prompt file, {R.get('code2prompt', {}).get('output_bytes', 0)/1e6:,.0f} MB", "peer")
        row("repomix", "repomix 1.18.1", f"{R.get('repomix', {}).get('files', '?')} files → one XML file, {R.get('repomix', {}).get('output_bytes', 0)/1e6:,.0f} MB", "peer")
        row("rg-floor", "floor: `rg -uuu -a -c '' DIR` (every file read)", "reads every byte, median of 3", "floor")
        row("rg-ignore", "`rg -a -c '' DIR` (wo's ignore rules)", "same file set as wo, median of 3", "floor")
        row("rg-print", "`rg -uuu -a '' DIR > /dev/null`", "prints every line, median of 3", "floor")
        lines.append("")
        inc = R["wo-incremental"]
        irep = inc.get("report", {})
        lines.append(f"Incremental re-index of the unchanged tree: {inc['wall_s']:.2f} s, peak {fmt_mb(inc['rss_mb'])} = "
                     f"{100*inc['wall_s']/wo['wall_s']:.1f}% of the full index (goal < 10%: "
                     f"{'met' if inc['wall_s'] < 0.1*wo['wall_s'] else '**missed**'}); "
                     f"{irep.get('files_reused', '?')} files reused, {irep.get('files_chunked', '?')} re-read.")
        if "wo-one-edit" in R:
            e = R["wo-one-edit"]
            lines.append(f"One edited file: {e['wall_s']:.2f} s, peak {fmt_mb(e['rss_mb'])} "
                         f"({e.get('report', {}).get('files_chunked', '?')} file re-read).")
        lines.append("")
    if "latency" in results:
        L = results["latency"]
        c = R["wo-search-cli"]
        lines.append(f"Query latency over the whole index ({L['queries']} queries × {L['repeat']} = {L['samples']} timed, "
                     f"identifiers drawn from the tree, a third of them two-word): "
                     f"p50 **{L['p50_ms']:.2f} ms**, p90 {L['p90_ms']:.2f} ms, p99 **{L['p99_ms']:.2f} ms**, max {L['max_ms']:.2f} ms "
                     f"(in process, library `Index::search`, after one untimed warm-up pass). "
                     f"Loading the index (`Index::open`) once: {L['open_s']:.2f} s; harness peak RSS {fmt_mb(L['harness_rss_mb'])}. "
                     f"A one-shot `wo search QUERY --dir DIR --json` (process start + open + one query): {c['wall_s']:.2f} s, "
                     f"peak {fmt_mb(c['rss_mb'])} (median of 3). Slowest queries: "
                     + ", ".join(f"`{w['q']}` {w['ms']} ms" for w in L.get("slowest", [])) + ".")
        lines.append("")
    if "quality" in results:
        Q = results["quality"]
        lines.append(f"Retrieval quality: {Q['n']} labelled questions about this repository (`bench/index/queries.tsv`), top 10:")
        lines.append("")
        lines.append("| system | MRR@10 | recall@10 | hit@1 |")
        lines.append("| --- | ---: | ---: | ---: |")
        for n, s in Q["systems"].items():
            lines.append(f"| {n} | {s['mrr@10']:.3f} | {s['recall@10']:.3f} | {s['hit@1']:.3f} |")
        lines.append("")
        names = list(Q["systems"])
        lines.append("| id | question | " + " | ".join(f"rank {n}" for n in names) + " |")
        lines.append("| --- | --- | " + " | ".join("---:" for _ in names) + " |")
        for p in Q["per_query"]:
            lines.append(f"| {p['id']} | {p['q']} | " + " | ".join(str(p[n] or "—") for n in names) + " |")
        lines.append("")
    if "pack" in results:
        lines.append("| tree | layout | source files | source bytes | chunks | export files | export bytes | bytes ratio | files ratio | loose bytes (no zips) | zips |")
        lines.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for p in results["pack"]:
            sb, sf = p["source_bytes"] or 0, p["source_files"] or 0
            z = ", ".join(f"{k} {v/1e3:,.0f} KB" for k, v in p["zips"].items())
            lines.append(f"| {p['tree']} | {p['layout']} | {sf:,} | {sb:,} | {p['chunks']:,} | {p['export_files']:,} | "
                         f"{p['export_bytes']:,} | {p['export_bytes']/sb if sb else 0:.2f}× | {p['export_files']/sf if sf else 0:.2f}× | "
                         f"{p['export_bytes'] - sum(p['zips'].values()):,} | {z} |")
        lines.append("")
    text = "\n".join(lines)
    print(text)
    open(os.path.join(OUT, "report.md"), "w").write(text + "\n")
    json.dump(results, open(os.path.join(OUT, "results.json"), "w"), indent=1, default=str)


def main():
    steps = [("speed", bench_speed), ("latency", bench_latency), ("quality", bench_quality), ("pack", bench_pack)]
    for name, fn in steps:
        if name in SKIP:
            continue
        fn()
        json.dump(results, open(os.path.join(OUT, "results.json"), "w"), indent=1, default=str)
    if "speed" in SKIP and os.path.exists(os.path.join(OUT, "results.prev.json")):
        pass
    report()


if __name__ == "__main__":
    main()
