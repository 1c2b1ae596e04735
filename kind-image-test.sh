#!/usr/bin/env bash
# Proves the in-cluster deployment on kind: builds the manager image, loads it,
# then scripts/in-cluster-check.sh installs CRD + RBAC + manager from
# manifests/, checks the ServiceAccount's permissions like `kubectl auth
# can-i`, runs a sample Runner to 1/1 Ready, and removes everything it
# created. Refuses to run where runner-system or the
# Runner CRD already exist (it would otherwise remove someone else's).
#   KIND_CLUSTER  cluster name (default handbook-lab); must exist (see kind-test.sh)
#   IMG           image tag (default kubectl-runner:kind)
set -euo pipefail
cd "$(dirname "$0")"
CLUSTER=${KIND_CLUSTER:-handbook-lab}
IMG=${IMG:-kubectl-runner:kind}
step() { printf '==> %s\n' "$*" >&2; }

for tool in kind docker kubectl; do
  command -v "$tool" > /dev/null || { echo "kind-image-test.sh needs '$tool' on PATH" >&2; exit 1; }
done
docker info > /dev/null 2>&1 || { echo "the Docker engine is not running" >&2; exit 1; }
kind get clusters 2> /dev/null | grep -qx "$CLUSTER" || { echo "no kind cluster $CLUSTER; run ./kind-test.sh first" >&2; exit 1; }
KUBECONFIG_FILE=$(mktemp)
kind get kubeconfig --name "$CLUSTER" > "$KUBECONFIG_FILE"
export KUBECONFIG=$KUBECONFIG_FILE

if kubectl get namespace runner-system > /dev/null 2>&1; then
  echo "refusing: namespace runner-system already exists on $CLUSTER" >&2; exit 1
fi
if kubectl get crd runners.lab.cloudlab.training > /dev/null 2>&1; then
  echo "refusing: the Runner CRD already exists on $CLUSTER" >&2; exit 1
fi

trap 'rm -f "$KUBECONFIG_FILE"' EXIT

step "docker build -t $IMG"
docker build -t "$IMG" .
step "kind load docker-image $IMG"
kind load docker-image "$IMG" --name "$CLUSTER"

# Install, permissions, sample Runner, cleanup: the same steps the local
# real-node tests run.
IMG=$IMG bash scripts/in-cluster-check.sh
step "kind-image-test passed"
