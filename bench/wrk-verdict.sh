#!/usr/bin/env bash
# Requests/s and latency of /verdict with browser-like forward-auth headers, against a bare axum
# "200 OK" baseline sent the same requests, side by side in one run (two alternating rounds).
# Needs wrk (apt-get install wrk).
#
# usage: bench/wrk-verdict.sh [SECONDS_PER_ROUND] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-32}
source bench/serve.sh
start_servers 18450 18451 18459

run() { # URL -> "requests/s p50 p99"
  wrk -t1 -c"$connections" -d"${seconds}s" --latency -s bench/verdict.lua "$1" |
    awk '/Requests\/sec/ {r=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} END {print r, p50, p99}'
}
declare -a verdict_rates base_rates
for round in 1 2; do
  read -r rate p50 p99 < <(run http://127.0.0.1:18459)
  base_rates+=("$rate"); echo "round $round baseline: $rate req/s, p50 $p50, p99 $p99"
  read -r rate p50 p99 < <(run http://127.0.0.1:18450)
  verdict_rates+=("$rate"); echo "round $round verdict:  $rate req/s, p50 $p50, p99 $p99"
done
python3 - "${base_rates[@]}" "${verdict_rates[@]}" <<'PY'
import sys
b = [float(x) for x in sys.argv[1:3]]; v = [float(x) for x in sys.argv[3:5]]
print(f"baseline mean {sum(b)/2:.0f} req/s, verdict mean {sum(v)/2:.0f} req/s, ratio verdict/baseline {sum(v)/sum(b):.2f}")
PY
