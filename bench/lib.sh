# Shared by the bench scripts that run `wo serve` against the harness's upstream
# (bench/serve/run.sh, bench/serve/growth.sh, bench/scale/run.sh): source it.

# wait_file FILE: wait up to 10 s for FILE to exist and be non-empty (a server's URL file).
wait_file() {
  for _ in $(seq 1 200); do [ -s "$1" ] && return 0; sleep 0.05; done
  echo "timed out waiting for $1" >&2
  return 1
}

# write_upstream_config FILE URL: a config.toml whose default provider `bench` is the
# harness's OpenAI-format upstream at URL (a 32k window); BENCH_CONFIG_EXTRA is appended
# (e.g. $'[memory]\nrecall_tokens = 1000000', the window as memory's only bound).
write_upstream_config() {
  cat >"$1" <<EOC
[defaults]
provider = "bench"

[providers.bench]
kind = "openai"
base_url = "$2"
model = "bench"
context_window = 32768
timeout_secs = 60
${BENCH_CONFIG_EXTRA:-}
EOC
}
