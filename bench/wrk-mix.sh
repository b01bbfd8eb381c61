#!/usr/bin/env bash
# The realistic mix (bench/mix.lua: 2,000 clients, a page view and its 10-30 subresources each,
# 5% bots) against quagmire on its defaults: verdicts per second, latency, the share trapped, and
# the CPU time quagmire spent per verdict (its utime + stime from /proc over the run, divided by
# the requests wrk completed). Three rounds.
#
# usage: bench/wrk-mix.sh [SECONDS_PER_ROUND] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-32}
source bench/serve.sh
start_servers 18490 18491 18499
pid=${started_pids[0]}
ticks=$(getconf CLK_TCK)
trapped() { curl -s http://127.0.0.1:18490/metrics | awk '/^quagmire_verdicts_total\{verdict="trap"/ {s += $2} END {print s + 0}'; }
for round in 1 2 3; do
  before_cpu=$(cpu_ticks "$pid"); before_trapped=$(trapped)
  out=$(wrk -t1 -c"$connections" -d"${seconds}s" --latency -s bench/mix.lua http://127.0.0.1:18490)
  after_cpu=$(cpu_ticks "$pid"); after_trapped=$(trapped)
  requests=$(echo "$out" | awk '/requests in/ {print $1}')
  rate=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p50=$(echo "$out" | awk '/^ +50%/ {print $2}'); p99=$(echo "$out" | awk '/^ +99%/ {print $2}')
  python3 - "$round" "$requests" "$rate" "$p50" "$p99" "$before_cpu" "$after_cpu" "$ticks" "$before_trapped" "$after_trapped" <<'PY'
import sys
r, n, rate, p50, p99, c0, c1, hz, t0, t1 = sys.argv[1:]
n = int(n); cpu_us = (int(c1) - int(c0)) / int(hz) * 1e6
print(f"round {r}: {float(rate):,.0f} verdicts/s, p50 {p50}, p99 {p99}, "
      f"{cpu_us / n:.1f} us CPU per verdict, {(float(t1) - float(t0)) / n:.1%} trapped")
PY
done
