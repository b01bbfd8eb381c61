#!/usr/bin/env bash
# `quagmire replay` speed and memory: lines per second for each log format on one core
# (taskset -c 0) with the default rules, and peak memory for a log and one four times as long.
#
# The logs are made here (bench/tools/make_logs.py): a day of a busy site's traffic, the same
# requests in each format. People browse from 50,000 home addresses (Chrome, Firefox, Safari),
# AI crawlers and scripts come from a few hundred datacenter addresses, and some crawlers walk
# the trap (requests under /trap/). Each line of the report is the replay's own count and time
# (the `lines` and `seconds` of its --json), so startup (reading the corpus) is not counted.
#
# usage: bench/replay.sh [LINES] (default 1000000)
set -euo pipefail
cd "$(dirname "$0")/.."
lines=${1:-1000000}
cargo build --release --quiet
binary=target/release/quagmire
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 bench/tools/make_logs.py "$lines" "$dir"
export QUAGMIRE_SECRET=bench-replay-secret-0123456789
printf '%-16s %10s %8s %12s %10s\n' format lines seconds lines/s peak_MiB
for format in jsonl nginx-combined caddy traefik; do
    file="$dir/$format.log"
    /usr/bin/time -f '%M' -o "$dir/rss" taskset -c 0 "$binary" replay --quiet --format "$format" \
        --json "$dir/report.json" "$file" >/dev/null 2>"$dir/stderr" || { cat "$dir/stderr"; exit 1; }
    python3 - "$dir/report.json" "$dir/rss" "$format" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
rss_kib = int(open(sys.argv[2]).read().split()[-1])
lines, seconds = report["lines"], report["seconds"]
print(f"{sys.argv[3]:<16} {lines:>10} {seconds:>8.2f} {lines / seconds:>12,.0f} {rss_kib / 1024:>10.0f}")
EOF
done
# Memory is bounded by the client capacity, not the file: the same traffic four times over.
for _ in 1 2 3 4; do cat "$dir/jsonl.log"; done >"$dir/jsonl4.log"
/usr/bin/time -f '%M' -o "$dir/rss" taskset -c 0 "$binary" replay --quiet --format jsonl \
    --json "$dir/report.json" "$dir/jsonl4.log" >/dev/null 2>"$dir/stderr"
python3 - "$dir/report.json" "$dir/rss" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
rss_kib = int(open(sys.argv[2]).read().split()[-1])
lines, seconds = report["lines"], report["seconds"]
print(f"{'jsonl x4':<16} {lines:>10} {seconds:>8.2f} {lines / seconds:>12,.0f} {rss_kib / 1024:>10.0f}")
EOF
