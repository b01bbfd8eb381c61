#!/usr/bin/env bash
# CPU time per /verdict request of two quagmire binaries, side by side: each serves the same wrk
# load (bench/verdict.lua, one thread, 32 connections) in alternating rounds, and the server's
# user+system CPU time from /proc around each run is divided by the requests it served. Steadier
# than requests/s on a noisy machine, since time the server spends waiting is not counted.
#
# usage: bench/verdict-cpu.sh BEFORE_BINARY [AFTER_BINARY (default: target/release/quagmire)] [SECONDS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
before=$1
after=${2:-target/release/quagmire}
seconds=${3:-6}
rounds=${4:-3}
source bench/serve.sh
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }

start() { # BINARY PORT -> pid
  QUAGMIRE_SECRET=bench-secret-0123456789abcdef RUST_LOG=warn \
    "$1" serve --listen "127.0.0.1:$2" --trap-listen "127.0.0.1:$(($2 + 1))" >/dev/null 2>&1 &
  started_pids+=($!)
  wait_until_up "http://127.0.0.1:$2/health"
}
measure() { # PID PORT -> "µs-per-request requests/s"
  local pid=$1 port=$2 hz before_ticks after_ticks out requests
  hz=$(getconf CLK_TCK)
  before_ticks=$(cpu_ticks "$pid")
  out=$(wrk -t1 -c32 -d"${seconds}s" -s bench/verdict.lua "http://127.0.0.1:$port")
  after_ticks=$(cpu_ticks "$pid")
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  awk -v t=$((after_ticks - before_ticks)) -v hz="$hz" -v n="$requests" -v s="$seconds" \
    'BEGIN {printf "%.1f %.0f\n", t / hz / n * 1e6, n / s}'
}

start "$before" 18460; before_pid=${started_pids[-1]}
start "$after" 18462; after_pid=${started_pids[-1]}
declare -a b a
for round in $(seq "$rounds"); do
  read -r us rate < <(measure "$before_pid" 18460); b+=("$us")
  echo "round $round before: $us µs CPU per request, $rate req/s"
  read -r us rate < <(measure "$after_pid" 18462); a+=("$us")
  echo "round $round after:  $us µs CPU per request, $rate req/s"
done
python3 - "${b[@]}" "${a[@]}" <<'PY'
import sys
v = [float(x) for x in sys.argv[1:]]; n = len(v) // 2
b, a = v[:n], v[n:]
print(f"before mean {sum(b)/n:.1f} µs, after mean {sum(a)/n:.1f} µs, CPU ratio after/before {sum(a)/sum(b):.2f}")
PY
