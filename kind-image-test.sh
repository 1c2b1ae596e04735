#!/usr/bin/env bash
# Proves the in-cluster deployment on kind: builds the manager image, loads it,
# installs CRD + RBAC + manager from manifests/, checks the ServiceAccount's
# permissions like `kubectl auth can-i`, runs a sample Runner to 1/1 Ready, and
# removes everything it created. Refuses to run where runner-system or the
# Runner CRD already exist (it would otherwise remove someone else's).
#   KIND_CLUSTER  cluster name (default handbook-lab); must exist (see kind-test.sh)
#   IMG           image tag (default kubectl-runner:kind)
set -euo pipefail
cd "$(dirname "$0")"
CLUSTER=${KIND_CLUSTER:-handbook-lab}
IMG=${IMG:-kubectl-runner:kind}
SA=system:serviceaccount:runner-system:runner-controller-manager
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

cleanup() {
  step "cleanup: sample Runner, manager, RBAC, CRD"
  kubectl delete runner runner-sample -n default --ignore-not-found --wait=true --timeout=60s || true
  kubectl delete -f manifests/manager.yaml --ignore-not-found || true
  kubectl delete -f manifests/rbac.yaml --ignore-not-found || true
  kubectl delete -f manifests/crd.yaml --ignore-not-found || true
  rm -f "$KUBECONFIG_FILE"
}
trap cleanup EXIT

step "docker build -t $IMG"
docker build -t "$IMG" .
step "kind load docker-image $IMG"
kind load docker-image "$IMG" --name "$CLUSTER"

step "install CRD, RBAC and the manager"
kubectl apply --server-side -f manifests/crd.yaml
kubectl wait --for=condition=Established crd/runners.lab.cloudlab.training --timeout=60s
kubectl apply --server-side -f manifests/rbac.yaml
sed "s|image: kubectl-runner:dev|image: $IMG|" manifests/manager.yaml | kubectl apply --server-side -f -
kubectl -n runner-system rollout status deployment/runner-controller-manager --timeout=180s

step "permissions of $SA"
for check in "list deployments.apps" "watch deployments.apps" "list services" "watch services" "create deployments.apps" "patch runners.lab.cloudlab.training/status"; do
  # shellcheck disable=SC2086 # $check is "VERB RESOURCE"
  answer=$(kubectl auth can-i $check --all-namespaces --as="$SA")
  printf '  can-i %-45s %s\n' "$check" "$answer" >&2
  [ "$answer" = yes ] || { echo "the ServiceAccount can't $check" >&2; exit 1; }
done

step "sample Runner to 1/1 Ready"
kubectl apply -f - <<'YAML'
apiVersion: lab.cloudlab.training/v1alpha1
kind: Runner
metadata:
  name: runner-sample
  namespace: default
spec:
  image: nginx:1.27
  replicas: 1
YAML
kubectl wait --for=condition=Ready runner/runner-sample -n default --timeout=180s
kubectl get runner,deployment,service -n default -l app.kubernetes.io/instance=runner-sample >&2 || true
kubectl get runner runner-sample -n default
step "kind-image-test passed"
