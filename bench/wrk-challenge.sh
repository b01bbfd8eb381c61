#!/usr/bin/env bash
# Challenge pages served per second beside trap pages per second, side by side in one run (three
# alternating rounds, one quagmire on its defaults): `/challenge` (a fresh signed challenge and
# the page, as nginx's error_page asks for it; the verdict's own challenge answer is the same
# work) and the trap listener's generated pages. Needs wrk.
#
# usage: bench/wrk-challenge.sh [SECONDS_PER_ROUND] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-32}
source bench/serve.sh
start_servers 18470 18471 18479
run() { wrk_rate "$1" "$2"; }
declare -a challenges traps
for round in 1 2 3; do
  read -r rate p50 p99 < <(run bench/challenge.lua http://127.0.0.1:18470)
  challenges+=("$rate"); echo "round $round challenge pages: $rate req/s, p50 $p50, p99 $p99"
  read -r rate p50 p99 < <(run bench/paths.lua http://127.0.0.1:18471)
  traps+=("$rate"); echo "round $round trap pages:      $rate req/s, p50 $p50, p99 $p99"
done
python3 - "${challenges[*]}" "${traps[*]}" <<'PY'
import sys
c = [float(x) for x in sys.argv[1].split()]
t = [float(x) for x in sys.argv[2].split()]
a, b = sum(c) / len(c), sum(t) / len(t)
print(f"mean challenge pages {a:,.0f}/s, trap pages {b:,.0f}/s: {a / b:.2f}x")
PY
