#!/usr/bin/env bash
# Builds the kubelet of the real node (cluster.sh with KRUISE_REAL_NODE=1): kubelet from
# k8s.io/kubernetes/cmd/kubelet, with the same wrapper module (tools/), the same pins and
# the same flags as the control plane of build.sh, cached next to it under $KRUISE_CACHE
# in kubelet-<hash of the pins and this script>.
#
# The kubelet needs two modules the control plane does not (github.com/armon/circbuf,
# otelrestful). Their go.sum lines live in tools/go.sum.kubelet and are added through an
# alternate go.mod/go.sum (`go build -modfile`), so tools/go.sum, and with it build.sh's
# cache key, stays as it is: adding the kubelet rebuilds nothing of the control plane.
#
# Prints the binary directory on stdout (last line); progress goes to stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${KRUISE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kruise-rs}
stamp=$(cat "$here/tools/go.mod" "$here/tools/go.sum" "$here/tools/go.sum.kubelet" "$here/build-node.sh" | sha256sum | cut -c1-12)
bin="$cache/kubelet-$stamp"

if [ -x "$bin/kubelet" ]; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || { echo "build-node.sh: Go is required to build the kubelet" >&2; exit 1; }
mkdir -p "$bin"
export GOSUMDB=off GOFLAGS=-mod=readonly CGO_ENABLED=0
export GOMODCACHE=${GOMODCACHE:-$(go env GOMODCACHE)}

k8s_version=$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' "$here/tools/go.mod")
major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

mod=$(mktemp -d)
trap 'rm -rf "$mod"' EXIT
cp "$here/tools/go.mod" "$mod/kubelet.mod"
cat "$here/tools/go.sum" "$here/tools/go.sum.kubelet" >"$mod/kubelet.sum"

echo "build-node.sh: building kubelet (k8s.io/kubernetes/cmd/kubelet $k8s_version)" >&2
start=$SECONDS
(cd "$here/tools" && go build -modfile "$mod/kubelet.mod" -trimpath -tags selinux,notest \
  -ldflags "$ldflags" -o "$bin/kubelet.tmp" k8s.io/kubernetes/cmd/kubelet)
mv "$bin/kubelet.tmp" "$bin/kubelet"
echo "build-node.sh: kubelet built in $((SECONDS - start))s" >&2
echo "$bin"
