#!/usr/bin/env bash
# Verdict latency with and without 8 concurrent scrapers of the admin endpoints (4 looping on
# /api/trapped?limit=1000, 4 on /metrics), with 100k client records, a few thousand of them
# trapped. Scrapes should not raise the verdict's p99 by more than a millisecond over the same
# loops asking for /health. Needs wrk and
# curl, and the release binary (cargo build --release --bin quagmire).
#
# usage: bench/admin-scrape.sh [SECONDS_PER_RUN] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-32}
source bench/serve.sh
dir=$(mktemp -d)
cleanup_dirs+=("$dir")
printf 'clients {\n    capacity 200000\n}\n' >"$dir/bench.kdl"
start_quagmire 18460 18461 --config "$dir/bench.kdl"

echo "filling the client records..."
PREFILL_CLIENTS=100000 wrk -t1 -c32 -d8s -s bench/prefill.lua http://127.0.0.1:18460 >/dev/null
PREFILL_CLIENTS=3000 wrk -t1 -c32 -d3s -s bench/prefill.lua http://127.0.0.1:18461 >/dev/null
curl -fs http://127.0.0.1:18460/metrics | grep -E '^[a-z_]*(client_cache_entries|clients_over_threshold) '

run() { # -> "requests/s p50 p99"
  wrk -t1 -c"$connections" -d"${seconds}s" --latency -s bench/verdict.lua http://127.0.0.1:18460 |
    awk '/Requests\/sec/ {r=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} END {print r, p50, p99}'
}
scrapers() { # URL URL: starts 4 curl loops on each; their pids go to scraper_pids
  scraper_pids=()
  for _ in 1 2 3 4; do
    (while :; do curl -fs "$1" -o /dev/null; done) &
    scraper_pids+=($!)
    (while :; do curl -fs "$2" -o /dev/null; done) &
    scraper_pids+=($!)
  done
}
with_scrapers() { # LABEL URL URL
  scrapers "$2" "$3"
  read -r rate p50 p99 < <(run)
  kill "${scraper_pids[@]}" 2>/dev/null || true
  wait "${scraper_pids[@]}" 2>/dev/null || true
  echo "round $round $1 $rate req/s, p50 $p50, p99 $p99"
}
for round in 1 2; do
  read -r rate p50 p99 < <(run)
  echo "round $round quiet:               $rate req/s, p50 $p50, p99 $p99"
  # The control: the same 8 curl loops on /health, so that what the loops themselves cost (8
  # processes started back to back on the same cores) is told apart from what scraping costs.
  with_scrapers "8 loops on /health: " http://127.0.0.1:18460/health http://127.0.0.1:18460/health
  with_scrapers "8 scrapers:         " 'http://127.0.0.1:18460/api/trapped?limit=1000' \
    http://127.0.0.1:18460/metrics
done
