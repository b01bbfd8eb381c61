#!/usr/bin/env bash
# The verdict path side by side with iocaine's deciding path and a bare axum "200 OK", in one
# run: wrk -t2 -c50 (issue 28's setting), the servers one at a time, in alternating rounds, all
# sent bench/verdict.lua's browser page views from 16,384 rotating client addresses. Per server
# and round: requests/s, and the CPU time the server used per request (utime + stime from /proc
# over the round: steadier than requests/s on a noisy machine). A fourth server is quagmire with
# a ruleset of no rules (the ceiling for any ruleset). Then each server's resident memory after
# its rounds, and quagmire's latency at light load (wrk -t1 -c4).
#
# iocaine is not built here: IOCAINE=path/to/iocaine runs it (3.5.1 was built with
#   apt-get install libnftables-dev libclang-dev
#   cargo install iocaine --version 3.5.1 --root /tmp/iocaine-3.5.1
# about 5-15 minutes on two cores); its built-in request handler decides, and answers 421 ("not
# a bot: pass it on") to these requests, which carry Sec-Fetch-Mode (bench/README.md). Without
# IOCAINE the iocaine rows are left out.
#
# usage: [IOCAINE=BINARY] bench/wrk-iocaine.sh [SECONDS_PER_ROUND] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
rounds=${2:-3}
source bench/serve.sh
start_servers 18540 18541 18549
quagmire_pid=${started_pids[0]}
baseline_pid=${started_pids[1]}
no_rules=$(mktemp -d)
cleanup_dirs+=("$no_rules")
echo 'return {}' >"$no_rules/none.lua"
printf 'rules {\n    script "%s/none.lua"\n}\n' "$no_rules" >"$no_rules/none.kdl"
start_quagmire 18542 18543 --config "$no_rules/none.kdl"
no_rules_pid=${started_pids[-1]}

servers=("bare axum:$baseline_pid:18549" "quagmire /verdict:$quagmire_pid:18540" "quagmire, no rules:$no_rules_pid:18542")
if [ -n "${IOCAINE:-}" ]; then
  iocaine_dir=$(mktemp -d)
  cleanup_dirs+=("$iocaine_dir")
  mkdir "$iocaine_dir/state"
  # A config file replaces iocaine's embedded defaults: this is its default config (one HTTP
  # server, the built-in handler) with a state folder of its own.
  cat >"$iocaine_dir/iocaine.kdl" <<EOF
state-directory "$iocaine_dir/state"
instance-id "bench"
http-server default {
    bind "127.0.0.1:18548"
    use handler-from=default
}
declare-handler default language=roto
EOF
  RUST_LOG=warn "$IOCAINE" --config-path "$iocaine_dir/iocaine.kdl" start >"$iocaine_dir/log" 2>&1 &
  started_pids+=($!)
  iocaine_pid=$!
  for _ in $(seq 100); do
    curl -s -o /dev/null http://127.0.0.1:18548/ && break
    sleep 0.1
  done
  status=$(curl -s -o /dev/null -w '%{http_code}' -H 'User-Agent: Mozilla/5.0 Chrome/130.0.0.0' \
    -H 'Sec-Fetch-Mode: navigate' http://127.0.0.1:18548/)
  [ "$status" = 421 ] || { echo "iocaine answered $status, not 421, to a browser" >&2; exit 1; }
  servers+=("iocaine 3.5.1:$iocaine_pid:18548")
fi

hz=$(getconf CLK_TCK)
results=$(mktemp)
cleanup_dirs+=("$results")
for round in $(seq "$rounds"); do
  for server in "${servers[@]}"; do
    IFS=: read -r name pid port <<<"$server"
    before=$(cpu_ticks "$pid")
    out=$(wrk -t2 -c50 -d"${seconds}s" -s bench/verdict.lua "http://127.0.0.1:$port")
    after=$(cpu_ticks "$pid")
    requests=$(awk '/requests in/ {print $1}' <<<"$out")
    line=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$requests" -v s="$seconds" \
      'BEGIN {printf "%.0f %.2f", n / s, t / hz / n * 1e6}')
    echo "$name|$line" >>"$results"
    echo "round $round $name: ${line% *} req/s, ${line#* } us CPU per request"
  done
done
for server in "${servers[@]}"; do
  IFS=: read -r name pid port <<<"$server"
  echo "$name: $(awk '/VmRSS/ {print $2 / 1024 " MiB"}' "/proc/$pid/status") resident after its rounds"
done
python3 - "$results" <<'PY'
import sys, collections
rates, cpu = collections.defaultdict(list), collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, figures = line.rstrip("\n").split("|")
    rate, us = figures.split()
    rates[name].append(float(rate)); cpu[name].append(float(us))
mean = lambda xs: sum(xs) / len(xs)
bare = mean(rates["bare axum"])
ioc = mean(rates["iocaine 3.5.1"]) if "iocaine 3.5.1" in rates else None
print("| | req/s (rounds) | mean | CPU us per request (mean) | vs bare axum | vs iocaine |")
print("|---|---|---|---|---|---|")
for name in rates:
    rounds = ", ".join(f"{r / 1000:.1f}k" for r in rates[name])
    vs_ioc = f"{mean(rates[name]) / ioc:.2f}" if ioc else "-"
    print(f"| {name} | {rounds} | {mean(rates[name]) / 1000:.1f}k | {mean(cpu[name]):.2f} | "
          f"{mean(rates[name]) / bare:.2f} | {vs_ioc} |")
PY
echo "light load, quagmire /verdict (wrk -t1 -c4, ${seconds}s):"
wrk -t1 -c4 -d"${seconds}s" --latency -s bench/verdict.lua http://127.0.0.1:18540 |
  awk '/Requests\/sec/ {r=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} END {print "  " r " req/s, p50 " p50 ", p99 " p99}'
