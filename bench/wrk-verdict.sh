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
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }

cargo build --release --quiet --bin quagmire --example baseline
QUAGMIRE_SECRET=bench-secret-0123456789abcdef RUST_LOG=warn \
  target/release/quagmire serve --listen 127.0.0.1:18450 --trap-listen 127.0.0.1:18451 &
verdict_pid=$!
target/release/examples/baseline 127.0.0.1:18459 &
base_pid=$!
trap 'kill $verdict_pid $base_pid 2>/dev/null || true' EXIT
for port in 18450 18459; do
  for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/health" -o /dev/null && break; sleep 0.1; done
done

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
