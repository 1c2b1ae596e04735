#!/usr/bin/env bash
# diagnose at scale: how long `kubectl runner diagnose -A` takes on N
# settled Runners next to `kubectl get runners,deploy,svc,ing,pods -A`, the
# same objects read by kubectl. Prints figures, asserts none.
#
#   bash benches/diagnose-scale.sh
#
# On its own bench cluster ("diagbench", recreated and stopped at the end):
# the manager creates the children of N Runners (replicas 1) and is stopped
# once every one is Ready; then each command runs RUNNER_DIAG_RUNS times in
# turn, and the medians, their ratio, and diagnose with `--churn-window 0`
# (its reads alone, without the one-second second look) are printed.
#
# Environment: RUNNER_DIAG_N (default 1000), RUNNER_DIAG_RUNS (default 5),
# RUNNER_BENCH_IMAGE, and those of benches/lib.sh (RUNNER_BENCH_PROFILE,
# RUNNER_BENCH_KEEP, RUNNER_BENCH_REUSE, CARGO_TARGET_DIR).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

N=${RUNNER_DIAG_N:-1000}
RUNS=${RUNNER_DIAG_RUNS:-5}
IMAGE=${RUNNER_BENCH_IMAGE:-bench:1}
NS=diag-scale
case $N in '' | *[!0-9]* | 0) echo "error: RUNNER_DIAG_N must be a positive integer, got '$N'" >&2; exit 2 ;; esac
case $RUNS in '' | *[!0-9]* | 0) echo "error: RUNNER_DIAG_RUNS must be a positive integer, got '$RUNS'" >&2; exit 2 ;; esac

step() { printf '==> [diagnose-scale] %s\n' "$*" >&2; }
work=$(mktemp -d)
export RUNNER_BENCH_CLUSTER=diagbench RUNNER_BENCH_MANAGERS=rust
# shellcheck source=benches/lib.sh
source "$root/benches/lib.sh"
export RUNNER_CLUSTER_NODES=$(((N + 99) / 100))
export RUNNER_CLUSTER_CLIENT_QPS=${RUNNER_CLUSTER_CLIENT_QPS:-200}
export RUNNER_CLUSTER_AUDIT=0
export RUNNER_BENCH_TIMEOUT=${RUNNER_BENCH_TIMEOUT:-3600}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  manager_stop
  if [ "$rc" != 0 ] && [ -f "$work/rust.log" ]; then
    step "failed (exit $rc); last lines of the manager's log:"
    tail -n 20 "$work/rust.log" >&2 || true
  fi
  cluster_down
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# seconds CMD...: wall-clock seconds of one run (output discarded; diagnose
# exits 3 on findings, which is not a failure of the bench).
seconds() {
  local t0 t1 rc=0
  t0=$(date +%s%N)
  "$@" > /dev/null 2> "$work/last.err" || rc=$?
  t1=$(date +%s%N)
  if ((rc != 0 && rc != 3)); then
    step "'$*' exited $rc:"
    tail -n 5 "$work/last.err" >&2
    return 1
  fi
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", (b - a) / 1e9 }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

build_all bench_runners
cluster_up
have=$(kubectl get runners -n "$NS" --no-headers 2> /dev/null | wc -l)
if ((have < N)); then
  manager_start rust "$work/rust.log"
  kubectl create namespace "$NS" > /dev/null 2>&1 || true
  step "creating $((N - have)) Runners in $NS, waiting until the manager made their children and all are Ready"
  t=$SECONDS
  "$work/bench_runners" create "$NS" $((N - have)) "$IMAGE" > "$work/create.kv" ||
    step "warning: not all Runners were Ready in time"
  step "$N Runners settled in $((SECONDS - t)) s"
  # Stopped, so the figures are of the reads alone, not of a busy manager.
  manager_stop
fi

diag=("$work/kubectl-runner" diagnose -A)
kget=(kubectl get runners,deploy,svc,ing,pods -A)
step "warming up (one run each)"
seconds "${diag[@]}" > /dev/null
seconds "${kget[@]}" > /dev/null
: > "$work/diag" && : > "$work/kget" && : > "$work/diag0"
for i in $(seq "$RUNS"); do
  seconds "${diag[@]}" >> "$work/diag"
  seconds "${kget[@]}" >> "$work/kget"
  seconds "${diag[@]}" --churn-window 0 >> "$work/diag0"
  step "run $i/$RUNS: diagnose $(tail -n 1 "$work/diag") s, kubectl $(tail -n 1 "$work/kget") s," \
    "diagnose --churn-window 0 $(tail -n 1 "$work/diag0") s"
done
d=$(median < "$work/diag")
k=$(median < "$work/kget")
d0=$(median < "$work/diag0")
printf '\ndiagnose at scale: %s Runners, median of %s runs (commit %s, %s build)\n' "$N" "$RUNS" "$bench_commit" "${RUNNER_BENCH_PROFILE:-release}"
printf '  %-52s %8s s\n' "kubectl runner diagnose -A" "$d"
printf '  %-52s %8s s\n' "kubectl get runners,deploy,svc,ing,pods -A" "$k"
printf '  %-52s %8s s\n' "kubectl runner diagnose -A --churn-window 0" "$d0"
awk -v d="$d" -v k="$k" -v d0="$d0" 'BEGIN {
  printf "  ratio diagnose / kubectl %.2fx (target 1.5x); without the churn window %.2fx\n", d / k, d0 / k }'
