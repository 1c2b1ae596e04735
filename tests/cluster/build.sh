#!/usr/bin/env bash
# Builds the local control plane from Go modules, once, into a cache outside
# the repository: kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, etcd and kwok. A second run finds the binaries and does nothing.
#
# Kubernetes cannot be `go install`ed: its go.mod replaces ~30 staging modules
# with local paths at v0.0.0. A throwaway wrapper module replaces each of them
# with its published v0.X.Y, which is what the release binaries are built from.
#
# RUNNER_CLUSTER_REAL_NODE=1 also builds kubelet and kube-proxy (for
# tests/cluster/real-node.sh), from the same wrapper module, into the same
# cache dir; without it they are neither built nor required.
# RUNNER_CLUSTER_KIND=1 builds those and kubeadm too, for the kind node image
# (tests/kind/build.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/cluster/versions.env
source "$here/versions.env"

CACHE=${RUNNER_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-runner-cluster}
BIN="$CACHE/bin-$K8S_VERSION-etcd$ETCD_VERSION-kwok$KWOK_VERSION"
mkdir -p "$BIN"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
# Two cores: keep the linker from running several ~2 GiB links at once.
JOBS=${GO_BUILD_JOBS:-2}

step() { printf '==> %s\n' "$*" >&2; }
gomod() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p'; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

build_kubernetes() {
  local cmds=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
  [ "${RUNNER_CLUSTER_REAL_NODE:-0}" = 1 ] || [ "${RUNNER_CLUSTER_KIND:-0}" = 1 ] && cmds+=(kubelet kube-proxy)
  [ "${RUNNER_CLUSTER_KIND:-0}" = 1 ] && cmds+=(kubeadm)
  local missing=0 c
  for c in "${cmds[@]}"; do [ -x "$BIN/$c" ] || missing=1; done
  [ "$missing" = 0 ] && { step "kubernetes $K8S_VERSION: cached"; return; }
  step "kubernetes $K8S_VERSION: building the missing ones of ${cmds[*]} (cold: 15-30 min on 2 cores; kubelet and kube-proxy add ~2 min to a warm cache)"
  local w="$work/k8s" up minor ldf kv
  mkdir -p "$w"
  up=$(gomod "k8s.io/kubernetes@$K8S_VERSION")
  minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  {
    echo 'module local/k8sbuild'
    grep -E '^(go|godebug) ' "$up"
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo 'replace ('
    awk -v v="v0.${K8S_VERSION#v1.}" '$2=="=>" && $3 ~ /^\.\/staging\// {print "\t"$1" => "$1" "v}' "$up"
    echo ')'
  } > "$w/go.mod"
  {
    printf '//go:build tools\npackage tools\nimport (\n'
    for c in "${cmds[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
    echo ')'
  } > "$w/tools.go"
  (cd "$w" && go mod tidy)
  ldf="-s -w"
  for kv in gitVersion=$K8S_VERSION gitMajor=1 gitMinor=$minor gitTreeState=clean; do
    ldf+=" -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
  done
  for c in "${cmds[@]}"; do
    [ -x "$BIN/$c" ] && continue
    step "go build $c"
    local t=$SECONDS
    (cd "$w" && go build -p "$JOBS" -trimpath -tags selinux,notest -ldflags "$ldf" \
      -o "$BIN/$c.tmp" "k8s.io/kubernetes/cmd/$c")
    mv "$BIN/$c.tmp" "$BIN/$c"
    step "$c built in $((SECONDS - t)) s"
  done
  "$BIN/kube-apiserver" --version >&2
}

build_etcd() {
  [ -x "$BIN/etcd" ] && { step "etcd $ETCD_VERSION: cached"; return; }
  step "etcd $ETCD_VERSION: building"
  local w="$work/etcd" up
  mkdir -p "$w"
  up=$(gomod "go.etcd.io/etcd/server/v3@$ETCD_VERSION")
  {
    echo 'module local/etcdbuild'
    grep -E '^go ' "$up"
    echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION"
  } > "$w/go.mod"
  printf '//go:build tools\npackage tools\nimport _ "go.etcd.io/etcd/server/v3"\n' > "$w/tools.go"
  (cd "$w" && go mod tidy && go build -p "$JOBS" -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$BIN/etcd.tmp" "$BIN/etcd"
}

build_kwok() {
  [ -x "$BIN/kwok" ] && { step "kwok $KWOK_VERSION: cached"; return; }
  step "kwok $KWOK_VERSION: building"
  GOBIN="$work/kwokbin" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  mv "$work/kwokbin/kwok" "$BIN/kwok"
}

# The kwok binary has no built-in stages ("no stages found" without any);
# kwokctl writes its defaults into kwok's config. Keep the same defaults, from
# the same module version, next to the binary: node init, heartbeat with
# leases, pod ready/complete/delete.
kwok_stages() {
  [ -s "$BIN/kwok-stages.yaml" ] && return
  step "kwok $KWOK_VERSION: default stages"
  local dir f
  dir=$(cd "$work" && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo '---'
    cat "$dir/kustomize/stage/$f"
  done > "$BIN/kwok-stages.yaml.tmp"
  mv "$BIN/kwok-stages.yaml.tmp" "$BIN/kwok-stages.yaml"
}

start=$(date +%s)
build_etcd
build_kwok
kwok_stages
build_kubernetes
step "control plane binaries ready in $BIN ($(( $(date +%s) - start )) s)"
echo "$BIN"
