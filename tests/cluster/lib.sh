# shellcheck shell=bash
# Shared by up.sh, down.sh and tests/run.sh: where a cluster lives and how to
# tell whether its processes are still the ones we started. Sourced, not run.
#
# Environment (all optional):
#   RUNNER_CLUSTER_NAME       cluster name, default "dev"; CI uses "ci" so both
#                             can run side by side on one machine
#   RUNNER_CLUSTER_STATE      state dir (certs, etcd data, logs, pid files,
#                             kubeconfig); default
#                             ${XDG_STATE_HOME:-~/.local/state}/kubectl-runner-cluster/<name>
#   RUNNER_CLUSTER_PORT_BASE  first of 6 consecutive loopback ports; default:
#                             the first free block from 16440 on, in steps of 10
#   RUNNER_CLUSTER_CACHE      binary cache (see build.sh)
#   RUNNER_CLUSTER_REAL_NODE  1: the cluster runs in its own network namespace
#                             with one real node next to the kwok ones (see
#                             real-node.sh); clients run through
#                             `nsenter --net=/run/netns/runner-<name>`

CLUSTER_NAME=${RUNNER_CLUSTER_NAME:-dev}
STATE=${RUNNER_CLUSTER_STATE:-${XDG_STATE_HOME:-$HOME/.local/state}/kubectl-runner-cluster/$CLUSTER_NAME}
# shellcheck disable=SC2034 # used by the scripts that source this
KUBECONFIG_PATH="$STATE/kubeconfig"
# Started in this order, stopped in the reverse one.
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

# The real node (real-node.sh). $REAL_NODE_STATE exists while this cluster
# has one, so down.sh and a second up.sh know without the variable.
# shellcheck disable=SC2034 # used by the scripts that source this
{
  REAL_NODE_NETNS="runner-$CLUSTER_NAME"
  REAL_NODE_STATE="$STATE/node"
  REAL_NODE_NAME=real-node
  REAL_NODE_IP=10.250.0.1
  REAL_NODE_POD_CIDR=10.88.0.0/16
  # Label and NoSchedule taint of the real node: only Pods that ask land there.
  REAL_NODE_LABEL=kubectl-runner.test/real-node
  REAL_NODE_PAUSE_IMAGE=localhost/kubectl-runner/pause:3.10
  REAL_NODE_WEB_IMAGE=localhost/kubectl-runner/busybox-httpd:2
}

# True when this process runs in network namespace $1.
in_netns() {
  [ -e "/run/netns/$1" ] && [ "$(stat -L -c %i /proc/self/ns/net)" = "$(stat -L -c %i "/run/netns/$1")" ]
}

step() { printf '==> [%s] %s\n' "$CLUSTER_NAME" "$*" >&2; }

# The pid in $STATE/pids/<component>.pid, if that process is alive and is
# still ours: its command line names our state dir (pids get reused).
component_pid() {
  local f="$STATE/pids/$1.pid" pid
  [ -f "$f" ] || return 1
  pid=$(<"$f")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" | grep -qF -- "$STATE/" || return 1
  echo "$pid"
}

# True when every component of this cluster is running.
cluster_running() {
  local c
  for c in "${COMPONENTS[@]}"; do component_pid "$c" > /dev/null || return 1; done
}
