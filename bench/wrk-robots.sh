#!/usr/bin/env bash
# The cost of the site's robots.txt on the verdict path: /verdict requests/s of quagmire on its
# defaults against the same build with a 200-line robots.txt for every host (bench/robots-200.sh),
# side by side in alternating rounds of one run. The requests are browser page views
# (bench/verdict.lua), which fall under the `*` group and are matched against all of its rules.
#
# usage: bench/wrk-robots.sh [SECONDS_PER_ROUND] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-32}
source bench/serve.sh
source bench/robots-200.sh
start_servers 18470 18471 18479
dir=$(mktemp -d)
cleanup_dirs+=("$dir")
write_robots_200 "$dir/robots.txt"
printf 'robots {\n    file "*" "%s/robots.txt"\n}\n' "$dir" >"$dir/robots.kdl"
echo "robots.txt: $(wc -l <"$dir/robots.txt") lines"
start_quagmire 18472 18473 --config "$dir/robots.kdl"

run() { wrk_verdicts "$1"; }
declare -a without with
for round in 1 2 3; do
  read -r rate p50 p99 < <(run http://127.0.0.1:18470)
  without+=("$rate"); echo "round $round without robots.txt: $rate req/s, p50 $p50, p99 $p99"
  read -r rate p50 p99 < <(run http://127.0.0.1:18472)
  with+=("$rate"); echo "round $round with robots.txt:    $rate req/s, p50 $p50, p99 $p99"
done
python3 - "${without[@]}" "${with[@]}" <<'PY'
import sys
a = [float(x) for x in sys.argv[1:4]]; b = [float(x) for x in sys.argv[4:7]]
print(f"without mean {sum(a)/3:.0f} req/s, with mean {sum(b)/3:.0f} req/s, ratio with/without {sum(b)/sum(a):.2f}")
PY
