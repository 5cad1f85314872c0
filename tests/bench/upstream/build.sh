#!/usr/bin/env bash
# Builds OpenKruise v1.9.0's kruise-manager (github.com/openkruise/kruise: main.go at the
# module root, from the Go module proxy) as a static binary (CGO_ENABLED=0), for
# `make bench-compare`. Upstream is built as published, never patched.
#
# The wrapper module next to this script (go.mod, go.sum) pins it and copies upstream's
# replace directives, as tests/conformance does. The binary is cached under $KRUISE_CACHE
# (default ~/.cache/kruise-rs) in a directory named after a hash of the pins: a change of
# pins rebuilds, anything else is a no-op. About 3 minutes on a warm module cache on
# 2 busy cores (the build runs under `nice -n 10`).
#
# Prints the path of the binary on stdout (last line); progress goes to stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${KRUISE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kruise-rs}
stamp=$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -c1-12)
dir="$cache/kruise-manager-$stamp"
out="$dir/kruise-manager"

if [ -x "$out" ]; then
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { echo "bench/upstream/build.sh: Go is required to build kruise-manager" >&2; exit 1; }
mkdir -p "$dir"

# As tests/cluster/build.sh: go.sum is committed and verifies every module hash, so the
# checksum database (not reachable from every machine) adds nothing.
export GOSUMDB=off GOFLAGS=-mod=readonly CGO_ENABLED=0
export GOMODCACHE=${GOMODCACHE:-$(go env GOMODCACHE)}

echo "bench/upstream/build.sh: building kruise-manager v1.9.0 (github.com/openkruise/kruise)" >&2
start=$SECONDS
(cd "$here" && nice -n 10 go build -trimpath -ldflags "-s -w" -o "$out.tmp" github.com/openkruise/kruise)
mv "$out.tmp" "$out"
echo "bench/upstream/build.sh: built in $((SECONDS - start))s ($(du -m "$out" | cut -f1) MiB)" >&2
echo "$out"
