#!/usr/bin/env bash
# Builds krew (the kubectl plugin manager) from Go modules, once, into the
# same cache outside the repository as the control plane (see
# tests/cluster/build.sh), and prints the path of the `kubectl-krew` binary.
# tests/krew_install.rs runs it; a second run finds the binary and does
# nothing. krew is a plain Go module (no local replaces), so `go install`
# builds it as released.
set -euo pipefail

# The newest krew the Go module proxy serves.
KREW_VERSION=v0.4.3
CACHE=${RUNNER_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-runner-cluster}
BIN="$CACHE/krew-$KREW_VERSION"

step() { printf '==> %s\n' "$*" >&2; }

if [ -x "$BIN/kubectl-krew" ]; then
  step "krew $KREW_VERSION: cached"
else
  command -v go > /dev/null || { echo "error: Go is required to build krew" >&2; exit 1; }
  step "krew $KREW_VERSION: building (cold: about a minute)"
  start=$SECONDS
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$BIN"
  (cd "$work" && CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" GOBIN="$work/bin" \
    go install -trimpath -ldflags "-s -w" "sigs.k8s.io/krew/cmd/krew@$KREW_VERSION")
  # kubectl finds plugins by name: `kubectl krew` runs `kubectl-krew`.
  mv "$work/bin/krew" "$BIN/kubectl-krew.tmp"
  mv "$BIN/kubectl-krew.tmp" "$BIN/kubectl-krew"
  step "krew $KREW_VERSION built in $((SECONDS - start)) s"
fi
echo "$BIN/kubectl-krew"
