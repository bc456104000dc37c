#!/usr/bin/env python3
"""Memory never in the way, in the web app's face: `wo serve` (local mode) on
a real model server that answers one request at a time.

llama-cpp-python serves SmolLM2 on loopback as the configured provider; the
interpreter is on. Questions go to `POST /api/chat` one after another, as a
person types them: each sent THINK seconds after the previous answer's `done`
event (the web app frees its input then; memory's event comes later). For
each question: seconds to the first word and to `done`. Two settings of
`[interpreter] pause_seconds`, each on a fresh project and server, run one
after the other and then again in the other order (the model server keeps
one prompt cache): PAUSES (default "0,10"; 0 is how `wo serve` behaved before
it waited for a pause).

    python3 bench/serve_memory_in_the_way.py [--wo target/debug/wo] [--questions 6]

Needs llama-cpp-python (`pip install "llama-cpp-python[server]"`) and the
model (`scripts/install-model.sh`). Prints per setting the median and the
slowest first word, and how many exchanges were remembered within SETTLE
seconds of the last question.
"""

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

QUESTIONS = [
    "What is a kiln?",
    "I am building a pottery studio in my garage. What do I need?",
    "My kiln is a Skutt KM-818. How hot does cone 6 get?",
    "What clay should I use for mugs?",
    "Remind me what kiln I have.",
    "How long does a bisque firing take?",
    "What is glaze crawling?",
    "My name is Alec and I teach pottery on Saturdays.",
]
TOKEN = "bench-token-0123456789abcdefghijklmnop"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port, path, headers=None, seconds=120):
    end = time.time() + seconds
    while time.time() < end:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", path, headers=headers or {})
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit(f"nothing answered on port {port}{path}")


def ask(port, question, timeout):
    """(seconds to the first delta, seconds to done, whether memory follows)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    body = json.dumps({"message": question, "params": {"max_tokens": 48, "temperature": 0}})
    start = time.time()
    c.request("POST", "/api/chat", body=body, headers={
        "Authorization": f"Bearer {TOKEN}",
        "Content-Type": "application/json",
        "Host": f"127.0.0.1:{port}",
    })
    r = c.getresponse()
    if r.status != 200:
        return None, None, f"HTTP {r.status}: {r.read()[:200]!r}"
    first, event = None, None
    while True:
        line = r.readline()
        if not line:
            return first, None, "stream ended before done"
        line = line.decode().rstrip("\n")
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            if event == "delta" and first is None:
                first = time.time() - start
            elif event == "done":
                # Stop reading here, as the web app frees its input here;
                # the server goes on to the memory step.
                return first, time.time() - start, None
            elif event == "error":
                return first, None, line[5:200]


def run(wo, model_port, pause, questions, think, settle, work):
    home = tempfile.mkdtemp(dir=work)
    config = os.path.join(home, "config.toml")
    with open(config, "w") as f:
        f.write(f"""[defaults]
provider = "llamacpp"

[interpreter]
mode = "after"
pause_seconds = {pause}

[providers.llamacpp]
kind = "openai"
base_url = "http://127.0.0.1:{model_port}/v1"
context_window = 4096
""")
    env = dict(os.environ, WO_CONFIG=config, WO_SERVE_TOKEN=TOKEN)
    subprocess.run([wo, "init", home, "--context", "Trying wo."], env=env,
                   check=True, capture_output=True)
    port = free_port()
    server = subprocess.Popen([wo, "serve", "--port", str(port)], cwd=home, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(port, "/api/health")
        rows = []
        for q in QUESTIONS[:questions]:
            rows.append(ask(port, q, timeout=300))
            time.sleep(think)
        # Memory catches up in the pause after the last question (up to
        # SETTLE seconds: SmolLM2 takes about a minute an exchange here).
        end = time.time() + settle
        while time.time() < end:
            state = json.load(open(os.path.join(home, "llm.json")))
            if len(state.get("memory_log", [])) >= questions:
                break
            time.sleep(2)
        state = json.load(open(os.path.join(home, "llm.json")))
        remembered = len(state.get("memory_log", []))
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
    return rows, remembered


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wo", default=os.environ.get("WO", "target/debug/wo"))
    ap.add_argument("--questions", type=int, default=6)
    ap.add_argument("--think", type=float, default=2.0,
                    help="seconds between an answer's done and the next question")
    ap.add_argument("--pauses", default=os.environ.get("PAUSES", "0,10"))
    ap.add_argument("--settle", type=float, default=90.0,
                    help="seconds memory may take after the last question before counting")
    ap.add_argument("--model", default=os.path.join(
        os.environ.get("XDG_DATA_HOME", os.path.expanduser("~/.local/share")),
        "wikioracle/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    args = ap.parse_args()
    wo = os.path.abspath(args.wo)
    work = tempfile.mkdtemp()
    model_port = free_port()
    model = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", args.model, "--host", "127.0.0.1",
         "--port", str(model_port), "--n_ctx", "4096", "--n_threads", "2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(model_port, "/v1/models")
        pauses = [int(p) for p in args.pauses.split(",")]
        results = {p: [] for p in pauses}
        remembered = {p: [] for p in pauses}
        for order in (pauses, list(reversed(pauses))):
            for p in order:
                rows, got = run(wo, model_port, p, args.questions, args.think, args.settle, work)
                results[p] += rows
                remembered[p].append(got)
                firsts = " ".join("-" if f is None else f"{f:.1f}" for f, _, _ in rows)
                print(f"pause {p:>2} s: first word (s) per question: {firsts}; "
                      f"remembered {got} of {args.questions}", flush=True)
                for f, d, err in rows:
                    if err:
                        print(f"  failed: {err}", flush=True)
        print()
        for p in pauses:
            firsts = [f for f, _, err in results[p] if f is not None and not err]
            failed = sum(1 for _, _, err in results[p] if err)
            print(f"pause_seconds = {p:>2}: first word median {statistics.median(firsts):.2f} s, "
                  f"slowest {max(firsts):.2f} s; failed {failed}; "
                  f"remembered {sum(remembered[p])} of {args.questions * len(remembered[p])}")
        if len(pauses) == 2 and all(results[p] for p in pauses):
            a, b = (statistics.median([f for f, _, e in results[p] if f is not None and not e])
                    for p in pauses)
            print(f"first word, pause {pauses[1]} / pause {pauses[0]}: {b / a:.2f}x")
    finally:
        model.terminate()
        model.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
