#!/usr/bin/env bash
# The main job in one command on a fresh machine: builds the control plane
# once (cached), brings up the local "dev" cluster (or reuses it), installs the
# CRD and RBAC, starts the reconcile manager, and walks a demo Runner through
# create -> get -> describe -> diagnose. On a terminal the manager then keeps
# running in the foreground (Ctrl-C stops it); otherwise it is stopped. Either
# way no manager process is left behind; the cluster keeps running, and the
# last lines say how to delete the demo and stop the cluster.
#
# The manager runs with --leader-elect: it holds the leader Lease, which is
# how `diagnose` sees a manager that runs outside the cluster.
#
# Environment: the cluster settings of tests/cluster/lib.sh, and
# RUNNER_DEMO_NAMESPACE (default "default"), where the demo Runner lives.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/cluster/lib.sh
source tests/cluster/lib.sh

demo_ns=${RUNNER_DEMO_NAMESPACE:-default}

eval "$(bash tests/cluster/up.sh)"
export KUBECONFIG
step "cargo build"
# Built once; every step below runs this binary. Starting the manager through
# `cargo run` would make "$!" cargo's pid, and stopping cargo leaves the
# manager running.
bin=$(cargo build --quiet --bin kubectl-runner --message-format=json-render-diagnostics |
  sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
[ -x "$bin" ] || { echo "error: cargo build did not report the kubectl-runner binary" >&2; exit 1; }
runner() { "$bin" "$@"; }

step "kubectl runner install (CRD + RBAC)"
runner install

log="$STATE/logs/run-manager.log"
step "kubectl runner run-manager --leader-elect (log: $log)"
manager=
stop_manager() {
  [ -n "$manager" ] || return 0
  kill -TERM "$manager" 2> /dev/null || true
  wait "$manager" 2> /dev/null || true
  manager=
}
trap stop_manager EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
"$bin" run-manager --leader-elect --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 > "$log" 2>&1 < /dev/null &
manager=$!

if runner get demo -n "$demo_ns" -o name > /dev/null 2>&1; then
  step "Runner $demo_ns/demo exists; scaling it to 2"
  runner scale demo -n "$demo_ns" --replicas 2 --wait
else
  step "kubectl runner create demo --image nginx:1.27 --replicas 2 --wait"
  runner create demo -n "$demo_ns" --image nginx:1.27 --replicas 2 --wait
fi
step "kubectl runner get -A -o wide"
runner get -A -o wide
step "kubectl runner describe demo"
runner describe demo -n "$demo_ns"
step "kubectl runner diagnose demo"
runner diagnose demo -n "$demo_ns"

if [ -t 0 ]; then
  step "the manager keeps reconciling; try 'kubectl runner scale demo --replicas 3' in another shell (KUBECONFIG=$KUBECONFIG). Ctrl-C stops it."
  wait "$manager" || true
  manager=
else
  stop_manager
fi
# How to clean up. The demo keeps the manager's finalizer, and no manager
# runs any more: said here, so nobody is surprised by a delete that hangs.
cat >&2 << EOF
==> [$CLUSTER_NAME] done; the manager is stopped, the "$CLUSTER_NAME" cluster keeps running: export KUBECONFIG=$KUBECONFIG
    Delete the demo with a manager running, which removes its children and then its finalizer:
      kubectl runner run-manager &   # or: bash scripts/run.sh on a terminal
      kubectl runner delete demo -n $demo_ns --wait
    Without a manager, 'kubectl runner delete demo' only marks it for deletion: it stays (with its
    Deployment and Service) until a manager next runs and cleans up; --wait would wait for that.
    Stop the cluster and delete all its state, the demo included: bash tests/cluster/down.sh
    The tests use a cluster of their own ("test"): bash tests/run.sh leaves this one alone.
EOF
