#!/usr/bin/env bash
# Builds the krew release archive for this platform and renders the krew
# manifest for what is in dist/:
#   dist/kubectl-runner_<version>_<os>_<arch>.tar.gz   kubectl-runner,
#       kubectl_complete-runner and LICENSE, at the archive's top level
#   dist/kubectl-runner_<version>_<os>_<arch>.tar.gz.sha256
#   dist/runner.yaml   plugins/runner.yaml with the version, the repository
#       and the sha256 of every archive in dist/; platforms without an
#       archive are left out (krew refuses a platform without a valid sha256)
# For a multi-platform release, run it on each platform (or copy the other
# archives into dist/) and run it once more where all archives are.
#
# Environment:
#   RELEASE_REPO     required: the project URL; archives are expected at
#                    $RELEASE_REPO/releases/download/<version>/<archive>
#   RELEASE_PROFILE  cargo profile, default "release" (fat LTO: ~10 min cold
#                    on 2 cores); "dev" for a quick local check of the packaging
#   DIST             output directory, default dist
# Try it: kubectl krew install --manifest=dist/runner.yaml --archive=dist/<archive>
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '==> [release] %s\n' "$*" >&2; }

: "${RELEASE_REPO:?set RELEASE_REPO to the project URL, e.g. https://example.org/you/kubectl-runner}"
profile=${RELEASE_PROFILE:-release}
dist=${DIST:-dist}
version="v$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
[ "$version" != v ] || { echo "error: no version in Cargo.toml" >&2; exit 1; }

case "$(uname -s)" in
  Linux) os=linux ;;
  Darwin) os=darwin ;;
  *) echo "error: unsupported OS $(uname -s); plugins/runner.yaml lists linux and darwin" >&2; exit 1 ;;
esac
case "$(uname -m)" in
  x86_64 | amd64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "error: unsupported architecture $(uname -m)" >&2; exit 1 ;;
esac
archive="kubectl-runner_${version}_${os}_${arch}.tar.gz"

step "cargo build --profile $profile (kubectl-runner, kubectl_complete-runner)"
# Cargo reports where it put each binary, wherever the target directory is.
mapfile -t bins < <(cargo build --locked --profile "$profile" --bin kubectl-runner \
  --bin kubectl_complete-runner --message-format=json-render-diagnostics |
  sed -n 's/.*"executable":"\([^"]*\)".*/\1/p')
[ "${#bins[@]}" = 2 ] || { echo "error: cargo built ${#bins[@]} binaries, expected 2" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp "${bins[@]}" LICENSE "$stage/"
# The release profile strips already; a dev build carries ~500 MB of debug
# info that no user wants.
if [ "$profile" != release ] && command -v strip > /dev/null; then
  strip "$stage/kubectl-runner" "$stage/kubectl_complete-runner"
fi
mkdir -p "$dist"
step "archive $dist/$archive"
tar_flags=()
# Same bytes for the same binaries: fixed owner, order and time (GNU tar).
if tar --version 2> /dev/null | grep -q 'GNU tar'; then
  tar_flags=(--owner=0 --group=0 --numeric-owner --sort=name --mtime=@0)
fi
tar "${tar_flags[@]}" -C "$stage" -czf "$dist/$archive" kubectl-runner kubectl_complete-runner LICENSE

sha256() {
  if command -v sha256sum > /dev/null; then sha256sum "$1"; else shasum -a 256 "$1"; fi |
    cut -d ' ' -f 1
}
sha256 "$dist/$archive" > "$dist/$archive.sha256"
step "sha256 $(cat "$dist/$archive.sha256")"

# One awk pass over the template: substitute VERSION and REPO, and keep a
# platform block only when its archive is in dist/ (its SHA256_OS_ARCH known).
shas=()
for f in "$dist"/kubectl-runner_"${version}"_*.tar.gz; do
  plat=${f##*/kubectl-runner_"${version}"_}
  plat=${plat%.tar.gz}
  key="SHA256_$(printf '%s' "$plat" | tr '[:lower:]' '[:upper:]')"
  shas+=("$key=$(sha256 "$f")")
done
awk -v version="$version" -v repo="$RELEASE_REPO" -v shas="${shas[*]}" '
  BEGIN { n = split(shas, kv, " "); for (i = 1; i <= n; i++) { split(kv[i], p, "="); sha[p[1]] = p[2] } }
  function flush() { if (block != "" && keep) printf "%s", block; block = ""; keep = 0 }
  {
    gsub(/\$\{VERSION\}/, version); gsub(/\$\{REPO\}/, repo)
    if (match($0, /\$\{SHA256_[A-Z0-9_]+\}/)) {
      key = substr($0, RSTART + 2, RLENGTH - 3)
      if (key in sha) { sub(/\$\{SHA256_[A-Z0-9_]+\}/, sha[key]); keep = 1 }
    }
  }
  /^    - selector:/ { flush(); inblock = 1 }
  /^[^ #]/ && !/^    / { if (inblock) { flush(); inblock = 0 } }
  { if (inblock) block = block $0 "\n"; else if ($0 !~ /^#/) print }
  END { flush() }
' plugins/runner.yaml > "$dist/runner.yaml"
grep -q 'sha256: [0-9a-f]\{64\}$' "$dist/runner.yaml" ||
  { echo "error: $dist/runner.yaml lists no platform" >&2; exit 1; }
step "manifest $dist/runner.yaml (${#shas[@]} platform(s))"
