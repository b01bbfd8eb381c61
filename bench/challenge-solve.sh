#!/usr/bin/env bash
# How long a real Chromium (Debian's chromium, headless, two cores here) takes to answer the
# challenge at several difficulties: quagmire serves its /challenge page, chromedriver drives
# Chromium to it ROUNDS times per difficulty (examples/solve_time), timing each from the
# navigation to the answer's redirect: the page's load, the workers' start, the proof of work and
# the answer. Prints the median and p95 per difficulty. Needs chromium and chromium-driver.
#
# With `rate` first, it measures one worker's hashes a second instead, for today's worker.js and
# the one before its last change (or at REV), side by side in the same Chromium.
#
# usage: bench/challenge-solve.sh [ROUNDS] [DIFFICULTY...]
#        bench/challenge-solve.sh rate [ROUNDS] [REV]
set -euo pipefail
cd "$(dirname "$0")/.."
mode=answers
if [ "${1:-}" = rate ]; then
  mode=rate
  shift
fi
rounds=${1:-20}
shift || true
source bench/serve.sh
command -v chromedriver >/dev/null || { echo "chromedriver is missing: apt-get install chromium-driver" >&2; exit 1; }
cargo build --release --quiet --bin quagmire --example solve_time
chromedriver --port=18489 >/dev/null 2>&1 &
started_pids+=($!)
dir=$(mktemp -d)
cleanup_dirs+=("$dir")
port=18480
if [ "$mode" = rate ]; then
  before=${1:-$(git log -n 2 --format=%H -- src/challenge/worker.js | tail -1)}
  git show "$before:src/challenge/worker.js" >"$dir/worker-${before:0:7}.js"
  cp src/challenge/worker.js "$dir/worker-now.js"
  start_quagmire "$port" $((port + 1))
  target/release/examples/solve_time 18489 "http://127.0.0.1:$port" "$rounds" \
    --rate "$dir/worker-now.js" "$dir/worker-${before:0:7}.js" "$dir/worker-now.js"
  exit 0
fi
difficulties=("${@:-12 14 16 18}")
for difficulty in ${difficulties[*]}; do
  printf 'challenge {\n    difficulty %s\n}\n' "$difficulty" >"$dir/$difficulty.kdl"
  start_quagmire "$port" $((port + 1)) --config "$dir/$difficulty.kdl"
  echo "difficulty $difficulty: $(target/release/examples/solve_time 18489 "http://127.0.0.1:$port" "$rounds")"
  port=$((port + 2))
done
