#!/usr/bin/env bash
# Sustained load: how long a spec change takes to reach a Runner's children
# while other Runners keep changing, how many changes per second one manager
# keeps up with, and what each change costs it. Prints figures, asserts none.
#
#   bash benches/sustained.sh
#
# Managers, one at a time, on one bench cluster with the apiserver audit log
# on (tests/cluster/up.sh, RUNNER_CLUSTER_AUDIT=runners): this one ("rust",
# DEFAULT_CONCURRENCY passes in flight, or RUNNER_MANAGER_ARGS'
# --concurrency); its variants ("rust-NAME", RUNNER_BENCH_VARIANTS: the same
# binary with more arguments, e.g. another design behind a flag); the
# controller-runtime baseline "twin" as the kubebuilder scaffold runs it (1
# reconcile in flight unless RUNNER_TWIN_ARGS says otherwise); and
# "twin-cN", the twin with --max-concurrent-reconciles=N, N being ours, so
# the ratios compare like with like. Each run: the manager starts, N Runners
# are created in the namespace runner-sustained and it settles on them;
# examples/sustained_load.rs patches their specs (replicas, image, port;
# round-robin over the Runners) at each rate for SECONDS; then the namespace
# is deleted with the manager still running (it clears its own finalizers)
# and waited for, so the next run starts on an empty cluster with nothing of
# another manager's left; the manager stops and the audit log's lines of the
# run are kept apart.
#
# Repeat mode (RUNNER_SUSTAINED_REPEAT=K, default 1): one run of every
# manager K times over, the order rotating by one manager per round (with
# two managers: alternating), so the machine's drift over time and the first
# run on a fresh cluster fall to no one manager. One cluster for all runs:
# each run leaves the cluster as it found it, and a cluster started per run
# would add its own start-up to the spread. With K > 1 the tables give, per
# rate and manager, each figure's median and spread (min-max) over the runs,
# and ratios of medians only where the two spreads do not overlap ("~"
# where they do); with K = 1 the tables are one run's, as before. Two alike
# managers' spreads miss each other by chance 1 time in 3 with K = 2, in 10
# with K = 3 and in 126 with K = 5 (per figure): K = 5 to decide on a ratio.
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
# RUNNER_SUSTAINED_REPEAT (runs of each manager, default 1),
# RUNNER_SUSTAINED_RATES (changes/s, default "25 50 100 200 400"),
# RUNNER_SUSTAINED_SECONDS (per rate, default 60), RUNNER_SUSTAINED_PAUSE
# (seconds between rates, default 5), RUNNER_LOAD_DRAIN (most seconds a
# drain takes, default 120), RUNNER_BENCH_IMAGE, RUNNER_SUSTAINED_OUT (a
# directory to keep the raw figures and audit logs in), and those of
# benches/lib.sh (RUNNER_BENCH_CLUSTER, RUNNER_BENCH_PROFILE,
# RUNNER_BASELINE_DIR, RUNNER_BENCH_MANAGERS (default "rust", "rust-NAME"
# per variant, "twin", "twin-cN"), RUNNER_BENCH_VARIANTS,
# RUNNER_MANAGER_ARGS, RUNNER_TWIN_ARGS, ...).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

N=${RUNNER_SUSTAINED_N:-1000}
RATES=${RUNNER_SUSTAINED_RATES:-25 50 100 200 400}
SECS=${RUNNER_SUSTAINED_SECONDS:-60}
PAUSE=${RUNNER_SUSTAINED_PAUSE:-5}
REPEAT=${RUNNER_SUSTAINED_REPEAT:-1}
IMAGE=${RUNNER_BENCH_IMAGE:-bench:1}
NS=runner-sustained
if ! [[ $REPEAT =~ ^[1-9][0-9]*$ ]]; then
  echo "error: RUNNER_SUSTAINED_REPEAT=$REPEAT: want a whole number of runs per manager, 1 or more" >&2
  exit 2
fi

step() { printf '==> [sustained] %s\n' "$*" >&2; }
# shellcheck source=benches/lib.sh
source "$root/benches/lib.sh"
work=$(mktemp -d)
# Up to two replicas per Runner while changes run; kwok nodes take 110 Pods.
export RUNNER_CLUSTER_NODES=$(((2 * N + 99) / 100))
export RUNNER_CLUSTER_AUDIT=runners
export RUNNER_CLUSTER_CLIENT_QPS=${RUNNER_CLUSTER_CLIENT_QPS:-200}
out=${RUNNER_SUSTAINED_OUT:-$work/out}
mkdir -p "$out"
default_concurrency=$(sed -n 's/^pub const DEFAULT_CONCURRENCY: u16 = \([0-9]*\);/\1/p' src/manager/controller.rs)
# in_flight ROW: passes in flight of our manager row ROW (rust or
# rust-VARIANT): the last --concurrency in its arguments, else the default.
in_flight() {
  local a=() i c=$default_concurrency
  mapfile -t a < <(manager_args "$1")
  for i in "${!a[@]}"; do
    case ${a[i]} in --concurrency=*) c=${a[i]#*=} ;; --concurrency) c=${a[i + 1]:-$c} ;; esac
  done
  echo "$c"
}
ours=$(in_flight rust)
[ -n "${RUNNER_BENCH_MANAGERS:-}" ] || MANAGERS="$ours_rows twin twin-c$ours"
# The twin's reconciles in flight by default: 1, unless RUNNER_TWIN_ARGS sets it.
twin_default=$(echo " ${RUNNER_TWIN_ARGS:-} " | sed -n 's/.* --*max-concurrent-reconciles[= ]\([0-9]*\) .*/\1/p')

run_dir=
cluster=0
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  manager_stop
  if [ "$rc" != 0 ] && [ -n "$run_dir" ] && [ -f "$run_dir/manager.log" ]; then
    step "failed (exit $rc); last lines of the $manager_name manager's log:"
    tail -n 20 "$run_dir/manager.log" >&2
  fi
  [ "$cluster" = 0 ] || cluster_down
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# run_once MANAGER ROUND: one run of MANAGER into $out/MANAGER/run-ROUND:
# create and settle N Runners, every rate, then delete the namespace and
# keep the audit log's lines written meanwhile.
run_once() {
  local m=$1 audit_from
  run_dir=$out/$m/run-$2
  mkdir -p "$run_dir"
  audit_from=$(stat -c %s "$state/logs/audit.log")
  manager_start "$m" "$run_dir/manager.log"
  case $m in rust*) echo kubectl-runner/ ;; *) echo runner-twin ;; esac > "$run_dir/agent"
  case $m in rust*) in_flight "$m" ;; twin-c*) echo "${m#twin-c}" ;; *) echo "${twin_default:-1}" ;; esac \
    > "$run_dir/concurrency"
  kubectl create namespace "$NS" > /dev/null
  step "$m, run $2 of $REPEAT: creating $N Runners, waiting until all are Ready"
  "$work/bench_runners" create "$NS" "$N" "$IMAGE" > "$run_dir/create.kv"
  step "$m: settled after $(wait_quiet "$N") s more; $(rss_mib "$manager_pid") MiB RSS"
  for rate in $RATES; do
    step "$m: $rate changes/s for $SECS s, then the drain"
    "$work/sustained_load" "$NS" "$rate" "$SECS" "$manager_pid" "127.0.0.1:$metrics_port" "$(passes_metric)" \
      > "$run_dir/rate-$rate.kv" || step "$m: not every change at $rate/s was observed (see the table)"
    step "$m: $rate changes/s: drained in $(sed -n 's/^drain_s=//p' "$run_dir/rate-$rate.kv") s"
    sleep "$PAUSE"
  done
  step "$m: deleting the namespace $NS (its Runners, children and Pods), the manager still running"
  local t0=$SECONDS
  if ! kubectl delete namespace "$NS" --timeout="${RUNNER_BENCH_SYNC_TIMEOUT:-900}s" > /dev/null; then
    step "the namespace $NS is still there after ${RUNNER_BENCH_SYNC_TIMEOUT:-900} s: the next run would not" \
      "start on an empty cluster"
    return 1
  fi
  step "$m: namespace gone after $((SECONDS - t0)) s"
  manager_stop
  sleep 2 # the batch audit backend flushes every second
  tail -c "+$((audit_from + 1))" "$state/logs/audit.log" > "$run_dir/audit.log"
}

build_all bench_runners sustained_load
read -ra order <<< "$MANAGERS"
for m in "${order[@]}"; do rm -rf "${out:?}/$m"; done # a kept directory's figures of an earlier run
load_start=$(cut -d ' ' -f 1-3 /proc/loadavg)
cluster=1
cluster_up
for ((round = 1; round <= REPEAT; round++)); do
  # Round r starts with the ((r - 1) mod M)-th manager: each one takes every place in turn.
  for ((i = 0; i < ${#order[@]}; i++)); do
    run_once "${order[(round - 1 + i) % ${#order[@]}]}" "$round"
  done
done
cluster_down
cluster=0

echo
echo "sustained load: N=$N Runners, ${SECS}s per rate, $REPEAT run(s) of each manager in rotating order" \
  "on one cluster, $(nproc) cores, load average at start $load_start," \
  "profile ${RUNNER_BENCH_PROFILE:-release}, commit $bench_commit"
python3 "$root/benches/sustained.py" "$out" "${order[@]}"
[ -n "${RUNNER_SUSTAINED_OUT:-}" ] && step "raw figures and audit logs: $out"
exit 0
