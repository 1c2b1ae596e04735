#!/usr/bin/env bash
# Sustained load: how long a spec change takes to reach a Runner's children
# while other Runners keep changing, how many changes per second one manager
# keeps up with, and what each change costs it. Prints figures, asserts none.
#
#   bash benches/sustained.sh
#
# Managers, one at a time, each on a fresh bench cluster with the apiserver
# audit log on (tests/cluster/up.sh, RUNNER_CLUSTER_AUDIT=runners): this one
# ("rust", DEFAULT_CONCURRENCY passes in flight, or RUNNER_MANAGER_ARGS'
# --concurrency); the controller-runtime baseline "twin" as the kubebuilder
# scaffold runs it (1 reconcile in flight unless RUNNER_TWIN_ARGS says
# otherwise); and "twin-cN", the twin with --max-concurrent-reconciles=N,
# N being ours, so the ratios compare like with like. Each creates N Runners
# and settles; then examples/sustained_load.rs patches their specs
# (replicas, image, port; round-robin over the Runners) at each rate for
# SECONDS.
#
# Counting window, per rate: from the first change of the rate to the end
# of its drain, which is when every change has been observed
# (status.observedGeneration), every Deployment in the namespace is rolled
# out, no Runner, Deployment, Service or Ingress event came for 2 s and the
# manager's pass counter did not move for 2 s (or after RUNNER_LOAD_DRAIN
# seconds, default 120; the row then says so). Writes of rollouts that
# finish after the last change are counted. One row per manager and rate:
#   writes/chg  the manager's writes in the window (audit log, its
#       User-Agent: creates, updates, patches and deletes of Runners and their
#       status, Deployments, Services, Ingresses, PodDisruptionBudgets, Events
#       and Leases, failed ones included) / changes sent
#   reads/chg   its GETs and LISTs of any resource in the window (audit log,
#       its User-Agent; watches not counted) / changes sent
#   passes/chg  its reconcile passes over the window (/metrics: ours
#       runner_reconciles_total, the twin's controller_runtime_reconcile_total,
#       every result) / changes sent
#   child p50/p99/max  audit log: the Runner PATCH (completed) to the
#       manager's first successful Deployment, Service or Ingress write for
#       that Runner received after the PATCH was (completed; 0 when it
#       completed first: the watch can deliver a change, and the manager
#       write for it, before the apiserver logs the PATCH complete)
#   status p50/p99  the same, to the manager's first successful status
#       write: the manager's share of change -> observed
#   observed p50/p99  the PATCH sent to the watch showing
#       status.observedGeneration at least that generation
#   failed      the manager's writes answered >= 400 in the window
#   CPU (cores, /proc/PID/stat over the load phase, not the drain), RSS at
#       its end and its sampled peak, drain (s)
# The sustained throughput is the highest rate whose change -> child written
# p99 stays under 1 s with every change observed. Then each manager's writes
# and reads by resource and verb, and a ratio table: ours against each twin
# at the same rate, with the targets.
#
# Environment: RUNNER_SUSTAINED_N (Runners, default 1000),
# RUNNER_SUSTAINED_RATES (changes/s, default "25 50 100 200 400"),
# RUNNER_SUSTAINED_SECONDS (per rate, default 60), RUNNER_SUSTAINED_PAUSE
# (seconds between rates, default 5), RUNNER_LOAD_DRAIN (most seconds a
# drain takes, default 120), RUNNER_BENCH_IMAGE, RUNNER_SUSTAINED_OUT (a
# directory to keep the raw figures and audit logs in), and those of
# benches/lib.sh (RUNNER_BENCH_CLUSTER, RUNNER_BENCH_PROFILE,
# RUNNER_BASELINE_DIR, RUNNER_BENCH_MANAGERS (default "rust twin twin-cN"),
# RUNNER_MANAGER_ARGS, RUNNER_TWIN_ARGS, ...).
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
# Our passes in flight: --concurrency N in RUNNER_MANAGER_ARGS, else the default.
ours=$(sed -n 's/^pub const DEFAULT_CONCURRENCY: u16 = \([0-9]*\);/\1/p' src/manager/controller.rs)
read -ra margs <<< "${RUNNER_MANAGER_ARGS:-}"
for i in "${!margs[@]}"; do
  case ${margs[i]} in --concurrency=*) ours=${margs[i]#*=} ;; --concurrency) ours=${margs[i + 1]:-$ours} ;; esac
done
[ -n "${RUNNER_BENCH_MANAGERS:-}" ] || MANAGERS="rust twin twin-c$ours"
# The twin's reconciles in flight by default: 1, unless RUNNER_TWIN_ARGS sets it.
twin_default=$(echo " ${RUNNER_TWIN_ARGS:-} " | sed -n 's/.* --*max-concurrent-reconciles[= ]\([0-9]*\) .*/\1/p')

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
  rm -f "$out/$m"/rate-*.kv # a kept directory's figures of an earlier run
  cluster_up
  manager_start "$m" "$out/$m/manager.log"
  case $m in rust) echo kubectl-runner/ ;; *) echo runner-twin ;; esac > "$out/$m/agent"
  case $m in rust) echo "$ours" ;; twin-c*) echo "${m#twin-c}" ;; *) echo "${twin_default:-1}" ;; esac > "$out/$m/concurrency"
  kubectl create namespace "$NS" > /dev/null
  step "$m: creating $N Runners, waiting until all are Ready"
  "$work/bench_runners" create "$NS" "$N" "$IMAGE" > "$out/$m/create.kv"
  step "$m: settled after $(wait_quiet "$N") s more; $(rss_mib "$manager_pid") MiB RSS"
  for rate in $RATES; do
    step "$m: $rate changes/s for $SECS s, then the drain"
    "$work/sustained_load" "$NS" "$rate" "$SECS" "$manager_pid" "127.0.0.1:$metrics_port" "$(passes_metric)" \
      > "$out/$m/rate-$rate.kv" || step "$m: not every change at $rate/s was observed (see the table)"
    step "$m: $rate changes/s: drained in $(sed -n 's/^drain_s=//p' "$out/$m/rate-$rate.kv") s"
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
