#!/usr/bin/env bash
# The local loop with webhooks, measured: `run-manager --local-webhooks`
# from start to the first request the apiserver sends it, from Ctrl-C to
# the registrations handed back, and the latency the validating webhook
# adds to `kubectl runner create`. Prints figures, asserts none.
#
#   bash benches/local-webhooks.sh
#
# One cluster of its own (RUNNER_BENCH_CLUSTER, default "lwbench"), the CRD
# installed by `kubectl runner install` (no manager, no webhook). Each of
# RUNNER_LW_ROUNDS rounds (default 7):
#   1. starts the manager as a process (reconciling an idle namespace) and
#      reads from its log when the apiserver first called /convert and when
#      its dry-run probe had gone through both webhooks;
#   2. times RUNNER_LW_CREATES (default 30) `kubectl runner create` runs,
#      each with a host (the webhook looks it up), with the webhook;
#   3. sends SIGINT and reads when the registrations were handed back, and
#      when the process exited, and checks the CRD holds no local annotation;
#   4. times as many creates with no webhook registered.
# Times of a round come from the manager's own log timestamps against the
# moment the script started or signalled it. The creates alternate with
# and without the webhook round by round, so drift hits both alike.
#
# Environment: RUNNER_LW_ROUNDS, RUNNER_LW_CREATES, RUNNER_BENCH_PROFILE
# (dev, default, or release), RUNNER_BENCH_KEEP=1 (leave the cluster).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
ROUNDS=${RUNNER_LW_ROUNDS:-7}
CREATES=${RUNNER_LW_CREATES:-30}
PROFILE=${RUNNER_BENCH_PROFILE:-dev}
export RUNNER_CLUSTER_NAME=${RUNNER_BENCH_CLUSTER:-lwbench}
unset RUNNER_CLUSTER_STATE
work=$(mktemp -d)
manager_pid=

step() { printf '==> [local-webhooks %s] %s\n' "$(date +%T)" "$*" >&2; }
cleanup() {
  [ -n "$manager_pid" ] && kill -INT "$manager_pid" 2> /dev/null && wait "$manager_pid" 2> /dev/null
  [ "${RUNNER_BENCH_KEEP:-0}" = 1 ] || bash tests/cluster/down.sh > /dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
now() { date +%s.%N; }

step "building kubectl-runner ($PROFILE profile)"
cargo build --quiet --profile "$PROFILE" --bin kubectl-runner
dir=$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
bin="${CARGO_TARGET_DIR:-target}/$dir/kubectl-runner"

step "cluster $RUNNER_CLUSTER_NAME"
eval "$(bash tests/cluster/up.sh)"
export KUBECONFIG
"$bin" install > /dev/null
kubectl create namespace lw-idle > /dev/null
kubectl create namespace lw > /dev/null

# Seconds from $1 (epoch) to the timestamp of the first log line of $2
# holding $3.
since() {
  python3 - "$1" "$2" "$3" << 'PY'
import sys, datetime
t0, path, needle = float(sys.argv[1]), sys.argv[2], sys.argv[3]
for line in open(path, encoding="utf-8", errors="replace"):
    if needle in line:
        ts = line.split()[0].rstrip("Z")[:26]
        t = datetime.datetime.fromisoformat(ts).replace(tzinfo=datetime.timezone.utc).timestamp()
        print(f"{(t - t0) * 1000:.0f}")
        break
else:
    sys.exit(f"no {needle!r} in the log")
PY
}

# $CREATES timed creates named $1-N, each with a host; ms per line to $2.
creates() {
  for i in $(seq "$CREATES"); do
    t=$(now)
    "$bin" create "$1-$i" -n lw --image nginx:1.27 --host "$1-$i.bench.example" > /dev/null
    python3 -c "print(f'{($(now) - $t) * 1000:.1f}')" >> "$2"
  done
}

for r in $(seq "$ROUNDS"); do
  step "round $r/$ROUNDS: start"
  log="$work/manager-$r.log"
  t0=$(now)
  "$bin" run-manager --watch-namespace lw-idle --local-webhooks 2> "$log" &
  manager_pid=$!
  for _ in $(seq 600); do
    grep -q "the apiserver called the local webhooks" "$log" && break
    kill -0 "$manager_pid" 2> /dev/null || { tail -n 20 "$log" >&2; exit 1; }
    sleep 0.05
  done
  since "$t0" "$log" "served the first conversion" >> "$work/first-request"
  since "$t0" "$log" "the apiserver called the local webhooks" >> "$work/probe-passed"

  step "round $r: $CREATES creates with the webhook"
  creates "with-$r" "$work/with"

  step "round $r: Ctrl-C"
  t_int=$(now)
  kill -INT "$manager_pid"
  wait "$manager_pid"
  manager_pid=
  python3 -c "print(f'{($(now) - $t_int) * 1000:.0f}')" >> "$work/exit"
  since "$t_int" "$log" "handed the webhook registrations back" >> "$work/handed-back"
  if kubectl get crd runners.lab.cloudlab.training -o jsonpath='{.metadata.annotations}' | grep -q local-webhooks; then
    echo "round $r: the CRD still names the local manager after exit" >&2
    exit 1
  fi
  kubectl get validatingwebhookconfiguration runner-validation > /dev/null 2>&1 &&
    { echo "round $r: the webhook configuration is still there" >&2; exit 1; }

  step "round $r: $CREATES creates without a webhook"
  creates "without-$r" "$work/without"
done

python3 - "$work" "$ROUNDS" "$CREATES" << 'PY'
import statistics, sys
work, rounds, creates = sys.argv[1], sys.argv[2], sys.argv[3]
def read(name):
    return [float(x) for x in open(f"{work}/{name}").read().split()]
def p(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]
print(f"\nrun-manager --local-webhooks, {rounds} rounds (median, min-max, ms)")
print(f"{'what':44} {'median':>8} {'min':>8} {'max':>8}")
for name, what in [("first-request", "start -> first conversion served"),
                   ("probe-passed", "start -> dry-run through both webhooks"),
                   ("handed-back", "Ctrl-C -> registrations handed back"),
                   ("exit", "Ctrl-C -> process exited")]:
    v = read(name)
    print(f"{what:44} {statistics.median(v):8.0f} {min(v):8.0f} {max(v):8.0f}")
w, wo = read("with"), read("without")
print(f"\nkubectl runner create, {len(w)} runs each (ms, whole process)")
print(f"{'':22} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8}")
for label, v in [("with the webhook", w), ("without", wo)]:
    print(f"{label:22} {p(v, 50):8.1f} {p(v, 90):8.1f} {p(v, 99):8.1f} {max(v):8.1f}")
print(f"{'added by the webhook':22} {p(w, 50) - p(wo, 50):8.1f} {p(w, 90) - p(wo, 90):8.1f} {p(w, 99) - p(wo, 99):8.1f}")
PY
