# Shared by the bench scripts (sourced, not run): builds the release binaries and starts quagmire
# and the bare axum baseline, stopping both when the script exits.
#   start_servers VERDICT_PORT TRAP_PORT BASELINE_PORT
start_servers() {
  command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }
  cargo build --release --quiet --bin quagmire --example baseline
  QUAGMIRE_SECRET=bench-secret-0123456789abcdef RUST_LOG=warn \
    target/release/quagmire serve --listen "127.0.0.1:$1" --trap-listen "127.0.0.1:$2" &
  quagmire_pid=$!
  target/release/examples/baseline "127.0.0.1:$3" &
  baseline_pid=$!
  trap 'kill $quagmire_pid $baseline_pid 2>/dev/null || true' EXIT
  for port in "$1" "$3"; do
    for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/health" -o /dev/null && break; sleep 0.1; done
  done
}
