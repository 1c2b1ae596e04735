#!/usr/bin/env bash
# Starts a real, local Kubernetes control plane on loopback: etcd,
# kube-apiserver (RBAC, default admission plugins), kube-controller-manager,
# kube-scheduler, and kwok faking the kubelet of one or more Nodes, so that
# Deployment Pods get scheduled and become Running/Ready without containers.
#
# Steps go to stderr; the only stdout line is `export KUBECONFIG=...`, so
#   eval "$(bash tests/cluster/up.sh)"
# works. Idempotent: when the cluster is running it only verifies it; when
# some components died it restarts those. Stop with tests/cluster/down.sh.
# Environment: see lib.sh, plus RUNNER_CLUSTER_NODES (fake nodes, default 1),
# RUNNER_CLUSTER_TIMEOUT (seconds per wait, default 90) and
# RUNNER_CLUSTER_AUDIT=1: an apiserver audit log of every write (Metadata
# level, JSON lines) at $STATE/logs/audit.log, which the benchmark reads for
# per-Runner latencies and writes by user agent;
# RUNNER_CLUSTER_AUDIT=runners: the same log, narrowed to clients outside
# the control plane (not kube-system's service accounts, nodes, the
# controller-manager's, scheduler's or apiserver's own users), and to their
# writes on Runners (and their status), on Deployments, Services, Ingresses
# and PodDisruptionBudgets (not their status), Events and Leases, and their
# gets and lists of anything (not watches): a spec change, the manager's
# writes and reads after it, without the Pod traffic that would grow the
# log by orders of magnitude under sustained load.
# RUNNER_CLUSTER_CLIENT_QPS (and RUNNER_CLUSTER_CLIENT_BURST, default twice
# the QPS): --kube-api-qps/--kube-api-burst of kube-controller-manager and
# kube-scheduler, so a bench cluster sets up thousands of Pods in minutes
# (unset: their defaults, 20/30 and 50/100).
#
# RUNNER_CLUSTER_REAL_NODE=1 (needs root): the whole cluster runs in its own
# network namespace, with one real node (containerd, kubelet, kube-proxy)
# next to the kwok ones; see real-node.sh. A cluster that has a real node
# keeps it until down.sh, with or without the variable.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/cluster/lib.sh
source "$here/lib.sh"

REAL_NODE=${RUNNER_CLUSTER_REAL_NODE:-0}
[ -d "$REAL_NODE_STATE" ] && REAL_NODE=1
if [ "$REAL_NODE" = 1 ] && ! in_netns "$REAL_NODE_NETNS"; then
  if cluster_running && [ ! -d "$REAL_NODE_STATE" ]; then
    echo "error: cluster '$CLUSTER_NAME' runs without a real node; stop it first (tests/cluster/down.sh)" >&2
    exit 1
  fi
  bash "$here/real-node.sh" prepare
  step "real node: running up.sh inside network namespace $REAL_NODE_NETNS"
  exec nsenter --net="/run/netns/$REAL_NODE_NETNS" -- env RUNNER_CLUSTER_REAL_NODE=1 bash "$0" "$@"
fi

NODES=${RUNNER_CLUSTER_NODES:-1}
TIMEOUT=${RUNNER_CLUSTER_TIMEOUT:-90}
started_at=$SECONDS

for tool in openssl curl base64 flock setsid go; do
  command -v "$tool" > /dev/null || { echo "error: '$tool' is not installed" >&2; exit 1; }
done

mkdir -p "$STATE"
# One up/down at a time per cluster. fd 9 must not leak into the daemons
# (see start), or they would hold the lock forever.
exec 9> "$STATE/.lock"
flock 9

BIN=$(bash "$here/build.sh" | tail -n 1)
PKI="$STATE/pki"

fail() {
  local component=$1 msg=$2 log="$STATE/logs/$1.log"
  echo "error: $component: $msg" >&2
  if [ -f "$log" ]; then
    echo "---- last 40 lines of $log" >&2
    tail -n 40 "$log" >&2
    echo "----" >&2
  fi
  echo "hint: 'bash tests/cluster/down.sh' stops what was started" >&2
  exit 1
}

# wait_until WHAT COMPONENT COMMAND...: polls COMMAND until it succeeds; fails
# with COMPONENT's log when it exits or after $TIMEOUT seconds.
wait_until() {
  local what=$1 component=$2 deadline=$((SECONDS + TIMEOUT))
  shift 2
  step "waiting for $what"
  until "$@" > /dev/null 2>&1; do
    component_pid "$component" > /dev/null || fail "$component" "exited while waiting for $what"
    (( SECONDS < deadline )) || fail "$component" "timed out after ${TIMEOUT}s waiting for $what"
    sleep 0.5
  done
}

port_in_use() { (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null; }

choose_ports() {
  local base=${RUNNER_CLUSTER_PORT_BASE:-} b p busy
  if [ -n "$base" ]; then
    for p in $(seq "$base" $((base + 5))); do
      port_in_use "$p" && { echo "error: RUNNER_CLUSTER_PORT_BASE=$base: port $p is in use" >&2; exit 1; }
    done
  else
    for b in $(seq 16440 10 16990); do
      busy=0
      for p in $(seq "$b" $((b + 5))); do port_in_use "$p" && { busy=1; break; }; done
      [ "$busy" = 0 ] && { base=$b; break; }
    done
    [ -n "$base" ] || { echo "error: no 6 free ports between 16440 and 16995" >&2; exit 1; }
  fi
  cat > "$STATE/ports.env" << EOF
API_PORT=$base
ETCD_PORT=$((base + 1))
ETCD_PEER_PORT=$((base + 2))
KCM_PORT=$((base + 3))
SCHEDULER_PORT=$((base + 4))
KWOK_PORT=$((base + 5))
EOF
}

# leaf NAME SUBJECT EXTENSIONS: a key and a certificate signed by our CA.
leaf() {
  printf '%s\n' "$3" > "$PKI/$1.ext"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -out "$PKI/$1.csr" -subj "$2" 2> /dev/null
  openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$PKI/$1.ext" -out "$PKI/$1.crt" 2> /dev/null
}

make_pki() {
  [ -f "$PKI/done" ] && return
  step "certificates: generating in $PKI"
  rm -rf "$PKI"
  mkdir -p "$PKI"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 3650 \
    -subj "/CN=kubectl-runner-cluster-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2> /dev/null
  local client=$'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth'
  leaf apiserver "/CN=kube-apiserver" $'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local'
  leaf admin "/O=system:masters/CN=kubectl-runner-admin" "$client"
  # The identities kubeadm gives these components; bootstrap RBAC binds them.
  leaf controller-manager "/CN=system:kube-controller-manager" "$client"
  leaf scheduler "/CN=system:kube-scheduler" "$client"
  openssl genrsa -out "$PKI/sa.key" 2048 2> /dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2> /dev/null
  chmod 600 "$PKI"/*.key
  touch "$PKI/done"
}

# write_kubeconfig FILE CERT_NAME
write_kubeconfig() {
  local ctx="kubectl-runner-$CLUSTER_NAME"
  : > "$1"
  chmod 600 "$1"
  cat > "$1" << EOF
apiVersion: v1
kind: Config
clusters:
- name: $ctx
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $2@$ctx
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$2.crt")
    client-key-data: $(base64 -w0 "$PKI/$2.key")
contexts:
- name: $ctx
  context:
    cluster: $ctx
    user: $2@$ctx
    namespace: default
current-context: $ctx
EOF
}

# start COMPONENT COMMAND...: starts it detached (own session, so Ctrl-C or
# the end of this script does not stop it) unless it is already running.
start() {
  local name=$1 pid
  shift
  if pid=$(component_pid "$name"); then
    step "$name: running (pid $pid)"
    return
  fi
  step "$name: starting, log $STATE/logs/$name.log"
  setsid "$@" > "$STATE/logs/$name.log" 2>&1 < /dev/null 9>&- &
  pid=$!
  echo "$pid" > "$STATE/pids/$name.pid"
  # Until the child has exec'd, its command line is this script's and
  # component_pid would call a starting component exited: wait for the exec
  # (or its exit, which wait_until then reports with the log).
  local tries=100
  while ! component_pid "$name" > /dev/null && [ -d "/proc/$pid" ] && ((tries-- > 0)); do
    sleep 0.05
  done
}

kubectl() { "$BIN/kubectl" --kubeconfig="$KUBECONFIG_PATH" "$@"; }

etcd_healthy() { curl -fsS "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }
apiserver_ready() { [ "$(kubectl get --raw=/readyz)" = ok ]; }
component_healthy() { [ "$(curl -fsSk "https://127.0.0.1:$1/healthz")" = ok ]; }
kwok_healthy() { curl -fsS "http://127.0.0.1:$KWOK_PORT/healthz"; }
nodes_ready() {
  local n
  for n in $(seq 0 $((NODES - 1))); do
    kubectl wait --for=condition=Ready --timeout=1s "node/kwok-node-$n" || return 1
    # The node lifecycle controller keeps a not-ready NoSchedule taint a
    # moment after Ready; Pods schedule once it is gone.
    [ -z "$(kubectl get "node/kwok-node-$n" -o 'jsonpath={.spec.taints}')" ] || return 1
  done
}
default_sa_exists() { kubectl -n default get serviceaccount default; }

fake_nodes() {
  local n
  for n in $(seq 0 $((NODES - 1))); do
    cat << EOF
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$n
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: kwok-node-$n
    kubernetes.io/os: linux
    type: kwok
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
EOF
  done
}

# --- main -------------------------------------------------------------------
running=0
for c in "${COMPONENTS[@]}"; do component_pid "$c" > /dev/null && running=1; done
if cluster_running; then
  step "already running in $STATE; verifying"
elif [ "$running" = 0 ]; then
  # Nothing of ours runs: start clean (a crashed run may have left data).
  step "fresh cluster in $STATE"
  rm -rf "$STATE/etcd" "$STATE/logs" "$STATE/pids"
  choose_ports
else
  step "some components stopped; restarting them"
fi
mkdir -p "$STATE/logs" "$STATE/pids"
# shellcheck source=/dev/null
source "$STATE/ports.env"
step "ports: apiserver $API_PORT, etcd $ETCD_PORT/$ETCD_PEER_PORT, controller-manager $KCM_PORT, scheduler $SCHEDULER_PORT, kwok $KWOK_PORT"

make_pki
write_kubeconfig "$KUBECONFIG_PATH" admin
write_kubeconfig "$STATE/controller-manager.kubeconfig" controller-manager
write_kubeconfig "$STATE/scheduler.kubeconfig" scheduler
# Our own config, so a developer's ~/.kwok/kwok.yaml does not apply: only
# kwokctl's default stages (build.sh extracts them from the kwok module). No
# KwokConfiguration document: kwok does not default one read from a file
# ("playStageParallelism must be greater than 0").
cp "$BIN/kwok-stages.yaml" "$STATE/kwok.yaml"

start etcd "$BIN/etcd" --name=runner --data-dir="$STATE/etcd" \
  --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster="runner=http://127.0.0.1:$ETCD_PEER_PORT" \
  --unsafe-no-fsync --log-level=warn
wait_until "etcd health" etcd etcd_healthy

# Loopback only: the endpoint reconciler refuses a loopback advertise address
# ("may not be in the loopback range"), and no Pod here could reach the
# apiserver through the `kubernetes` Service anyway, so it is turned off.
api_net=(--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --endpoint-reconciler-type=none)
if [ "$REAL_NODE" = 1 ]; then
  # Inside our own network namespace only: Pods on the real node reach the
  # apiserver as in any cluster, through the `kubernetes` Service (10.96.0.1,
  # already in the serving certificate) whose endpoint is the node address.
  # The apiserver reaches the kubelet (logs, exec) by that address too. In
  # namespaces annotated for it, Pods get the real node's selector and
  # toleration at admission (see real-node.sh).
  api_net=(--bind-address=0.0.0.0 --advertise-address="$REAL_NODE_IP"
    --kubelet-preferred-address-types=InternalIP,Hostname
    --enable-admission-plugins=PodNodeSelector,PodTolerationRestriction)
fi
audit_flags=()
case ${RUNNER_CLUSTER_AUDIT:-0} in
  1)
    # Writes only: reads would multiply the log without telling who changed what.
    cat > "$STATE/audit-policy.yaml" << 'EOF2'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  verbs: [get, list, watch]
- level: Metadata
EOF2
    ;;
  runners)
    cat > "$STATE/audit-policy.yaml" << 'EOF2'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  verbs: [watch]
- level: None
  userGroups: [system:serviceaccounts:kube-system, system:nodes]
- level: None
  users: [system:kube-controller-manager, system:kube-scheduler, system:apiserver]
- level: None
  nonResourceURLs: ["*"]
- level: Metadata
  verbs: [get, list]
- level: Metadata
  resources:
  - group: lab.cloudlab.training
    resources: [runners, runners/status]
  - group: apps
    resources: [deployments]
  - group: ""
    resources: [services]
  - group: networking.k8s.io
    resources: [ingresses]
  - group: policy
    resources: [poddisruptionbudgets]
  - group: ""
    resources: [events]
  - group: events.k8s.io
    resources: [events]
  - group: coordination.k8s.io
    resources: [leases]
- level: None
EOF2
    ;;
  0) ;;
  *) echo "error: RUNNER_CLUSTER_AUDIT=$RUNNER_CLUSTER_AUDIT: want 0, 1 or runners" >&2; exit 1 ;;
esac
if [ "${RUNNER_CLUSTER_AUDIT:-0}" != 0 ]; then
  audit_flags=(--audit-policy-file="$STATE/audit-policy.yaml" --audit-log-path="$STATE/logs/audit.log"
    --audit-log-format=json --audit-log-mode=batch --audit-log-maxsize=0)
  step "audit log ($RUNNER_CLUSTER_AUDIT): $STATE/logs/audit.log"
fi
client_qps=()
if [ -n "${RUNNER_CLUSTER_CLIENT_QPS:-}" ]; then
  client_qps=(--kube-api-qps="$RUNNER_CLUSTER_CLIENT_QPS"
    --kube-api-burst="${RUNNER_CLUSTER_CLIENT_BURST:-$((2 * RUNNER_CLUSTER_CLIENT_QPS))}")
  step "kube-controller-manager and kube-scheduler client: ${client_qps[*]}"
fi
start kube-apiserver "$BIN/kube-apiserver" "${audit_flags[@]}" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  "${api_net[@]}" --secure-port="$API_PORT" \
  --cert-dir="$STATE/pki/apiserver-serving" \
  --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
  --client-ca-file="$PKI/ca.crt" \
  --authorization-mode=Node,RBAC \
  --service-cluster-ip-range=10.96.0.0/12 --allow-privileged=true \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key"
wait_until "kube-apiserver /readyz" kube-apiserver apiserver_ready

start kube-controller-manager "$BIN/kube-controller-manager" "${client_qps[@]}" \
  --kubeconfig="$STATE/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$STATE/controller-manager.kubeconfig" \
  --authorization-kubeconfig="$STATE/controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --cert-dir="$STATE/pki/controller-manager-serving" \
  --leader-elect=false --use-service-account-credentials=true \
  --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
  --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
  --authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics
start kube-scheduler "$BIN/kube-scheduler" "${client_qps[@]}" \
  --kubeconfig="$STATE/scheduler.kubeconfig" \
  --authentication-kubeconfig="$STATE/scheduler.kubeconfig" \
  --authorization-kubeconfig="$STATE/scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" --cert-dir="$STATE/pki/scheduler-serving" \
  --leader-elect=false
start kwok "$BIN/kwok" --kubeconfig="$KUBECONFIG_PATH" --config="$STATE/kwok.yaml" \
  --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --node-lease-duration-seconds=40 --cidr=10.244.0.1/16 --node-ip=10.0.0.1 \
  --server-address="127.0.0.1:$KWOK_PORT"
wait_until "kube-controller-manager /healthz" kube-controller-manager component_healthy "$KCM_PORT"
wait_until "kube-scheduler /healthz" kube-scheduler component_healthy "$SCHEDULER_PORT"
wait_until "kwok /healthz" kwok kwok_healthy

step "fake nodes: applying $NODES"
fake_nodes | kubectl apply -f - > /dev/null
wait_until "$NODES node(s) Ready and untainted" kwok nodes_ready
wait_until "the default ServiceAccount in default" kube-controller-manager default_sa_exists

if [ "$REAL_NODE" = 1 ]; then
  bash "$here/real-node.sh" up
  step "clients reach this cluster from its network namespace: nsenter --net=/run/netns/$REAL_NODE_NETNS kubectl ..."
fi

step "ready in $((SECONDS - started_at)) s ($("$BIN/kubectl" version --kubeconfig="$KUBECONFIG_PATH" -o json | sed -n 's/.*"gitVersion": "\(v[^"]*\)".*/\1/p' | tail -n 1))"
step "stop with: bash tests/cluster/down.sh"
echo "export KUBECONFIG=$KUBECONFIG_PATH"
