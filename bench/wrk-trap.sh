#!/usr/bin/env bash
# Requests/s of the trap listener against a bare axum "200 OK" baseline, measured side by side in
# one run (two alternating rounds each), and the ratio. Needs wrk (apt-get install wrk).
#
# usage: bench/wrk-trap.sh [SECONDS_PER_ROUND] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-32}
source bench/serve.sh
start_servers 18420 18421 18429
# The same bare server sending a fixed 8 KB page: the ceiling for any page generator.
start_baseline 18428 8192

run() { # URL -> requests/s and transfer/s lines
  wrk -t1 -c"$connections" -d"${seconds}s" -s bench/paths.lua "$1" | awk '/Requests\/sec/ {r=$2} /Transfer\/sec/ {t=$2} END {print r, t}'
}
declare -a trap_rates base_rates fixed_rates
for round in 1 2; do
  read -r rate transfer < <(run http://127.0.0.1:18429)
  base_rates+=("$rate"); echo "round $round baseline:    $rate req/s ($transfer/s)"
  read -r rate transfer < <(run http://127.0.0.1:18428)
  fixed_rates+=("$rate"); echo "round $round fixed 8 KB:  $rate req/s ($transfer/s)"
  read -r rate transfer < <(run http://127.0.0.1:18421)
  trap_rates+=("$rate"); echo "round $round trap:        $rate req/s ($transfer/s)"
done
python3 - "${base_rates[@]}" "${trap_rates[@]}" "${fixed_rates[@]}" <<'PY'
import sys
b = [float(x) for x in sys.argv[1:3]]; t = [float(x) for x in sys.argv[3:5]]; f = [float(x) for x in sys.argv[5:7]]
print(f"baseline mean {sum(b)/2:.0f} req/s, trap mean {sum(t)/2:.0f} req/s, ratio trap/baseline {sum(t)/sum(b):.2f}")
print(f"fixed 8 KB page mean {sum(f)/2:.0f} req/s, ratio fixed/baseline {sum(f)/sum(b):.2f} (the ceiling for any generator)")
PY
