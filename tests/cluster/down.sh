#!/usr/bin/env bash
# Stops the local control plane that up.sh started (only the processes in its
# pid files, newest first), waits until they are gone, and removes its state
# dir (etcd data, certificates, logs, kubeconfig). Safe to run twice.
# Environment: see lib.sh (RUNNER_CLUSTER_NAME, RUNNER_CLUSTER_STATE).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/cluster/lib.sh
source "$here/lib.sh"

if [ ! -d "$STATE" ]; then
  step "no cluster state in $STATE; nothing to stop"
  bash "$here/real-node.sh" netns-delete
  exit 0
fi
exec 9> "$STATE/.lock"
flock 9

gone() { [ ! -d "/proc/$1" ] || [ "$(awk '{print $3}' "/proc/$1/stat" 2> /dev/null)" = Z ]; }

# stop COMPONENT: SIGTERM, up to 20 s for a clean exit, then SIGKILL.
stop() {
  local pid i
  pid=$(component_pid "$1") || return 0
  step "$1: stopping pid $pid"
  kill -TERM "$pid" 2> /dev/null || return 0
  for i in $(seq 100); do
    gone "$pid" && return 0
    sleep 0.2
  done
  step "$1: still running after 20 s; killing"
  kill -KILL "$pid" 2> /dev/null || true
  until gone "$pid"; do sleep 0.1; done
}

# The real node first, while the apiserver can still drain it.
[ -d "$REAL_NODE_STATE" ] && bash "$here/real-node.sh" down
for (( i = ${#COMPONENTS[@]} - 1; i >= 0; i-- )); do
  stop "${COMPONENTS[i]}"
done
bash "$here/real-node.sh" netns-delete
step "removing $STATE"
rm -rf "$STATE"
step "stopped"
