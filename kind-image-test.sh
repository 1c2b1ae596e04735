#!/usr/bin/env bash
# Proves the in-cluster deployment on kind: builds the manager image, loads it
# with `kind load docker-image`, then scripts/in-cluster-check.sh installs
# CRD + RBAC + manager from manifests/ (running the loaded image: its pull
# policy never asks a registry), checks the ServiceAccount's permissions like
# `kubectl auth can-i`, runs a sample Runner to 1/1 Ready and fetches it over
# HTTP through its Service from inside the cluster, and removes everything it
# created. Refuses to run where runner-system or the Runner CRD already exist
# (it would otherwise remove someone else's).
#
#   KIND_CLUSTER      cluster name (default handbook-lab); must exist (see kind-test.sh)
#   IMG               image tag (default kubectl-runner:kind)
#   KIND_IMAGE_BUILD  docker (default): `docker build .`, the Dockerfile as is;
#                     host: the static binary built here (scripts/image.sh)
#                     and `docker build` of the Dockerfile's runtime stage
#                     (FROM scratch), for engines that cannot pull rust:1-bookworm
#   SAMPLE_IMAGE, SAMPLE_PORT  the sample Runner (default nginx:1.27 on 80);
#                     on a node that cannot pull, `kind load` it first
#   DOCKER_HOST       the engine, when not the default socket
set -euo pipefail
cd "$(dirname "$0")"
# shellcheck source=scripts/kind-lib.sh
source scripts/kind-lib.sh
CLUSTER=${KIND_CLUSTER:-handbook-lab}
IMG=${IMG:-kubectl-runner:kind}
BUILD=${KIND_IMAGE_BUILD:-docker}

case $BUILD in docker | host) ;; *) fail "KIND_IMAGE_BUILD=$BUILD: docker or host" ;; esac
tools=(kind docker kubectl)
[ "$BUILD" = host ] && tools+=(cargo)
kind_need_tools kind-image-test.sh "${tools[@]}"
kind_need_engine
kind_need_running "$CLUSTER"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
kind_kubeconfig "$CLUSTER" "$work/kubeconfig"
export KUBECONFIG=$work/kubeconfig

if kubectl get namespace runner-system > /dev/null 2>&1; then
  fail "refusing: namespace runner-system already exists on $CLUSTER (this script would remove it)"
fi
crd=runners.lab.cloudlab.training
if kubectl get crd "$crd" > /dev/null 2>&1; then
  # One being deleted (e.g. by a `kubectl runner e2e` that installed it) is
  # nobody's any more: wait until it is gone.
  [ -n "$(kubectl get crd "$crd" -o jsonpath='{.metadata.deletionTimestamp}')" ] ||
    fail "refusing: the Runner CRD already exists on $CLUSTER (this script would remove it)"
  step "waiting for the Runner CRD, being deleted, to go"
  kubectl wait --for=delete "crd/$crd" --timeout=120s > /dev/null ||
    fail "the Runner CRD on $CLUSTER is still being deleted after 120 s: see 'kubectl get runners -A' for Runners whose finalizer no manager removes"
fi

if [ "$BUILD" = host ]; then
  step "static binary on this machine, then docker build -t $IMG of the Dockerfile's runtime stage"
  bash scripts/image.sh --docker-context "$work/image" > /dev/null
  docker build -t "$IMG" "$work/image"
else
  step "docker build -t $IMG"
  docker build -t "$IMG" .
fi
step "kind load docker-image $IMG"
kind load docker-image "$IMG" --name "$CLUSTER"

# Install, permissions, sample Runner over HTTP, cleanup: the same steps
# the local real-node tests run.
IMG=$IMG bash scripts/in-cluster-check.sh
step "kind-image-test passed"
