#!/usr/bin/env bash
# A Docker engine for kind on a machine that has none running: Debian's
# docker.io (installed when missing), started by hand with its own data
# root, exec root and socket under $RUNNER_KIND_ENGINE, so it touches no
# other engine. Users with Docker Desktop, a system dockerd or podman never
# need this; CI runs it.
#
#   engine.sh start   start (or keep) the engine; prints `export DOCKER_HOST=...`
#   engine.sh stop    stop the engine this script started (by its pid)
#
# Networking: the engine must not change the host's firewall or sysctls (a
# network namespace of the real-node tests shares them): --iptables=false
# (Docker would set the FORWARD policy to DROP), --ip-forward=false, and no
# masquerading. Containers still reach each other and the host over the
# engine's bridges, and published ports go through docker-proxy on
# loopback, which is all kind needs. DNS: the engine forwards names it does
# not know to 127.0.0.1 inside the container (nothing answers), so nothing
# resolves names outside the cluster.
#
# Privileged containers: where the machine's capability bounding set lacks
# CAP_SYS_RESOURCE, runc cannot start one; the engine then runs containers
# through runc-without-sys-resource (next to this script).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/kind/lib.sh
source "$here/lib.sh"

# alive: the engine's pid while it runs and is ours (its command line names $ENGINE).
alive() {
  local pid
  [ -f "$ENGINE/dockerd.pid" ] || return 1
  pid=$(<"$ENGINE/dockerd.pid")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" | grep -qF -- "$ENGINE/" || return 1
  echo "$pid"
}

# True when bit 24 (CAP_SYS_RESOURCE) is missing from this process's bounding set.
lacks_sys_resource() {
  local bnd
  bnd=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
  (((16#$bnd >> 24 & 1) == 0))
}

start() {
  local pid runtime=() t0=$SECONDS
  if pid=$(alive); then
    kstep "engine: running (pid $pid, $ENGINE_SOCK)"
  else
    [ "$(id -u)" = 0 ] || die "starting a Docker engine needs root; or point DOCKER_HOST at a running engine"
    command -v dockerd > /dev/null || apt_install docker.io
    # The package may start its own engine under systemd; ours is separate.
    mkdir -p "$ENGINE"
    if lacks_sys_resource; then
      command -v python3 > /dev/null || apt_install python3
      runtime=(--add-runtime "runc-without-sys-resource=$here/runc-without-sys-resource"
        --default-runtime runc-without-sys-resource)
      kstep "engine: this machine lacks CAP_SYS_RESOURCE: containers run through runc-without-sys-resource"
    fi
    kstep "engine: starting dockerd (data root $ENGINE/root)"
    setsid dockerd --data-root "$ENGINE/root" --exec-root "$ENGINE/exec" --pidfile "$ENGINE/dockerd.pid" \
      -H "unix://$ENGINE_SOCK" --iptables=false --ip6tables=false --ip-forward=false --ip-masq=false \
      --dns 127.0.0.1 "${runtime[@]}" > "$ENGINE/dockerd.log" 2>&1 < /dev/null &
    local i
    for i in $(seq 120); do
      docker -H "unix://$ENGINE_SOCK" version > /dev/null 2>&1 && break
      sleep 0.5
      [ "$i" = 120 ] && { tail -n 30 "$ENGINE/dockerd.log" >&2; die "engine: no answer on $ENGINE_SOCK after 60 s (log above)"; }
    done
    kstep "engine: up in $((SECONDS - t0)) s"
  fi
  echo "export DOCKER_HOST=unix://$ENGINE_SOCK"
}

stop() {
  local pid i
  pid=$(alive) || { kstep "engine: not running"; return 0; }
  kstep "engine: stopping pid $pid"
  kill -TERM "$pid"
  for i in $(seq 150); do alive > /dev/null || { kstep "engine: stopped"; return 0; }; sleep 0.2; done
  kill -KILL "$pid" 2> /dev/null || true
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
