#!/usr/bin/env bash
# Builds the Prometheus the e2e tests scrape the controllers with: github.com/prometheus/
# prometheus/cmd/prometheus at a pinned version, from the Go module proxy (checked against
# the checksum database), with only the Kubernetes service discovery compiled in
# (`remove_all_sd,enable_kubernetes_sd`). Debian's prometheus (2.42) is built without
# kubernetes_sd_configs, which docs/kustomize.md's scrape config and the deployed-controller test
# use. About 2 minutes on 2 cores, cached under $KRUISE_CACHE in prometheus-<hash>/.
#
# Prints the binary's path on stdout (last line); progress goes to stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
version=v0.316.0 # Prometheus 3.16 (its Go module versions are v0.<minor>.<patch>)
cache=${KRUISE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kruise-rs}
stamp=$(sha256sum "$here/build-prometheus.sh" | cut -c1-12)
bin="$cache/prometheus-$stamp"

if [ -x "$bin/prometheus" ]; then
  echo "$bin/prometheus"
  exit 0
fi

command -v go >/dev/null || { echo "build-prometheus.sh: Go is required to build Prometheus" >&2; exit 1; }
mkdir -p "$bin"
echo "build-prometheus.sh: building prometheus (github.com/prometheus/prometheus $version, kubernetes_sd only)" >&2
start=$SECONDS
# GOBIN to a temporary directory, then a rename: a concurrent caller never runs half a file.
tmp=$(mktemp -d "$bin/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && CGO_ENABLED=0 GOFLAGS=-mod=mod GOBIN="$tmp" go install -trimpath -ldflags "-s -w" \
  -tags remove_all_sd,enable_kubernetes_sd "github.com/prometheus/prometheus/cmd/prometheus@$version")
mv "$tmp/prometheus" "$bin/prometheus"
echo "build-prometheus.sh: prometheus built in $((SECONDS - start))s" >&2
echo "$bin/prometheus"
