#!/usr/bin/env bash
# Scale: what holding many Runners costs each manager at rest, and what a
# full relist costs on top. Prints figures, asserts none.
#
#   bash benches/scale.sh
#
# One bench cluster (kwok nodes for the largest size, 110 Pods each; the
# controller-manager's and scheduler's client QPS raised so thousands of
# Pods settle in minutes). For each size, smallest first: this manager
# creates the missing Runners (replicas 1) in a namespace of their own and is
# stopped once every one is Ready; then each manager in turn (this one, the
# controller-runtime twin) is started alone on the settled cluster:
#   synced after   seconds from start until its reconcile counter reached
#                  the size and stayed still for 5 s; CPU s spent until then
#   steady         CPU (cores) over the next RUNNER_SCALE_WINDOW seconds and
#                  RSS at its end
#   start peak     VmHWM over start, sync and the steady window
#   relist peak    the apiserver is killed and restarted under it (every
#                  watch relists); peak RSS (VmHWM reset before, and RSS
#                  sampled every 0.1 s) until it is quiet again, and that
#                  peak / steady
# A ratio table follows. The twin starts on children this manager made; its
# sync includes whatever it rewrites to adopt them. To measure another build
# on Runners a run left (RUNNER_BENCH_KEEP=1), run again with
# RUNNER_BENCH_REUSE=1 and RUNNER_SCALE_SIZES set to the number there.
#
# Environment: RUNNER_SCALE_SIZES (default "1000 5000 10000"),
# RUNNER_SCALE_WINDOW (seconds, default 30), RUNNER_BENCH_IMAGE,
# RUNNER_CLUSTER_CLIENT_QPS (default 200), and those of benches/lib.sh
# (RUNNER_BENCH_CLUSTER, RUNNER_BENCH_PROFILE, RUNNER_BASELINE_DIR,
# RUNNER_BENCH_MANAGERS, RUNNER_BENCH_SYNC_TIMEOUT, ...).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

SIZES=${RUNNER_SCALE_SIZES:-1000 5000 10000}
WINDOW=${RUNNER_SCALE_WINDOW:-30}
IMAGE=${RUNNER_BENCH_IMAGE:-bench:1}

step() { printf '==> [scale] %s\n' "$*" >&2; }
work=$(mktemp -d)
# shellcheck source=benches/lib.sh
source "$root/benches/lib.sh"
max=0
for s in $SIZES; do ((s > max)) && max=$s; done
export RUNNER_CLUSTER_NODES=$(((max + 99) / 100))
export RUNNER_CLUSTER_CLIENT_QPS=${RUNNER_CLUSTER_CLIENT_QPS:-200}
export RUNNER_CLUSTER_AUDIT=0
# Thousands of new Runners at once take longer than bench_runners' default.
export RUNNER_BENCH_TIMEOUT=${RUNNER_BENCH_TIMEOUT:-3600}

sampler=
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  [ -n "$sampler" ] && kill "$sampler" 2> /dev/null
  manager_stop
  if [ "$rc" != 0 ] && [ -n "$manager_name" ]; then
    step "failed (exit $rc); last lines of the $manager_name manager's log:"
    tail -n 20 "$work/$manager_name.log" >&2 || true
  fi
  cluster_down
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# restart_apiserver: kill -9 and start it again (up.sh restarts the
# components that stopped and waits until the cluster is ready).
restart_apiserver() {
  kill -KILL "$(cat "$state/pids/kube-apiserver.pid")"
  while [ -d "/proc/$(cat "$state/pids/kube-apiserver.pid")" ]; do sleep 0.1; done
  bash tests/cluster/up.sh > /dev/null 2> "$work/up-restart.log"
}

# measure SIZE: start $m, read it synced, steady and through a relist; one
# tab-separated row to $work/rows.
measure() {
  local size=$1 t0 synced cpu_sync cpu0 rss hwm peak quiet_s expired
  t0=$SECONDS
  manager_start "$m" "$work/$m.log"
  wait_quiet "$size" > /dev/null
  synced=$((SECONDS - t0))
  cpu_sync=$(cpu_s "$manager_pid")
  cpu0=$cpu_sync
  step "$m on $size Runners: synced after $synced s ($cpu_sync CPU s); steady window ${WINDOW}s"
  sleep "$WINDOW"
  local cpu1 steady_cores
  cpu1=$(cpu_s "$manager_pid")
  steady_cores=$(awk -v a="$cpu0" -v b="$cpu1" -v w="$WINDOW" 'BEGIN { printf "%.3f", (b - a) / w }')
  rss=$(rss_mib "$manager_pid")
  hwm=$(hwm_mib "$manager_pid")
  step "$m on $size Runners: steady $rss MiB, $steady_cores cores; restarting the apiserver under it"
  # Reset VmHWM to the current RSS (clear_refs 5), and sample as well in case
  # the kernel refuses.
  echo 5 > "/proc/$manager_pid/clear_refs" 2> /dev/null || true
  (while :; do awk '/^VmRSS/ { print $2 }' "/proc/$manager_pid/status" 2> /dev/null || exit 0; sleep 0.1; done) \
    > "$work/relist.rss" &
  sampler=$!
  local r0=$SECONDS log_lines
  log_lines=$(wc -l < "$work/$m.log")
  restart_apiserver
  quiet_s=$(wait_quiet 0)
  kill "$sampler" 2> /dev/null || true
  wait "$sampler" 2> /dev/null || true
  sampler=
  # Our watches log each 410 Expired they relist after; the twin's client-go
  # reflectors log theirs below the default verbosity.
  expired=$(tail -n +$((log_lines + 1)) "$work/$m.log" | grep -c 'Expired' || true)
  peak=$(awk -v h="$(hwm_mib "$manager_pid")" '$1 > m { m = $1 } END { m /= 1024; printf "%.1f", (m > h ? m : h) }' "$work/relist.rss")
  step "$m on $size Runners: relist peak $peak MiB ($expired watch(es) answered 410 Expired); quiet $((SECONDS - r0)) s after the kill ($quiet_s s after the apiserver was back)"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$size" "$synced" "$cpu_sync" "$steady_cores" "$rss" "$hwm" "$peak" >> "$work/rows"
  manager_stop
}

build_all bench_runners
load_start=$(cut -d ' ' -f 1-3 /proc/loadavg)
cluster_up
: > "$work/rows"
# Runners already there (RUNNER_BENCH_REUSE=1) count towards each size.
have=$(kubectl get runners -A --no-headers 2> /dev/null | wc -l)
for size in $SIZES; do
  if ((size < have)); then
    step "skipping $size Runners: $have are there already"
    continue
  fi
  if ((size > have)); then
    manager_start rust "$work/rust.log"
    kubectl create namespace "scale-$size" > /dev/null
    step "creating $((size - have)) Runners in scale-$size ($size in all), waiting until all are Ready"
    t=$SECONDS
    "$work/bench_runners" create "scale-$size" $((size - have)) "$IMAGE" > "$work/create-$size.kv" ||
      step "warning: not all $((size - have)) new Runners were Ready in time"
    # No wait_quiet here: past a few thousand Runners the resync period's
    # passes never leave 5 s of quiet. Ready is the manager's own last write.
    step "$size Runners settled in $((SECONDS - t)) s"
    manager_stop
    have=$size
  fi
  for m in $MANAGERS; do measure "$size"; done
done

echo
echo "scale: replicas 1, kwok Pods, steady window ${WINDOW}s, $(nproc) cores, load average at start $load_start," \
  "profile ${RUNNER_BENCH_PROFILE:-release}, commit $bench_commit"
awk -F'\t' '
  BEGIN { printf "  %-8s %8s %10s %10s %12s %11s %11s %12s %13s\n", "manager", "Runners", "synced s", "sync CPU s",
            "steady cores", "steady MiB", "start peak", "relist peak", "relist/steady" }
  { printf "  %-8s %8d %10d %10.2f %12.3f %11.1f %11.1f %12.1f %12.2fx\n", $1, $2, $3, $4, $5, $6, $7, $8, $8 / $6
    rss[$1, $2] = $6; peak[$1, $2] = $8; cpu[$1, $2] = $5
    if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 }
    if ($1 == "twin") twin = 1 }
  END {
    if (!twin) exit
    printf "\nratios, this manager / baseline:\n"
    printf "  %-8s %14s %14s %16s   targets: RSS < 64 MiB at 10000 and <= 0.25x; relist peak <= 1.2x steady\n",
      "Runners", "steady RSS", "relist peak", "steady CPU"
    for (i = 1; i <= n; i++) {
      s = order[i]
      if (!(("rust", s) in rss) || !(("twin", s) in rss)) continue
      c = (cpu["twin", s] > 0) ? sprintf("%.2fx", cpu["rust", s] / cpu["twin", s]) : "-"
      printf "  %-8d %13.2fx %13.2fx %15s\n", s, rss["rust", s] / rss["twin", s], peak["rust", s] / peak["twin", s], c
    }
  }' "$work/rows"
