#!/usr/bin/env bash
# Startup time (process start until /health answers) and resident memory one and three seconds
# after start, with the embedded default corpus, over five runs of the release binary.
#
# usage: bench/startup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin quagmire
for run in 1 2 3 4 5; do
  start=$(date +%s%N)
  QUAGMIRE_SECRET=bench-secret-0123456789abcdef RUST_LOG=warn \
    target/release/quagmire serve --listen 127.0.0.1:18430 --trap-listen 127.0.0.1:18431 &
  pid=$!
  until curl -fs http://127.0.0.1:18430/health -o /dev/null; do sleep 0.005; done
  ready=$(( ($(date +%s%N) - start) / 1000000 ))
  sleep 1
  rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
  # jemalloc's background threads hand back what startup's training used within a second or two.
  sleep 2
  rss_settled=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
  # One page so that the trap path has been touched too.
  curl -fs http://127.0.0.1:18431/warm -o /dev/null
  rss_after=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
  kill $pid; wait $pid 2>/dev/null || true
  echo "run $run: ready in ${ready} ms, RSS $((rss / 1024)) MiB idle at 1 s, $((rss_settled / 1024)) MiB at 3 s, $((rss_after / 1024)) MiB after a page"
done
