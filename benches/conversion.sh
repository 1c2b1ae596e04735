#!/usr/bin/env bash
# What reading Runners through the conversion webhook costs: `kubectl get
# runners -A -o json` of N Runners stored as v1beta1, asked for as v1alpha1
# (every object goes through the manager's /convert) against the same list
# asked for as v1beta1 (no conversion). Prints figures, asserts none.
#
#   bash benches/conversion.sh
#
# One cluster of its own (RUNNER_BENCH_CLUSTER, default "convbench"), the
# CRD installed by `kubectl runner install`, and one manager run as a
# process, serving the webhook on the loopback (`run-manager
# --webhook-listen/--webhook-url`) and reconciling an empty namespace only,
# so it does nothing else while the lists run. The two lists alternate,
# RUNNER_CONVERSION_REPEAT times each (default 9), after one unmeasured
# warm-up of each; the table gives each one's median and spread (min-max),
# and the ratio of the medians (the target: within 1.5x), marked "~" when
# the spreads overlap.
#
# Environment: RUNNER_CONVERSION_N (Runners, default 1000),
# RUNNER_CONVERSION_REPEAT, RUNNER_BENCH_PROFILE (dev, default, or release),
# RUNNER_BENCH_KEEP=1 (leave the cluster running).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
N=${RUNNER_CONVERSION_N:-1000}
K=${RUNNER_CONVERSION_REPEAT:-9}
PROFILE=${RUNNER_BENCH_PROFILE:-dev}
export RUNNER_CLUSTER_NAME=${RUNNER_BENCH_CLUSTER:-convbench}
unset RUNNER_CLUSTER_STATE
work=$(mktemp -d)
manager_pid=

step() { printf '==> [conversion %s] %s\n' "$(date +%T)" "$*" >&2; }
cleanup() {
  [ -n "$manager_pid" ] && kill "$manager_pid" 2> /dev/null && wait "$manager_pid" 2> /dev/null
  [ "${RUNNER_BENCH_KEEP:-0}" = 1 ] || bash tests/cluster/down.sh > /dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

step "building kubectl-runner ($PROFILE profile)"
cargo build --quiet --profile "$PROFILE" --bin kubectl-runner
dir=$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
bin="${CARGO_TARGET_DIR:-target}/$dir/kubectl-runner"

step "cluster $RUNNER_CLUSTER_NAME"
eval "$(bash tests/cluster/up.sh)"
export KUBECONFIG
"$bin" install > /dev/null
kubectl create namespace conv-idle > /dev/null
kubectl create namespace conv > /dev/null

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
step "manager serving /convert on 127.0.0.1:$port"
"$bin" run-manager --watch-namespace conv-idle --webhook-listen "127.0.0.1:$port" \
  --webhook-url "https://127.0.0.1:$port/convert" 2> "$work/manager.log" &
manager_pid=$!
# The manager points the CRD's conversion at itself; serving v1alpha1 too
# is then safe, as `install --with-manager` does in a cluster.
for _ in $(seq 60); do
  [ "$(kubectl get crd runners.lab.cloudlab.training -o jsonpath='{.spec.conversion.strategy}')" = Webhook ] && break
  sleep 1
done
index=$(kubectl get crd runners.lab.cloudlab.training -o json |
  python3 -c 'import json,sys; print([v["name"] for v in json.load(sys.stdin)["spec"]["versions"]].index("v1alpha1"))')
kubectl patch crd runners.lab.cloudlab.training --type=json \
  -p "[{\"op\":\"replace\",\"path\":\"/spec/versions/$index/served\",\"value\":true}]" > /dev/null
for _ in $(seq 60); do
  kubectl get runners.v1alpha1.lab.cloudlab.training -A > /dev/null 2>&1 && break
  kill -0 "$manager_pid" 2> /dev/null || { tail -n 20 "$work/manager.log" >&2; exit 1; }
  sleep 1
done
kubectl get runners.v1alpha1.lab.cloudlab.training -A > /dev/null

step "creating $N Runners in namespace conv (every third with two hosts)"
python3 - "$N" > "$work/runners.yaml" << 'EOF'
import sys
for i in range(int(sys.argv[1])):
    hosts = f"\n    hosts: [r{i}.example.com, www.r{i}.example.com]" if i % 3 == 0 else ""
    print(f"""---
apiVersion: lab.cloudlab.training/v1beta1
kind: Runner
metadata:
  name: r{i}
  namespace: conv
spec:
  image: nginx:1.27
  replicas: {1 + i % 3}
  expose:
    port: 8080{hosts}""")
EOF
kubectl create -f "$work/runners.yaml" > /dev/null
have=$(kubectl get runners.v1beta1.lab.cloudlab.training -n conv -o name | wc -l)
step "$have Runners stored"

# One list, timed: its wall time in ms on stdout, its size checked, and
# (read as v1alpha1) the extra hosts in their annotation: the webhook ran.
list() {
  local t0 t1
  t0=$(date +%s%N)
  kubectl get "runners.$1.lab.cloudlab.training" -A -o json > "$work/list.json"
  t1=$(date +%s%N)
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['items'])==int(sys.argv[2]), len(d['items']); \
assert all(i['apiVersion'].endswith('/'+sys.argv[3]) for i in d['items']); \
more=[i for i in d['items'] if 'lab.cloudlab.training/more-hosts' in i['metadata'].get('annotations',{})]; \
assert (len(more) > 0) == (sys.argv[3] == 'v1alpha1'), len(more)" "$work/list.json" "$have" "$1"
  echo $(((t1 - t0) / 1000000))
}
list v1beta1 > /dev/null
list v1alpha1 > /dev/null
: > "$work/times"
for i in $(seq "$K"); do
  if [ $((i % 2)) = 1 ]; then order="v1beta1 v1alpha1"; else order="v1alpha1 v1beta1"; fi
  for v in $order; do
    echo "$v $(list "$v")" >> "$work/times"
  done
done
step "manager: $(grep -c 'conversion' "$work/manager.log" || true) log lines naming conversion"

python3 - "$work/times" "$have" "$K" << 'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
t = {v: [int(ms) for w, ms in rows if w == v] for v in ("v1beta1", "v1alpha1")}
print(f"\nkubectl get runners -A -o json, {sys.argv[2]} Runners stored as v1beta1, {sys.argv[3]} runs each (alternating)")
print(f"  {'asked as':<10} {'conversion':<11} {'median ms':>10} {'min-max ms':>14}")
for v, conv in (("v1beta1", "none"), ("v1alpha1", "webhook")):
    print(f"  {v:<10} {conv:<11} {statistics.median(t[v]):>10.0f} {min(t[v]):>6}-{max(t[v]):<7}")
apart = min(t["v1alpha1"]) > max(t["v1beta1"]) or max(t["v1alpha1"]) < min(t["v1beta1"])
ratio = statistics.median(t["v1alpha1"]) / statistics.median(t["v1beta1"])
print(f"  ratio (through conversion / without): {ratio:.2f}x{'' if apart else ' ~ (spreads overlap)'}; target <= 1.5x")
EOF
