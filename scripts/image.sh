#!/usr/bin/env bash
# Builds the manager image without Docker or a registry, from the project's
# own recipe: the Dockerfile's build command (a static glibc binary) run on
# this machine, and the Dockerfile's runtime stage (`FROM scratch`, the
# binary, its USER, ENTRYPOINT and CMD) written as an OCI image tarball by
# scripts/oci-image.sh. `docker build .` makes the same image for those who
# have Docker.
#
#   bash scripts/image.sh            -> prints the tarball path on stdout
#   bash scripts/image.sh --docker-context DIR
#                                    -> DIR holds the binary and the runtime
#                                       stage as a Dockerfile: `docker build
#                                       DIR` makes the image without pulling
#                                       any base (kind-image-test.sh)
#
# Environment:
#   RUNNER_IMAGE          image name, default localhost/kubectl-runner:<version>
#   RUNNER_IMAGE_PROFILE  release (default: the Dockerfile's fat-LTO build,
#                         ~10 min cold on 2 cores) or dev (unoptimised, a few
#                         minutes; for working on the image, never for CI)
#   CARGO_TARGET_DIR      as usual; the tarball goes to <target>/image/
# Load it into the local cluster's real node: tests/cluster/real-node.sh load TAR
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '==> [image] %s\n' "$*" >&2; }
context=
if [ "${1:-}" = --docker-context ]; then
  [ -n "${2:-}" ] || { echo "usage: $0 [--docker-context DIR]" >&2; exit 2; }
  context=$2
fi

target=x86_64-unknown-linux-gnu
profile=${RUNNER_IMAGE_PROFILE:-release}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
name=${RUNNER_IMAGE:-localhost/kubectl-runner:$version}
tdir=${CARGO_TARGET_DIR:-target}

# The runtime stage, read from the Dockerfile: everything after the last FROM.
runtime=$(awk '/^FROM /{stage=""} {stage = stage $0 "\n"} END {printf "%s", stage}' Dockerfile)
from=$(printf '%s' "$runtime" | sed -n 's/^FROM \([^ ]*\).*/\1/p')
[ "$from" = scratch ] || { echo "error: the Dockerfile's runtime stage is FROM $from; this script builds FROM scratch only" >&2; exit 1; }
user=$(printf '%s' "$runtime" | sed -n 's/^USER \(.*\)$/\1/p')
entrypoint=$(printf '%s' "$runtime" | sed -n 's/^ENTRYPOINT \(.*\)$/\1/p')
cmd=$(printf '%s' "$runtime" | sed -n 's/^CMD \(.*\)$/\1/p')
dest=$(printf '%s' "$runtime" | sed -n 's/^COPY --from=build [^ ]* \(.*\)$/\1/p')
[ -n "$user" ] && [ -n "$entrypoint" ] && [ -n "$dest" ] || { echo "error: cannot read USER, ENTRYPOINT and COPY from the Dockerfile's runtime stage" >&2; exit 1; }

case $profile in
  release) profile_args=(--release); outdir=release ;;
  dev) profile_args=(); outdir=debug
    # No debug info: the binary stays small enough to ship around.
    export CARGO_PROFILE_DEV_DEBUG=0 CARGO_PROFILE_DEV_STRIP=true ;;
  *) echo "error: RUNNER_IMAGE_PROFILE=$profile: release or dev" >&2; exit 2 ;;
esac

t0=$SECONDS
step "cargo build --profile $profile --target $target (static glibc)"
RUSTFLAGS='-C target-feature=+crt-static' cargo build "${profile_args[@]}" --locked --target "$target" --bin kubectl-runner
bin="$tdir/$target/$outdir/kubectl-runner"
step "built in $((SECONDS - t0)) s: $(stat -c %s "$bin") bytes"
# A static binary has no interpreter; a dynamic one would not start FROM scratch.
if readelf -l "$bin" 2> /dev/null | grep -q 'Requesting program interpreter'; then
  echo "error: $bin is dynamically linked" >&2
  exit 1
fi

if [ -n "$context" ]; then
  mkdir -p "$context"
  install -m 0555 "$bin" "$context/kubectl-runner"
  printf '%s' "$runtime" | sed 's|^COPY --from=build [^ ]* |COPY kubectl-runner |' > "$context/Dockerfile"
  step "docker build context (the Dockerfile's runtime stage and the binary): $context"
  echo "$context"
  exit 0
fi

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
install -D -m 0555 "$bin" "$root$dest"
mkdir -p "$tdir/image"
out="$tdir/image/kubectl-runner-$profile.oci.tar"
bash scripts/oci-image.sh "$root" "$name" "$out" "$entrypoint" "${cmd:-null}" "$user"
step "$name ($profile): $(du -h --apparent-size "$out" | cut -f1) in $out"
echo "$out"
