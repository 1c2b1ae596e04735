# shellcheck shell=bash
# The component images of the kind node image, for tests/kind/build.sh:
# each an OCI tarball with one layer (scripts/oci-image.sh) under the name
# kubeadm expects. Sourced by build.sh (its $work, $BIN, $here, kubeadm_image,
# extract_rootfs), not run.

# --- component images ---------------------------------------------------------------
# Each an OCI tarball with one layer (scripts/oci-image.sh), named as
# kubeadm expects, in $IMAGES. A tarball that exists is not rebuilt: its
# name carries the version of what is in it.
IMAGES="$KIND_CACHE/images-$K8S_VERSION"
# The CNI the node image installs (its /kind/manifests/default-cni.yaml):
# kind's own kindnetd is not published as a Go module, so the node runs a
# bridge network from Debian's CNI plugins, written by a DaemonSet.
CNI_IMAGE=localhost/kubectl-runner/kind-bridge-cni:1
COREDNS_PLUGINS="bind cache debug errors forward health hosts kubernetes loadbalance log loop metrics ready reload rewrite whoami"

oci() { bash "$here/../../scripts/oci-image.sh" "$@" 2> /dev/null; }

# binary_image NAME BINARY: BINARY at /usr/local/bin, nothing else (the
# static pods of kubeadm name their command; it is on PATH).
binary_image() {
  local name=$1 bin=$2 tar r
  tar="$IMAGES/$(basename "$bin")-${name##*:}.tar"
  [ -s "$tar" ] && return
  r="$work/img-$(basename "$bin")"
  install -D -m 0755 "$bin" "$r/usr/local/bin/$(basename "$bin")"
  oci "$r" "$name" "$tar" "[\"/usr/local/bin/$(basename "$bin")\"]"
  kstep "image $name"
}

pause_image() {
  local name tar src r
  name=$(kubeadm_image pause)
  tar="$IMAGES/pause-${name##*:}.tar"
  [ -s "$tar" ] && return
  src=$(cd "$work" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')/build/pause/linux/pause.c
  r="$work/img-pause"
  mkdir -p "$r"
  gcc -Os -static -Wall -DVERSION="v${name##*:}" -o "$r/pause" "$src"
  strip "$r/pause"
  oci "$r" "$name" "$tar" '["/pause"]'
  kstep "image $name"
}

# CoreDNS at the version kubeadm names, with the plugins kubeadm's and
# kind's Corefiles use (not the cloud ones: a tenth of the build).
coredns_image() {
  local name version tar w p
  name=$(kubeadm_image coredns)
  version=${name##*:}
  tar="$IMAGES/coredns-$version.tar"
  [ -s "$tar" ] && return
  kstep "CoreDNS $version: building"
  w="$work/coredns"
  mkdir -p "$w" "$w/root"
  {
    echo 'package main'
    echo 'import ('
    for p in $COREDNS_PLUGINS; do printf '\t_ "github.com/coredns/coredns/plugin/%s"\n' "$p"; done
    printf '\t"github.com/coredns/coredns/coremain"\n)\n'
    echo 'func main() { coremain.Run() }'
  } > "$w/main.go"
  printf 'module local/corednsbuild\n\ngo 1.25.0\n\nrequire github.com/coredns/coredns %s\n' "$version" > "$w/go.mod"
  (cd "$w" && go mod tidy > "$w/log" 2>&1 && go build -p "$JOBS" -trimpath -ldflags "-s -w" -o "$w/root/coredns" . >> "$w/log" 2>&1) ||
    { tail -n 30 "$w/log" >&2; die "CoreDNS $version did not build (log above)"; }
  oci "$w/root" "$name" "$tar" '["/coredns"]'
  kstep "image $name"
}

# pkg_closure ROOT PKG...: PKG and every package they depend on, installed in ROOT.
pkg_closure() {
  local root=$1 todo seen=" " p deps
  shift
  todo=("$@")
  while [ ${#todo[@]} -gt 0 ]; do
    p=${todo[0]}
    todo=("${todo[@]:1}")
    case $seen in *" $p "*) continue ;; esac
    chroot "$root" dpkg-query -W "$p" > /dev/null 2>&1 || continue
    seen+="$p "
    deps=$(chroot "$root" dpkg-query -W -f '${Pre-Depends}, ${Depends}' "$p" |
      tr ',' '\n' | sed 's/|.*//; s/(.*//; s/:any//; s/ //g' | grep -v '^$' || true)
    # shellcheck disable=SC2206 # package names have no spaces
    todo+=($deps)
  done
  echo "$seen"
}

# kube-proxy needs iptables (and conntrack) in its image: Debian's, with the
# libraries they load, from the node's rootfs; the same backend (nft) as the node.
kube_proxy_image() {
  local name tar r p f
  name=$(kubeadm_image kube-proxy)
  tar="$IMAGES/kube-proxy-${name##*:}.tar"
  [ -s "$tar" ] && return
  r="$work/img-kube-proxy"
  mkdir -p "$r/usr"
  # Debian's merged /usr: /lib, /sbin... are links into /usr.
  for f in bin sbin lib lib64; do
    [ -L "$work/rootfs/$f" ] || continue
    cp -a "$work/rootfs/$f" "$r/$f"
    mkdir -p "$r/$(readlink "$work/rootfs/$f")"
  done
  for p in $(pkg_closure "$work/rootfs" iptables nftables conntrack dash grep coreutils); do
    chroot "$work/rootfs" dpkg-query -L "$p" | while read -r f; do
      case $f in /usr/share/doc* | /usr/share/man* | /usr/share/lintian* | /usr/share/locale*) continue ;; esac
      [ -d "$work/rootfs$f" ] && continue
      [ -e "$work/rootfs$f" ] || [ -L "$work/rootfs$f" ] || continue
      mkdir -p "$r$(dirname "$f")"
      cp -a "$work/rootfs$f" "$r$f"
    done
  done
  # The update-alternatives links (iptables -> iptables-nft), made by postinst.
  for f in "$work/rootfs"/etc/alternatives/*tables* "$work/rootfs"/usr/sbin/*tables*; do
    [ -L "$f" ] && { mkdir -p "$r$(dirname "${f#"$work/rootfs"}")"; cp -a "$f" "$r${f#"$work/rootfs"}"; }
  done
  mkdir -p "$r/tmp" "$r/run" "$r/var/lib"
  chmod 1777 "$r/tmp"
  ln -sf dash "$r/bin/sh"
  # The backend the node uses, chosen on the first call (node/iptables-wrapper).
  install -m 0755 "$here/node/iptables-wrapper" "$r/usr/sbin/iptables-wrapper"
  for f in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
    ln -sf iptables-wrapper "$r/usr/sbin/$f"
  done
  install -D -m 0755 "$BIN/kube-proxy" "$r/usr/local/bin/kube-proxy"
  chroot "$r" /usr/sbin/iptables-legacy --version > /dev/null || die "the kube-proxy image's iptables does not run"
  chroot "$r" /usr/sbin/conntrack --version > /dev/null || die "the kube-proxy image's conntrack does not run"
  oci "$r" "$name" "$tar" '["/usr/local/bin/kube-proxy"]'
  kstep "image $name ($(du -sh "$r" | cut -f1))"
}

# The CNI installer: Debian's static busybox writing the bridge conflist.
cni_image() {
  local tar="$IMAGES/kind-bridge-cni-${CNI_IMAGE##*:}.tar" r a
  [ -s "$tar" ] && return
  [ -x /bin/busybox ] || apt_install busybox-static
  r="$work/img-cni"
  mkdir -p "$r/bin"
  cp /bin/busybox "$r/bin/busybox"
  for a in sh cat mkdir mv sleep; do ln -s busybox "$r/bin/$a"; done
  oci "$r" "$CNI_IMAGE" "$tar" '["/bin/sh","-c"]'
  kstep "image $CNI_IMAGE"
}

build_images() {
  mkdir -p "$IMAGES"
  [ -x "$BIN/kubeadm" ] || die "kubeadm is not built: run the binaries step first"
  local c
  for c in kube-apiserver kube-controller-manager kube-scheduler; do binary_image "$(kubeadm_image "$c")" "$BIN/$c"; done
  # The project's pinned etcd, under the tag kubeadm asks for.
  binary_image "$(kubeadm_image etcd)" "$BIN/etcd"
  pause_image
  coredns_image
  cni_image
  [ -s "$ROOTFS_TAR" ] || die "no rootfs: run the rootfs step first"
  extract_rootfs
  kube_proxy_image
  kstep "images: $(find "$IMAGES" -name '*.tar' | wc -l) in $IMAGES ($(du -sh "$IMAGES" | cut -f1))"
}
