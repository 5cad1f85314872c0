#!/usr/bin/env bash
# Builds helm (helm.sh/helm/v3, pinned in tests/helm/go.mod and go.sum) and, next to it,
# kustomize (tests/helm/kustomize: the version `kubectl kustomize` v1.33 embeds) from the Go
# module proxy, for the chart's lint, drift and install tests. Cached under $KRUISE_CACHE
# (default ~/.cache/kruise-rs) in a directory named after a hash of the pins and of this
# script, as tests/cluster/build.sh caches kubectl: a change of pins rebuilds, anything else
# is a no-op. kustomize is built here rather than taken from the control plane's kubectl so
# the drift test (`cargo test -p kruise-helm-tests`) needs no control plane build.
#
# Prints the path of the helm binary on stdout (last line; kustomize is in the same
# directory); progress goes to stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${KRUISE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kruise-rs}
stamp=$(cat "$here/go.mod" "$here/go.sum" "$here/kustomize/go.mod" "$here/kustomize/go.sum" "$here/build.sh" |
  sha256sum | cut -c1-12)
bin="$cache/helm-$stamp"

if [ -x "$bin/helm" ] && [ -x "$bin/kustomize" ]; then
  echo "$bin/helm"
  exit 0
fi

command -v go >/dev/null || { echo "tests/helm/build.sh: Go is required to build helm" >&2; exit 1; }
mkdir -p "$bin"

# go.sum is committed and verifies every module hash; sum.golang.org is not reachable
# from every machine.
export GOSUMDB=off GOFLAGS=-mod=readonly CGO_ENABLED=0
export GOMODCACHE=${GOMODCACHE:-$(go env GOMODCACHE)}

build() { # module-dir out pkg ldflags
  local dir=$1 out=$2 pkg=$3 flags=$4
  [ -x "$bin/$out" ] && return 0
  echo "tests/helm/build.sh: building $out ($pkg)" >&2
  local start=$SECONDS tmp
  # A name of its own: two test runs may build at once.
  tmp=$(mktemp "$bin/.$out.XXXXXX")
  (cd "$dir" && go build -trimpath -ldflags "$flags" -o "$tmp" "$pkg")
  mv -f "$tmp" "$bin/$out"
  echo "tests/helm/build.sh: $out built in $((SECONDS - start))s" >&2
}

version() { awk -v m="$2" '($1=="require" && $2==m){print $3; exit} ($1==m){print $2; exit}' "$1/go.mod"; }

# helm and kustomize print their version from these (they would say -dev / unknown).
helm_version=$(version "$here" helm.sh/helm/v3)
build "$here" helm helm.sh/helm/v3/cmd/helm \
  "-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
kustomize_version=$(version "$here/kustomize" sigs.k8s.io/kustomize/kustomize/v5)
build "$here/kustomize" kustomize sigs.k8s.io/kustomize/kustomize/v5 \
  "-s -w -X sigs.k8s.io/kustomize/api/provenance.version=$kustomize_version"

echo "$bin/helm"
