#!/usr/bin/env bash
# What kind-test.sh does, on machines without Docker: brings up the local
# control plane (tests/cluster/up.sh, built from Go modules and cached), runs
# `kubectl runner e2e` against it, and stops the cluster if it started it.
#   RUNNER_CLUSTER_NAME  which local cluster (default dev)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/cluster/lib.sh
source tests/cluster/lib.sh
if cluster_running; then
  step "using the running cluster"
else
  trap 'bash tests/cluster/down.sh' EXIT
fi
eval "$(bash tests/cluster/up.sh)"
export KUBECONFIG
step "building kubectl-runner"
cargo build --release --bin kubectl-runner
step "kubectl runner e2e"
cargo run --quiet --release --bin kubectl-runner -- e2e "$@"
