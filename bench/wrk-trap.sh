#!/usr/bin/env bash
# Requests/s of the trap listener against a bare axum "200 OK" baseline, measured side by side in
# one run (two alternating rounds each), and the ratio. Needs wrk (apt-get install wrk).
#
# usage: bench/wrk-trap.sh [SECONDS_PER_ROUND] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-32}
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }

cargo build --release --quiet --bin quagmire --example baseline
QUAGMIRE_SECRET=bench-secret-0123456789abcdef RUST_LOG=warn \
  target/release/quagmire serve --listen 127.0.0.1:18420 --trap-listen 127.0.0.1:18421 &
trap_pid=$!
target/release/examples/baseline 127.0.0.1:18429 &
base_pid=$!
trap 'kill $trap_pid $base_pid 2>/dev/null || true' EXIT
for port in 18420 18429; do
  for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/health" -o /dev/null && break; sleep 0.1; done
done

run() { # URL -> requests/s and transfer/s lines
  wrk -t1 -c"$connections" -d"${seconds}s" -s bench/paths.lua "$1" | awk '/Requests\/sec/ {r=$2} /Transfer\/sec/ {t=$2} END {print r, t}'
}
declare -a trap_rates base_rates
for round in 1 2; do
  read -r rate transfer < <(run http://127.0.0.1:18429)
  base_rates+=("$rate"); echo "round $round baseline: $rate req/s ($transfer/s)"
  read -r rate transfer < <(run http://127.0.0.1:18421)
  trap_rates+=("$rate"); echo "round $round trap:     $rate req/s ($transfer/s)"
done
python3 - "${base_rates[@]}" "${trap_rates[@]}" <<'PY'
import sys
b = [float(x) for x in sys.argv[1:3]]; t = [float(x) for x in sys.argv[3:5]]
print(f"baseline mean {sum(b)/2:.0f} req/s, trap mean {sum(t)/2:.0f} req/s, ratio trap/baseline {sum(t)/sum(b):.2f}")
PY
