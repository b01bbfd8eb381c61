#!/usr/bin/env bash
# What the shared client store (Redis) costs a verdict, side by side in one run (two alternating
# rounds): the bare axum "200 OK" baseline, quagmire with its local records only, and quagmire
# sharing client state through a redis-server on this machine (persistence off). All three get
# bench/verdict.lua's requests (1,000 rotating clients). For the store rounds it also reports
# Redis's own counts per verdict: calls from quagmire (EVALSHA, EVAL, PING, ...) and commands
# executed (those calls plus the commands each update script runs inside Redis).
#
# Then a spray: SPRAY_SECONDS (default 60) of verdicts from clients never seen before
# (bench/clients.lua over 16,777,216 addresses, each once) through the store replica, and Redis's memory per client (used_memory before
# and after, over the clients added).
#
# Needs wrk and redis-server (apt-get install wrk redis-server).
# usage: [SPRAY_SECONDS=N] bench/wrk-store.sh [SECONDS_PER_ROUND] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-32}
spray_seconds=${SPRAY_SECONDS:-60}
redis_port=18469
command -v redis-server >/dev/null || { echo "redis-server is missing: apt-get install redis-server" >&2; exit 1; }
source bench/serve.sh
redis_dir=$(mktemp -d)
cleanup_dirs+=("$redis_dir")
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$redis_dir" >/dev/null &
started_pids+=($!)
for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
start_servers 18450 18451 18459
printf 'clients {\n    store "redis://127.0.0.1:%s/0"\n}\n' "$redis_port" >"$redis_dir/store.kdl"
start_quagmire 18452 18453 --config "$redis_dir/store.kdl"

commands() { redis-cli -p "$redis_port" info stats | awk -F: '/^total_commands_processed/ {print $2+0}'; }
# Calls a client made: every command but those run inside scripts (by name) and INFO itself.
calls() {
  redis-cli -p "$redis_port" info commandstats | tr -d '\r' | awk -F'[_:=,]' '
    /^cmdstat_/ && $2 !~ /^(time|hmget|hset|hsetnx|pexpire|set|zadd|zremrangebyscore|zremrangebyrank|info)$/ {n += $4}
    END {print n+0}'
}
run() { # URL [SCRIPT] -> "requests/s p50 p99 requests"
  wrk -t1 -c"$connections" -d"${seconds}s" --latency -s "${2:-bench/verdict.lua}" "$1" |
    awk '/Requests\/sec/ {r=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} / requests in / {n=$1} END {print r, p50, p99, n}'
}
declare -a base_rates local_rates store_rates
for round in 1 2; do
  read -r rate p50 p99 _ < <(run http://127.0.0.1:18459)
  base_rates+=("$rate"); echo "round $round baseline: $rate req/s, p50 $p50, p99 $p99"
  read -r rate p50 p99 _ < <(run http://127.0.0.1:18450)
  local_rates+=("$rate"); echo "round $round local:    $rate req/s, p50 $p50, p99 $p99"
  before=$(commands); before_calls=$(calls)
  read -r rate p50 p99 requests < <(run http://127.0.0.1:18452)
  after=$(commands); after_calls=$(calls)
  store_rates+=("$rate")
  echo "round $round store:    $rate req/s, p50 $p50, p99 $p99; per verdict: Redis calls" \
    "$(python3 -c "print(f'{($after_calls - $before_calls) / $requests:.3f}, commands executed {($after - $before) / $requests:.3f}')")"
done
python3 - "${base_rates[@]}" "${local_rates[@]}" "${store_rates[@]}" <<'PY'
import sys
b, l, s = ([float(x) for x in sys.argv[i:i + 2]] for i in (1, 3, 5))
print(f"baseline mean {sum(b)/2:.0f} req/s; local {sum(l)/2:.0f} ({sum(l)/sum(b):.2f} of baseline); "
      f"store {sum(s)/2:.0f} ({sum(s)/sum(b):.2f} of baseline, {sum(s)/sum(l):.2f} of local)")
PY

# The spray: Redis memory per client.
redis-cli -p "$redis_port" flushall >/dev/null
memory() { redis-cli -p "$redis_port" info memory | awk -F: '/^used_memory:/ {print $2+0}'; }
keys() { redis-cli -p "$redis_port" dbsize; }
sleep 1
before_memory=$(memory)
before=$(commands); before_calls=$(calls)
wrk -t1 -c"$connections" -d"${spray_seconds}s" --latency -s bench/clients.lua http://127.0.0.1:18452 -- 16777216 |
  awk '/Requests\/sec/ {print "spray: " $2 " verdicts/s"} /^ +99%/ {print "spray p99: " $2} / requests in / {print "spray: " $1 " verdicts"}'
sleep 2 # the last round of updates
after=$(commands); after_calls=$(calls)
after_memory=$(memory)
key_count=$(keys)
python3 - "$before_memory" "$after_memory" "$key_count" "$before" "$after" "$before_calls" "$after_calls" <<'PY'
import sys
before, after, clients, c0, c1, k0, k1 = (int(x) for x in sys.argv[1:])
# One hash per client: none of the spray's clients has trap hits, so none has a user-agent key.
print(f"spray: {clients} clients in Redis, used_memory {before/2**20:.1f} MiB -> {after/2**20:.1f} MiB, "
      f"{(after - before) / clients:.0f} bytes per client; per new client: {(k1 - k0) / clients:.2f} Redis calls, "
      f"{(c1 - c0) / clients:.2f} commands executed")
PY
