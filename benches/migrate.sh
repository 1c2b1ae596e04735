#!/usr/bin/env bash
# `kubectl runner migrate` of N Runners stored at v1alpha1 while a writer
# updates 10% of them: the time, the writes per Runner (from the apiserver
# audit log: every update or patch of a Runner in the window that was not
# the writer's, 409s included, divided by N; the goal is 1 plus retries),
# the conflicts, and the lost updates (a write the apiserver acknowledged
# that is not there afterwards; must be 0). Prints figures, asserts none.
#
#   bash benches/migrate.sh
#
# One cluster of its own (RUNNER_BENCH_CLUSTER, default "migbench") with the
# audit log of every write (RUNNER_CLUSTER_AUDIT=1). For each method, the
# Runner CRD is created with v1alpha1 as its storage version, N Runners are
# created, and the CRD is replaced by one whose storage version is v1beta1
# (both with the v1alpha1 schema and no webhook, as tests/migrate.rs does:
# this measures moving objects, not converting them). The writer is 4
# kubectl loops patching an annotation of Runners r0..r(N/10-1), logging
# each acknowledged value; it runs from before migrate starts until it ends.
#
# Environment: RUNNER_MIGRATE_N (default 1000), RUNNER_MIGRATE_METHODS
# (default "update svm": one update per Runner from the CLI, and the
# apiserver's StorageVersionMigration), RUNNER_MIGRATE_PARALLEL (default 8),
# RUNNER_BENCH_PROFILE (dev, default, or release), RUNNER_BENCH_KEEP=1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
N=${RUNNER_MIGRATE_N:-1000}
METHODS=${RUNNER_MIGRATE_METHODS:-update svm}
PARALLEL=${RUNNER_MIGRATE_PARALLEL:-8}
PROFILE=${RUNNER_BENCH_PROFILE:-dev}
export RUNNER_CLUSTER_NAME=${RUNNER_BENCH_CLUSTER:-migbench}
export RUNNER_CLUSTER_AUDIT=1
unset RUNNER_CLUSTER_STATE
work=$(mktemp -d)
writers=()

step() { printf '==> [migrate %s] %s\n' "$(date +%T)" "$*" >&2; }
# A writer stops between two patches (a patch killed in flight could land
# after its value was logged as not acknowledged, and count as lost).
stop_writers() {
  touch "$work/stop"
  for p in "${writers[@]}"; do wait "$p" 2> /dev/null || true; done
  writers=()
}
cleanup() {
  stop_writers
  [ "${RUNNER_BENCH_KEEP:-0}" = 1 ] || bash tests/cluster/down.sh > /dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "building kubectl-runner ($PROFILE profile)"
cargo build --quiet --profile "$PROFILE" --bin kubectl-runner
dir=$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
bin="${CARGO_TARGET_DIR:-target}/$dir/kubectl-runner"

step "cluster $RUNNER_CLUSTER_NAME (audit log of every write)"
eval "$(bash tests/cluster/up.sh)"
export KUBECONFIG
state=$(dirname "$KUBECONFIG")
audit="$state/logs/audit.log"

# The generated CRD with both versions on the v1alpha1 schema; $1 the storage version.
crd() {
  "$bin" manifests | python3 -c '
import sys, yaml
storage, versions = sys.argv[1], sys.argv[2].split(",")
for d in yaml.safe_load_all(sys.stdin):
    if d and d.get("kind") == "CustomResourceDefinition":
        t = next(v for v in d["spec"]["versions"] if v["name"] == "v1alpha1")
        d["spec"]["versions"] = [dict(t, name=n, served=True, storage=(n == storage)) for n in versions]
        d["spec"].pop("conversion", None)
        print(yaml.safe_dump(d))
' "$1" "$2"
}

python3 - "$N" > "$work/runners.yaml" << 'PY'
import sys
for i in range(int(sys.argv[1])):
    print(f"---\napiVersion: lab.cloudlab.training/v1alpha1\nkind: Runner\nmetadata:\n  name: r{i}\n  namespace: mig\nspec:\n  image: nginx:1.27\n  replicas: {1 + i % 3}")
PY

# One writer loop: patches Runners r$1, r$1+4, ... below N/10, logging each acknowledged value.
writer() {
  local first=$1 n=0 i
  while :; do
    for ((i = first; i < N / 10; i += 4)); do
      [ -e "$work/stop" ] && return 0
      n=$((n + 1))
      if kubectl -n mig patch runners.v1alpha1.lab.cloudlab.training "r$i" --type merge \
        -p "{\"metadata\":{\"annotations\":{\"bench/write\":\"$first-$n\"}}}" > /dev/null 2>&1; then
        echo "r$i $first-$n" >> "$work/acked.$first"
      fi
    done
  done
}

: > "$work/rows"
for method in $METHODS; do
  case $method in
    update) flags=(--no-storage-version-migration --parallel "$PARALLEL") ;;
    svm) flags=() ;;
    *) echo "error: RUNNER_MIGRATE_METHODS: '$method': want update or svm" >&2; exit 2 ;;
  esac
  step "$method: the CRD stored at v1alpha1, $N Runners"
  kubectl delete crd runners.lab.cloudlab.training --ignore-not-found --wait=true > /dev/null
  kubectl delete namespace mig --ignore-not-found --wait=true > /dev/null
  crd v1alpha1 v1alpha1 | kubectl apply --server-side -f - > /dev/null
  kubectl wait --for condition=Established crd/runners.lab.cloudlab.training --timeout=60s > /dev/null
  kubectl create namespace mig > /dev/null
  kubectl create -f "$work/runners.yaml" > /dev/null
  step "$method: the CRD's storage version becomes v1beta1"
  crd v1beta1 v1alpha1,v1beta1 | kubectl apply --server-side --force-conflicts -f - > /dev/null
  until kubectl get runners.v1beta1.lab.cloudlab.training -n mig -o name > /dev/null 2>&1; do sleep 1; done
  rm -f "$work"/acked.* "$work/stop"
  for w in 0 1 2 3; do writer "$w" & writers+=($!); done
  sleep 2
  sleep 2 # the batch audit backend flushes every second
  from=$(stat -c %s "$audit")
  step "$method: kubectl runner migrate ${flags[*]} (writer running)"
  t0=$(date +%s%N)
  "$bin" migrate "${flags[@]}" -o json > "$work/summary.json" || step "$method: migrate exited $?"
  t1=$(date +%s%N)
  stop_writers
  sleep 2 # the audit log's last batch
  tail -c "+$((from + 1))" "$audit" > "$work/audit.$method"
  kubectl get runners.v1alpha1.lab.cloudlab.training -n mig -o json > "$work/after.json"
  python3 - "$method" "$N" "$(((t1 - t0) / 1000000))" "$work" >> "$work/rows" << 'PY'
import glob, json, sys
method, n, ms, work = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
writes = conflicts = 0
for line in open(f"{work}/audit.{method}"):
    e = json.loads(line)
    ref = e.get("objectRef", {})
    if e.get("stage") != "ResponseComplete" or ref.get("resource") != "runners" or ref.get("subresource"):
        continue
    if e["verb"] not in ("update", "patch") or e.get("userAgent", "").startswith("kubectl/"):
        continue
    writes += 1
    conflicts += e.get("responseStatus", {}).get("code") == 409
last = {}
for f in sorted(glob.glob(f"{work}/acked.*")):
    for l in open(f):
        name, value = l.split()
        last[name] = value
now = {i["metadata"]["name"]: i["metadata"].get("annotations", {}).get("bench/write")
       for i in json.load(open(f"{work}/after.json"))["items"]}
lost = sum(1 for k, v in last.items() if now.get(k) != v)
s = json.load(open(f"{work}/summary.json"))
print(f"{method} {ms} {writes} {writes / n:.3f} {conflicts} {len(last)} {sum(1 for _ in last)} {lost} "
      f"{s.get('retried', '-')} {','.join(s['storedVersionsAfter'])}")
PY
done

python3 - "$work/rows" "$N" << 'PY'
import sys
print(f"\nkubectl runner migrate of {sys.argv[2]} Runners stored at v1alpha1, a writer patching 10% of them meanwhile")
print(f"  {'method':<8} {'time s':>7} {'writes':>7} {'per Runner':>11} {'409s':>5} {'written by writer':>18} {'lost':>5} {'retried':>8}  storedVersions after")
for l in open(sys.argv[1]):
    m, ms, w, per, c, touched, _, lost, retried, after = l.split()
    print(f"  {m:<8} {int(ms) / 1000:>7.1f} {w:>7} {per:>11} {c:>5} {touched:>18} {lost:>5} {retried:>8}  {after}")
print("  writes: updates and patches of Runners in the window that were not the writer's (409s included)")
PY
