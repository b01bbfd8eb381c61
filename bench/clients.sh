#!/usr/bin/env bash
# The scale table (bench/README, "Clients remembered"): /verdict requests/s and the process's RSS
# with browser page views spread over 1,000, 16,384, 100,000 and 1,000,000 distinct clients
# (bench/clients.lua), and bytes per remembered client ((RSS under load - RSS warm) / clients
# remembered, as quagmire_client_cache_entries counts them; warm is the RSS after two seconds of
# the same load from 100 clients, so start-up's passing allocations are not counted). Each count is a fresh server with
# room for a million clients: first every client once, then the measured load over all of them.
# With BEFORE=path/to/an/older/quagmire, that binary is measured the same way in the same run,
# each count right after this build's. Needs wrk (apt-get install wrk).
#
# usage: [BEFORE=BINARY] bench/clients.sh [SECONDS] [CONNECTIONS] [COUNT...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-8}
connections=${2:-50}
shift $(($# < 2 ? $# : 2))
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(1000 16384 100000 1000000)
source bench/serve.sh
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }
cargo build --release --quiet --bin quagmire
dir=$(mktemp -d)
cleanup_dirs+=("$dir")
printf 'clients {\n    capacity 1000000\n}\n' >"$dir/million.kdl"

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# BINARY PORT COUNT: prints "requests/s rss_kb idle_kb remembered".
measure() {
  local binary=$1 port=$2 count=$3
  QUAGMIRE_SECRET=bench-secret-0123456789abcdef RUST_LOG=warn \
    "$binary" serve --config "$dir/million.kdl" --listen "127.0.0.1:$port" \
    --trap-listen "127.0.0.1:$((port + 1))" &
  local pid=$!
  started_pids+=("$pid")
  wait_until_up "http://127.0.0.1:$port/health"
  local idle rate rss remembered
  wrk -t1 -c"$connections" -d2s -s bench/clients.lua "http://127.0.0.1:$port" -- 100 >/dev/null
  idle=$(rss_kb "$pid")
  # At 20,000 verdicts/s or more, every client is asked for at least once.
  wrk -t1 -c"$connections" -d"$((count / 20000 + 2))s" -s bench/clients.lua \
    "http://127.0.0.1:$port" -- "$count" >/dev/null
  rate=$(wrk -t1 -c"$connections" -d"${seconds}s" -s bench/clients.lua \
    "http://127.0.0.1:$port" -- "$count" | awk '/Requests\/sec/ {print $2}')
  rss=$(rss_kb "$pid")
  remembered=$(curl -fs "http://127.0.0.1:$port/metrics" |
    awk '/^quagmire_client_cache_entries / {print $2}')
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  echo "$rate $rss $idle $remembered"
}

report() {
  local name=$1 count=$2 rate=$3 rss=$4 idle=$5 remembered=$6
  awk -v n="$name" -v c="$count" -v r="$rate" -v rss="$rss" -v idle="$idle" -v m="$remembered" \
    'BEGIN { printf "%-7s %9d clients: %8.0f req/s, RSS %6.1f MB (warm %5.1f MB), %4.0f bytes per remembered client (%d remembered)\n",
      n, c, r, rss / 1024, idle / 1024, (rss - idle) * 1024 / (m > 0 ? m : 1), m }'
}

for count in "${counts[@]}"; do
  read -r rate rss idle remembered < <(measure target/release/quagmire 18470 "$count")
  report this "$count" "$rate" "$rss" "$idle" "$remembered"
  if [ -n "${BEFORE:-}" ]; then
    read -r rate rss idle remembered < <(measure "$BEFORE" 18472 "$count")
    report before "$count" "$rate" "$rss" "$idle" "$remembered"
  fi
done
