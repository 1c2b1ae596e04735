#!/usr/bin/env bash
# The one command that sets up and passes the tests: brings the local control
# plane up if it is not running (building it once, cached), then runs
# `cargo fmt --check`, `cargo clippy --all-targets -- -D warnings` and
# `cargo test --all-targets` against it, and stops the cluster again if this
# script started it. Cluster settings: see tests/cluster/lib.sh.
#
# With a real node (RUNNER_CLUSTER_REAL_NODE=1, or a cluster started with
# it), the tests run inside the cluster's network namespace, and afterwards
# the manager image is built (scripts/image.sh, RUNNER_IMAGE_PROFILE as
# there), loaded into the real node, and the real-node target runs:
# `cargo test --test real_node -- --ignored`. Without a real node that target
# is reported as ignored, never as passed.
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
innet=()
real_node=${RUNNER_CLUSTER_REAL_NODE:-0}
[ -d "$REAL_NODE_STATE" ] && real_node=1
if [ "$real_node" = 1 ]; then
  # Dependencies first: there is no route out of the namespace.
  cargo fetch --locked
  innet=(nsenter --net="/run/netns/$REAL_NODE_NETNS" --)
fi

step "cargo fmt --check"
cargo fmt --check
step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings
step "cargo test --all-targets (KUBECONFIG=$KUBECONFIG)"
"${innet[@]}" cargo test --all-targets
if [ "$real_node" = 1 ]; then
  step "real node: the manager image (scripts/image.sh)"
  export RUNNER_IMAGE=localhost/kubectl-runner:test RUNNER_TEST_MANAGER_IMAGE=localhost/kubectl-runner:test
  export RUNNER_TEST_MANAGER_IMAGE_V2=localhost/kubectl-runner:test-v2
  image_start=$SECONDS
  tar=$(bash scripts/image.sh | tail -n 1)
  bash tests/cluster/real-node.sh load "$tar"
  # Second names for an upgrade and for e2e's image update.
  bash tests/cluster/real-node.sh tag "$RUNNER_IMAGE" "$RUNNER_TEST_MANAGER_IMAGE_V2"
  bash tests/cluster/real-node.sh tag "$REAL_NODE_WEB_IMAGE" "$REAL_NODE_WEB_IMAGE-update"
  step "real node: image built and loaded in $((SECONDS - image_start)) s"
  step "cargo test --test real_node -- --ignored (one at a time: each installs the cluster-wide manager)"
  test_start=$SECONDS
  "${innet[@]}" cargo test --test real_node -- --ignored --nocapture --test-threads=1
  step "real node tests took $((SECONDS - test_start)) s"
fi
step "tests passed"
