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

CLUSTER_NAME=${RUNNER_CLUSTER_NAME:-dev}
STATE=${RUNNER_CLUSTER_STATE:-${XDG_STATE_HOME:-$HOME/.local/state}/kubectl-runner-cluster/$CLUSTER_NAME}
# shellcheck disable=SC2034 # used by the scripts that source this
KUBECONFIG_PATH="$STATE/kubeconfig"
# Started in this order, stopped in the reverse one.
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

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
