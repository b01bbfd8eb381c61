# Shared by the bench scripts (sourced, not run): builds the release binaries and starts the
# servers they compare, stopping every one of them (and removing `cleanup_dirs`) on exit.
#   start_servers VERDICT_PORT TRAP_PORT BASELINE_PORT   quagmire on its defaults, and the baseline
#   start_quagmire VERDICT_PORT TRAP_PORT [ARGS...]      another quagmire, e.g. with --config
#   start_baseline PORT [BYTES]                          another baseline, e.g. with a fixed body
started_pids=()
cleanup_dirs=()
trap 'kill "${started_pids[@]}" 2>/dev/null || true; rm -rf "${cleanup_dirs[@]}"' EXIT

# CPU time process PID has used so far (utime + stime), in clock ticks (getconf CLK_TCK).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# Waits until URL answers; fails with a message if it never does.
wait_until_up() {
  for _ in $(seq 100); do curl -fs "$1" -o /dev/null && return 0; sleep 0.1; done
  echo "no answer from $1 after 10 s" >&2
  exit 1
}

start_quagmire() {
  local verdict_port=$1 trap_port=$2
  shift 2
  QUAGMIRE_SECRET=bench-secret-0123456789abcdef RUST_LOG=warn \
    target/release/quagmire serve "$@" --listen "127.0.0.1:$verdict_port" \
    --trap-listen "127.0.0.1:$trap_port" &
  started_pids+=($!)
  wait_until_up "http://127.0.0.1:$verdict_port/health"
}

start_baseline() {
  target/release/examples/baseline "127.0.0.1:$1" ${2:+"$2"} &
  started_pids+=($!)
  wait_until_up "http://127.0.0.1:$1/"
}

start_servers() {
  command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }
  cargo build --release --quiet --bin quagmire --example baseline
  start_quagmire "$1" "$2"
  start_baseline "$3"
}

# /verdict requests/s, p50 and p99 at URL, sending bench/verdict.lua's browser page views for
# $seconds over $connections connections (script arguments may follow URL after --).
wrk_verdicts() {
  wrk_rate bench/verdict.lua "$@"
}

# Requests/s, p50 and p99 at URL for wrk script SCRIPT, for $seconds over $connections
# connections, with the script's own arguments after URL: "requests/s p50 p99".
#   wrk_rate SCRIPT URL [-- SCRIPT_ARGS...]
wrk_rate() {
  local script=$1
  shift
  wrk -t1 -c"$connections" -d"${seconds}s" --latency -s "$script" "$@" |
    awk '/Requests\/sec/ {r=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} END {print r, p50, p99}'
}
