#!/usr/bin/env bash
# Measures `kubectl runner get -A` against `kubectl get runners -A` with
# N Runners (default 100) on the cluster in $KUBECONFIG, and the start-up
# time of `kubectl-runner --help`. Prints medians of RUNS runs (default 11).
#
#   eval "$(bash tests/cluster/up.sh)"
#   bash scripts/bench-cli.sh path/to/kubectl-runner
#
# Creates its Runners in a temporary namespace and deletes it on exit. No
# manager needs to run: `get` reads what is stored either way.
set -euo pipefail
BIN=${1:-target/release/kubectl-runner}
N=${N:-100}
RUNS=${RUNS:-11}
NS=bench-cli-$$
step() { printf '==> %s\n' "$*" >&2; }

command -v kubectl > /dev/null || { echo "error: kubectl is not on PATH" >&2; exit 1; }
[ -x "$BIN" ] || { echo "error: $BIN is not an executable; build it first" >&2; exit 1; }
: "${KUBECONFIG:?export the KUBECONFIG that tests/cluster/up.sh prints}"

cleanup() { step "deleting namespace $NS"; kubectl delete namespace "$NS" --wait=false > /dev/null 2>&1 || true; }
trap cleanup EXIT

if ! kubectl get crd runners.lab.cloudlab.training > /dev/null 2>&1; then
  step "applying the Runner CRD"
  "$BIN" manifests crd | kubectl apply --server-side --field-manager kubectl-runner-bench -f - > /dev/null
  kubectl wait --for condition=established crd/runners.lab.cloudlab.training > /dev/null
fi

step "creating $N Runners in $NS"
kubectl create namespace "$NS" > /dev/null
for i in $(seq 1 "$N"); do
  printf -- '---\napiVersion: lab.cloudlab.training/v1alpha1\nkind: Runner\nmetadata: {name: r%03d, namespace: %s}\nspec: {image: "nginx:1.27"}\n' "$i" "$NS"
done | kubectl apply -f - > /dev/null

# median_ms CMD...: runs CMD RUNS times (stdout discarded), prints the median
# wall time in milliseconds.
median_ms() {
  local times=() i t0 t1
  "$@" > /dev/null 2>&1 # warm-up (discovery cache, page cache)
  for i in $(seq 1 "$RUNS"); do
    t0=$(date +%s%N); "$@" > /dev/null; t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {m=a[int((NR+1)/2)]; printf "%.1f\n", m/1000}'
}

step "timing ($RUNS runs each, median)"
ours=$(median_ms "$BIN" get -A)
theirs=$(median_ms kubectl get runners -A)
ours_ns=$(median_ms "$BIN" -n "$NS" get)
theirs_ns=$(median_ms kubectl -n "$NS" get runners)
help=$(median_ms "$BIN" --help)
rows=$("$BIN" -n "$NS" get | tail -n +2 | wc -l)
echo "runners listed in $NS: $rows"
echo "kubectl runner get -A:        ${ours} ms"
echo "kubectl get runners -A:       ${theirs} ms"
echo "kubectl runner get -n NS:     ${ours_ns} ms"
echo "kubectl get runners -n NS:    ${theirs_ns} ms"
echo "kubectl-runner --help:        ${help} ms"
