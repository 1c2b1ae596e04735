# shellcheck shell=bash
# Shared by benches/sustained.sh and benches/scale.sh: building both managers,
# a bench cluster of our own, starting and stopping one manager at a time,
# and reading it (/proc, /metrics). Sourced, not run. Expects $root, $work
# and a step() function.
#
# Environment (all optional):
#   RUNNER_BENCH_CLUSTER   cluster name, default "bench" (tests/cluster/lib.sh)
#   RUNNER_BENCH_PROFILE   release (default) or dev: the dev build skips the
#                          ~10 min release build; its CPU and RSS are not the
#                          release figures
#   RUNNER_BASELINE_DIR    the controller-runtime baseline (twin/ sources),
#                          default ../shared/baseline next to the checkout;
#                          without it (or without Go) only this manager runs
#   RUNNER_BENCH_MANAGERS  which managers, in order, default "rust", each
#                          variant's "rust-NAME", then "twin"; "twin-cN" is
#                          the twin with --max-concurrent-reconciles=N
#   RUNNER_MANAGER_ARGS    extra arguments of `kubectl-runner run-manager`
#   RUNNER_BENCH_VARIANTS  more rows of this manager, so two designs run side
#                          by side: "NAME:ARGS;NAME:ARGS" adds "rust-NAME",
#                          this binary with ARGS after RUNNER_MANAGER_ARGS
#                          (e.g. "json:--log-format=json"); "NAME@REV:ARGS"
#                          builds the manager of git revision REV instead
#                          (e.g. "plain@pacing:", a design on a branch)
#   RUNNER_BENCH_KEEP=1    leave the bench cluster running at the end
#   RUNNER_BENCH_REUSE=1   use the bench cluster a run left running instead of
#                          a fresh one (scale.sh: measure a new build on
#                          Runners already settled, without creating them)
#   RUNNER_TWIN_ARGS       extra arguments of the twin (e.g.
#                          --max-concurrent-reconciles=4); default none, as
#                          the kubebuilder scaffold runs it
#   CARGO_TARGET_DIR, XDG_CACHE_HOME (the twin binary is cached there)

# Always our own cluster: never inherit a name or state dir that could point
# at someone else's (down.sh deletes the state dir).
export RUNNER_CLUSTER_NAME=${RUNNER_BENCH_CLUSTER:-bench}
unset RUNNER_CLUSTER_STATE
BASE=${RUNNER_BASELINE_DIR:-$root/../shared/baseline}
manager_pid=
manager_name=

# RUNNER_BENCH_VARIANTS, checked before anything is built: the names in
# order (variant_names), each one's arguments (variant_args) and the git
# revision it is built from, if not this tree (variant_rev).
variant_names=()
declare -A variant_args=() variant_rev=()
parse_variants() {
  local entry name entries rev
  IFS=';' read -ra entries <<< "${RUNNER_BENCH_VARIANTS:-}"
  for entry in "${entries[@]}"; do
    entry=$(echo "$entry" | sed 's/^ *//; s/ *$//')
    [ -n "$entry" ] || continue
    name=${entry%%:*}
    rev=
    case $name in *@*) rev=${name#*@} name=${name%%@*} ;; esac
    if [ -n "$rev" ] && ! git -C "$root" rev-parse -q --verify "$rev^{commit}" > /dev/null; then
      echo "error: RUNNER_BENCH_VARIANTS: '$entry': '$rev' is no git revision of this checkout" >&2
      exit 2
    fi
    if [ "${entry%%:*}" = "$entry" ] || ! [[ $name =~ ^[a-z0-9]+(-[a-z0-9]+)*$ ]] || [ -n "${variant_args[$name]+set}" ]; then
      echo "error: RUNNER_BENCH_VARIANTS: '$entry': want NAME:ARGS, NAME unique, of a-z, 0-9 and inner '-'" \
        "(entries separated by ';', e.g. \"json:--log-format=json\")" >&2
      exit 2
    fi
    variant_names+=("$name")
    variant_args[$name]=${entry#*:}
    variant_rev[$name]=$rev
  done
}
parse_variants
# Our rows: "rust", then "rust-NAME" per variant.
ours_rows=rust
for name in "${variant_names[@]}"; do ours_rows+=" rust-$name"; done
MANAGERS=${RUNNER_BENCH_MANAGERS:-$ours_rows twin}
for m in $MANAGERS; do
  case $m in rust-*) [ -n "${variant_args[${m#rust-}]+set}" ] || {
    echo "error: RUNNER_BENCH_MANAGERS names $m, but RUNNER_BENCH_VARIANTS has no '${m#rust-}:ARGS'" >&2
    exit 2
  } ;;
  esac
done

# manager_args NAME: the extra arguments of our manager row NAME (rust or
# rust-VARIANT), one per line.
manager_args() {
  local a=() v=()
  read -ra a <<< "${RUNNER_MANAGER_ARGS:-}"
  case $1 in rust-*) read -ra v <<< "${variant_args[${1#rust-}]}" ;; esac
  a+=("${v[@]}")
  [ "${#a[@]}" = 0 ] || printf '%s\n' "${a[@]}"
}

# build_all EXAMPLE...: the manager and the examples named, copied to $work
# (the target dir is shared and may be rebuilt during the run); the twin
# built once per source hash into the cache. Sets $twin ("" without one).
build_all() {
  local target=${CARGO_TARGET_DIR:-$root/target} profile=${RUNNER_BENCH_PROFILE:-release} outdir ex args=()
  outdir=$([ "$profile" = dev ] && echo debug || echo "$profile")
  for ex in "$@"; do args+=(--example "$ex"); done
  # The commit the figures are of: the one built, whatever HEAD is by the end.
  bench_commit=$(git rev-parse --short HEAD 2> /dev/null || echo '?')
  git diff --quiet HEAD -- src Cargo.toml Cargo.lock 2> /dev/null || bench_commit="$bench_commit+changes"
  step "building the $profile manager and ${*} (cargo build --profile $profile)"
  cargo build --profile "$profile" --bin kubectl-runner "${args[@]}"
  cp "$target/$outdir/kubectl-runner" "$work/"
  for ex in "$@"; do cp "$target/$outdir/examples/$ex" "$work/"; done
  local name tree
  local commit
  for name in "${variant_names[@]}"; do
    [ -n "${variant_rev[$name]}" ] || continue
    # A checkout of its own, built into the same target dir (its own path
    # keeps its artifacts apart), removed once the binary is copied. The
    # path is the commit's, under the target dir: a second bench of the
    # same commit finds its build there.
    commit=$(git -C "$root" rev-parse --short "${variant_rev[$name]}^{commit}")
    tree="$target/bench-trees/$commit"
    step "building the $profile manager of ${variant_rev[$name]} ($commit) for rust-$name"
    git -C "$root" worktree remove --force "$tree" 2> /dev/null || rm -rf "$tree"
    git -C "$root" worktree prune
    git -C "$root" worktree add -q --detach "$tree" "$commit"
    (cd "$tree" && CARGO_TARGET_DIR=$target cargo build --profile "$profile" --bin kubectl-runner)
    cp "$target/$outdir/kubectl-runner" "$work/kubectl-runner-$name"
    git -C "$root" worktree remove --force "$tree"
  done
  twin=
  case " $MANAGERS " in *" twin"*) ;; *) return 0 ;; esac
  if [ ! -d "$BASE/twin" ] || ! command -v go > /dev/null; then
    step "no baseline at $BASE/twin (or no Go): measuring this manager alone"
    MANAGERS=$(for m in $MANAGERS; do case $m in twin*) ;; *) printf '%s ' "$m" ;; esac; done | sed 's/ $//')
    return 0
  fi
  local cache=${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-runner-bench hash
  hash=$(cd "$BASE/twin" && find . -type f \( -name '*.go' -o -name 'go.*' \) -print0 | sort -z |
    xargs -0 sha256sum | sha256sum | cut -c1-12)
  twin=$cache/runner-twin-$hash
  if [ ! -x "$twin" ]; then
    step "building the baseline twin from $BASE/twin into $cache (cold: ~5 min on 2 cores)"
    mkdir -p "$cache"
    (cd "$BASE/twin" && CGO_ENABLED=0 go build -o "$twin.tmp" ./cmd) && mv "$twin.tmp" "$twin"
  fi
}

# cluster_up: a fresh bench cluster (the caller sets RUNNER_CLUSTER_NODES and
# the RUNNER_CLUSTER_* knobs), KUBECONFIG exported, the CRD installed, the
# namespace `kubectl runner install` makes (our manager's presence Lease
# lives there), and kubectl the one built with the control plane.
cluster_up() {
  if [ "${RUNNER_BENCH_REUSE:-0}" = 1 ]; then
    step "reusing the control plane '$RUNNER_CLUSTER_NAME' (RUNNER_BENCH_REUSE=1)"
  else
    step "fresh control plane '$RUNNER_CLUSTER_NAME' ($RUNNER_CLUSTER_NODES fake node(s))"
    bash tests/cluster/down.sh > /dev/null 2>&1 || true
  fi
  # Two steps, so a failing up.sh stops the script (eval "$(...)" would not).
  local kubeconfig_export
  kubeconfig_export=$(bash tests/cluster/up.sh)
  eval "$kubeconfig_export"
  export KUBECONFIG
  state=$(dirname "$KUBECONFIG")
  kubectl_bin=$(bash tests/cluster/build.sh 2> /dev/null | tail -n 1)/kubectl
  kubectl apply --server-side -f manifests/crd.yaml > /dev/null
  kubectl wait --for=condition=Established --timeout=60s crd/runners.lab.cloudlab.training > /dev/null
  kubectl create namespace runner-system --dry-run=client -o yaml | kubectl apply -f - > /dev/null
}
kubectl() { "$kubectl_bin" "$@"; }

cluster_down() {
  if [ "${RUNNER_BENCH_KEEP:-0}" = 1 ]; then
    step "leaving the bench cluster '$RUNNER_CLUSTER_NAME' running (RUNNER_BENCH_KEEP=1); stop it with:" \
      "RUNNER_CLUSTER_NAME=$RUNNER_CLUSTER_NAME bash tests/cluster/down.sh"
    return 0
  fi
  step "stopping the bench cluster '$RUNNER_CLUSTER_NAME'"
  bash tests/cluster/down.sh > /dev/null 2>&1 || true
}

port_in_use() { (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null; }
free_port() {
  local p
  for p in $(seq 18600 2 18700); do
    port_in_use "$p" || port_in_use $((p + 1)) || { echo "$p"; return; }
  done
  echo "error: no two free ports between 18600 and 18701" >&2
  return 1
}

# manager_start rust|rust-VARIANT|twin|twin-cN LOG: starts that manager (all
# namespaces) and waits for its /readyz; rust-VARIANT is ours with the
# variant's arguments; twin-cN is the twin with N reconciles in flight
# (after RUNNER_TWIN_ARGS, so N holds). Sets manager_pid, manager_name,
# metrics_port.
manager_start() {
  manager_name=$1
  metrics_port=$(free_port)
  local health=$((metrics_port + 1)) i concurrency=() extra=()
  if [ "$1" = rust ] || [ "${1#rust-}" != "$1" ]; then
    mapfile -t extra < <(manager_args "$1")
    local bin="$work/kubectl-runner"
    [ -x "$bin-${1#rust-}" ] && bin="$bin-${1#rust-}"
    "$bin" run-manager --metrics-addr "127.0.0.1:$metrics_port" \
      --health-addr "127.0.0.1:$health" "${extra[@]}" > "$2" 2>&1 &
  else
    case $1 in twin-c*) concurrency=("--max-concurrent-reconciles=${1#twin-c}") ;; esac
    # shellcheck disable=SC2086
    "$twin" --metrics-bind-address "127.0.0.1:$metrics_port" \
      --health-probe-bind-address "127.0.0.1:$health" ${RUNNER_TWIN_ARGS:-} "${concurrency[@]}" > "$2" 2>&1 &
  fi
  manager_pid=$!
  step "$1 manager${concurrency:+ (${concurrency[*]})}${extra:+ (${extra[*]})}: pid $manager_pid," \
    "metrics 127.0.0.1:$metrics_port, log $2"
  for i in $(seq 240); do
    # 200 once the caches synced: "reconciling" (ours), "ok" (the twin).
    curl -fsS -o /dev/null "http://127.0.0.1:$health/readyz" 2> /dev/null && return 0
    kill -0 "$manager_pid" 2> /dev/null || { step "the $1 manager exited"; tail -n 20 "$2" >&2; return 1; }
    sleep 0.25
  done
  step "the $1 manager is not ready after 60 s"
  return 1
}

manager_stop() {
  [ -n "$manager_pid" ] || return 0
  if kill -0 "$manager_pid" 2> /dev/null; then
    step "stopping the $manager_name manager (pid $manager_pid)"
    kill -TERM "$manager_pid" 2> /dev/null || true
    wait "$manager_pid" 2> /dev/null || true
  fi
  manager_pid=
}

# passes_metric: the running manager's counter of reconcile passes: ours
# runner_reconciles_total, the twin's controller_runtime_reconcile_total
# (every result: success, error, requeue).
passes_metric() {
  case $manager_name in twin*) echo controller_runtime_reconcile_total ;; *) echo runner_reconciles_total ;; esac
}

# reconciles: the manager's reconcile passes so far (its /metrics), ours
# without the resync's (runner_passes_total{trigger="resync"}): every
# Runner once per 5 minutes, so a manager up that long is never quiet.
reconciles() {
  local m
  m=$(passes_metric)
  curl -fsS "http://127.0.0.1:$metrics_port/metrics" |
    awk -v m="$m" 'index($0, m) == 1 && (substr($0, length(m) + 1, 1) ~ /[{ ]/) { s += $NF }
      /^runner_passes_total\{trigger="resync"/ { s -= $NF } END { printf "%d\n", s }'
}

# wait_quiet MIN: until the manager has reconciled at least MIN times and
# then not at all for 5 s (its initial pass over every Runner is over);
# prints the seconds it took. Gives up after RUNNER_BENCH_SYNC_TIMEOUT
# (default 900) seconds.
wait_quiet() {
  local min=$1 last=-1 now still=0 t0=$SECONDS
  while ((SECONDS - t0 < ${RUNNER_BENCH_SYNC_TIMEOUT:-900})); do
    now=$(reconciles)
    if [ "$now" -ge "$min" ] && [ "$now" = "$last" ]; then
      still=$((still + 1))
      ((still >= 10)) && { echo $((SECONDS - t0)); return 0; }
    else
      still=0
    fi
    last=$now
    sleep 0.5
  done
  step "warning: the $manager_name manager is still reconciling after ${RUNNER_BENCH_SYNC_TIMEOUT:-900} s ($last passes)"
  echo $((SECONDS - t0))
}

rss_mib() { awk '/^VmRSS/ { printf "%.1f\n", $2 / 1024 }' "/proc/$1/status"; }
hwm_mib() { awk '/^VmHWM/ { printf "%.1f\n", $2 / 1024 }' "/proc/$1/status"; }
# CPU seconds (user + system) of a process so far.
cpu_s() { awk '{ sub(/^.*\) /, ""); printf "%.2f\n", ($12 + $13) / 100 }' "/proc/$1/stat"; }
