#!/usr/bin/env bash
# CI's kind stage (.ci/run calls it after tests/run.sh): the top-level
# kind-test.sh and kind-image-test.sh, unchanged, on a real kind cluster
# made here with no image registry.
#
#   1. a Docker engine: $DOCKER_HOST when it answers, else tests/kind/engine.sh
#      starts one (and stops it on exit)
#   2. kind and the node image (tests/kind/build.sh, cached)
#   3. `kind create cluster` with that image and tests/kind/cluster.yaml
#   4. smoke: node Ready, CoreDNS Ready, a Pod answers HTTP through a
#      Service by its DNS name
#   5. ./kind-test.sh (RUNNER_BIN: the static release binary), then
#      ./kind-image-test.sh (KIND_IMAGE_BUILD=host: that binary, FROM scratch)
#   6. on exit, also on failure: delete the cluster, stop the engine
#
# The Runners' image is the real node's web image (busybox httpd on 8080,
# tests/cluster/real-node.sh images), loaded with `kind load image-archive`.
# Every step prints its time.
#
#   RUNNER_KIND_CLUSTER  cluster name (default kubectl-runner-ci); a leftover
#                        one of that name from an aborted run is deleted first
set -euo pipefail
cd "$(dirname "$0")/../.."
here=tests/kind
# shellcheck source=tests/kind/lib.sh
source "$here/lib.sh"
CLUSTER=${RUNNER_KIND_CLUSTER:-kubectl-runner-ci}
t_all=$SECONDS
timings=()
timed() { # timed LABEL CMD...: runs CMD, records its seconds
  local label=$1 t=$SECONDS
  shift
  "$@"
  timings+=("$(printf '%-28s %4d s' "$label" $((SECONDS - t)))")
  kstep "$label: $((SECONDS - t)) s"
}

started_engine=0
created=0
work=$(mktemp -d)
cleanup() {
  local rc=$?
  if [ "$created" = 1 ]; then
    kstep "deleting kind cluster $CLUSTER"
    "$KIND_BIN/kind" delete cluster --name "$CLUSTER" || true
  fi
  [ "$started_engine" = 1 ] && bash "$here/engine.sh" stop
  if [ ${#timings[@]} -gt 0 ]; then
    kstep "timings:"
    printf '  %s\n' "${timings[@]}" >&2
  fi
  kstep "kind stage $([ "$rc" = 0 ] && echo passed || echo FAILED) in $((SECONDS - t_all)) s"
  rm -rf "$work"
}
trap cleanup EXIT

# 1. engine: one that answers is used and left running.
if [ -z "${DOCKER_HOST:-}" ] && DOCKER_HOST="unix://$ENGINE_SOCK" docker info > /dev/null 2>&1; then
  export DOCKER_HOST="unix://$ENGINE_SOCK"
fi
if [ -n "${DOCKER_HOST:-}" ] && docker info > /dev/null 2>&1; then
  kstep "engine: using DOCKER_HOST=$DOCKER_HOST (left running)"
else
  engine_start() { eval "$(bash "$here/engine.sh" start)"; }
  timed "engine start" engine_start
  started_engine=1
  export DOCKER_HOST
fi

# 2. kind and the node image
build() { image=$(bash "$here/build.sh" | tail -n 1); }
timed "kind + node image build" build
# kind, and the kubectl of the project's Kubernetes version, for the scripts.
export PATH="$KIND_BIN:$BIN:$PATH"
web_images() { web_tar=$(bash tests/cluster/real-node.sh images | tail -n 1); }
timed "web image" web_images
source tests/cluster/lib.sh # REAL_NODE_WEB_IMAGE
WEB=$REAL_NODE_WEB_IMAGE

# 3. the cluster
if kind get clusters 2> /dev/null | grep -qx "$CLUSTER"; then
  kstep "deleting a leftover kind cluster $CLUSTER"
  kind delete cluster --name "$CLUSTER"
fi
created=1
# kind writes the new context here, not into the user's kubeconfig.
export KUBECONFIG=$work/kubeconfig
timed "kind create cluster" kind create cluster --name "$CLUSTER" --image "$image" --config "$here/cluster.yaml" --wait 180s
load() {
  kind load image-archive "$web_tar" --name "$CLUSTER"
  # A second name for e2e's image update.
  docker exec "$CLUSTER-control-plane" ctr -n k8s.io images tag --force "$WEB" "$WEB-update" > /dev/null
}
timed "kind load (web image)" load

# 4. smoke
smoke() {
  kubectl wait --for=condition=Ready node --all --timeout=120s
  kubectl -n kube-system rollout status deployment/coredns --timeout=120s
  kubectl create namespace kind-smoke
  kubectl -n kind-smoke create deployment web --image="$WEB" --port=8080
  kubectl -n kind-smoke expose deployment web --port=80 --target-port=8080
  kubectl -n kind-smoke rollout status deployment/web --timeout=120s
  local pod body=
  pod=$(kubectl -n kind-smoke get pods -l app=web -o name | head -n 1)
  # busybox's nc, not its wget: Debian's static busybox wget crashes
  # (SIGSEGV) before it sends anything.
  # Tried every 5 s for a minute: the Service's rules may not be in place
  # the moment its Pod is Ready.
  local try
  for try in $(seq 12); do
    # shellcheck disable=SC2016 # expanded by the Pod's shell
    body=$(timeout 15 kubectl -n kind-smoke exec "$pod" -- sh -c \
      'printf "GET / HTTP/1.0\r\nHost: %s\r\n\r\n" "$0" | busybox nc -w 5 "$0" 80' \
      web.kind-smoke.svc.cluster.local) && [ -n "$body" ] && break
    kstep "smoke: no answer yet (try $try of 12)"
    sleep 5
  done
  kstep "smoke: $pod fetched http://web.kind-smoke.svc.cluster.local/: $(printf '%s' "$body" | head -n 1)"
  case $body in "HTTP/1."?" 200 "*) ;; *) return 1 ;; esac
  kubectl delete namespace kind-smoke --wait=true --timeout=120s > /dev/null
}
timed "smoke (node, CoreDNS, HTTP)" smoke

# 5. the users' scripts, as they are. Both run the static release binary
# scripts/image.sh builds (tests/run.sh has built it already): kind-test.sh
# as RUNNER_BIN, kind-image-test.sh in the image.
export KIND_CLUSTER=$CLUSTER
binary() { bash scripts/image.sh --docker-context "$work/bin" > /dev/null; }
timed "static binary" binary
timed "kind-test.sh" env RUNNER_BIN="$work/bin/kubectl-runner" ./kind-test.sh --image "$WEB" --image-update "$WEB-update"
timed "kind-image-test.sh" env KIND_IMAGE_BUILD=host SAMPLE_IMAGE="$WEB" SAMPLE_PORT=8080 ./kind-image-test.sh
