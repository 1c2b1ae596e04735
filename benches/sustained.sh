#!/usr/bin/env bash
# Sustained load: how long a spec change takes to reach a Runner's children
# while other Runners keep changing, and how many changes per second one
# manager keeps up with. Prints figures, asserts none.
#
#   bash benches/sustained.sh
#
# For each manager in turn (this one, then the controller-runtime baseline
# "twin"; one at a time, each on a fresh bench cluster with the apiserver
# audit log on): the manager creates N Runners and settles; then
# examples/sustained_load.rs patches their specs (replicas, image, port;
# round-robin over the Runners) at each rate for SECONDS, waiting after each
# rate until every change is observed. Per rate, one table row:
#   change -> child written  p50/p99/max: audit log, the Runner PATCH
#       (completed) to the manager's first successful Deployment, Service or
#       Ingress write for that Runner received after it (completed)
#   change -> observed       p50/p99: the PATCH sent to the watch showing
#       status.observedGeneration at least that generation
#   CPU (cores, /proc/PID/stat over the load phase), RSS at its end and its
#       sampled peak, failed writes (audit: the manager's writes answered
#       >= 400 during the rate's window), manager writes per change (audit),
#       reconciles per change (/metrics delta, drain included)
# The sustained throughput is the highest rate whose change -> child written
# p99 stays under 1 s with every change observed. A ratio table follows.
#
# Environment: RUNNER_SUSTAINED_N (Runners, default 1000),
# RUNNER_SUSTAINED_RATES (changes/s, default "25 50 100 200 400"),
# RUNNER_SUSTAINED_SECONDS (per rate, default 60), RUNNER_SUSTAINED_PAUSE
# (seconds between rates, default 5), RUNNER_LOAD_DRAIN (seconds to wait for
# the last changes, default 60), RUNNER_BENCH_IMAGE, RUNNER_SUSTAINED_OUT (a
# directory to keep the raw figures and audit logs in), and those of
# benches/lib.sh (RUNNER_BENCH_CLUSTER, RUNNER_BENCH_PROFILE,
# RUNNER_BASELINE_DIR, RUNNER_BENCH_MANAGERS, ...).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

N=${RUNNER_SUSTAINED_N:-1000}
RATES=${RUNNER_SUSTAINED_RATES:-25 50 100 200 400}
SECS=${RUNNER_SUSTAINED_SECONDS:-60}
PAUSE=${RUNNER_SUSTAINED_PAUSE:-5}
IMAGE=${RUNNER_BENCH_IMAGE:-bench:1}
NS=runner-sustained

step() { printf '==> [sustained] %s\n' "$*" >&2; }
work=$(mktemp -d)
# shellcheck source=benches/lib.sh
source "$root/benches/lib.sh"
# Up to two replicas per Runner while changes run; kwok nodes take 110 Pods.
export RUNNER_CLUSTER_NODES=$(((2 * N + 99) / 100))
export RUNNER_CLUSTER_AUDIT=runners
export RUNNER_CLUSTER_CLIENT_QPS=${RUNNER_CLUSTER_CLIENT_QPS:-200}
out=${RUNNER_SUSTAINED_OUT:-$work/out}
mkdir -p "$out"

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  manager_stop
  if [ "$rc" != 0 ] && [ -n "$manager_name" ] && [ -f "$out/$manager_name/manager.log" ]; then
    step "failed (exit $rc); last lines of the $manager_name manager's log:"
    tail -n 20 "$out/$manager_name/manager.log" >&2
  fi
  cluster_down
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

build_all bench_runners sustained_load
load_start=$(cut -d ' ' -f 1-3 /proc/loadavg)

for m in $MANAGERS; do
  mkdir -p "$out/$m"
  cluster_up
  manager_start "$m" "$out/$m/manager.log"
  case $m in rust) echo kubectl-runner/ ;; *) echo runner-twin ;; esac > "$out/$m/agent"
  kubectl create namespace "$NS" > /dev/null
  step "$m: creating $N Runners, waiting until all are Ready"
  "$work/bench_runners" create "$NS" "$N" "$IMAGE" > "$out/$m/create.kv"
  step "$m: settled after $(wait_quiet "$N") s more; $(rss_mib "$manager_pid") MiB RSS"
  for rate in $RATES; do
    step "$m: $rate changes/s for $SECS s"
    before=$(reconciles)
    "$work/sustained_load" "$NS" "$rate" "$SECS" "$manager_pid" > "$out/$m/rate-$rate.kv" ||
      step "$m: not every change at $rate/s was observed (see the table)"
    echo "reconciles=$(($(reconciles) - before))" >> "$out/$m/rate-$rate.kv"
    sleep "$PAUSE"
  done
  manager_stop
  sleep 2 # the batch audit backend flushes every second
  cp "$state/logs/audit.log" "$out/$m/audit.log"
  cluster_down
done

echo
echo "sustained load: N=$N Runners, ${SECS}s per rate, $(nproc) cores, load average at start $load_start," \
  "profile ${RUNNER_BENCH_PROFILE:-release}, commit $bench_commit"
# shellcheck disable=SC2086 # one argument per manager
python3 "$root/benches/sustained.py" "$out" $MANAGERS
[ -n "${RUNNER_SUSTAINED_OUT:-}" ] && step "raw figures and audit logs: $out"
exit 0
