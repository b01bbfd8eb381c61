#!/usr/bin/env bash
# The pass economy (issue 39): a crawler farm that knows quagmire, and an office behind one
# address, each against a quagmire of its own on its defaults, all side by side in one run
# (`examples/passfarm`, bench/tools/passfarm.rs, says what each plays). Every request goes to
# loopback; the client addresses are X-Forwarded-For values from a trusted (loopback) peer.
#
# With REPLICAS="1 2", each scenario runs against one quagmire and, side by side, against two
# replicas sharing one Redis behind a round-robin balancer (needs redis-server).
#
# usage: [REPLICAS="1 2"] bench/pass-economy.sh [SECONDS] [SCENARIO...]
#   SCENARIO: farm-work-N, farm-wait-N (N addresses of one /24, 40 crawler threads each), office-40
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(farm-work-1 farm-wait-1 farm-work-16 farm-wait-16 office-40)
cargo build --release --quiet --bin quagmire --example passfarm
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
read -r -a replicas <<<"${REPLICAS:-1}"
port=18700
for scenario in "${scenarios[@]}"; do
  for count in "${replicas[@]}"; do
    target/release/examples/passfarm target/release/quagmire "$scenario" "$seconds" "$port" "$count" \
      >"$dir/$scenario-$count.txt" 2>&1 &
    port=$((port + 10))
  done
done
wait
for scenario in "${scenarios[@]}"; do
  for count in "${replicas[@]}"; do
    cat "$dir/$scenario-$count.txt"
    echo
  done
done
