#!/usr/bin/env bash
# The one command that sets up and passes the tests: brings the local control
# plane up if it is not running (building it once, cached), then runs
# `cargo fmt --check`, `cargo clippy --all-targets -- -D warnings` and
# `cargo test --all-targets` against it, and stops the cluster again if this
# script started it. Cluster settings: see tests/cluster/lib.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/cluster/lib.sh
source tests/cluster/lib.sh

if cluster_running; then
  step "tests: using the running cluster (left running afterwards)"
else
  step "tests: starting a cluster (stopped afterwards)"
  trap 'bash tests/cluster/down.sh' EXIT
fi
# Verifies a running cluster, starts a stopped one; prints the export line.
eval "$(bash tests/cluster/up.sh)"

step "cargo fmt --check"
cargo fmt --check
step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings
step "cargo test --all-targets (KUBECONFIG=$KUBECONFIG)"
cargo test --all-targets
step "tests passed"
