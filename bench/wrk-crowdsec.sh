#!/usr/bin/env bash
# The cost of CrowdSec decisions on the verdict path, and their memory: quagmire on its defaults
# against the same build pulling 100,000 decisions (addresses in 10.0.0.0/8, imported with
# `cscli decisions import`) from a real CrowdSec Local API (Debian's crowdsec, Local API only, in
# a temporary folder), /verdict requests/s side by side in alternating rounds of one run. The
# requests (bench/verdict.lua) come from addresses no decision covers: the common case, a lookup
# that finds nothing. Memory per decision is the difference in resident memory, divided.
#
# usage: bench/wrk-crowdsec.sh [SECONDS_PER_ROUND] [CONNECTIONS] [DECISIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-32}
decisions=${3:-100000}
command -v crowdsec >/dev/null || { echo "crowdsec is missing: see .ci/run" >&2; exit 1; }
source bench/serve.sh
start_servers 18480 18481 18489
plain_pid=${started_pids[0]}
dir=$(mktemp -d)
cleanup_dirs+=("$dir")
mkdir -p "$dir/data" "$dir/hub" "$dir/notifications"
echo '{}' >"$dir/hub/.index.json"
echo 'simulation: off' >"$dir/simulation.yaml"
printf 'name: default\nfilters:\n - Alert.Remediation == true\ndecisions:\n - type: ban\n   duration: 4h\non_success: break\n' >"$dir/profiles.yaml"
cat >"$dir/config.yaml" <<YAML
common: {daemonize: false, log_media: stdout, log_level: error, working_dir: .}
config_paths: {config_dir: $dir/, data_dir: $dir/data/, simulation_path: $dir/simulation.yaml, hub_dir: $dir/hub/, index_path: $dir/hub/.index.json, notification_dir: $dir/notifications/, plugin_dir: /usr/lib/crowdsec/plugins/}
db_config: {type: sqlite, db_path: $dir/data/crowdsec.db, use_wal: false}
api:
  client: {credentials_path: $dir/local_api_credentials.yaml}
  server: {log_level: error, listen_uri: 127.0.0.1:18488, profiles_path: $dir/profiles.yaml, trusted_ips: [127.0.0.1]}
prometheus: {enabled: false}
YAML
crowdsec -c "$dir/config.yaml" -no-cs >/dev/null 2>&1 &
started_pids+=($!)
for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:18488/ && break; sleep 0.1; done
cscli -c "$dir/config.yaml" machines add bench --password bench-password-0123456789 \
  -f "$dir/local_api_credentials.yaml" --url http://127.0.0.1:18488 >/dev/null 2>&1
cscli -c "$dir/config.yaml" bouncers add quagmire -k bench-bouncer-key-0123456789 >/dev/null 2>&1
python3 - "$decisions" "$dir/decisions.json" <<'PY'
import json, sys
n = int(sys.argv[1])
rows = [{"value": f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}", "scope": "Ip", "type": "ban",
         "duration": "24h", "reason": "bench"} for i in range(n)]
json.dump(rows, open(sys.argv[2], "w"))
PY
cscli -c "$dir/config.yaml" decisions import -i "$dir/decisions.json" >/dev/null 2>&1
printf 'crowdsec {\n    url "http://127.0.0.1:18488"\n    bouncer-key-env "BENCH_CROWDSEC_KEY"\n    pull-seconds 5\n}\n' >"$dir/quagmire.kdl"
BENCH_CROWDSEC_KEY=bench-bouncer-key-0123456789 start_quagmire 18482 18483 --config "$dir/quagmire.kdl"
crowdsec_pid=${started_pids[-1]}
for _ in $(seq 300); do
  loaded=$(curl -s http://127.0.0.1:18482/metrics | awk '/^quagmire_crowdsec_decisions / {print $2}')
  [ "${loaded:-0}" -ge "$decisions" ] && break
  sleep 0.2
done
echo "decisions in force: ${loaded:-0}"
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

run() { wrk_verdicts "$1"; }
declare -a without with
for round in 1 2 3; do
  read -r rate p50 p99 < <(run http://127.0.0.1:18480)
  without+=("$rate"); echo "round $round without CrowdSec: $rate req/s, p50 $p50, p99 $p99"
  read -r rate p50 p99 < <(run http://127.0.0.1:18482)
  with+=("$rate"); echo "round $round with $decisions decisions: $rate req/s, p50 $p50, p99 $p99"
done
plain_kib=$(rss "$plain_pid"); crowdsec_kib=$(rss "$crowdsec_pid")
python3 - "$plain_kib" "$crowdsec_kib" "$decisions" "${without[@]}" "${with[@]}" <<'PY'
import sys
plain, crowd, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
a = [float(x) for x in sys.argv[4:7]]; b = [float(x) for x in sys.argv[7:10]]
print(f"without mean {sum(a)/3:.0f} req/s, with mean {sum(b)/3:.0f} req/s, ratio with/without {sum(b)/sum(a):.2f}")
print(f"resident memory after the rounds: {plain/1024:.1f} MiB without, {crowd/1024:.1f} MiB with {n} decisions: "
      f"{(crowd - plain) * 1024 / n:.0f} bytes per decision")
PY
