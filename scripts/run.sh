#!/usr/bin/env bash
# The main job in one command on a fresh machine: builds the control plane
# once (cached), brings up the local "dev" cluster (or reuses it), and runs
# kubectl-runner against it. The cluster keeps running for further commands;
# stop it with `bash tests/cluster/down.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/cluster/lib.sh
source tests/cluster/lib.sh

eval "$(bash tests/cluster/up.sh)"
export KUBECONFIG
step "cargo build"
cargo build --quiet
step "kubectl-runner --version"
cargo run --quiet -- --version
step "kubectl-runner --help"
cargo run --quiet -- --help
step "the cluster keeps running; use it with:  export KUBECONFIG=$KUBECONFIG"
step "stop it with:  bash tests/cluster/down.sh"
