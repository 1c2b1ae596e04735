#!/usr/bin/env bash
# oci-image.sh ROOTFS_DIR IMAGE_NAME OUT_TAR ENTRYPOINT_JSON [CMD_JSON [USER]]
#
# Writes an OCI image layout tarball with one uncompressed layer holding
# ROOTFS_DIR, using only tar, sha256sum and printf: no Docker, no buildah, no
# registry. `ctr -n k8s.io images import OUT_TAR` names the image IMAGE_NAME
# (the io.containerd.image.name annotation of index.json); `docker load` and
# `podman load` read the same layout. Reproducible: entries sorted, mtime 0,
# owner 0:0, so the same files give the same digest.
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: $0 ROOTFS_DIR IMAGE_NAME OUT_TAR ENTRYPOINT_JSON [CMD_JSON [USER]]" >&2; exit 2; }
rootfs=$1 name=$2 out=$3 entrypoint=$4 cmd=${5:-null} user=${6:-}
lay=$(mktemp -d)
trap 'rm -rf "$lay"' EXIT
mkdir -p "$lay/blobs/sha256"

# put FILE: moves FILE into blobs/ under its digest; prints "digest size".
put() {
  local d s
  d=$(sha256sum "$1" | cut -d' ' -f1)
  s=$(stat -c %s "$1")
  mv "$1" "$lay/blobs/sha256/$d"
  echo "$d $s"
}

tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 --format=posix \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  -C "$rootfs" -cf "$lay/layer.tar" .
read -r layer_digest layer_size < <(put "$lay/layer.tar")

user_field=""
[ -n "$user" ] && user_field="\"User\":\"$user\","
printf '{"architecture":"amd64","os":"linux","config":{%s"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Entrypoint":%s,"Cmd":%s,"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created_by":"scripts/oci-image.sh"}]}' \
  "$user_field" "$entrypoint" "$cmd" "$layer_digest" > "$lay/config.json"
read -r config_digest config_size < <(put "$lay/config.json")

printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
  "$config_digest" "$config_size" "$layer_digest" "$layer_size" > "$lay/manifest.json"
read -r manifest_digest manifest_size < <(put "$lay/manifest.json")

printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
  "$manifest_digest" "$manifest_size" "$name" "${name##*:}" > "$lay/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' > "$lay/oci-layout"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$lay" -cf "$out.tmp" oci-layout index.json blobs
mv "$out.tmp" "$out"
echo "==> image $name sha256:$manifest_digest, layer $layer_size bytes, tarball $(stat -c %s "$out") bytes: $out" >&2
