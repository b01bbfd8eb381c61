#!/usr/bin/env bash
# Instructions per verdict for the whole service (HTTP parsing, identity, state, rules, metrics,
# the response: everything but the kernel), counted by callgrind: the same count on a noisy
# machine as on a quiet one, so a step that saves 2% shows. Each binary serves bench/verdict.lua's
# browser page views (wrk -t1 -c2) under valgrind: 12 s to warm its 16,384 clients' records,
# then 10 s counted. Prints, per binary, the instructions per verdict in all and in the largest
# parts (a part inlined into its caller in a build shows as 0).
#
# usage: bench/verdict-callgrind.sh [BINARY...]   (default: target/release/quagmire, built here)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is missing: apt-get install valgrind" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }
if [ $# -eq 0 ]; then
  cargo build --release --quiet --bin quagmire
  set -- target/release/quagmire
fi
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
port=18560

# The parts shown: how the part's line of callgrind_annotate's inclusive listing ends (before
# the object's name, which it may add in brackets), and a name.
parts=(
  'src/rules/driver.rs:quagmire::rules::driver::push_and_call|the rules (Lua)'
  'Http1Transaction>::parse|parsing the request (hyper)'
  'verdict::facts|identity, enrichment, history'
  'forwarded_request|the forwarded request'
  'observe_request_at|the client record'
  'Metrics::verdict|metrics'
  'verdict::respond|the response'
)

for binary in "$@"; do
  out="$work/callgrind.out"
  rm -f "$out"*
  QUAGMIRE_SECRET=bench-secret-0123456789abcdef RUST_LOG=warn \
    valgrind --tool=callgrind --callgrind-out-file="$out" "$binary" serve \
    --listen "127.0.0.1:$port" --trap-listen "127.0.0.1:$((port + 1))" >"$work/log" 2>&1 &
  pid=$!
  for _ in $(seq 120); do curl -fs "http://127.0.0.1:$port/health" -o /dev/null && break; sleep 0.5; done
  curl -fs "http://127.0.0.1:$port/health" -o /dev/null || { cat "$work/log" >&2; exit 1; }
  wrk -t1 -c2 -d12s -s bench/verdict.lua "http://127.0.0.1:$port" >/dev/null
  callgrind_control -z "$pid" >/dev/null
  verdicts=$(wrk -t1 -c2 -d10s -s bench/verdict.lua "http://127.0.0.1:$port" | awk '/requests in/ {print $1}')
  callgrind_control -d "$pid" >/dev/null
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
  dump=$(ls "$out".* | head -1)
  listing=$(callgrind_annotate --inclusive=yes "$dump" 2>/dev/null | tr -d ,)
  total=$(awk '/PROGRAM TOTALS/ {print $1}' <<<"$listing")
  echo "$binary: $verdicts verdicts counted"
  awk -v t="$total" -v n="$verdicts" 'BEGIN {printf "  %7.1fk  all\n", t / n / 1000}'
  for part in "${parts[@]}"; do
    pattern=${part%%|*}
    count=$(awk -v p="$pattern" '{
      line = $0; sub(/ \[[^]]*\]$/, "", line)
      if (substr(line, length(line) - length(p) + 1) == p) {print $1; exit}
    }' <<<"$listing")
    awk -v c="${count:-0}" -v n="$verdicts" -v name="${part#*|}" 'BEGIN {printf "  %7.1fk  %s\n", c / n / 1000, name}'
  done
  port=$((port + 2))
done
