#!/usr/bin/env bash
# The real node: one Node that runs real containers, next to the kwok nodes,
# for the tests that need a process behind a Pod (the manager's own image, a
# Runner answering HTTP). up.sh and down.sh call this when
# RUNNER_CLUSTER_REAL_NODE=1; it is not meant to be run on its own.
#
#   real-node.sh prepare  outside the namespace (it has no route out):
#                         packages, kubelet and kube-proxy (build.sh), the
#                         images, and the network namespace the cluster runs in
#   real-node.sh up       containerd + runc + CNI bridge, local images,
#                         kubelet and kube-proxy; waits for the Node Ready
#   real-node.sh down     drain, stop kube-proxy, kubelet, containers and
#                         containerd; unmount, remove cgroups and pod netns
#   real-node.sh netns-delete   after the control plane has stopped
#   real-node.sh load TAR       import an OCI image tarball (scripts/image.sh)
#                               into the node's containerd, as `kind load` does
#   real-node.sh tag IMAGE NEW  a second name for a loaded image (an upgrade
#                               to a new tag, without building twice)
#   real-node.sh images         builds the pause and web images (cached) and
#                               prints the web image's tarball (tests/kind/ci.sh
#                               loads it into kind)
#
# Everything with an address lives in one network namespace, runner-<cluster>:
# the control plane (up.sh re-runs itself inside it), containerd's CNI
# bridge, the Pods, the kubelet and kube-proxy's iptables rules. The host's
# interfaces, sysctls and iptables are never touched. The namespace is
# entered with `nsenter --net`, never `ip netns exec`, which remounts /sys
# and leaves /sys/fs/cgroup empty for containerd and the kubelet.
#
# Only Pods that ask land on the node: it carries the label and NoSchedule
# taint $REAL_NODE_LABEL=true (lib.sh). In a namespace annotated with
# scheduler.alpha.kubernetes.io/node-selector and .../defaultTolerations for
# them, the apiserver adds both to every Pod (PodNodeSelector and
# PodTolerationRestriction, enabled by up.sh in this mode only); the
# manifests under test need no change. See tests/real_node/fixture.rs.
#
# Needs root (namespaces, mounts, cgroups). Debian packages it installs when
# missing: containerd runc containernetworking-plugins busybox-static
# iptables (and gcc, libc6-dev for the pause binary).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/cluster/lib.sh
source "$here/lib.sh"
# shellcheck source=tests/cluster/versions.env
source "$here/versions.env"

NODE=$REAL_NODE_STATE
SOCK="$NODE/containerd/containerd.sock"
CACHE=${RUNNER_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-runner-cluster}
# Where build.sh puts the binaries (up runs build.sh, which builds them once).
BIN="$CACHE/bin-$K8S_VERSION-etcd$ETCD_VERSION-kwok$KWOK_VERSION"
IMAGES="$CACHE/images"
TIMEOUT=${RUNNER_CLUSTER_TIMEOUT:-90}

rstep() { printf '==> [%s real node %s] %s\n' "$CLUSTER_NAME" "$(date +%T)" "$*" >&2; }
innet() { nsenter --net="/run/netns/$REAL_NODE_NETNS" -- "$@"; }
rctr() { ctr --address "$SOCK" "$@"; }

# alive NAME: the pid in $NODE/pids/NAME.pid while that process runs and is
# still ours (its command line names $NODE; pids get reused).
alive() {
  local f="$NODE/pids/$1.pid" pid
  [ -f "$f" ] || return 1
  pid=$(<"$f")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  [ "$(awk '{print $3}' "/proc/$pid/stat" 2> /dev/null)" != Z ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" | grep -qF -- "$NODE/" || return 1
  echo "$pid"
}

# daemon NAME CMD...: detached (own session) inside the netns, log in $NODE/logs.
daemon() {
  local name=$1 pid tries=100
  shift
  if pid=$(alive "$name"); then rstep "$name: running (pid $pid)"; return; fi
  setsid nsenter --net="/run/netns/$REAL_NODE_NETNS" -- "$@" > "$NODE/logs/$name.log" 2>&1 < /dev/null 9>&- &
  pid=$!
  echo "$pid" > "$NODE/pids/$name.pid"
  # Until nsenter has exec'd the daemon, its command line is not the daemon's.
  while ! alive "$name" > /dev/null && [ -d "/proc/$pid" ] && ((tries-- > 0)); do sleep 0.05; done
  rstep "$name: started pid $pid, log $NODE/logs/$name.log"
}

# stop_daemon NAME: SIGTERM, up to 20 s, then SIGKILL; only the pid we recorded.
stop_daemon() {
  local pid i
  pid=$(alive "$1") || return 0
  rstep "$1: stopping pid $pid"
  kill -TERM "$pid" 2> /dev/null || return 0
  for i in $(seq 100); do alive "$1" > /dev/null || return 0; sleep 0.2; done
  kill -KILL "$pid" 2> /dev/null || true
  for i in $(seq 50); do alive "$1" > /dev/null || return 0; sleep 0.1; done
}

wait_for() { # wait_for WHAT DAEMON CMD...
  local what=$1 daemon=$2 deadline=$((SECONDS + TIMEOUT))
  shift 2
  until "$@" > /dev/null 2>&1; do
    if ! alive "$daemon" > /dev/null; then
      echo "error: $daemon exited while waiting for $what; last lines of $NODE/logs/$daemon.log:" >&2
      tail -n 40 "$NODE/logs/$daemon.log" >&2 || true
      exit 1
    fi
    if ((SECONDS >= deadline)); then
      echo "error: timed out after ${TIMEOUT}s waiting for $what; last lines of $NODE/logs/$daemon.log:" >&2
      tail -n 40 "$NODE/logs/$daemon.log" >&2 || true
      exit 1
    fi
    sleep 0.5
  done
  rstep "ok: $what"
}

# --- netns -------------------------------------------------------------------
# A veth pair with both ends inside gives the node a non-loopback address (the
# kubelet refuses a loopback --node-ip, and this kernel has no dummy driver).
make_netns() {
  [ -e "/run/netns/$REAL_NODE_NETNS" ] || { rstep "netns $REAL_NODE_NETNS: creating"; ip netns add "$REAL_NODE_NETNS"; }
  ip -n "$REAL_NODE_NETNS" link set lo up
  if ! ip -n "$REAL_NODE_NETNS" link show rn0 > /dev/null 2>&1; then
    ip -n "$REAL_NODE_NETNS" link add rn0 type veth peer name rn1
    ip -n "$REAL_NODE_NETNS" addr add "$REAL_NODE_IP/24" dev rn0
    ip -n "$REAL_NODE_NETNS" link set rn0 up
    ip -n "$REAL_NODE_NETNS" link set rn1 up
    ip -n "$REAL_NODE_NETNS" route add default dev rn0
  fi
  # Per-namespace sysctls; the host's stay as they are.
  innet sysctl -qw net.ipv4.ip_forward=1
  innet sh -c '[ ! -e /proc/sys/net/bridge/bridge-nf-call-iptables ] || echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables'
}

# --- packages ----------------------------------------------------------------
packages() {
  local missing=() pair
  for pair in containerd:containerd runc:runc /usr/lib/cni/bridge:containernetworking-plugins \
    /bin/busybox:busybox-static iptables-restore:iptables nsenter:util-linux gcc:gcc \
    /usr/include/stdio.h:libc6-dev; do
    command -v "${pair%%:*}" > /dev/null || [ -e "${pair%%:*}" ] || missing+=("${pair#*:}")
  done
  [ ${#missing[@]} = 0 ] && return
  [ "$(id -u)" = 0 ] || { echo "error: the real node needs root (and packages: ${missing[*]})" >&2; exit 1; }
  rstep "apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" < /dev/null > /dev/null
}

# --- images (cached next to the binaries; no registry) -------------------------
# The pause binary is Kubernetes' own build/pause/linux/pause.c from the
# k8s.io/kubernetes module build.sh already downloaded, linked statically.
# The web image is Debian's static busybox, whose httpd serves
# /var/www/index.html on the port in $PORT (default 8080) as user 65534,
# under a shell that exits on SIGTERM (PID 1 ignores signals it does not
# handle, and every delete would wait out the grace period).
# Tarballs are named by tag: change the recipe, change the tag in lib.sh.
PAUSE_TAR="$IMAGES/pause-${REAL_NODE_PAUSE_IMAGE##*:}-$K8S_VERSION.tar"
WEB_TAR="$IMAGES/busybox-httpd-${REAL_NODE_WEB_IMAGE##*:}.tar"
build_images() {
  local work src
  mkdir -p "$IMAGES"
  [ -s "$PAUSE_TAR" ] && [ -s "$WEB_TAR" ] && return
  work=$(mktemp -d)
  # shellcheck disable=SC2064 # expand now: $work is local
  trap "rm -rf '$work'" RETURN
  if [ ! -s "$PAUSE_TAR" ]; then
    src=$(cd "$work" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
      sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')/build/pause/linux/pause.c
    mkdir -p "$work/pause"
    gcc -Os -static -Wall -DVERSION="$K8S_VERSION" -o "$work/pause/pause" "$src"
    strip "$work/pause/pause"
    bash "$here/../../scripts/oci-image.sh" "$work/pause" "$REAL_NODE_PAUSE_IMAGE" "$PAUSE_TAR" '["/pause"]'
  fi
  if [ ! -s "$WEB_TAR" ]; then
    local r="$work/web" a
    mkdir -p "$r"/{bin,etc,tmp,var/www}
    chmod 1777 "$r/tmp"
    cp /bin/busybox "$r/bin/busybox"
    for a in sh httpd wget cat ls id sleep; do ln -s busybox "$r/bin/$a"; done
    printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' > "$r/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' > "$r/etc/group"
    echo 'hello from a real container' > "$r/var/www/index.html"
    bash "$here/../../scripts/oci-image.sh" "$r" "$REAL_NODE_WEB_IMAGE" "$WEB_TAR" '["/bin/sh","-c"]' \
      '["trap \"exit 0\" TERM; httpd -f -v -p \"${PORT:-8080}\" -h /var/www & wait"]' 65534:65534
  fi
}

# --- containerd --------------------------------------------------------------
start_containerd() {
  mkdir -p "$NODE/containerd" "$NODE/cni/net.d" "$NODE/logs" "$NODE/pids"
  cat > "$NODE/cni/net.d/10-runner.conflist" << EOF
{
  "cniVersion": "1.0.0",
  "name": "runner-real-node",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "$REAL_NODE_POD_CIDR"}]],
               "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$NODE/cni/ipam"}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "loopback"}
  ]
}
EOF
  cat > "$NODE/containerd/config.toml" << EOF
version = 2
root = "$NODE/containerd/root"
state = "$NODE/containerd/state"
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$NODE/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  # Built here (build_images): nothing is pulled.
  sandbox_image = "$REAL_NODE_PAUSE_IMAGE"
  # Root may lack CAP_SYS_RESOURCE (some VMs), and then no process can lower
  # its oom_score_adj: the kubelet asks -998 for every sandbox and runc dies
  # with "can't get final child's PID from pipe: EOF". This clamps requests
  # to containerd's own score.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$NODE/cni/net.d"
EOF
  daemon containerd containerd --config "$NODE/containerd/config.toml"
  wait_for "containerd on $SOCK" containerd rctr version
  local t
  for t in "$PAUSE_TAR" "$WEB_TAR"; do rctr -n k8s.io images import "$t" > /dev/null; done
  rstep "images: $(rctr -n k8s.io images ls -q | grep '^localhost/' | tr '\n' ' ')"
}

# --- kubelet and kube-proxy ----------------------------------------------------
# leaf NAME SUBJECT: a client certificate from up.sh's CA.
leaf() {
  local pki="$STATE/pki"
  [ -s "$NODE/pki/$1.crt" ] && return
  mkdir -p "$NODE/pki"
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' > "$NODE/pki/$1.ext"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$NODE/pki/$1.key" -out "$NODE/pki/$1.csr" -subj "$2" 2> /dev/null
  openssl x509 -req -in "$NODE/pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$NODE/pki/$1.ext" -out "$NODE/pki/$1.crt" 2> /dev/null
}

node_kubeconfig() { # node_kubeconfig NAME
  cat > "$NODE/$1.kubeconfig" << EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$STATE/pki/ca.crt"}
users:
- name: $1
  user: {client-certificate: "$NODE/pki/$1.crt", client-key: "$NODE/pki/$1.key"}
contexts:
- name: local
  context: {cluster: local, user: $1}
current-context: local
EOF
}

start_kubelet() {
  # The Node authorizer and NodeRestriction let this identity touch only its Node.
  leaf kubelet "/O=system:nodes/CN=system:node:$REAL_NODE_NAME"
  node_kubeconfig kubelet
  mkdir -p "$NODE/kubelet" "$NODE/pod-logs"
  cat > "$NODE/kubelet/config.yaml" << EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# Some machines still mount cgroup v1, which the kubelet refuses by default.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://$SOCK
imageServiceEndpoint: unix://$SOCK
# Inside the private netns only; the apiserver dials the node's InternalIP.
address: 0.0.0.0
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
# The apiserver has no kubelet client certificate, so logs and exec reach the
# kubelet anonymously: acceptable in a private test namespace, nowhere else.
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
  x509: {clientCAFile: "$STATE/pki/ca.crt"}
authorization: {mode: AlwaysAllow}
clusterDomain: cluster.local
podLogsDir: $NODE/pod-logs
rotateCertificates: false
serializeImagePulls: false
# A shared disk: neither evict nor garbage-collect images because of other files on it.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, nodefs.inodesFree: 1%, imagefs.available: 1%}
EOF
  daemon kubelet "$BIN/kubelet" --config="$NODE/kubelet/config.yaml" \
    --kubeconfig="$NODE/kubelet.kubeconfig" --root-dir="$NODE/kubelet/root" --cert-dir="$NODE/kubelet/pki" \
    --hostname-override="$REAL_NODE_NAME" --node-ip="$REAL_NODE_IP" \
    --node-labels="$REAL_NODE_LABEL=true" --register-with-taints="$REAL_NODE_LABEL=true:NoSchedule" \
    --v="${RUNNER_CLUSTER_KUBELET_V:-1}"
}

node_ready() {
  [ "$(kc get node "$REAL_NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

start_kube_proxy() {
  leaf kube-proxy "/CN=system:kube-proxy"
  node_kubeconfig kube-proxy
  # kube-proxy exits when its --config file changes: write it only while it is stopped.
  alive kube-proxy > /dev/null || cat > "$NODE/kube-proxy.yaml" << EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$NODE/kube-proxy.kubeconfig"}
mode: iptables
clusterCIDR: $REAL_NODE_POD_CIDR
hostnameOverride: $REAL_NODE_NAME
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Leave the conntrack sysctls alone: they are not per-namespace.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
  daemon kube-proxy "$BIN/kube-proxy" --config="$NODE/kube-proxy.yaml" --v=1
  wait_for "kube-proxy /healthz" kube-proxy innet curl -fsS http://127.0.0.1:10256/healthz
  wait_for "kube-proxy rules for the kubernetes Service" kube-proxy \
    sh -c "nsenter --net=/run/netns/$REAL_NODE_NETNS iptables -t nat -S KUBE-SERVICES | grep -F 'default/kubernetes:https cluster IP' > /dev/null"
}

kc() { innet "$BIN/kubectl" --kubeconfig="$KUBECONFIG_PATH" "$@"; }

up() {
  local t0=$SECONDS t
  [ -f "$STATE/ports.env" ] || { echo "error: no control plane in $STATE: run up.sh" >&2; exit 1; }
  # shellcheck source=/dev/null
  source "$STATE/ports.env"
  local b
  for b in "$BIN/kubelet" "$BIN/kube-proxy" "$PAUSE_TAR" "$WEB_TAR" /run/netns/"$REAL_NODE_NETNS"; do
    [ -e "$b" ] || { echo "error: $b missing: run '$0 prepare' first (up.sh does)" >&2; exit 1; }
  done
  # One real node per machine: every kubelet with the cgroupfs driver keeps
  # its Pods under /kubepods and treats the others' there as orphans to kill.
  local other
  other=$(pgrep -a kubelet | grep -F -- "--config=" | grep -vF -- "$NODE/" | head -n 1 || true)
  if [ -n "$other" ]; then
    echo "error: another cluster's real node runs on this machine (${other%% --kubeconfig*}); two kubelets would fight over /kubepods: stop that cluster first" >&2
    exit 1
  fi
  t=$SECONDS; start_containerd; rstep "containerd ready in $((SECONDS - t)) s"
  t=$SECONDS; start_kubelet
  wait_for "node $REAL_NODE_NAME Ready" kubelet node_ready
  rstep "kubelet: node Ready $((SECONDS - t)) s after start"
  t=$SECONDS; start_kube_proxy; rstep "kube-proxy ready in $((SECONDS - t)) s"
  rstep "real node up in $((SECONDS - t0)) s"
}

# True when a containerd other than a zombie runs (ours may linger as one a moment).
live_containerd() {
  local p
  for p in $(pgrep -x containerd); do [ "$(awk '{print $3}' "/proc/$p/stat" 2> /dev/null)" = Z ] || return 0; done
  return 1
}

down() {
  local t0=$SECONDS ns t c m n h d
  [ -d "$NODE" ] || return 0
  if alive kubelet > /dev/null && [ -f "$KUBECONFIG_PATH" ]; then
    rstep "deleting the Pods on $REAL_NODE_NAME"
    kc delete pods -A --field-selector "spec.nodeName=$REAL_NODE_NAME" --grace-period=1 --timeout=60s > /dev/null 2>&1 || true
  fi
  # kube-proxy exits by itself once its Node is gone: stop it first.
  stop_daemon kube-proxy
  stop_daemon kubelet
  kc delete node "$REAL_NODE_NAME" --timeout=10s > /dev/null 2>&1 || true
  if alive containerd > /dev/null; then
    for ns in k8s.io default; do # what the kubelet did not get to remove
      for t in $(rctr -n "$ns" task ls -q 2> /dev/null); do
        rctr -n "$ns" task kill -s SIGKILL "$t" > /dev/null 2>&1 || true
        rctr -n "$ns" task delete -f "$t" > /dev/null 2>&1 || true
      done
      for c in $(rctr -n "$ns" containers ls -q 2> /dev/null); do rctr -n "$ns" containers delete "$c" > /dev/null 2>&1 || true; done
    done
  fi
  stop_daemon containerd
  # Shims exit with their tasks, a moment after containerd.
  for _ in $(seq 50); do pgrep -f "containerd-shim-runc-v2 .*-address $SOCK" > /dev/null || break; sleep 0.2; done
  # Mounts under our dirs (volume tmpfs, overlay rootfs, netns pins), deepest first.
  awk -v p="$NODE/" 'index($2, p) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do
    umount "$m" 2> /dev/null || umount -l "$m" || true
  done
  # The pod network namespaces CNI made for our sandboxes (recorded by up).
  for n in $(ip netns list | awk '/^cni-/{print $1}'); do
    grep -qx "$n" "$NODE/netns-before" 2> /dev/null || ip netns delete "$n" 2> /dev/null || true
  done
  # The kubelet's /kubepods cgroups (cgroupfs driver), in every hierarchy.
  for h in /sys/fs/cgroup/ /sys/fs/cgroup/*/; do
    d="${h}kubepods"
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2> /dev/null || true
  done
  # Shim and runc state at fixed paths (containerd 1.6 has no option): drop
  # the empty dirs when no other containerd runs.
  if ! live_containerd && [ -d /run/containerd ]; then
    find /run/containerd -depth -type d -empty -delete 2> /dev/null || true
  fi
  rm -rf "$NODE"
  rstep "real node down in $((SECONDS - t0)) s"
}

case "${1:-}" in
  prepare)
    t0=$SECONDS
    packages
    RUNNER_CLUSTER_REAL_NODE=1 bash "$here/build.sh" > /dev/null
    build_images
    make_netns
    mkdir -p "$NODE"
    rstep "prepared in $((SECONDS - t0)) s"
    [ -f "$NODE/netns-before" ] || ip netns list | awk '{print $1}' > "$NODE/netns-before"
    ;;
  up) up ;;
  down) down ;;
  images)
    packages
    build_images
    echo "$WEB_TAR"
    ;;
  netns-delete)
    if [ -e "/run/netns/$REAL_NODE_NETNS" ]; then
      ip netns delete "$REAL_NODE_NETNS"
      rstep "netns $REAL_NODE_NETNS deleted"
    fi
    ;;
  load)
    [ -f "${2:-}" ] || { echo "usage: $0 load IMAGE.tar" >&2; exit 2; }
    alive containerd > /dev/null || { echo "error: the real node of cluster '$CLUSTER_NAME' is not running" >&2; exit 1; }
    rctr -n k8s.io images import "$2" >&2
    rstep "loaded $2"
    ;;
  tag)
    [ -n "${2:-}" ] && [ -n "${3:-}" ] || { echo "usage: $0 tag IMAGE NEW-NAME" >&2; exit 2; }
    alive containerd > /dev/null || { echo "error: the real node of cluster '$CLUSTER_NAME' is not running" >&2; exit 1; }
    rctr -n k8s.io images tag --force "$2" "$3" > /dev/null
    rstep "tagged $2 as $3"
    ;;
  *) echo "usage: $0 prepare|up|down|netns-delete|images|load TAR|tag IMAGE NEW-NAME" >&2; exit 2 ;;
esac
