#!/usr/bin/env bash
# Verdicts carrying a valid pass against the same requests without one, side by side in one run
# (three alternating rounds, one quagmire): bench/verdict.lua's 16,384 browser clients, each with a
# pass of its own (minted under the bench secret by `examples/passes`) or without. The request
# quota and the pass's page pace are raised so both kinds are allowed by the same rules: what
# differs is the pass's whole cost (reading and checking the cookie, its own client record, its
# networks and page pace) and nothing else. Needs wrk.
#
# usage: bench/wrk-pass.sh [SECONDS_PER_ROUND] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-32}
source bench/serve.sh
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }
cargo build --release --quiet --bin quagmire --example passes
dir=$(mktemp -d)
cleanup_dirs+=("$dir")
target/release/examples/passes 16384 >"$dir/passes.txt"
cat >"$dir/quagmire.kdl" <<'KDL'
clients {
    requests-per-minute 1000000
    request-burst 1000000
}
challenge {
    burn-pages-per-minute 100000
    burn-page-burst 100000
}
KDL
start_quagmire 18460 18461 --config "$dir/quagmire.kdl"
run() { wrk_verdicts http://127.0.0.1:18460 "$@"; }
declare -a without with
for round in 1 2 3; do
  read -r rate p50 p99 < <(run)
  without+=("$rate"); echo "round $round without a pass: $rate req/s, p50 $p50, p99 $p99"
  read -r rate p50 p99 < <(run -- "$dir/passes.txt")
  with+=("$rate"); echo "round $round with a pass:    $rate req/s, p50 $p50, p99 $p99"
done
verdicts=$(curl -s http://127.0.0.1:18460/metrics | awk '/^quagmire_verdicts_total\{verdict="allow"/ {s += $2} END {print s + 0}')
passes=$(curl -s http://127.0.0.1:18460/metrics | awk '/^quagmire_passes_total\{result="valid"/ {print $2}')
python3 - "${without[*]}" "${with[*]}" "$verdicts" "${passes:-0}" <<'PY'
import sys
without = [float(x) for x in sys.argv[1].split()]
with_pass = [float(x) for x in sys.argv[2].split()]
a, b = sum(without) / len(without), sum(with_pass) / len(with_pass)
print(f"mean without {a:,.0f} req/s, with a pass {b:,.0f} req/s: {b / a:.2f}x "
      f"({int(float(sys.argv[3])):,} verdicts allowed, {int(float(sys.argv[4])):,} carried a valid pass)")
PY
