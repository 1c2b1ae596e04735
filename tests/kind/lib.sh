# shellcheck shell=bash
# Shared by the scripts in tests/kind: pinned versions, where things are
# cached, and the Docker engine CI starts for kind. Sourced, not run.
#
# Environment (all optional):
#   RUNNER_CLUSTER_CACHE  binary cache, as in tests/cluster/build.sh; kind,
#                         the node image's parts and its tarball go under kind/
#   RUNNER_KIND_ENGINE    state dir of the engine engine.sh starts (data
#                         root, socket, log, pid); default
#                         ${XDG_STATE_HOME:-~/.local/state}/kubectl-runner-kind/engine
#   GO_BUILD_JOBS         parallel Go compiles (default 2)

_kind_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/cluster/versions.env
source "$_kind_here/../cluster/versions.env"

# kind from Go modules; v0.33.0 supports Kubernetes v1.37 and builds with
# the Go of this repository's CI.
KIND_VERSION=v0.33.0
# The node's userland: Debian's packages, from the mirror apt already uses.
KIND_NODE_SUITE=bookworm

CACHE=${RUNNER_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-runner-cluster}
# Where tests/cluster/build.sh puts kube-apiserver, kubelet, kubectl, etcd...
BIN="$CACHE/bin-$K8S_VERSION-etcd$ETCD_VERSION-kwok$KWOK_VERSION"
KIND_CACHE="$CACHE/kind"
KIND_BIN="$KIND_CACHE/kind-$KIND_VERSION"

ENGINE=${RUNNER_KIND_ENGINE:-${XDG_STATE_HOME:-$HOME/.local/state}/kubectl-runner-kind/engine}
ENGINE_SOCK="$ENGINE/docker.sock"

kstep() { printf '==> [kind %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# apt_install PKG...: Debian packages this machine lacks (root), after one
# `apt-get update` per run of a script (a clean machine has no lists).
apt_install() {
  [ "$(id -u)" = 0 ] || die "needs root to install $*"
  kstep "apt-get install $*"
  [ -n "${_kind_apt_updated:-}" ] || { apt-get update -qq; _kind_apt_updated=1; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" < /dev/null > /dev/null 2>&1 ||
    die "apt-get install $* failed"
}
