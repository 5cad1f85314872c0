#!/usr/bin/env bash
# `make schema-parity` (part of `make lint` and of make test's lint step): our CRDs
# (deploy/crds) against OpenKruise v1.9.0's config/crd/bases, fetched as the Go module
# github.com/openkruise/kruise@v1.9.0 from the module proxy (cached in Go's module cache).
# Fails on a difference not in allowlist.txt and on an allowlist line that no longer
# matches. SCHEMA_PARITY_VERBOSE=1 also prints the allowlisted differences and the paths
# only ours accepts.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
module=github.com/openkruise/kruise@v1.9.0
command -v go >/dev/null || { echo "schema-parity: Go is required (tests/deps.sh installs it)" >&2; exit 1; }
# The checksum database is not reachable from every machine this runs on: the module's hash
# is pinned here instead (the same as tests/conformance/go.sum's) and checked.
sum=h1:7MWDURrU7VlkapL1qaFLQehJG0OdTN338RSvzuzR3kU=
info=$(cd / && GOSUMDB=off GOFLAGS=-mod=mod go mod download -json "$module")
[ "$(sed -n 's/^\t"Sum": "\(.*\)",$/\1/p' <<<"$info")" = "$sum" ] ||
  { echo "schema-parity: $module is not the module pinned ($sum): $info" >&2; exit 1; }
upstream=$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' <<<"$info")
[ -d "$upstream/config/crd/bases" ] || { echo "schema-parity: $module has no config/crd/bases ($upstream)" >&2; exit 1; }
bin=$(mktemp -d)/schema-parity
trap 'rm -rf "$(dirname "$bin")"' EXIT
(cd "$here" && GOSUMDB=off GOFLAGS=-mod=readonly go test -count=1 -v=false . >/dev/null && GOSUMDB=off GOFLAGS=-mod=readonly go build -o "$bin" .)
args=()
[ -z "${SCHEMA_PARITY_VERBOSE:-}" ] || args+=(-v)
"$bin" "${args[@]}" -upstream "$upstream/config/crd/bases" -ours "$root/deploy/crds" -allowlist "$here/allowlist.txt"
