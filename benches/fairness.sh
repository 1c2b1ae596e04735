#!/usr/bin/env bash
# Fairness and priority under load: who waits, and how long, when the
# manager has a backlog. Prints figures, asserts none.
#
#   RUNNER_BENCH_VARIANTS="old@086abec:" bash benches/fairness.sh
#
# Managers one at a time on one bench cluster (benches/lib.sh: this build
# "rust", each variant "rust-NAME", e.g. a revision before the work queue),
# the order rotating each round (with two: alternating), RUNNER_FAIR_REPEAT
# rounds (default 3). Scenarios (RUNNER_FAIR_SCENARIOS, default all):
#   burst-N   N Runners created in order as fast as the apiserver takes them
#             (examples/fairness_load.rs burst), the manager running first:
#             wait = create answered -> its Deployment seen; median, p99 and
#             max, the first and the last 10% created, the drain (last
#             Deployment after the last create), the rank correlation of
#             creation order with service order, and where the first Runner
#             created was served (percent of the service order). Then the
#             namespace is deleted with the manager running.
#             RUNNER_FAIR_BURSTS, default "1000 5000".
#   relist    RUNNER_FAIR_SETTLED Runners (default 5000) settled once; per run
#             the manager starts on them (its first list: a pass for each)
#             and, from its /readyz on, 50 other settled Runners get
#             replicas changes at RUNNER_FAIR_RATE/s (default 5) for 30 s:
#             change -> Deployment updated, p50/p99/max.
#   burst-changes  the same changes while RUNNER_FAIR_SETTLED new Runners
#             are created in another namespace.
#
# Environment: benches/lib.sh's (RUNNER_BENCH_PROFILE, RUNNER_BENCH_VARIANTS,
# RUNNER_BENCH_KEEP ...). The release profile's fat LTO takes ~10 min per
# build; CARGO_PROFILE_RELEASE_LTO=thin CARGO_PROFILE_RELEASE_CODEGEN_UNITS=8
# builds every row faster and alike.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
step() { printf '==> [fairness] %s\n' "$*" >&2; }
work=$(mktemp -d)
# shellcheck source=benches/lib.sh
source benches/lib.sh
MANAGERS=${RUNNER_BENCH_MANAGERS:-$ours_rows}
REPEAT=${RUNNER_FAIR_REPEAT:-3}
BURSTS=${RUNNER_FAIR_BURSTS:-1000 5000}
SETTLED=${RUNNER_FAIR_SETTLED:-5000}
RATE=${RUNNER_FAIR_RATE:-5}
SCENARIOS=${RUNNER_FAIR_SCENARIOS:-burst relist burst-changes}
PROBES=50
out=${RUNNER_FAIR_OUT:-$work/out}
mkdir -p "$out"
trap 'manager_stop; cluster_down; [ -n "${RUNNER_FAIR_OUT:-}" ] || rm -rf "$work"' EXIT

has() { case " $SCENARIOS " in *" $1 "*) return 0 ;; esac; return 1; }

# delete_ns NS: with the manager running (it clears its finalizers).
delete_ns() {
  kubectl delete namespace "$1" --timeout=900s > /dev/null || step "namespace $1 still there after 900 s"
}

# run_burst MANAGER N ROUND
run_burst() {
  local m=$1 n=$2 dir="$out/$1/burst-$2/round-$3"
  mkdir -p "$dir"
  manager_start "$m" "$dir/manager.log"
  kubectl create namespace fair-burst > /dev/null
  step "$m, round $3: a burst of $n Runners"
  "$work/fairness_load" burst fair-burst "$n" > "$dir/figures.kv"
  step "$m: $(tr '\n' ' ' < "$dir/figures.kv")"
  delete_ns fair-burst
  manager_stop
}

# settle: the settled Runners of the relist scenarios, made once (by the
# first manager row), PROBES of them the ones that get changes.
settle() {
  kubectl create namespace fair-settled > /dev/null
  manager_start "${MANAGERS%% *}" "$out/settle.log"
  step "settling $PROBES Runners$(has relist && echo " + $SETTLED")"
  "$work/fairness_load" burst fair-settled "$PROBES" p > "$out/settle-probes.kv"
  # The bulk only for the relist: burst-changes needs the probes alone.
  if has relist; then "$work/fairness_load" burst fair-settled "$SETTLED" s > "$out/settle.kv"; fi
  step "settled after $(wait_quiet "$PROBES") s"
  manager_stop
}

# run_relist MANAGER ROUND: the manager starts on the settled Runners; the
# changes go out from its /readyz on.
run_relist() {
  local m=$1 dir="$out/$1/relist/round-$2"
  mkdir -p "$dir"
  manager_start "$m" "$dir/manager.log"
  step "$m, round $2: $RATE changes/s to $PROBES settled Runners during its first list"
  "$work/fairness_load" changes fair-settled p "$PROBES" "$RATE" 30 > "$dir/figures.kv"
  step "$m: $(tr '\n' ' ' < "$dir/figures.kv")"
  wait_quiet 1 > /dev/null
  manager_stop
}

# run_burst_changes MANAGER ROUND
run_burst_changes() {
  local m=$1 dir="$out/$1/burst-changes/round-$2"
  mkdir -p "$dir"
  manager_start "$m" "$dir/manager.log"
  kubectl create namespace fair-burst > /dev/null
  step "$m, round $2: $RATE changes/s to $PROBES settled Runners during a burst of $SETTLED"
  "$work/fairness_load" burst fair-burst "$SETTLED" > "$dir/burst.kv" &
  local burst=$!
  "$work/fairness_load" changes fair-settled p "$PROBES" "$RATE" 30 > "$dir/figures.kv"
  wait "$burst" || true
  step "$m: $(tr '\n' ' ' < "$dir/figures.kv")"
  delete_ns fair-burst
  manager_stop
}

# rotated ROUND: the managers, rotated by ROUND.
rotated() {
  local a
  read -ra a <<< "$MANAGERS"
  local n=${#a[@]} i
  for ((i = 0; i < n; i++)); do printf '%s ' "${a[$(((i + $1) % n))]}"; done
}

build_all fairness_load
# A fake node takes 110 Pods: enough nodes for the settled Runners and the
# largest burst at once (replicas 1), or Pods stay Pending and nothing settles.
max_burst=$(printf '%s\n' $BURSTS "$SETTLED" | sort -n | tail -n 1)
RUNNER_CLUSTER_NODES=${RUNNER_CLUSTER_NODES:-$(((SETTLED + PROBES + max_burst + 99) / 100))} cluster_up
has relist || has burst-changes && settle
for round in $(seq "$REPEAT"); do
  for m in $(rotated "$round"); do
    if has burst; then for n in $BURSTS; do run_burst "$m" "$n" "$round"; done; fi
    if has relist; then run_relist "$m" "$round"; fi
    if has burst-changes; then run_burst_changes "$m" "$round"; fi
  done
done

# Tables: per scenario and manager, each figure's median and spread.
python3 - "$out" "$MANAGERS" << 'EOF'
import os, statistics, sys
out, managers = sys.argv[1], sys.argv[2].split()
def kv(path):
    d = {}
    for line in open(path):
        if "=" in line:
            k, v = line.strip().split("=", 1)
            try: d[k] = float(v)
            except ValueError: pass
    return d
scenarios = sorted({s for m in managers if os.path.isdir(f"{out}/{m}") for s in os.listdir(f"{out}/{m}")})
for s in scenarios:
    rows = {}
    for m in managers:
        d = f"{out}/{m}/{s}"
        if not os.path.isdir(d): continue
        rows[m] = [kv(f"{d}/{r}/figures.kv") for r in sorted(os.listdir(d)) if os.path.exists(f"{d}/{r}/figures.kv")]
    keys = [k for k in next(iter(rows.values()))[0] if k not in ("n", "changes")] if rows else []
    print(f"\n== {s} (median, min-max over {max(len(v) for v in rows.values())} runs)")
    print(f"{'figure':24}" + "".join(f"{m:>26}" for m in rows))
    for k in keys:
        cells = []
        for m, runs in rows.items():
            v = [r[k] for r in runs if k in r]
            cells.append(f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else "-")
        print(f"{k:24}" + "".join(f"{c:>26}" for c in cells))
EOF
