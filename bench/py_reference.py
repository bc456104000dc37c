#!/usr/bin/env python3
"""Reference timings for the state-file benchmark: what the existing Python
WikiOracle does with the same files, using only the standard library.

Usage: py_reference.py OP STATE [EXPORT...]   (prints one JSON object)
  load     json.load of STATE
  append   STATE already in memory: append one message, dump (indent=2),
           fsync, rename over a copy (the steady state of a server or REPL)
  cold     load + append + dump + fsync + rename (one CLI run)
  merge    load STATE and every EXPORT, union messages by id, sort by
           (timestamp, id), dump + fsync + rename
Each op runs REPEAT times (env, default 5); the median seconds is printed.
"""
import json
import os
import statistics
import sys
import time

REPEAT = int(os.environ.get("REPEAT", "5"))


def dump_durably(data, path):
    tmp = path + ".pytmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, ensure_ascii=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    os.fsync(dfd)
    os.close(dfd)


def load(path):
    with open(path, "rb") as f:
        return json.load(f)


def new_message(i):
    return {
        "id": "m_py%014d" % i,
        "title": "appended",
        "username": "bench",
        "timestamp": "2099-01-01T00:00:00Z",
        "content": "<p>appended turn %d</p>" % i,
    }


def main():
    op, state = sys.argv[1], sys.argv[2]
    exports = sys.argv[3:]
    work = state + ".py.json"
    with open(state, "rb") as src, open(work, "wb") as dst:
        dst.write(src.read())
    times = []
    if op == "append":
        data = load(work)
    for i in range(REPEAT):
        t0 = time.perf_counter()
        if op == "load":
            load(state)
        elif op == "append":
            data["messages"].append(new_message(i))
            dump_durably(data, work)
        elif op == "cold":
            d = load(work)
            d["messages"].append(new_message(i))
            dump_durably(d, work)
        elif op == "merge":
            base = load(state)
            by_id = {m["id"]: m for m in base["messages"]}
            for e in exports:
                for m in load(e)["messages"]:
                    by_id.setdefault(m["id"], m)
            base["messages"] = sorted(by_id.values(), key=lambda m: (m["timestamp"], m["id"]))
            dump_durably(base, work)
        else:
            sys.exit("unknown op " + op)
        times.append(time.perf_counter() - t0)
    os.remove(work)
    print(json.dumps({"op": op, "median_s": statistics.median(times), "runs": len(times)}))


if __name__ == "__main__":
    main()
