#!/usr/bin/env bash
# The pass economy (issue 39): a crawler farm that knows quagmire, and an office behind one
# address, each against a quagmire of its own on its defaults, all side by side in one run
# (`examples/passfarm`, bench/tools/passfarm.rs, says what each plays). Every request goes to
# loopback; the client addresses are X-Forwarded-For values from a trusted (loopback) peer.
#
# usage: bench/pass-economy.sh [SECONDS] [SCENARIO...]
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
port=18700
for scenario in "${scenarios[@]}"; do
  target/release/examples/passfarm target/release/quagmire "$scenario" "$seconds" "$port" >"$dir/$scenario.txt" 2>&1 &
  port=$((port + 10))
done
wait
for scenario in "${scenarios[@]}"; do
  cat "$dir/$scenario.txt"
  echo
done
