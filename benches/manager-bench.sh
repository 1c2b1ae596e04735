#!/usr/bin/env bash
# Benchmark of the reconcile manager: prints figures, asserts none.
#
#   bash benches/manager-bench.sh
#
# On its own local control plane (cluster "bench", recreated from scratch and
# stopped at the end): installs the CRD, starts the release manager as a
# separate process watching all namespaces, creates N Runners at once in a
# fresh namespace (examples/bench_runners.rs times them), then reports
# p50/p99 time to children created and to Ready, apiserver requests per
# Runner by resource and verb (apiserver_request_total deltas), the manager's
# writes per Runner (its /metrics), writes during an idle window, the
# manager's peak RSS, and the time to delete every Runner and its children.
# Environment: RUNNER_BENCH_N (default 100), RUNNER_BENCH_IDLE (idle window,
# seconds, default 60), RUNNER_BENCH_IMAGE, RUNNER_BENCH_PROFILE (release or
# dev), CARGO_TARGET_DIR.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

N=${RUNNER_BENCH_N:-100}
IDLE=${RUNNER_BENCH_IDLE:-60}
IMAGE=${RUNNER_BENCH_IMAGE:-bench:1}
NS=runner-bench
# Always our own cluster: never inherit a name or state dir that could point
# at someone else's (down.sh deletes the state dir).
export RUNNER_CLUSTER_NAME=bench
unset RUNNER_CLUSTER_STATE
# kwok nodes take 110 Pods each.
export RUNNER_CLUSTER_NODES=$(((N + 99) / 100))
target=${CARGO_TARGET_DIR:-$root/target}

step() { printf '==> [bench] %s\n' "$*" >&2; }

work=$(mktemp -d)
manager_pid=
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$manager_pid" ] && kill -0 "$manager_pid" 2> /dev/null; then
    step "stopping the manager (pid $manager_pid)"
    kill -TERM "$manager_pid" 2> /dev/null || true
    wait "$manager_pid" 2> /dev/null || true
  fi
  if [ "$rc" != 0 ] && [ -f "$work/manager.log" ]; then
    step "failed (exit $rc); last lines of the manager log:"
    tail -n 20 "$work/manager.log" >&2
  fi
  step "stopping the bench cluster"
  bash tests/cluster/down.sh || true
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- helpers ------------------------------------------------------------------
port_in_use() { (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null; }
free_port() {
  local p
  for p in $(seq 18480 2 18580); do
    port_in_use "$p" || port_in_use $((p + 1)) || { echo "$p"; return; }
  done
  echo "error: no two free ports between 18480 and 18581" >&2
  return 1
}

# apiserver_scrape PREFIX: the apiserver's /metrics summed to "resource verb n"
# lines (resource as resource/subresource; "(non-resource)" for discovery and
# other plain URLs): PREFIX.total from apiserver_request_total, PREFIX.dsum
# and PREFIX.dcount from apiserver_request_duration_seconds.
apiserver_scrape() {
  kubectl get --raw /metrics > "$1.raw"
  sum_by apiserver_request_total "$1.raw" > "$1.total"
  sum_by apiserver_request_duration_seconds_sum "$1.raw" > "$1.dsum"
  sum_by apiserver_request_duration_seconds_count "$1.raw" > "$1.dcount"
}
sum_by() {
  awk -v m="$1" '
    function label(s, k,   i, r) {
      i = index(s, "," k "=\""); if (!i) return ""
      r = substr(s, i + length(k) + 3); return substr(r, 1, index(r, "\"") - 1)
    }
    index($0, m "{") == 1 {
      l = "," substr($0, 2 + length(m), index($0, "}") - 1)
      res = label(l, "resource"); sr = label(l, "subresource")
      if (res == "") res = "(non-resource)"
      else if (sr != "") res = res "/" sr
      n[res " " label(l, "verb")] += $NF
    }
    END { for (k in n) print k, n[k] }' "$2" | sort
}

manager_metrics() { curl -fsS "http://127.0.0.1:$metrics_port/metrics" > "$1"; }

# delta BEFORE AFTER: "key... n" lines whose last field grew, with the growth.
delta() {
  awk 'FILENAME == ARGV[1] { k = $0; sub(/ [^ ]+$/, "", k); a[k] = $NF; next }
       { k = $0; sub(/ [^ ]+$/, "", k); d = $NF - a[k]; if (d > 0) print k, d }' "$1" "$2"
}

# manager_counts FILE: "name{labels} n" lines of the manager's counters.
manager_counts() { grep -E '^runner_(reconciles|writes|reconcile_errors)_total' "$1" | sort || true; }

is_write() { case $1 in POST | PUT | PATCH | APPLY | DELETE | DELETECOLLECTION) return 0 ;; esac; return 1; }

# per_runner_table DELTA_FILE: resource x verb, per Runner, non-zero rows.
per_runner_table() {
  awk -v n="$N" '
    { v[$2] = 1; r[$1] = 1; c[$1 " " $2] += $3; t[$2] += $3 }
    END {
      split("GET LIST WATCH POST PUT PATCH APPLY DELETE DELETECOLLECTION", order, " ")
      for (i = 1; i in order; i++) if (order[i] in v) cols[++nc] = order[i]
      printf "    %-36s", "resource \\ verb (per Runner)"
      for (i = 1; i <= nc; i++) printf " %8s", substr(cols[i], 1, 8)
      printf "\n"
      for (res in r) {
        line = sprintf("    %-36s", res)
        for (i = 1; i <= nc; i++) line = line sprintf(" %8.2f", c[res " " cols[i]] / n)
        print line
      }
      line = sprintf("    %-36s", "TOTAL")
      for (i = 1; i <= nc; i++) line = line sprintf(" %8.2f", t[cols[i]] / n)
      print line
    }' "$1" | { IFS= read -r head; echo "$head"; sort -k1,1 | awk '$1 == "TOTAL" { t = $0; next } { print } END { print t }'; }
}

# writes FILE [EXCLUDE_REGEX]: sum of write verbs in a delta file.
writes() {
  local total=0 res verb n
  while read -r res verb n; do
    is_write "$verb" || continue
    [ -n "${2:-}" ] && [[ $res =~ $2 ]] && continue
    total=$((total + n))
  done < "$1"
  echo "$total"
}

# histogram_quantile Q FILE: upper bound of the bucket holding quantile Q of
# runner_reconcile_duration_seconds (coarse, like Prometheus without
# interpolation); "> B s" when it lies beyond the last finite bound B.
histogram_quantile() {
  awk -v q="$1" -F'[" ]' '
    /^runner_reconcile_duration_seconds_count/ { total = $NF }
    /^runner_reconcile_duration_seconds_bucket/ { le[++nb] = $2; cnt[nb] = $NF }
    END {
      for (i = 1; i <= nb; i++) if (cnt[i] >= q * total) break
      if (le[i] == "+Inf") printf "> %s s", le[i - 1]; else printf "<= %s s", le[i]
    }' "$2"
}
# server_latency "VERB resource"...: mean apiserver-side duration of those
# requests during the create phase (all clients), e.g. "POST deployments 12 ms".
server_latency() {
  local want out=
  for want in "$@"; do
    out+=$(awk -v r="${want#* }" -v v="${want%% *}" '
      FILENAME == ARGV[1] { if ($1 == r && $2 == v) s = $3; next }
      $1 == r && $2 == v && $3 > 0 { printf "%s %s %.0f ms; ", v, r, 1000 * s / $3 }' \
      "$work/api.create.dsum" "$work/api.create.dcount")
  done
  echo "${out%; }"
}
metric_value() { awk -v m="$1" '$1 == m { print $NF }' "$2"; }
kv() { awk -F= -v k="$1" '$1 == k { print $2 }' "$2"; }

# --- build ----------------------------------------------------------------------
# RUNNER_BENCH_PROFILE=dev counts requests and writes without the ~10 min
# release build; its times and RSS are not the release figures.
profile=${RUNNER_BENCH_PROFILE:-release}
outdir=$([ "$profile" = dev ] && echo debug || echo "$profile")
step "building the $profile manager and the load generator (cargo build --profile $profile)"
cargo build --profile "$profile" --bin kubectl-runner --example bench_runners
# Private copies: the target dir is shared and may be rebuilt during the run.
cp "$target/$outdir/kubectl-runner" "$target/$outdir/examples/bench_runners" "$work/"

# --- cluster ----------------------------------------------------------------------
step "fresh control plane 'bench' ($RUNNER_CLUSTER_NODES fake node(s))"
bash tests/cluster/down.sh
# Two steps, so a failing up.sh stops the script (eval "$(...)" would not).
kubeconfig_export=$(bash tests/cluster/up.sh)
eval "$kubeconfig_export"
export KUBECONFIG
bin=$(bash tests/cluster/build.sh 2> /dev/null | tail -n 1)
kubectl() { "$bin/kubectl" "$@"; }

step "installing the CRD (manifests/crd.yaml, server-side apply)"
kubectl apply --server-side -f manifests/crd.yaml > /dev/null
kubectl wait --for=condition=Established --timeout=60s crd/runners.lab.cloudlab.training > /dev/null

metrics_port=$(free_port)
health_port=$((metrics_port + 1))
step "starting the manager (all namespaces), metrics on 127.0.0.1:$metrics_port, log $work/manager.log"
"$work/kubectl-runner" run-manager --metrics-addr "127.0.0.1:$metrics_port" \
  --health-addr "127.0.0.1:$health_port" > "$work/manager.log" 2>&1 &
manager_pid=$!
for _ in $(seq 120); do
  curl -fsS "http://127.0.0.1:$health_port/readyz" > /dev/null 2>&1 && break
  kill -0 "$manager_pid" 2> /dev/null || { step "the manager exited"; cat "$work/manager.log" >&2; exit 1; }
  sleep 0.5
done
curl -fsS "http://127.0.0.1:$health_port/readyz" > /dev/null || { step "the manager is not ready after 60 s"; exit 1; }
rss_start=$(awk '/^VmRSS/ { print $2 }' "/proc/$manager_pid/status")

load_start=$(cut -d ' ' -f 1-3 /proc/loadavg)
step "namespace $NS"
kubectl create namespace "$NS" > /dev/null

# --- create -----------------------------------------------------------------------
apiserver_scrape "$work/api0"
manager_metrics "$work/m0"
step "creating $N Runners at once; waiting for children and Ready"
"$work/bench_runners" create "$NS" "$N" "$IMAGE" | tee "$work/create.out" >&2
apiserver_scrape "$work/api1"
manager_metrics "$work/m1"

# --- idle -------------------------------------------------------------------------
step "idle for ${IDLE}s with every Runner Ready"
sleep "$IDLE"
apiserver_scrape "$work/api2"
manager_metrics "$work/m2"
rss_idle=$(awk '/^VmRSS/ { print $2 }' "/proc/$manager_pid/status")

# --- delete -----------------------------------------------------------------------
step "deleting all $N Runners; waiting until they and their children are gone"
"$work/bench_runners" delete "$NS" | tee "$work/delete.out" >&2
apiserver_scrape "$work/api3"
manager_metrics "$work/m3"
hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$manager_pid/status")

# --- report -----------------------------------------------------------------------
delta "$work/api0.total" "$work/api1.total" > "$work/api.create"
delta "$work/api1.total" "$work/api2.total" > "$work/api.idle"
delta "$work/api2.total" "$work/api3.total" > "$work/api.delete"
delta "$work/api0.dsum" "$work/api1.dsum" > "$work/api.create.dsum"
delta "$work/api0.dcount" "$work/api1.dcount" > "$work/api.create.dcount"
delta <(manager_counts "$work/m0") <(manager_counts "$work/m1") > "$work/mgr.create"
delta <(manager_counts "$work/m1") <(manager_counts "$work/m2") > "$work/mgr.idle"
delta <(manager_counts "$work/m2") <(manager_counts "$work/m3") > "$work/mgr.delete"
# Not the manager's: node heartbeats (leases, nodes) and Events.
noise='^(leases|events|nodes)(/|$)'
mgr_writes() { awk '$1 ~ /^runner_writes_total/ { s += $NF } END { print s + 0 }' "$1"; }
per_op() { awk -v n="$N" '$1 ~ /^runner_writes_total/ { sub(/.*op="/, "", $1); sub(/".*/, "", $1); printf "%s=%.2f ", $1, $NF / n }' "$1"; }
m3=$work/m3
row() { printf '%-46s %s\n' "$1" "$2"; }
dur_count=$(metric_value runner_reconcile_duration_seconds_count "$m3")
dur_sum=$(metric_value runner_reconcile_duration_seconds_sum "$m3")

echo
echo "manager benchmark: N=$N Runners (replicas 1, kwok Pods), idle ${IDLE}s, $(nproc) cores, load average at start $load_start"
echo
echo "apiserver requests per Runner, create -> all Ready (all clients: manager, controllers, kwok, the load generator's $N POST runners and its watches):"
per_runner_table "$work/api.create"
echo
echo "apiserver requests per Runner, delete -> all gone:"
per_runner_table "$work/api.delete"
echo
echo "writes during ${IDLE}s idle, by resource (apiserver):"
idle_rows=0
while read -r res verb n; do
  if is_write "$verb"; then echo "    $res $verb $n"; idle_rows=1; fi
done < "$work/api.idle"
[ "$idle_rows" = 1 ] || echo "    (none)"
echo "  (noise: leases, events, nodes: kwok's node heartbeats and other components' Events)"
echo
row "figure" "value"
row "children created (Deployment+Service), p50 / p99" \
  "$(kv children_p50_ms "$work/create.out") ms / $(kv children_p99_ms "$work/create.out") ms"
row "Ready (phase Available, Ready=True), p50 / p99" \
  "$(kv ready_p50_ms "$work/create.out") ms / $(kv ready_p99_ms "$work/create.out") ms"
row "all $N Ready after" "$(kv all_ready_s "$work/create.out") s"
row "apiserver latency (mean), create phase" \
  "$(server_latency "POST deployments" "POST services" "PATCH runners" "PATCH runners/status")"
row "apiserver writes/Runner, create (all clients)" \
  "$(awk -v n="$N" -v w="$(writes "$work/api.create")" 'BEGIN { printf "%.2f", w / n }')"
row "manager writes/Runner, create" \
  "$(awk -v n="$N" -v w="$(mgr_writes "$work/mgr.create")" 'BEGIN { printf "%.2f", w / n }') ($(per_op "$work/mgr.create"))"
row "manager reconciles/Runner, create" \
  "$(awk -v n="$N" '$1 == "runner_reconciles_total" { printf "%.2f", $NF / n }' "$work/mgr.create")"
row "manager reconcile errors, whole run" \
  "$(awk '$1 ~ /^runner_reconcile_errors_total/ { sub(/.*reason="/, "", $1); sub(/".*/, "", $1); printf "%s=%s ", $1, $NF; s += $NF }
          END { if (!s) print "0" }' <(manager_counts "$m3"))"
row "reconcile duration mean / p50 / p99" \
  "$(awk -v s="$dur_sum" -v c="$dur_count" 'BEGIN { printf "%.1f ms", c ? 1000 * s / c : 0 }') / $(histogram_quantile 0.5 "$m3") / $(histogram_quantile 0.99 "$m3")"
row "idle ${IDLE}s: apiserver writes all / w/o noise" \
  "$(writes "$work/api.idle") / $(writes "$work/api.idle" "$noise")"
row "idle ${IDLE}s: manager writes" "$(mgr_writes "$work/mgr.idle")"
row "idle ${IDLE}s: manager reconciles" \
  "$(awk '$1 == "runner_reconciles_total" { n = $NF } END { print n + 0 }' "$work/mgr.idle")"
row "delete all: Runners+children gone / Pods gone" \
  "$(kv delete_s "$work/delete.out") s / $(kv pods_gone_s "$work/delete.out") s"
row "manager writes/Runner, delete" \
  "$(awk -v n="$N" -v w="$(mgr_writes "$work/mgr.delete")" 'BEGIN { printf "%.2f", w / n }') ($(per_op "$work/mgr.delete"))"
row "manager RSS start / idle / peak (VmHWM)" \
  "$((rss_start / 1024)) MiB / $((rss_idle / 1024)) MiB / $((hwm / 1024)) MiB"
