#!/usr/bin/env bash
# The main job in one command on a fresh machine: builds the control plane
# once (cached), brings up the local "dev" cluster (or reuses it), installs the
# CRD and RBAC, starts the reconcile manager, and walks a demo Runner through
# create -> get -> describe -> diagnose. On a terminal the manager then keeps
# running in the foreground (Ctrl-C stops it); otherwise it is stopped. The
# cluster keeps running; stop it with `bash tests/cluster/down.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/cluster/lib.sh
source tests/cluster/lib.sh

eval "$(bash tests/cluster/up.sh)"
export KUBECONFIG
step "cargo build"
cargo build --quiet --bin kubectl-runner
runner() { cargo run --quiet --bin kubectl-runner -- "$@"; }

step "kubectl runner install (CRD + RBAC)"
runner install

log="$STATE/logs/run-manager.log"
step "kubectl runner run-manager (log: $log)"
runner run-manager --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 > "$log" 2>&1 &
manager=$!
trap 'kill "$manager" 2> /dev/null || true; wait "$manager" 2> /dev/null || true' EXIT

if runner get demo -n default -o name > /dev/null 2>&1; then
  step "Runner default/demo exists; scaling it to 2"
  runner scale demo -n default --replicas 2 --wait
else
  step "kubectl runner create demo --image nginx:1.27 --replicas 2 --wait"
  runner create demo -n default --image nginx:1.27 --replicas 2 --wait
fi
step "kubectl runner get -A -o wide"
runner get -A -o wide
step "kubectl runner describe demo"
runner describe demo -n default
step "kubectl runner diagnose demo"
runner diagnose demo -n default || true

if [ -t 0 ]; then
  step "the manager keeps reconciling; try 'kubectl runner scale demo --replicas 3' in another shell (KUBECONFIG=$KUBECONFIG). Ctrl-C stops it."
  wait "$manager"
else
  step "done; the cluster keeps running (export KUBECONFIG=$KUBECONFIG); stop it with: bash tests/cluster/down.sh"
fi
