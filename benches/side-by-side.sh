#!/usr/bin/env bash
# Benchmark: this manager against the controller-runtime baseline ("twin"),
# one at a time on one local control plane with the same load. Prints the
# baseline harness's table, per-Runner latencies from the apiserver audit
# log, the 1,000-Runner steady-state memory, and the ratios the manager is
# held to. Asserts nothing: it prints figures.
#
#   bash benches/side-by-side.sh
#
# The baseline (twin/ source, side-by-side.sh, steady-rss.sh,
# audit-latency.py) lives outside this repository: RUNNER_BASELINE_DIR,
# default ../shared/baseline next to the checkout. The twin is built from it
# with Go once and cached by a hash of its sources. Without the baseline only
# our own figures are printed (benches/manager-bench.sh is the Rust-only run).
#
# Environment: N (Runners created at once, default 100), STEADY_N (Runners
# held for the steady-state memory, default 1000; 0 skips), IDLE (seconds,
# default 30), RUNNER_BASELINE_DIR, CARGO_TARGET_DIR, OUT (JSON, default a
# temporary file).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

N=${N:-100}
STEADY_N=${STEADY_N:-1000}
IDLE=${IDLE:-30}
BASE=${RUNNER_BASELINE_DIR:-$root/../shared/baseline}
target=${CARGO_TARGET_DIR:-$root/target}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-runner-bench
export RUNNER_CLUSTER_NAME=bench
unset RUNNER_CLUSTER_STATE
export RUNNER_CLUSTER_AUDIT=1
# kwok nodes take 110 Pods each.
big=$((N > STEADY_N ? N : STEADY_N))
export RUNNER_CLUSTER_NODES=$(((big + 99) / 100))

step() { printf '==> [side-by-side] %s\n' "$*" >&2; }
work=$(mktemp -d)
OUT=${OUT:-$work/side-by-side.json}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  step "stopping the bench cluster"
  bash tests/cluster/down.sh > /dev/null 2>&1 || true
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "building the release manager"
cargo build --release --quiet --bin kubectl-runner
rust=$target/release/kubectl-runner

twin=
if [ -f "$BASE/side-by-side.sh" ] && [ -d "$BASE/twin" ] && command -v go > /dev/null; then
  hash=$(cd "$BASE/twin" && find . -type f \( -name '*.go' -o -name 'go.*' \) -print0 | sort -z |
    xargs -0 sha256sum | sha256sum | cut -c1-12)
  twin=$CACHE/runner-twin-$hash
  if [ ! -x "$twin" ]; then
    step "building the baseline twin from $BASE/twin (cold: ~5 min on 2 cores)"
    mkdir -p "$CACHE"
    (cd "$BASE/twin" && CGO_ENABLED=0 go build -o "$twin.tmp" ./cmd) && mv "$twin.tmp" "$twin"
  fi
else
  step "no baseline at $BASE (or no Go): measuring this manager alone"
fi

step "starting a fresh bench cluster ($RUNNER_CLUSTER_NODES fake nodes, audit log on)"
bash tests/cluster/down.sh > /dev/null 2>&1 || true
# Two steps, so a failing up.sh stops the script (eval "$(...)" would not).
kubeconfig_export=$(bash tests/cluster/up.sh)
eval "$kubeconfig_export"
export KUBECONFIG
state=$(dirname "$KUBECONFIG")
# The baseline's scripts call `kubectl`: the one built with the control plane.
PATH="$(bash tests/cluster/build.sh 2> /dev/null | tail -n 1):$PATH"
export PATH
kubectl apply --server-side -f manifests/crd.yaml > /dev/null
kubectl wait --for=condition=Established crd/runners.lab.cloudlab.training --timeout=60s > /dev/null

if [ -f "$BASE/side-by-side.sh" ]; then
  N=$N IDLE=$IDLE OUT=$OUT WORK=$work/raw bash "$BASE/side-by-side.sh" "$rust" "$twin" | tee "$work/table.txt"
  if [ -f "$BASE/audit-latency.py" ]; then
    step "per-Runner latencies and writes by user agent (apiserver audit log)"
    sleep 2 # the batch audit backend flushes every second
    python3 "$BASE/audit-latency.py" "$state/logs/audit.log" bench-rust bench-twin || true
  fi
  python3 "$root/benches/ratios.py" "$OUT" "$state/logs/audit.log"
else
  step "running benches/manager-bench.sh instead"
  bash benches/manager-bench.sh
fi

if [ "$STEADY_N" -gt 0 ] && [ -f "$BASE/steady-rss.sh" ] && [ -n "$twin" ]; then
  step "steady-state memory with $STEADY_N Runners"
  N=$STEADY_N WORK=$work bash "$BASE/steady-rss.sh" "$rust" "$twin" | tee "$work/steady.txt"
  python3 "$root/benches/ratios.py" --steady "$work/steady.txt"
fi
step "raw numbers: $OUT"
