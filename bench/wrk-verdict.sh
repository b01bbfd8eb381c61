#!/usr/bin/env bash
# Requests/s and latency of /verdict with browser-like forward-auth headers, against a bare axum
# "200 OK" baseline sent the same requests, side by side in one run (two alternating rounds).
# A third server is quagmire with a ruleset of no rules: everything a verdict costs but the rules
# themselves, so its ratio is the ceiling for any ruleset. Needs wrk (apt-get install wrk).
# With BEFORE=path/to/an/older/quagmire, that binary runs in the same rounds on its defaults, and
# the script prints the ratio of this build's verdict rate to it (a change's cost, side by side).
#
# usage: [BEFORE=BINARY] bench/wrk-verdict.sh [SECONDS_PER_ROUND] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-32}
source bench/serve.sh
start_servers 18450 18451 18459
no_rules=$(mktemp -d)
cleanup_dirs+=("$no_rules")
echo 'return {}' >"$no_rules/none.lua"
printf 'rules {\n    script "%s/none.lua"\n}\n' "$no_rules" >"$no_rules/none.kdl"
start_quagmire 18452 18453 --config "$no_rules/none.kdl"
if [ -n "${BEFORE:-}" ]; then
  QUAGMIRE_SECRET=bench-secret-0123456789abcdef RUST_LOG=warn \
    "$BEFORE" serve --listen 127.0.0.1:18454 --trap-listen 127.0.0.1:18455 &
  started_pids+=($!)
  wait_until_up "http://127.0.0.1:18454/health"
fi

run() { wrk_verdicts "$1"; }
declare -a verdict_rates base_rates bare_rates before_rates
for round in 1 2; do
  read -r rate p50 p99 < <(run http://127.0.0.1:18459)
  base_rates+=("$rate"); echo "round $round baseline: $rate req/s, p50 $p50, p99 $p99"
  read -r rate p50 p99 < <(run http://127.0.0.1:18450)
  verdict_rates+=("$rate"); echo "round $round verdict:  $rate req/s, p50 $p50, p99 $p99"
  read -r rate p50 p99 < <(run http://127.0.0.1:18452)
  bare_rates+=("$rate"); echo "round $round no rules: $rate req/s, p50 $p50, p99 $p99"
  if [ -n "${BEFORE:-}" ]; then
    read -r rate p50 p99 < <(run http://127.0.0.1:18454)
    before_rates+=("$rate"); echo "round $round before:   $rate req/s, p50 $p50, p99 $p99"
  fi
done
python3 - "${base_rates[@]}" "${verdict_rates[@]}" "${bare_rates[@]}" "${before_rates[@]}" <<'PY'
import sys
b = [float(x) for x in sys.argv[1:3]]; v = [float(x) for x in sys.argv[3:5]]; n = [float(x) for x in sys.argv[5:7]]
w = [float(x) for x in sys.argv[7:9]]
if w:
    print(f"before mean {sum(w)/2:.0f} req/s, ratio verdict/before {sum(v)/sum(w):.2f}")
print(f"baseline mean {sum(b)/2:.0f} req/s, verdict mean {sum(v)/2:.0f} req/s, ratio verdict/baseline {sum(v)/sum(b):.2f}")
print(f"no-rules mean {sum(n)/2:.0f} req/s, ratio no-rules/baseline {sum(n)/sum(b):.2f} (the ceiling for any ruleset)")
PY
