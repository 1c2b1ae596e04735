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
#
# The tests run in a cluster of their own, named "test" (RUNNER_CLUSTER_NAME
# chooses another), never in the "dev" cluster scripts/run.sh leaves running
# for the user: tests delete and replace cluster-wide objects (the CRD, the
# webhook registrations), and refuse to where others' Runners live
# (tests/support/guard.rs). Every test binary runs even after one fails
# (--no-fail-fast); the last line sums them all up.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUNNER_CLUSTER_NAME=${RUNNER_CLUSTER_NAME:-test}
if [ "$RUNNER_CLUSTER_NAME" = dev ]; then
  echo "error: RUNNER_CLUSTER_NAME=dev is the cluster scripts/run.sh keeps for you; the tests use their own (unset it)" >&2
  exit 2
fi
# shellcheck source=tests/cluster/lib.sh
source tests/cluster/lib.sh

# Each cargo test's output also goes to $results, which summary() reads.
results=$(mktemp)
started=0
cleanup() {
  rm -f "$results"
  [ "$started" = 0 ] || bash tests/cluster/down.sh
}
trap cleanup EXIT
if cluster_running; then
  step "tests: using the running \"$CLUSTER_NAME\" cluster (left running afterwards)"
else
  step "tests: starting the \"$CLUSTER_NAME\" cluster (stopped afterwards)"
  started=1
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
failed=0
# tested ARGS...: cargo test ARGS, recorded; a failure is counted, not fatal.
tested() {
  "${innet[@]}" cargo test "$@" 2>&1 | tee -a "$results" || failed=1
}
# One line for the whole run: the sums of cargo's "test result:" lines and
# the names of the tests that failed.
summary() {
  awk '
    /^test result: / { for (i = 1; i <= NF; i++) { n = $i + 0
        if ($(i+1) ~ /^passed/) p += n; if ($(i+1) ~ /^failed/) f += n; if ($(i+1) ~ /^ignored/) g += n } }
    /^test .* \.\.\. FAILED$/ { names = names (names ? ", " : "") $2 }
    END { printf "tests: %d passed, %d failed, %d ignored%s\n", p, f, g, (names ? " (failed: " names ")" : "") }
  ' "$results"
}

step "cargo test --all-targets --no-fail-fast (KUBECONFIG=$KUBECONFIG)"
tested --all-targets --no-fail-fast
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
  tested --test real_node -- --ignored --nocapture --test-threads=1
  step "real node tests took $((SECONDS - test_start)) s"
fi
summary
[ "$failed" = 0 ] || { step "tests failed"; exit 1; }
step "tests passed"
