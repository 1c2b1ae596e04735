#!/usr/bin/env bash
# The cluster-agnostic half of an image test: on whatever cluster $KUBECONFIG
# points at, with the manager image already there, installs CRD + RBAC +
# manager from manifests/, checks the ServiceAccount's permissions as
# `kubectl auth can-i --as` does, runs a sample Runner to Ready, and removes
# what it created. kind-image-test.sh runs it on kind; the real-node tests
# (tests/real_node/in_cluster_check.rs) on the local cluster.
#
# Two proofs beyond Ready: the manager's Pod runs $IMG with a pull policy
# that uses the image already on the node (a loaded image, never a
# registry's), and the sample Runner answers HTTP through its Service's
# ClusterIP from inside the cluster (its own Pod runs wget or curl; the
# sample image needs a shell and one of them).
#
#   IMG               the manager image (required)
#   KUBECTL           kubectl to use (default: kubectl on PATH)
#   SAMPLE_IMAGE      image of the sample Runner (default nginx:1.27)
#   SAMPLE_PORT       its port (default 80)
#   SAMPLE_NAMESPACE  where it runs (default default)
#   TIMEOUT           per wait, in seconds (default 180)
#
# Cleanup deletes the sample Runner and waits until the manager has removed
# it (its finalizer) before the manager goes; the CRD goes last, and only
# when no Runner is left in the cluster: deleting a CRD deletes every
# Runner, and one whose finalizer no manager removes any more keeps the CRD
# deletion hanging.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${IMG:?set IMG to the manager image}"
KUBECTL=${KUBECTL:-kubectl}
SAMPLE_IMAGE=${SAMPLE_IMAGE:-nginx:1.27}
SAMPLE_PORT=${SAMPLE_PORT:-80}
SAMPLE_NAMESPACE=${SAMPLE_NAMESPACE:-default}
TIMEOUT=${TIMEOUT:-180}
SA=system:serviceaccount:runner-system:runner-controller-manager
CRD=runners.lab.cloudlab.training
step() { printf '==> [in-cluster] %s\n' "$*" >&2; }
k() { "$KUBECTL" "$@"; }

cleanup() {
  step "cleanup: the sample Runner (the manager removes its finalizer), the manager, RBAC, the CRD"
  k delete runner runner-sample -n "$SAMPLE_NAMESPACE" --ignore-not-found --wait=true --timeout="${TIMEOUT}s" || true
  k delete -f manifests/manager.yaml --ignore-not-found --wait=true --timeout="${TIMEOUT}s" || true
  k delete -f manifests/rbac.yaml --ignore-not-found || true
  local left
  left=$(k get runners.lab.cloudlab.training -A --no-headers 2> /dev/null | wc -l || echo 0)
  if [ "$left" -gt 0 ]; then
    step "keeping the CRD: $left Runner(s) not made here are still in the cluster"
  else
    k delete -f manifests/crd.yaml --ignore-not-found --wait=true --timeout="${TIMEOUT}s" || true
  fi
}
trap cleanup EXIT

step "install CRD, RBAC and the manager ($IMG)"
k apply --server-side -f manifests/crd.yaml
k wait --for=condition=Established "crd/$CRD" --timeout="${TIMEOUT}s"
k apply --server-side -f manifests/rbac.yaml
sed "s|image: kubectl-runner:dev|image: $IMG|" manifests/manager.yaml | k apply --server-side -f -
k -n runner-system rollout status deployment/runner-controller-manager --timeout="${TIMEOUT}s"
policy=$(k -n runner-system get deployment runner-controller-manager -o jsonpath='{.spec.template.spec.containers[0].imagePullPolicy}')
running=$(k -n runner-system get pods -l app.kubernetes.io/name=runner-controller-manager \
  -o jsonpath='{range .items[*]}{.status.containerStatuses[0].image}{" "}{.status.containerStatuses[0].imageID}{"\n"}{end}')
step "manager image: pull policy $policy; running: ${running:-nothing}"
[ "$policy" != Always ] || { echo "the manager's pull policy is Always: a loaded image would be pulled from a registry" >&2; exit 1; }
[ -n "$running" ] || { echo "no manager Pod reports its image" >&2; exit 1; }

step "permissions of $SA"
for check in "list deployments.apps" "watch deployments.apps" "create deployments.apps" "list services" \
  "watch services" "patch runners.lab.cloudlab.training/status" "create tokenreviews.authentication.k8s.io"; do
  # shellcheck disable=SC2086 # $check is "VERB RESOURCE"
  answer=$(k auth can-i $check --all-namespaces --as="$SA" || true)
  printf '  can-i %-45s %s\n' "$check" "$answer" >&2
  [ "$answer" = yes ] || { echo "the ServiceAccount can't $check" >&2; exit 1; }
done

step "the webhooks answer (a server-side dry run; the Service follows a Ready manager by a moment)"
probe='{"apiVersion":"lab.cloudlab.training/v1alpha1","kind":"Runner","metadata":{"generateName":"webhook-probe-","namespace":"runner-system"},"spec":{"image":"probe:1","replicas":1,"port":8080}}'
for i in $(seq "$TIMEOUT"); do
  printf '%s' "$probe" | k create --dry-run=server -f - > /dev/null 2>&1 && break
  [ "$i" = "$TIMEOUT" ] && { printf '%s' "$probe" | k create --dry-run=server -f - ; exit 1; }
  sleep 1
done

step "sample Runner to 1/1 Ready"
k apply -f - << YAML
apiVersion: lab.cloudlab.training/v1alpha1
kind: Runner
metadata:
  name: runner-sample
  namespace: $SAMPLE_NAMESPACE
spec:
  image: $SAMPLE_IMAGE
  replicas: 1
  port: $SAMPLE_PORT
YAML
k wait --for=condition=Ready runner/runner-sample -n "$SAMPLE_NAMESPACE" --timeout="${TIMEOUT}s"
k get runner,deployment,service -n "$SAMPLE_NAMESPACE" -l app.kubernetes.io/instance=runner-sample >&2 || true
k get runner runner-sample -n "$SAMPLE_NAMESPACE"

ip=$(k get service runner-sample -n "$SAMPLE_NAMESPACE" -o jsonpath='{.spec.clusterIP}')
port=$(k get service runner-sample -n "$SAMPLE_NAMESPACE" -o jsonpath='{.spec.ports[0].port}')
pod=$(k get pods -n "$SAMPLE_NAMESPACE" -l app.kubernetes.io/instance=runner-sample -o name | head -n 1)
step "HTTP through the Service, from $pod: http://$ip:$port/"
url="http://$ip:$port/"
# shellcheck disable=SC2016 # expanded by the Pod's shell
# curl, else wget, else a plain request through nc (busybox's static wget
# crashes before it sends anything; its nc works).
body=$(timeout 60 "$KUBECTL" exec -n "$SAMPLE_NAMESPACE" "$pod" -- sh -c '
  if command -v curl > /dev/null 2>&1; then exec curl -fsS -m 20 "http://$0:$1/"; fi
  if command -v wget > /dev/null 2>&1 && wget -qO- "http://$0:$1/" 2> /dev/null; then exit 0; fi
  printf "GET / HTTP/1.0\r\nHost: %s\r\n\r\n" "$0" | busybox nc -w 10 "$0" "$1"' "$ip" "$port") ||
  { echo "the sample Runner does not answer HTTP at $url from inside the cluster" >&2; exit 1; }
[ -n "$body" ] || { echo "the sample Runner answered $url with an empty body" >&2; exit 1; }
case $body in
  "HTTP/1."?" 200 "* | [!H]* | H[!T]*) ;;
  HTTP/*) echo "the sample Runner answered $url with $(printf '%s' "$body" | head -n 1)" >&2 && exit 1 ;;
esac
printf '  %s\n' "$(printf '%s' "$body" | head -c 200 | tr -cd '[:print:]\n' | head -n 3)" >&2
step "in-cluster check passed"
