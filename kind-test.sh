#!/usr/bin/env bash
# Proves the Runner lifecycle on a kind cluster with a manager started by
# `kubectl runner e2e` in this process (your kubeconfig, not a ServiceAccount).
#   KIND_CLUSTER  cluster name (default handbook-lab); created if missing, kept.
# Without Docker/kind, use scripts/local-e2e.sh (same proof, local control plane).
set -euo pipefail
cd "$(dirname "$0")"
CLUSTER=${KIND_CLUSTER:-handbook-lab}
step() { printf '==> %s\n' "$*" >&2; }

for tool in kind docker kubectl cargo; do
  if ! command -v "$tool" > /dev/null; then
    echo "kind-test.sh needs '$tool' on PATH; without Docker/kind run scripts/local-e2e.sh instead." >&2
    exit 1
  fi
done
docker info > /dev/null 2>&1 || { echo "the Docker engine is not running; start it, or run scripts/local-e2e.sh" >&2; exit 1; }

if kind get clusters 2> /dev/null | grep -qx "$CLUSTER"; then
  step "reusing kind cluster $CLUSTER"
else
  step "creating kind cluster $CLUSTER"
  kind create cluster --name "$CLUSTER" --wait 120s
fi
KUBECONFIG_FILE=$(mktemp)
trap 'rm -f "$KUBECONFIG_FILE"' EXIT
kind get kubeconfig --name "$CLUSTER" > "$KUBECONFIG_FILE"
export KUBECONFIG=$KUBECONFIG_FILE

step "building kubectl-runner"
cargo build --release --bin kubectl-runner
step "kubectl runner e2e (in-process manager)"
# e2e cleans up only what it created, also on failure and Ctrl-C.
cargo run --quiet --release --bin kubectl-runner -- e2e "$@"
step "kind-test passed on $CLUSTER"
