#!/usr/bin/env bash
# Proves the Runner lifecycle on a kind cluster with a manager started by
# `kubectl runner e2e` in this process (your kubeconfig, not a ServiceAccount),
# then again with that manager serving the webhooks from this machine
# (`e2e --local-webhooks`: the node's apiserver calls it through the Docker
# network's gateway).
# Arguments go to `kubectl runner e2e` (e.g. --image, see its --help).
#
#   KIND_CLUSTER     cluster name (default handbook-lab); created if missing,
#                    and then kept for kind-image-test.sh
#   KIND_NODE_IMAGE  node image to create it with (default: kind's own)
#   KIND_CONFIG      kind config file to create it with (default: none)
#   DOCKER_HOST      the engine, when not the default socket
#   RUNNER_BIN       a kubectl-runner binary to run instead of building one
#                    (`cargo build --release`)
#
# Without Docker/kind, use scripts/local-e2e.sh (same proof, local control plane).
set -euo pipefail
cd "$(dirname "$0")"
# shellcheck source=scripts/kind-lib.sh
source scripts/kind-lib.sh
CLUSTER=${KIND_CLUSTER:-handbook-lab}

tools=(kind docker kubectl)
[ -n "${RUNNER_BIN:-}" ] || tools+=(cargo)
kind_need_tools kind-test.sh "${tools[@]}"
kind_need_engine
case $(kind_cluster_state "$CLUSTER") in
  running) step "reusing kind cluster $CLUSTER" ;;
  stopped) kind_need_running "$CLUSTER" ;;
  absent)
    create=(kind create cluster --name "$CLUSTER" --wait 120s)
    [ -n "${KIND_NODE_IMAGE:-}" ] && create+=(--image "$KIND_NODE_IMAGE") && kind_need_privileged "$KIND_NODE_IMAGE"
    [ -n "${KIND_CONFIG:-}" ] && create+=(--config "$KIND_CONFIG")
    step "creating kind cluster $CLUSTER: ${create[*]:3}"
    # kind removes a cluster it failed to create.
    kind_create "${create[@]}"
    ;;
esac
KUBECONFIG_FILE=$(mktemp)
trap 'rm -f "$KUBECONFIG_FILE"' EXIT
kind_kubeconfig "$CLUSTER" "$KUBECONFIG_FILE"
export KUBECONFIG=$KUBECONFIG_FILE

if [ -n "${RUNNER_BIN:-}" ]; then
  [ -x "$RUNNER_BIN" ] || fail "RUNNER_BIN=$RUNNER_BIN is not an executable"
  runner=("$RUNNER_BIN")
else
  step "building kubectl-runner"
  cargo build --release --bin kubectl-runner
  runner=(cargo run --quiet --release --bin kubectl-runner --)
fi
step "kubectl runner e2e (in-process manager)"
# e2e cleans up only what it created, also on failure and Ctrl-C.
"${runner[@]}" e2e "$@"
step "kubectl runner e2e --local-webhooks (the kind node's apiserver calls this machine)"
"${runner[@]}" e2e --local-webhooks "$@"
step "kind-test passed on $CLUSTER"
