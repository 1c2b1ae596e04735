# shellcheck shell=bash
# What kind-test.sh and kind-image-test.sh both check before touching a
# kind cluster: the tools, the engine, the cluster's state, and that the
# kubeconfig they use reaches that cluster. Each failure is one line that
# says what to do, and exits 1. Sourced, not run.
#
# kind and docker read their usual environment: DOCKER_HOST selects the
# engine (e.g. a socket other than the default one), and
# KIND_EXPERIMENTAL_PROVIDER=podman makes kind use podman.

step() { printf '==> %s\n' "$*" >&2; }
fail() { printf 'error: %s\n' "$*" >&2; exit 1; }

# kind_need_tools SCRIPT TOOL...: every TOOL on PATH.
kind_need_tools() {
  local script=$1 tool
  shift
  for tool in "$@"; do
    command -v "$tool" > /dev/null ||
      fail "$script needs '$tool' on PATH; without Docker and kind, run scripts/local-e2e.sh instead"
  done
}

# The engine answers (Docker Desktop, dockerd, podman's socket).
kind_need_engine() {
  local out
  out=$(docker info --format '{{.ServerVersion}}' 2>&1) ||
    fail "no container engine answers at ${DOCKER_HOST:-the default socket} ($(printf '%s' "$out" | tail -n 1)): start Docker (or set DOCKER_HOST to a running engine's socket)"
}

# kind_cluster_state NAME: running, stopped (its node containers exist but
# not all run) or absent.
kind_cluster_state() {
  local states
  states=$(docker ps -a --filter "label=io.x-k8s.kind.cluster=$1" --format '{{.State}}')
  if [ -z "$states" ]; then
    echo absent
  elif printf '%s\n' "$states" | grep -qvx running; then
    echo stopped
  else
    echo running
  fi
}

# kind_need_running NAME: the cluster exists and its nodes run.
kind_need_running() {
  case $(kind_cluster_state "$1") in
    running) ;;
    stopped) fail "kind cluster $1 exists but its nodes are stopped: start them with 'docker start \$(docker ps -aq --filter label=io.x-k8s.kind.cluster=$1)', or remove it with 'kind delete cluster --name $1'" ;;
    absent) fail "no kind cluster $1: run ./kind-test.sh first (it creates it), or set KIND_CLUSTER" ;;
  esac
}

# kind_need_privileged IMAGE: the engine runs privileged containers, as
# kind's nodes are. Checked only when IMAGE is already there (it is never
# pulled just for this).
kind_need_privileged() {
  local out
  docker image inspect "$1" > /dev/null 2>&1 || return 0
  out=$(docker run --rm --privileged --entrypoint /bin/true "$1" 2>&1) || {
    out=$(printf '%s\n' "$out" | grep -m 1 -o 'unable to apply caps.*\|Error.*' || printf '%s' "$out" | head -n 1)
    fail "the engine cannot run privileged containers, and kind's nodes are ($out): use a rootful engine that allows --privileged"
  }
}

# kind_create CMD...: runs `kind create cluster ...`; a failure is one
# line at the end (kind has removed what it made): the engine's refusal of
# privileged containers named as such.
kind_create() {
  local log rc=0
  log=$(mktemp)
  "$@" 2>&1 | tee "$log" >&2 || rc=$?
  if [ "$rc" != 0 ]; then
    if grep -q 'unable to apply caps' "$log"; then
      rm -f "$log"
      fail "the engine cannot run privileged containers, and kind's nodes are (\"unable to apply caps\" above): use a rootful engine that allows --privileged"
    fi
    rm -f "$log"
    fail "kind create cluster failed (output above); kind removed what it had made"
  fi
  rm -f "$log"
}

# kind_kubeconfig NAME FILE: kind's kubeconfig of NAME in FILE, and proof
# that it reaches that cluster: its current context is kind-NAME and the
# apiserver there knows the node NAME-control-plane.
kind_kubeconfig() {
  local name=$1 file=$2 ctx node
  kind get kubeconfig --name "$name" > "$file" 2> /dev/null ||
    fail "kind has no kubeconfig for cluster $name: recreate it ('kind delete cluster --name $name', then ./kind-test.sh)"
  ctx=$(kubectl --kubeconfig "$file" config current-context 2> /dev/null || true)
  [ "$ctx" = "kind-$name" ] || fail "the kubeconfig's context is '$ctx', not kind-$name: check 'kind get kubeconfig --name $name'"
  node=$(kubectl --kubeconfig "$file" --request-timeout=20s get node "$name-control-plane" -o name 2>&1) ||
    fail "context kind-$name does not reach kind cluster $name (${node##*$'\n'}): is another cluster on its port? 'kind export kubeconfig --name $name' rewrites it"
}
