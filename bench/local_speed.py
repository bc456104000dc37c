#!/usr/bin/env python3
"""Benchmark: the `local` provider's prompt and generation
speed against a bare llama-cpp-2 loop and llama.cpp's own figures (via
llama-cpp-python), for the same GGUF, prompt, thread count and greedy
sampling, measured in one run.

  python3 bench/local_speed.py [PROMPT_WORDS] [MAX_TOKENS] [REPEATS]

Three generators, run back to back REPEATS times (default 3) so that each
repetition's ratios come from the same moment of a shared, noisy machine:

- wo local: the `local_speed` example of wo-providers (release build)
  through the public streaming API — wall time per token between the first
  and the last streamed delta, so it includes our sampler chain,
  detokenisation and the channel to the caller. Prompt: time to the first
  token (prompt evaluation plus one step and the context's setup).
- bare llama-cpp-2: the `local_bare` example — the same crate with nothing
  around it (context, decode, greedy pick). Two figures: llama.cpp's decode
  counter (`llama_perf_context`: n_eval / t_eval_ms) and the wall time per
  token measured like ours.
- llama.cpp via llama-cpp-python 0.3.36: its perf counters only
  (t_p_eval / n_p_eval and t_eval / n_eval); it has no comparable wall
  figure, as its Python sampling loop is not what we compete with.

Each generator runs three rounds per repetition; the first is a warm-up
and the best of the other two counts. Goal: wo local >= 1.0x llama.cpp in
generation and prompt. Needs scripts/install-model.sh and llama-cpp-python.
"""
import json
import os
import re
import statistics
import subprocess
import sys

words = int(sys.argv[1]) if len(sys.argv) > 1 else 200
max_tokens = int(sys.argv[2]) if len(sys.argv) > 2 else 128
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
threads = os.cpu_count() or 2
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
model = os.environ.get("WO_MODEL") or os.path.join(
    os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"),
    "wikioracle/models/SmolLM2-135M-Instruct.Q4_1.gguf",
)
if not os.path.isfile(model):
    sys.exit(f"model {model} not found: run scripts/install-model.sh or set WO_MODEL")
env = dict(os.environ, WO_MODEL=model)
filler = "The quick brown fox jumps over the lazy dog. " * (words // 9 + 1)
prompt = filler + "\nNow count from 1 to 200, separated by commas."

# LOCAL_SPEED_PROFILE=dev measures the dev build instead (its llama.cpp is
# still a CMake Release -O3 build; only our Rust code is unoptimised) when a
# release build of llama.cpp is not at hand.
profile = os.environ.get("LOCAL_SPEED_PROFILE", "release")
subprocess.run(
    ["cargo", "build", "--profile", profile, "-q", "-p", "wo-providers", "--features", "local",
     "--example", "local_speed", "--example", "local_bare"],
    cwd=root, check=True,
)
examples = os.path.join(root, "target", "debug" if profile == "dev" else profile, "examples")


def run_example(name, pattern):
    out = subprocess.run(
        [os.path.join(examples, name), str(words), str(max_tokens), "--threads", str(threads)]
        if name == "local_bare" else
        [os.path.join(examples, name), str(words), str(max_tokens)],
        cwd=root, check=True, capture_output=True, text=True, env=env,
    ).stdout
    rounds = re.findall(pattern, out)
    if not rounds:
        sys.exit(f"could not read {name} output:\n{out}")
    # Skip the warm-up round, as llama.cpp's figure below is also warm.
    return rounds[1:] or rounds


def ours():
    rounds = run_example(
        "local_speed",
        r"prompt (\d+) tok, first token after (\d+) ms .*?, (\d+) tok generated at (\d+) tok/s",
    )
    best = max(rounds, key=lambda r: int(r[3]))
    return {"prompt_tps": int(best[0]) / (int(best[1]) / 1000.0), "gen_tps": float(best[3]),
            "gen_tok": int(best[2]), "prompt_tok": int(best[0])}


def bare():
    rounds = run_example(
        "local_bare",
        r"prompt (\d+) tok at (\d+) tok/s \(counter\), (\d+) tok generated: "
        r"counter (\d+) decodes at (\d+) tok/s, wall (\d+) tok/s",
    )
    return {"prompt_tps": max(float(r[1]) for r in rounds),
            "gen_tps": max(float(r[4]) for r in rounds),
            "wall_tps": max(float(r[5]) for r in rounds),
            "gen_tok": int(rounds[-1][2])}


from llama_cpp import Llama, llama_perf_context, llama_perf_context_reset  # noqa: E402

llm = Llama(model_path=model, n_ctx=8192, n_threads=threads, n_threads_batch=threads, verbose=False)
msgs = [{"role": "user", "content": prompt}]


def llamacpp():
    best = None
    for i in range(3):
        llm.reset()
        # The counters run from the context's creation: reset them so each
        # round is measured alone, as the other two generators' rounds are.
        llama_perf_context_reset(llm._ctx.ctx)
        llm.create_chat_completion(messages=msgs, temperature=0.0, max_tokens=max_tokens)
        perf = llama_perf_context(llm._ctx.ctx)
        p = perf.n_p_eval / (perf.t_p_eval_ms / 1000.0) if perf.t_p_eval_ms else 0.0
        g = perf.n_eval / (perf.t_eval_ms / 1000.0) if perf.t_eval_ms else 0.0
        if i and (best is None or g > best["gen_tps"]):
            best = {"prompt_tps": p, "gen_tps": g, "gen_tok": perf.n_eval, "prompt_tok": perf.n_p_eval}
    return best


reps = []
for _ in range(repeats):
    reps.append({"wo": ours(), "bare": bare(), "llamacpp": llamacpp()})


def med(f):
    return statistics.median(f(r) for r in reps)


def span(f):
    vals = sorted(f(r) for r in reps)
    return f"{vals[0]:.2f}-{vals[-1]:.2f}" if len(vals) > 1 else f"{vals[0]:.2f}"


print(f"local provider vs bare llama-cpp-2 vs llama.cpp, {os.path.basename(model)}, "
      f"{threads} threads, greedy, {repeats} repetitions (medians; ratio ranges per repetition), "
      f"{profile} build, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}, "
      f"load average {os.getloadavg()[0]:.1f}")
print(f"{'':26} {'wo local':>9} {'bare wall':>10} {'bare ctr':>9} {'llama.cpp':>10}")
print(f"{'prompt tok/s':26} {med(lambda r: r['wo']['prompt_tps']):9.0f} {'':>10} "
      f"{med(lambda r: r['bare']['prompt_tps']):9.0f} {med(lambda r: r['llamacpp']['prompt_tps']):10.0f}")
print(f"{'generation tok/s':26} {med(lambda r: r['wo']['gen_tps']):9.0f} "
      f"{med(lambda r: r['bare']['wall_tps']):10.0f} {med(lambda r: r['bare']['gen_tps']):9.0f} "
      f"{med(lambda r: r['llamacpp']['gen_tps']):10.0f}")
print("ratios (goal: wo / llama.cpp >= 1.0x in both):")
print(f"  prompt      wo / llama.cpp          {span(lambda r: r['wo']['prompt_tps'] / r['llamacpp']['prompt_tps'])}x"
      "  (wo: time to first token, incl. setup and one step)")
print(f"  generation  wo / llama.cpp          {span(lambda r: r['wo']['gen_tps'] / r['llamacpp']['gen_tps'])}x"
      "  (wo wall per token vs llama.cpp's decode counter)")
print(f"  generation  wo / bare wall          {span(lambda r: r['wo']['gen_tps'] / r['bare']['wall_tps'])}x"
      "  (like for like: what the provider adds)")
print(f"  generation  bare ctr / llama.cpp    {span(lambda r: r['bare']['gen_tps'] / r['llamacpp']['gen_tps'])}x"
      "  (counter vs counter: llama-cpp-2's build vs llama-cpp-python's)")
print(f"  tokens generated: wo {reps[-1]['wo']['gen_tok']}, bare {reps[-1]['bare']['gen_tok']}, "
      f"llama.cpp {reps[-1]['llamacpp']['gen_tok']}")
print(json.dumps({"words": words, "max_tokens": max_tokens, "threads": threads, "repetitions": reps}))
