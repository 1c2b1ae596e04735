#!/usr/bin/env bash
# Builds kind and a kind node image with no image registry, once, into the
# cache tests/cluster/build.sh uses; a second run finds every part and only
# checks that the engine has the image.
#
#   kind      sigs.k8s.io/kind at $KIND_VERSION (lib.sh), from Go modules
#   binaries  kubelet, kubeadm, kubectl and the control plane at
#             $K8S_VERSION: tests/cluster/build.sh (RUNNER_CLUSTER_KIND=1)
#   rootfs    Debian $KIND_NODE_SUITE with systemd, containerd, runc and the
#             CNI plugins (debootstrap, from the mirror apt uses)
#   images    kube-apiserver, kube-controller-manager, kube-scheduler,
#             kube-proxy, etcd, pause, CoreDNS and the CNI installer, each an
#             OCI tarball made from binaries built here (scripts/oci-image.sh)
#   node      the rootfs + kind's base files (from the kind module) + the
#             binaries + the images imported into the node's containerd,
#             laid out as `kind build node-image` lays out its images;
#             loaded into the engine as $KIND_NODE_IMAGE
#
#   bash tests/kind/build.sh          all of it; prints the node image's name
#   bash tests/kind/build.sh STEP...  only these steps (kind binaries rootfs images node)
#
# Needs root (debootstrap, chroot), Go, gcc, a Docker engine for the last
# step (DOCKER_HOST; tests/kind/engine.sh starts one). docs/development.md
# describes the image's layout and what differs from kind's own images.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/kind/lib.sh
source "$here/lib.sh"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
JOBS=${GO_BUILD_JOBS:-2}
mkdir -p "$KIND_CACHE"
work=$(mktemp -d)
cleanup() {
  # A containerd import_images started and did not get to stop.
  [ -f "$work/containerd.pid" ] && kill "$(<"$work/containerd.pid")" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# --- kind ----------------------------------------------------------------------
build_kind() {
  [ -x "$KIND_BIN/kind" ] && { kstep "kind $KIND_VERSION: cached"; return; }
  local t=$SECONDS
  kstep "kind $KIND_VERSION: go install"
  GOBIN="$work/kindbin" go install -p "$JOBS" -trimpath -ldflags "-s -w" "sigs.k8s.io/kind@$KIND_VERSION"
  mkdir -p "$KIND_BIN"
  mv "$work/kindbin/kind" "$KIND_BIN/kind"
  kstep "kind built in $((SECONDS - t)) s"
}

# --- Debian rootfs -----------------------------------------------------------------
# The packages of kind's base image that a single node needs (no NFS, iSCSI
# or fuse-overlayfs), with Debian's containerd, runc and CNI plugins in
# place of kind's own builds of them.
NODE_PACKAGES=systemd,systemd-sysv,dbus,conntrack,iptables,nftables,iproute2,ethtool,kmod,libseccomp2,pigz,e2fsprogs,ca-certificates,curl,jq,procps,containerd,runc,containernetworking-plugins
ROOTFS_TAR="$KIND_CACHE/rootfs-$KIND_NODE_SUITE-$(printf '%s' "$NODE_PACKAGES" | sha256sum | cut -c1-12).tar"

# The mirror apt already uses for $KIND_NODE_SUITE (KIND_NODE_MIRROR overrides).
apt_mirror() {
  [ -n "${KIND_NODE_MIRROR:-}" ] && { echo "$KIND_NODE_MIRROR"; return; }
  apt-get indextargets --format '$(SITE) $(RELEASE)' 2> /dev/null |
    awk -v s="$KIND_NODE_SUITE" '$2 == s {print $1; exit}'
}

build_rootfs() {
  [ -s "$ROOTFS_TAR" ] && { kstep "rootfs: cached ($ROOTFS_TAR)"; return; }
  local mirror t=$SECONDS
  command -v debootstrap > /dev/null || apt_install debootstrap
  mirror=$(apt_mirror)
  [ -n "$mirror" ] || die "no apt source for $KIND_NODE_SUITE: set KIND_NODE_MIRROR to a Debian mirror"
  kstep "rootfs: debootstrap $KIND_NODE_SUITE from $mirror"
  debootstrap --variant=minbase --include="$NODE_PACKAGES" "$KIND_NODE_SUITE" "$work/rootfs" "$mirror" > "$work/debootstrap.log" 2>&1 ||
    { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
  rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
  tar --numeric-owner -C "$work/rootfs" -cf "$ROOTFS_TAR.tmp" .
  mv "$ROOTFS_TAR.tmp" "$ROOTFS_TAR"
  rm -rf "$work/rootfs"
  kstep "rootfs built in $((SECONDS - t)) s: $(du -h "$ROOTFS_TAR" | cut -f1)"
}

# --- binaries --------------------------------------------------------------------
# kubelet, kubeadm, kubectl and the control plane, built the way the local
# cluster's are and into the same cache; pause.c comes from the same module.
build_binaries() {
  RUNNER_CLUSTER_KIND=1 bash "$here/../cluster/build.sh" > /dev/null
  local b
  for b in kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubeadm kubectl etcd; do
    [ -x "$BIN/$b" ] || die "$BIN/$b missing after tests/cluster/build.sh"
  done
}

# What kubeadm $K8S_VERSION runs, read from kubeadm itself: the node image
# holds exactly these names (as `kind build node-image` does).
kubeadm_images() { "$BIN/kubeadm" config images list --kubernetes-version "$K8S_VERSION" 2> /dev/null; }
kubeadm_image() { kubeadm_images | grep -m1 "/$1:"; }

# The rootfs tarball unpacked in $work/rootfs, once per run.
extract_rootfs() {
  [ -d "$work/rootfs/usr" ] && return
  mkdir -p "$work/rootfs"
  tar --numeric-owner -C "$work/rootfs" -xf "$ROOTFS_TAR"
}

# --- component images: images.sh ------------------------------------------------
# shellcheck source=tests/kind/images.sh
source "$here/images.sh"

# --- the node image -----------------------------------------------------------------
# Named by what is in it: the Kubernetes version, and a digest of the
# rootfs, the image tarballs, the binaries and these recipes.
node_recipe_digest() {
  {
    echo "$KIND_VERSION $ROOTFS_TAR"
    sha256sum "$0" "$here/lib.sh" "$here/images.sh" "$here/node/"* | cut -d' ' -f1
    find "$IMAGES" -name '*.tar' -printf '%f %s\n' | sort
    for b in kubelet kubeadm kubectl; do stat -c '%n %s %Y' "$BIN/$b"; done
  } | sha256sum | cut -c1-12
}

# The directory of the kind module: its images/base/files are the base
# image's files (entrypoint, systemd units, containerd config, /kind/bin).
kind_module_dir() {
  (cd "$work" && go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
}

# kind's base image Dockerfile, step by step, on the Debian rootfs.
install_kind_base() {
  local r=$1 files
  files="$(kind_module_dir)/images/base/files"
  [ -d "$files" ] || die "no images/base/files in the kind $KIND_VERSION module"
  install -m 0755 "$files"/usr/local/bin/* "$r/usr/local/bin/"
  mkdir -p "$r/kind" "$r/LICENSES" "$r/etc/systemd/system/kubelet.service.d"
  cp -r "$files/kind/." "$r/kind/"
  find "$r/kind" -type f -exec chmod 0644 {} + && chmod 0755 "$r/kind" "$r/kind/bin" "$r"/kind/bin/*
  install -m 0644 "$files"/LICENSES/* "$r/LICENSES/"
  install -m 0644 "$files/etc/crictl.yaml" "$r/etc/"
  install -D -m 0644 "$files/etc/containerd/config.toml" "$r/etc/containerd/config.toml"
  install -m 0644 "$files"/etc/default/* "$r/etc/default/"
  install -m 0644 "$files"/etc/sysctl.d/* "$r/etc/sysctl.d/"
  find "$files/etc/systemd/system" -maxdepth 1 -type f -exec install -m 0644 {} "$r/etc/systemd/system/" \;
  install -m 0644 "$files"/etc/systemd/system/kubelet.service.d/* "$r/etc/systemd/system/kubelet.service.d/"
  # kind's units run containerd from /usr/local/bin; Debian installs it in /usr/bin.
  local b
  for b in containerd containerd-shim-runc-v2 ctr; do ln -sf "/usr/bin/$b" "$r/usr/local/bin/$b"; done
  # The CNI plugins where containerd looks for them.
  mkdir -p "$r/opt/cni"
  ln -sfn /usr/lib/cni "$r/opt/cni/bin"
  # The sandbox image is the pause kubeadm names (built here).
  sed -i "s|^\([[:space:]]*sandbox_image = \).*|\1\"$(kubeadm_image pause)\"|" "$r/etc/containerd/config.toml"
  chroot "$r" sh -c 'ctr oci spec | jq ".hooks.createContainer[.hooks.createContainer | length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}" | jq "del(.process.rlimits)"' \
    > "$r/etc/containerd/cri-base.json"
  # The RUN lines of kind's base Dockerfile.
  find "$r/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
  rm -f "$r"/lib/systemd/system/multi-user.target.wants/* "$r"/etc/systemd/system/*.wants/* \
    "$r"/lib/systemd/system/local-fs.target.wants/* "$r"/lib/systemd/system/sockets.target.wants/*udev* \
    "$r"/lib/systemd/system/sockets.target.wants/*initctl* "$r"/lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >> "$r/etc/systemd/journald.conf"
  ln -sf /usr/lib/systemd/systemd "$r/sbin/init"
  chroot "$r" systemctl enable kubelet.service containerd.service undo-mount-hacks.service > /dev/null 2>&1
  chroot "$r" systemctl mask systemd-binfmt.service > /dev/null 2>&1
  mkdir -p "$r/etc/kubernetes/manifests"
}

# import_images ROOT: the image tarballs into ROOT's containerd content
# store, pinned and not unpacked, as kind's builder imports them; a
# containerd of our own (the same Debian version as the node's) on ROOT's
# /var/lib/containerd, stopped again.
import_images() {
  local r=$1 st="$work/ctrd" t
  mkdir -p "$st"
  cat > "$st/config.toml" << CONF
version = 2
root = "$r/var/lib/containerd"
state = "$st/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$st/sock"
[ttrpc]
  address = "$st/sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$st/opt"
CONF
  command -v containerd > /dev/null || apt_install containerd
  containerd --config "$st/config.toml" > "$st/log" 2>&1 &
  echo $! > "$work/containerd.pid"
  for t in $(seq 50); do ctr --address "$st/sock" version > /dev/null 2>&1 && break; sleep 0.2; done
  for t in "$IMAGES"/*.tar; do
    ctr --address "$st/sock" -n k8s.io images import --label=io.cri-containerd.pinned=pinned \
      --all-platforms --no-unpack --digests - < "$t" > /dev/null
  done
  kstep "node images: $(ctr --address "$st/sock" -n k8s.io images ls -q | grep -v '^sha256:\|^import-' | tr '\n' ' ')"
  kill "$(<"$work/containerd.pid")"
  wait "$(<"$work/containerd.pid")" 2> /dev/null || true
  rm -f "$work/containerd.pid"
}

build_node() {
  local digest r tar t=$SECONDS
  digest=$(node_recipe_digest)
  KIND_NODE_IMAGE=${KIND_NODE_IMAGE:-localhost/kubectl-runner/kind-node:$K8S_VERSION-$digest}
  tar="$KIND_CACHE/node-$K8S_VERSION-$digest.tar"
  if [ ! -s "$tar" ]; then
    kstep "node image: assembling $KIND_NODE_IMAGE"
    extract_rootfs
    r="$work/rootfs"
    install_kind_base "$r"
    for b in kubelet kubeadm kubectl; do install -m 0755 "$BIN/$b" "$r/usr/bin/$b"; done
    echo "$K8S_VERSION" > "$r/kind/version"
    mkdir -p "$r/kind/manifests"
    install -m 0644 "$here/node/default-cni.yaml" "$r/kind/manifests/default-cni.yaml"
    import_images "$r"
    tar --numeric-owner -C "$r" -cf "$tar.tmp" .
    mv "$tar.tmp" "$tar"
    # Earlier recipes' node tarballs (1 GB each) are of no further use.
    find "$KIND_CACHE" -maxdepth 1 -name 'node-*.tar' ! -name "$(basename "$tar")" -delete
    kstep "node rootfs: $(du -h "$tar" | cut -f1) in $((SECONDS - t)) s"
  fi
  command -v docker > /dev/null || die "no docker CLI: install Docker (or start tests/kind/engine.sh)"
  docker info > /dev/null 2>&1 ||
    die "no Docker engine answers at ${DOCKER_HOST:-the default socket}: start one ('eval \"\$(bash tests/kind/engine.sh start)\"'), or set DOCKER_HOST"
  if ! docker image inspect "$KIND_NODE_IMAGE" > /dev/null 2>&1; then
    t=$SECONDS
    kstep "node image: docker import $tar"
    # What kind's base image sets: systemd's container interface, and the stop signal.
    docker import --change 'ENV container=docker' \
      --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' "$tar" "$KIND_NODE_IMAGE-rootfs" > /dev/null
    printf 'FROM %s\nSTOPSIGNAL SIGRTMIN+3\n' "$KIND_NODE_IMAGE-rootfs" |
      docker build -q -t "$KIND_NODE_IMAGE" - > "$work/docker-build.log" 2>&1 ||
      { cat "$work/docker-build.log" >&2; die "docker build of the node image failed (above)"; }
    docker rmi "$KIND_NODE_IMAGE-rootfs" > /dev/null
    # Earlier node images, unless a cluster still runs on one.
    docker images --format '{{.Repository}}:{{.Tag}}' "${KIND_NODE_IMAGE%:*}" | grep -vxF "$KIND_NODE_IMAGE" |
      xargs -r docker rmi > /dev/null 2>&1 || true
    kstep "node image: loaded in $((SECONDS - t)) s"
  fi
  kstep "node image: $KIND_NODE_IMAGE"
  echo "$KIND_NODE_IMAGE"
}

main() {
  local steps=("$@") s
  [ ${#steps[@]} -gt 0 ] || steps=(kind binaries rootfs images node)
  for s in "${steps[@]}"; do
    case $s in
      kind) build_kind ;;
      binaries) build_binaries ;;
      rootfs) build_rootfs ;;
      images) build_images ;;
      node) build_node ;;
      *) die "unknown step $s (kind binaries rootfs images node)" ;;
    esac
  done
}
main "$@"
