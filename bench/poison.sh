#!/usr/bin/env bash
# Poison quality: crawl N trap pages as a scraper would and run them through the FineWeb filter
# stack with ../shared/tools/poison_eval.py (see bench/README.md).
#
# usage: EVAL_VENV=/tmp/eval-venv bench/poison.sh [PAGES]
set -euo pipefail
cd "$(dirname "$0")/.."
pages=${1:-200}
venv=${EVAL_VENV:-/tmp/eval-venv}
tools=${POISON_TOOLS:-../shared/tools}
[ -x "$venv/bin/python" ] || EVAL_VENV=$venv bash "$tools/setup-eval.sh"
cargo build --release --quiet --bin quagmire
QUAGMIRE_SECRET=bench-secret-0123456789abcdef RUST_LOG=warn \
  target/release/quagmire serve --listen 127.0.0.1:18440 --trap-listen 127.0.0.1:8421 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
until curl -fs http://127.0.0.1:18440/health -o /dev/null; do sleep 0.05; done
"$venv/bin/python" "$tools/poison_eval.py" http://127.0.0.1:8421/ --pages "$pages"
